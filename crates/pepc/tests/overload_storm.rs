//! Overload control end to end: an attach storm far above what the node takes at once
//! (all UEs in a burst, on a node with a small backlog bound) ends with every UE
//! attached: the node sends OVERLOAD START, the emulated eNBs refuse new RRC
//! connections and the congested slices answer #22 with T3346; the UEs back off and
//! come back; OVERLOAD STOP follows once the backlog drains. Nothing fails, nothing
//! crashes, and the node reports the overload periods.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use pepc::demo::emulator_subscribers;
use pepc::epc::{open_hss, Epc, EpcConfig};
use pepc_emulator::config::{SubscriberKeys, Traffic, TrafficProfile};
use pepc_emulator::{EmulatorConfig, Scenario};

fn storm(n: u8, slices: usize, ues: u32) {
    let t = Instant::now();
    let s1mme = 19_850 + u16::from(n);
    let sink_local = 15_850 + 2 * u16::from(n);
    let cfg = EpcConfig::parse(&format!(
        "[node]\nmax_users = 8192\nslices = {slices}\n\
         [s1u]\nbind = \"127.0.{n}.1:2152\"\n\
         [sgi]\nmode = \"udp\"\nsink_local = \"127.0.0.1:{sink_local}\"\nsink_peer = \"127.0.0.1:{}\"\n\
         [mme]\noverload_high = 48\noverload_low = 8\nt3346_s = 2\n\
         [metrics]\nlisten = \"\"\n[api]\nlisten = \"\"\n[s1mme]\ntransport = \"udp\"\nudp_port = {s1mme}\n\
         [hss]\ndb = \":memory:\"\n",
        sink_local + 1
    ))
    .expect("node config");
    let hss = open_hss(&cfg.hss).expect("HSS");
    let subs = emulator_subscribers(&SubscriberKeys::default(), ues).expect("subscribers");
    hss.add_many(&subs).expect("provision");
    let epc = Epc::start(&cfg, hss).expect("node start");
    let ecfg = EmulatorConfig {
        mme_udp_port: s1mme,
        gtpu_addr: SocketAddrV4::new(Ipv4Addr::new(127, 0, n, 2), 2152),
        sgi_peer: Some(SocketAddr::from(([127, 0, 0, 1], sink_local))),
        pdn_addr: SocketAddr::from(([127, 0, 0, 1], sink_local + 1)),
        enbs: 4,
        rrc_wait_ms: 1000,
        ..EmulatorConfig::default()
    };
    let scen = Scenario {
        ues,
        // The whole storm offered at once: far above what the slices take.
        attach_rate: 1_000_000.0,
        duration_s: 0.0,
        event_rate: 0.0,
        traffic: Traffic {
            profile: TrafficProfile::Pepc,
            rate_pps: 0.0,
        },
        detach_at_end: false,
        timeout_s: 10.0,
        ..Scenario::default()
    };
    let r = pepc_emulator::run(ecfg, scen);
    let stop = epc.stop();
    eprint!("node: {stop}");
    let r = r.expect("emulator run");
    let j = r.to_json();
    eprintln!("{}", r.to_table());
    assert_eq!(r.attached, u64::from(ues), "{j}");
    assert_eq!(r.failed, 0, "{j}");
    assert!(r.failures.is_empty(), "{j}");
    assert!(r.errors.is_empty(), "{j}");
    let b = &r.back_off;
    assert!(b.overload_starts >= 1, "no OVERLOAD START: {j}");
    assert_eq!(
        b.overload_starts, b.overload_stops,
        "overload not lifted: {j}"
    );
    assert!(
        b.rrc_rejects + b.t3346_rejects > 0,
        "nobody backed off: {j}"
    );
    // The node's own figures: overload periods, and #22 rejects by the slices match
    // what the UEs saw.
    assert!(stop.contains("overload control: "), "{stop}");
    let rejects: u64 = stop
        .lines()
        .filter_map(|l| {
            l.split(" turned away for congestion")
                .next()?
                .rsplit(", ")
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum();
    assert_eq!(rejects, b.t3346_rejects, "{stop}");
    assert!(
        t.elapsed() < Duration::from_secs(60),
        "took {:?}",
        t.elapsed()
    );
}

#[test]
fn attach_storm_with_overload_one_slice() {
    storm(61, 1, 2000);
}

#[test]
fn attach_storm_with_overload_two_slices() {
    storm(62, 2, 2000);
}
