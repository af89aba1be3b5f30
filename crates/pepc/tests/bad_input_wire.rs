//! Bad S1AP on the wire: a node's MME gets garbage and truncated PDUs (PPID 18) over a
//! real userspace SCTP association; it answers each with an Error Indication and the
//! association survives: an S1 Setup on the same association afterwards succeeds, and
//! an S1 Setup from an unknown PLMN gets S1 Setup Failure.

use pepc::epc::{open_hss, Epc, EpcConfig};
use pepc_s1ap::msg::{S1SetupRequest, S1apMessage};
use pepc_s1ap::{EnbId, GlobalEnbId, Plmn, SupportedTa};
use pepc_sctp::transport::{S1Transport, TransportEvent, UdpSctpTransport, S1AP_PPID};
use std::time::{Duration, Instant};

fn wait_for(
    t: &mut UdpSctpTransport,
    what: &str,
    mut pick: impl FnMut(&TransportEvent) -> bool,
) -> TransportEvent {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut ev = Vec::new();
    while Instant::now() < deadline {
        ev.clear();
        t.poll(Duration::from_millis(20), &mut ev).expect("poll");
        if let Some(i) = ev.iter().position(&mut pick) {
            return ev.swap_remove(i);
        }
        assert!(
            !ev.iter().any(|e| matches!(e, TransportEvent::Down { .. })),
            "association went down while waiting for {what}"
        );
    }
    panic!("no {what} within 5 s");
}

fn received(e: &TransportEvent) -> Option<S1apMessage> {
    match e {
        TransportEvent::Data { data, ppid, .. } => {
            assert_eq!(*ppid, S1AP_PPID);
            Some(S1apMessage::decode(data).expect("the MME sends valid S1AP"))
        }
        _ => None,
    }
}

fn setup(plmn: Plmn) -> Vec<u8> {
    S1apMessage::from(S1SetupRequest {
        global_enb_id: GlobalEnbId {
            plmn,
            enb_id: EnbId::Macro(0x42),
        },
        enb_name: Some("bad-input".into()),
        supported_tas: vec![SupportedTa {
            tac: 1,
            plmns: vec![plmn],
        }],
        paging_drx: Some(128),
    })
    .encode()
    .unwrap()
}

#[test]
fn garbage_gets_error_indication_and_the_association_survives() {
    let cfg = EpcConfig::parse(
        "[node]\nmax_users = 1024\n[s1u]\nbind = \"127.0.43.1:2152\"\n\
         [sgi]\nmode = \"udp\"\nsink_local = \"127.0.43.1:5202\"\nsink_peer = \"127.0.43.1:5201\"\n\
         [metrics]\nlisten = \"\"\n[api]\nlisten = \"\"\n[s1mme]\ntransport = \"udp\"\nbind = \"127.0.43.1\"\nudp_port = 9899\n[hss]\ndb = \":memory:\"\n",
    )
    .unwrap();
    let epc = Epc::start(&cfg, open_hss(&cfg.hss).unwrap()).unwrap();
    let mut t = UdpSctpTransport::connect(
        "127.0.43.2:0".parse().unwrap(),
        "127.0.43.1:9899".parse().unwrap(),
        36412,
        Default::default(),
    )
    .unwrap();
    let up = wait_for(&mut t, "association up", |e| {
        matches!(e, TransportEvent::Up { .. })
    });
    let TransportEvent::Up { assoc, .. } = up else {
        unreachable!()
    };

    let valid = setup(Plmn([0x00, 0xf1, 0x10]));
    let bad: Vec<(&str, Vec<u8>)> = vec![
        ("garbage", vec![0xde, 0xad, 0xbe, 0xef, 0x01, 0x02]),
        ("truncated S1 Setup", valid[..valid.len() / 2].to_vec()),
        ("one octet", vec![0x00]),
        ("all ones", vec![0xff; 40]),
    ];
    for (name, bytes) in &bad {
        t.send(assoc, 0, S1AP_PPID, bytes).unwrap();
        let e = wait_for(&mut t, &format!("answer to {name}"), |e| {
            matches!(e, TransportEvent::Data { .. })
        });
        match received(&e) {
            Some(S1apMessage::ErrorIndication(_)) => {}
            other => panic!("{name}: expected Error Indication, got {other:?}"),
        }
    }
    // Same association: an unknown PLMN is refused, a served one accepted.
    t.send(assoc, 0, S1AP_PPID, &setup(Plmn([0x13, 0x00, 0x14])))
        .unwrap();
    let e = wait_for(&mut t, "S1 Setup Failure", |e| {
        matches!(e, TransportEvent::Data { .. })
    });
    assert!(
        matches!(received(&e), Some(S1apMessage::S1SetupFailure(_))),
        "unknown PLMN must get S1 Setup Failure"
    );
    t.send(assoc, 0, S1AP_PPID, &valid).unwrap();
    let e = wait_for(&mut t, "S1 Setup Response", |e| {
        matches!(e, TransportEvent::Data { .. })
    });
    assert!(
        matches!(received(&e), Some(S1apMessage::S1SetupResponse(_))),
        "the association must survive bad input"
    );
    t.close(assoc);
    epc.stop();
}
