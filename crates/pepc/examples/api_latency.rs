//! How long management API requests take while the node serves an attach storm
//! (the target: <= 1 ms p99). A node (2 slices, userspace SCTP on loopback) takes
//! UES attaches from the emulator at RATE/s; meanwhile a client asks, over HTTP,
//! `GET /api/v1/slices` (published figures) and `GET /api/v1/ues/{imsi}` (answered by
//! the control thread that holds the UE, between its signaling) every 5 ms.
//!
//! `cargo run --release -p pepc --example api_latency -- [UES] [RATE]` (default 20000 10000)

use pepc::demo::{emulator_subscribers, DemoPorts};
use pepc::epc::{open_hss, Epc, EpcConfig};
use pepc_emulator::config::{SubscriberKeys, Traffic, TrafficProfile};
use pepc_emulator::{EmulatorConfig, Scenario};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn get(addr: SocketAddr, path: &str) -> (u16, Duration) {
    let t = Instant::now();
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_nodelay(true).unwrap();
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: pepc\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut r = String::new();
    c.read_to_string(&mut r).unwrap();
    (r[9..12].parse().unwrap_or(0), t.elapsed())
}

fn pct(v: &mut [Duration], p: f64) -> f64 {
    v.sort();
    if v.is_empty() {
        return 0.0;
    }
    let i = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[i.clamp(1, v.len()) - 1].as_secs_f64() * 1e3
}

fn main() {
    let ues: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let rate: f64 = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000.0);
    let ports = DemoPorts::default();
    let base = ports
        .config((ues as usize).max(1024) * 2, ues as usize, 2)
        .unwrap();
    // The demo's node, with the API on a port of its own.
    let cfg = EpcConfig {
        api: Some(pepc::epc::ApiConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            token: None,
        }),
        metrics: None,
        ..base
    };
    let hss = open_hss(&cfg.hss).unwrap();
    let keys = SubscriberKeys::default();
    hss.add_many(&emulator_subscribers(&keys, ues).unwrap())
        .unwrap();
    let epc = Epc::start(&cfg, hss).unwrap();
    let api = epc.api.as_ref().unwrap().local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let first = keys.imsi(0).unwrap();
    let client = std::thread::spawn(move || {
        let (mut slices, mut ue) = (Vec::new(), Vec::new());
        let mut errors = 0u64;
        while !s.load(Ordering::Relaxed) {
            let (st, d) = get(api, "/api/v1/slices");
            if st == 200 {
                slices.push(d)
            } else {
                errors += 1
            }
            let (st, d) = get(api, &format!("/api/v1/ues/{first}"));
            // 404 until the UE has attached: still an answer from its control thread.
            if st == 200 || st == 404 {
                ue.push(d)
            } else {
                errors += 1
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        (slices, ue, errors)
    });
    let ecfg = EmulatorConfig {
        enbs: 2,
        progress: false,
        ..ports.emulator()
    };
    let scen = Scenario {
        ues,
        attach_rate: rate,
        duration_s: 0.0,
        traffic: Traffic {
            profile: TrafficProfile::None,
            rate_pps: 0.0,
        },
        detach_at_end: false,
        ..Scenario::default()
    };
    let t = Instant::now();
    let r = pepc_emulator::run(ecfg, scen).unwrap();
    let storm_s = t.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let (mut slices, mut ue, errors) = client.join().unwrap();
    epc.stop();
    println!(
        "{{\"ues\":{ues},\"attach_rate_offered\":{rate},\"attached\":{},\"storm_s\":{storm_s:.2},\
         \"slices_requests\":{},\"slices_ms_p50\":{:.3},\"slices_ms_p99\":{:.3},\"slices_ms_max\":{:.3},\
         \"ue_requests\":{},\"ue_ms_p50\":{:.3},\"ue_ms_p99\":{:.3},\"ue_ms_max\":{:.3},\"errors\":{errors}}}",
        r.attached,
        slices.len(),
        pct(&mut slices, 50.0),
        pct(&mut slices, 99.0),
        pct(&mut slices, 100.0),
        ue.len(),
        pct(&mut ue, 50.0),
        pct(&mut ue, 99.0),
        pct(&mut ue, 100.0),
    );
}
