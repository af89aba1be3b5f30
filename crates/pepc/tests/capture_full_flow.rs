//! The full flow on the wire, captured by the kernel and judged by Wireshark's own
//! dissectors: a pepc node and the emulator on their own loopback addresses
//! (127.0.42.1 node, 127.0.42.2 eNBs), S1AP over userspace SCTP-in-UDP (RFC 6951),
//! GTP-U on 2152, the SGi sink. The scenario runs S1 Setup, attach, data, release to
//! idle, paging, service request, X2 and S1 handover, TAU and detach; `dumpcap`
//! records `lo`, and `tshark` must decode every frame with no malformed packet and no
//! expert warning or error, and must see every S1AP procedure of the flow.
//!
//! Needs dumpcap (Debian `tshark`, installed by scripts/test.sh) and permission to
//! capture on `lo` (root, as the test script runs). It fails, never skips, without.

use pepc::demo::emulator_subscribers;
use pepc::epc::{open_hss, Epc, EpcConfig};
use pepc_emulator::config::{SignalingMix, SubscriberKeys, Traffic, TrafficProfile};
use pepc_emulator::{EmulatorConfig, Scenario};
use pepc_wire::pcap::tshark_check;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Capture {
    child: std::process::Child,
    path: std::path::PathBuf,
}

impl Capture {
    fn start(path: std::path::PathBuf, net: u8) -> Capture {
        let filter = format!("net 127.0.{net}.0/24");
        let mut child = Command::new("dumpcap")
            .args(["-q", "-i", "lo", "-f", &filter, "-w"])
            .arg(&path)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("dumpcap (Debian tshark, installed by scripts/test.sh) must be present");
        // dumpcap says "Capturing on 'Loopback: lo'" once packets are being recorded.
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stderr);
            let mut line = String::new();
            let mut all = String::new();
            while r.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
                all += &line;
                if line.contains("Capturing on") {
                    let _ = tx.send(Ok(()));
                }
                line.clear();
            }
            let _ = tx.send(Err(all));
        });
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => {}
            Ok(Err(msg)) => {
                panic!("dumpcap could not capture on lo (needs root or CAP_NET_RAW): {msg}")
            }
            Err(_) => panic!("dumpcap did not start capturing within 10 s"),
        }
        // dumpcap announces the capture a moment before its filter is attached on a
        // busy machine (a run missed the S1 Setup): give it time before traffic starts.
        std::thread::sleep(Duration::from_secs(1));
        Capture { child, path }
    }

    fn stop(mut self) -> std::path::PathBuf {
        // SIGINT lets dumpcap flush and close the file.
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.path.clone()
    }
}

#[test]
fn full_flow_capture_decodes_cleanly_in_tshark() {
    full_flow(42, 1);
}

#[test]
fn full_flow_capture_on_two_slices_decodes_cleanly_in_tshark() {
    full_flow(43, 2);
}

#[test]
fn full_flow_capture_on_three_slices_decodes_cleanly_in_tshark() {
    full_flow(44, 3);
}

/// The flow on a node of `slices` slices at 127.0.`net`.1 (eNBs at .2), S1-MME on UDP
/// port 9800 + `net`.
fn full_flow(net: u8, slices: usize) {
    let node = Ipv4Addr::new(127, 0, net, 1);
    let enb = Ipv4Addr::new(127, 0, net, 2);
    let port = 9800 + u16::from(net);
    let decode_as = format!("udp.port=={port},sctp");
    let dir = std::env::temp_dir().join(format!("pepc-capture-{}-{net}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cap = Capture::start(dir.join("full_flow.pcapng"), net);

    // At least 8 UEs, and enough that the IMSI policy gives every slice some.
    let keys = SubscriberKeys::default();
    let ues = (8u32..)
        .find(|&n| {
            let used: BTreeSet<usize> = (0..n)
                .map(|i| {
                    let imsi: u64 = keys.imsi(i).unwrap().parse().unwrap();
                    pepc_mme::SlicePolicy::ConsistentHash.slice_of(imsi, slices)
                })
                .collect();
            used.len() == slices
        })
        .unwrap();
    let cfg = EpcConfig::parse(&format!(
        // prewarm_users: the full flow also runs on a control thread sized at start.
        "[node]\nmax_users = 4096\nprewarm_users = 4096\nslices = {slices}\n\
         [s1u]\nbind = \"{node}:2152\"\n\
         [sgi]\nmode = \"udp\"\nsink_local = \"{node}:5202\"\nsink_peer = \"{node}:5201\"\n\
         [mme]\nt3413_s = 2\n\
         [metrics]\nlisten = \"\"\n[api]\nlisten = \"\"\n[s1mme]\ntransport = \"udp\"\nbind = \"{node}\"\nudp_port = {port}\n\
         [hss]\ndb = \":memory:\"\n"
    ))
    .unwrap();
    let hss = open_hss(&cfg.hss).unwrap();
    hss.add_many(&emulator_subscribers(&SubscriberKeys::default(), ues).unwrap())
        .unwrap();
    let epc = Epc::start(&cfg, hss).expect("node");
    let ecfg = EmulatorConfig {
        mme_ip: IpAddr::V4(node),
        mme_udp_port: port,
        local_ip: IpAddr::V4(enb),
        gtpu_addr: SocketAddrV4::new(enb, 2152),
        sgi_peer: Some(SocketAddr::from((node, 5202))),
        pdn_addr: SocketAddr::from((node, 5201)),
        enbs: 2,
        ..EmulatorConfig::default()
    };
    let scen = Scenario {
        ues,
        attach_rate: 200.0,
        duration_s: 3.0,
        event_rate: 25.0,
        mix: SignalingMix {
            attach: 0.0,
            add_default_bearer: 0.0,
            dedicated_bearer: 0.0,
            idle_to_connected: 1.0,
            connected_to_idle: 1.0,
            x2_handover: 1.0,
            s1_handover: 1.0,
            tau: 1.0,
            paging: 1.0,
        },
        traffic: Traffic {
            profile: TrafficProfile::Pepc,
            rate_pps: 200.0,
        },
        seed: 7,
        ..Default::default()
    };
    let report = pepc_emulator::run(ecfg, scen);
    epc.stop();
    std::thread::sleep(Duration::from_millis(300));
    let path = cap.stop();
    let r = report.expect("emulator run");
    let j = r.to_json();
    assert_eq!(r.attached, u64::from(ues), "{j}");
    assert_eq!(r.failed, 0, "{j}");
    for p in [
        "attach",
        "detach",
        "release",
        "service_request",
        "x2_handover",
        "s1_handover",
    ] {
        assert!(
            r.procedures
                .get(p)
                .is_some_and(|s| s.ok > 0 && s.failed == 0),
            "{p} must run and succeed in the flow: {j}"
        );
    }
    let taus: u64 = ["tau", "tau_periodic", "tau_active"]
        .iter()
        .filter_map(|p| r.procedures.get(*p))
        .map(|s| s.ok)
        .sum();
    assert!(taus > 0, "a TAU must run: {j}");
    assert!(r.pagings > 0, "paging must run: {j}");
    assert_eq!(r.lost, 0, "{j}");

    // Wireshark's verdict on every frame.
    // Our NAS is ciphered with EEA2: stop Wireshark guessing that ciphered payloads
    // are EEA0 plaintext (its default), which misreads random bytes as NAS.
    let rep =
        tshark_check(&path, &[&decode_as, "nas-eps.null_decipher:FALSE"]).expect("tshark runs");
    assert!(rep.frames > 200, "capture too small: {} frames", rep.frames);
    assert!(
        rep.is_clean(),
        "tshark: malformed {:?}\nwarnings {:?}\nerrors {:?}",
        &rep.malformed[..rep.malformed.len().min(5)],
        &rep.warnings[..rep.warnings.len().min(5)],
        &rep.errors[..rep.errors.len().min(5)]
    );
    // Every S1AP message is on PPID 18, and the flow's procedures are all there.
    let fields = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(&path)
        .args([
            "-d",
            &decode_as,
            "-Y",
            "s1ap",
            "-T",
            "fields",
            "-e",
            "sctp.data_payload_proto_id",
            "-e",
            "s1ap.procedureCode",
            "-e",
            "s1ap.MME_UE_S1AP_ID",
        ])
        .output()
        .expect("tshark fields");
    let text = String::from_utf8_lossy(&fields.stdout);
    let mut procs = BTreeSet::new();
    let mut id_slices = BTreeSet::new();
    let ids = pepc_slice::ids::SignalingIds::new(slices);
    for line in text.lines() {
        let mut f = line.split('\t');
        let ppid = f.next().unwrap_or("");
        assert!(
            ppid.split(',').all(|p| p == "18"),
            "S1AP with PPID {ppid:?}"
        );
        for c in f.next().unwrap_or("").split(',') {
            if let Ok(c) = c.parse::<u32>() {
                procs.insert(c);
            }
        }
        for id in f.next().unwrap_or("").split(',') {
            if let Ok(id) = id.parse::<u32>() {
                id_slices.insert(ids.slice_of(id));
            }
        }
    }
    // As Wireshark reads them, the MME UE S1AP IDs name every slice of the node.
    assert_eq!(
        id_slices,
        (0..slices).collect::<BTreeSet<_>>(),
        "slices named by MME UE S1AP IDs"
    );
    // TS 36.413 procedure codes.
    for (code, name) in [
        (17, "S1 Setup"),
        (12, "Initial UE Message"),
        (11, "Downlink NAS Transport"),
        (13, "Uplink NAS Transport"),
        (9, "Initial Context Setup"),
        (18, "UE Context Release Request"),
        (23, "UE Context Release"),
        (10, "Paging"),
        (3, "Path Switch Request"),
        (0, "Handover Preparation"),
        (1, "Handover Resource Allocation"),
        (2, "Handover Notification"),
        (24, "eNB Status Transfer"),
        (25, "MME Status Transfer"),
    ] {
        assert!(
            procs.contains(&code),
            "no {name} (code {code}) in the capture: {procs:?}"
        );
    }
    // User plane: G-PDUs and the End Markers of the path switches, decoded as GTP-U.
    let gtp = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(&path)
        .args(["-Y", "gtp", "-T", "fields", "-e", "gtp.message"])
        .output()
        .expect("tshark gtp");
    let gtp = String::from_utf8_lossy(&gtp.stdout);
    assert!(gtp.lines().any(|l| l == "0xff"), "no G-PDU decoded");
    assert!(gtp.lines().any(|l| l == "0xfe"), "no End Marker decoded");
    let _ = std::fs::remove_dir_all(&dir);
}
