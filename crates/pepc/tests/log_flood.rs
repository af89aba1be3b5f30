//! A garbage flood does not flood the logs: 20,000 undecodable
//! S1AP PDUs to a `pepc run` node write at most a burst plus a few lines a second of
//! that kind, one of them says how many were suppressed, and /metrics counts them in
//! `pepc_log_suppressed_total{kind="s1ap_undecodable"}`. Before, every PDU wrote a
//! WARN line (26,960 "S1AP PDU truncated" in 30 s of the operator's flood).

mod common;

use pepc_sctp::transport::{S1Transport, TransportEvent, UdpSctpTransport, S1AP_PPID};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NET: u8 = 70;
const PDUS: usize = 20_000;

#[test]
fn a_garbage_flood_writes_a_bounded_log_and_counts_what_it_suppressed() {
    let dir = std::env::temp_dir().join(format!("pepc-flood-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("n.toml");
    let metrics = format!("127.0.{NET}.1:9090");
    std::fs::write(
        &cfg,
        format!(
            "[node]\nslices = 2\nmax_users = 1024\n[s1u]\nbind = \"127.0.{NET}.1:2152\"\n\
             [sgi]\nmode = \"udp\"\nsink_local = \"127.0.{NET}.1:5202\"\nsink_peer = \"127.0.{NET}.2:5201\"\n\
             [s1mme]\ntransport = \"udp\"\nbind = \"127.0.{NET}.1\"\nudp_port = 9899\n\
             [hss]\ndb = \":memory:\"\n[api]\nlisten = \"\"\n[metrics]\nlisten = \"{metrics}\"\n"
        ),
    )
    .unwrap();
    let mut node = Command::new(env!("CARGO_BIN_EXE_pepc"))
        .args(["run", "--seconds", "60", "--config"])
        .arg(&cfg)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = node.stderr.take().unwrap();
    let log = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    // The node is up once its S1-MME answers.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut t, assoc) = loop {
        assert!(Instant::now() < deadline, "the node never came up");
        let mut t = UdpSctpTransport::connect(
            format!("127.0.{NET}.2:0").parse().unwrap(),
            format!("127.0.{NET}.1:9899").parse().unwrap(),
            36412,
            Default::default(),
        )
        .unwrap();
        let mut ev = Vec::new();
        let until = Instant::now() + Duration::from_secs(1);
        let mut up = None;
        while up.is_none() && Instant::now() < until {
            t.poll(Duration::from_millis(20), &mut ev).unwrap();
            up = ev.iter().find_map(|e| match e {
                TransportEvent::Up { assoc, .. } => Some(*assoc),
                _ => None,
            });
        }
        if let Some(a) = up {
            break (t, a);
        }
    };
    let t0 = Instant::now();
    // Every PDU answered (an Error Indication each) before the next batch: the flood
    // goes at the node's pace and all of it reaches the MME.
    let mut answered = 0;
    let mut ev = Vec::new();
    // PEPC_FLOOD_SECS=30: flood for that long instead (the figure in the issue).
    let for_secs: Option<f64> = std::env::var("PEPC_FLOOD_SECS")
        .ok()
        .and_then(|v| v.parse().ok());
    let mut batch = 0;
    while match for_secs {
        Some(s) => t0.elapsed().as_secs_f64() < s,
        None => batch < PDUS / 100,
    } {
        for i in 0..100 {
            let pdu: &[u8] = if (batch + i) % 2 == 0 {
                &[0xde, 0xad, 0xbe, 0xef, 0x01, 0x02]
            } else {
                &[0x00]
            };
            t.send(assoc, 1, S1AP_PPID, pdu).unwrap();
        }
        let until = Instant::now() + Duration::from_secs(20);
        while answered < (batch + 1) * 100 {
            assert!(Instant::now() < until, "{answered} answers only");
            ev.clear();
            t.poll(Duration::from_millis(10), &mut ev).unwrap();
            answered += ev
                .iter()
                .filter(|e| matches!(e, TransportEvent::Data { .. }))
                .count();
        }
        batch += 1;
    }
    let pdus = batch * 100;
    let secs = t0.elapsed().as_secs_f64();
    let m = common::scrape(&metrics);
    // The association's SCTP counters, republished every second: every PDU came in
    // a DATA chunk of its own.
    assert_eq!(common::sample(&m, "pepc_sctp_associations"), Some(1), "{m}");
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let chunks = common::sample(
            &common::scrape(&metrics),
            "pepc_sctp_data_chunks_received_total",
        );
        if chunks.is_some_and(|c| c >= pdus as u64) {
            break;
        }
        assert!(
            Instant::now() < until,
            "{chunks:?} DATA chunks for {pdus} PDUs"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The same per association: its state, RTO and counters, labelled with its peer.
    let m = common::scrape(&metrics);
    let line = |name: &str| {
        m.lines()
            .find(|l| l.starts_with(&format!("{name}{{")))
            .unwrap_or_else(|| panic!("no {name} in {m}"))
            .to_string()
    };
    let state = line("pepc_sctp_association_state");
    assert!(
        state.contains("state=\"ESTABLISHED\"") && state.ends_with(" 1"),
        "{state}"
    );
    let peer = t.local_addr().to_string();
    assert!(
        state.contains(&format!("peer=\"{peer}\"")),
        "{state} (peer {peer})"
    );
    let rx = line("pepc_sctp_association_data_chunks_received_total");
    let n: u64 = rx.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(n >= pdus as u64, "{rx}");
    let rto = line("pepc_sctp_association_rto_ms");
    let rto: u64 = rto.rsplit(' ').next().unwrap().parse().unwrap();
    assert!((1..=60_000).contains(&rto), "{rto}");
    // SIGTERM: the node stops cleanly and prints its summary.
    let term = Command::new("kill")
        .args(["-TERM", &node.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let t = Instant::now();
    while node.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(30) {
            let _ = node.kill();
            panic!("the node did not stop on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = String::from_utf8_lossy(&log.join().unwrap()).to_string();
    let _ = std::fs::remove_dir_all(&dir);
    let lines = log
        .lines()
        .filter(|l| l.contains("undecodable S1AP"))
        .count();
    let bound = pepc_ratelog::BURST as f64 + pepc_ratelog::PER_SECOND as f64 * (secs + 1.0);
    eprintln!(
        "{pdus} undecodable PDUs in {secs:.1} s: {lines} lines of them, {} log bytes in all",
        log.len()
    );
    assert!(
        (lines as f64) <= bound,
        "{lines} lines for {pdus} PDUs in {secs:.1} s (bound {bound})"
    );
    assert!(log.contains("suppressed"), "{log}");
    // The association's life: one line when it came up, one when it went (here at
    // the node's stop), none per message.
    let assoc_lines = |what: &str| {
        log.lines()
            .filter(|l| l.contains("S1-MME association") && l.contains(what))
            .count()
    };
    assert_eq!(assoc_lines(" up: "), 1, "{log}");
    assert_eq!(assoc_lines(" down: "), 1, "{log}");
    let suppressed: u64 = m
        .lines()
        .find(|l| l.starts_with("pepc_log_suppressed_total{kind=\"s1ap_undecodable\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no pepc_log_suppressed_total in\n{m}"));
    assert!(
        suppressed as usize + lines >= pdus,
        "{suppressed} suppressed + {lines} written < {pdus}"
    );
    // The endpoint's decode errors are exported, equal to the stop summary's.
    let metric = |name: &str| -> u64 {
        m.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in\n{m}"))
    };
    let decode_errors = metric("pepc_s1ap_decode_errors_total");
    assert_eq!(decode_errors, pdus as u64);
    let summary = log
        .lines()
        .find(|l| l.starts_with("s1ap endpoint:"))
        .unwrap_or_else(|| panic!("no summary in\n{log}"));
    assert!(
        summary.contains(&format!("{decode_errors} decode errors"))
            && summary.contains(&format!(
                "{} unknown UE IDs",
                metric("pepc_s1ap_unknown_ue_ids_total")
            )),
        "{summary}"
    );
}
