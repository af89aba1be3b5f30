//! Checkpoints (restart without re-attach): a registered UE's snapshot at the
//! end of each procedure, its removal when it goes; a new process restoring them
//! serves the UEs with their old security contexts and identifiers, and its downlink
//! NAS COUNTs stay above any the dead process used.

use pepc_mme::snapshot::restore_checkpoint;
use pepc_mme::{Input, MmeConfig};
use pepc_s1ap::msg::*;
use pepc_s1ap::Cause;
use pepc_slice::packets::ipv4_udp;
use pepc_testkit::*;
use pepc_wire::{Batch, Verdict};
use std::net::Ipv4Addr;

const SERVER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);

fn imsi(i: usize) -> String {
    format!("00101{:010}", 1 + i)
}

fn imsi_n(i: usize) -> u64 {
    imsi(i).parse().unwrap()
}

fn node() -> Harness {
    let cfg = MmeConfig {
        checkpoints: true,
        ..MmeConfig::default()
    };
    let mut h = Harness::new(64, cfg);
    for i in 0..4 {
        h.hss.add(&subscriber(&imsi(i))).unwrap();
    }
    assert!(matches!(
        h.enb_setup(1, 1, 1),
        S1apMessage::S1SetupResponse(_)
    ));
    h
}

fn release(h: &mut Harness, ue: &mut SimUe) {
    let r = h.send(
        1,
        UeContextReleaseRequest {
            mme_ue_id: ue.mme_ue_id.unwrap(),
            enb_ue_id: ue.enb_ue_id,
            cause: Cause::USER_INACTIVITY,
        },
    );
    pump(h, ue, 1, r).unwrap();
}

/// The node restarted: a new process restores every checkpoint, then its eNB sets up.
fn restarted(old: &Harness) -> Harness {
    let cfg = MmeConfig {
        checkpoints: true,
        ..MmeConfig::default()
    };
    let mut h = Harness::new(64, cfg);
    let now = h.now;
    for bytes in old.checkpoints.values() {
        restore_checkpoint(&mut h.mme, &mut h.cp, bytes, now).unwrap();
    }
    h.checkpoints = old.checkpoints.clone();
    assert!(matches!(
        h.enb_setup(1, 1, 1),
        S1apMessage::S1SetupResponse(_)
    ));
    h
}

fn batch_of(pkts: &[Vec<u8>]) -> Batch {
    let mut b = Batch::default();
    for (i, p) in pkts.iter().enumerate() {
        assert!(b.bufs[i].fill(p));
    }
    b.len = pkts.len();
    b
}

#[test]
fn checkpoints_follow_procedures_and_detach_removes_them() {
    let mut h = node();
    let mut a = SimUe::new(&imsi(0), 10);
    attach(&mut h, &mut a, 1).unwrap();
    assert!(h.checkpoints.contains_key(&imsi_n(0)), "at attach complete");
    let first = h.checkpoints[&imsi_n(0)].clone();
    release(&mut h, &mut a);
    assert_ne!(h.checkpoints[&imsi_n(0)], first, "again once idle");
    let mut b = SimUe::new(&imsi(1), 11);
    attach(&mut h, &mut b, 1).unwrap();
    assert_eq!(h.checkpoints.len(), 2);
    let nas = b.detach_request(false);
    let plmn = h.mme.config().plmn;
    let r = h.send(
        1,
        UplinkNasTransport {
            mme_ue_id: b.mme_ue_id.unwrap(),
            enb_ue_id: b.enb_ue_id,
            nas_pdu: nas,
            ecgi: pepc_s1ap::Ecgi {
                plmn,
                cell_id: 0x101,
            },
            tai: pepc_s1ap::Tai { plmn, tac: 1 },
        },
    );
    pump(&mut h, &mut b, 1, r).unwrap();
    assert_eq!(h.checkpoints.len(), 1, "a detached UE has no checkpoint");
    // No key leaves through Debug.
    let ck = pepc_mme::SnapshotBytes(vec![0xAA; 64]);
    assert_eq!(format!("{ck:?}"), "SnapshotBytes(64 bytes)");
}

#[test]
fn a_restarted_node_serves_registered_ues_without_re_attach() {
    let mut h = node();
    let mut ues: Vec<SimUe> = (0..3)
        .map(|i| SimUe::new(&imsi(i), 10 + i as u32))
        .collect();
    for ue in ues.iter_mut() {
        attach(&mut h, ue, 1).unwrap();
    }
    // UE 0 idle; UEs 1 and 2 connected when the process dies.
    release(&mut h, &mut ues[0]);
    let teids: Vec<u32> = (0..3)
        .map(|i| {
            let (_, s) = h.cp.find_imsi(imsi_n(i)).unwrap();
            h.cp.ue(s).unwrap().bearers[0].teid_ul
        })
        .collect();
    // A GUTI Reallocation Command goes out and is never completed: its downlink COUNT
    // is past the last checkpoint.
    let mut out = vec![];
    h.mme
        .reallocate_guti(h.now, imsi_n(2), &mut h.cp, &mut out)
        .unwrap();
    // The driver's part: checkpoints to the store.
    for o in &out {
        if let pepc_mme::Output::Checkpoint { imsi, snapshot } = o {
            h.checkpoints.insert(*imsi, snapshot.0.clone());
        }
    }
    let pending = out
        .iter()
        .find_map(|o| match o {
            pepc_mme::Output::S1ap { bytes, .. } => match S1apMessage::decode(bytes).unwrap() {
                S1apMessage::DownlinkNasTransport(d) => Some(d.nas_pdu),
                _ => None,
            },
            _ => None,
        })
        .unwrap();
    ues[2].on_downlink(&pending).unwrap();
    let attaches = h.mme.stats.attaches;

    let mut h2 = restarted(&h);
    drop(h);
    assert_eq!(h2.mme.ue_count(), 3);
    for (i, ue) in ues.iter_mut().enumerate() {
        // Every UE comes back by Service Request with its old security context and
        // finds its bearers where they were (same uplink TEIDs).
        ue.enb_ue_id = 100 + i as u32;
        let sr = ue.service_request();
        let t = ue.m_tmsi;
        let r = h2.send(1, initial_ue(&h2, ue, sr, t));
        let seen = pump(&mut h2, ue, 1, r).unwrap();
        assert_eq!(
            seen,
            ["InitialContextSetupRequest"],
            "UE {i}: {:?}",
            h2.logs
        );
        let (_, s) = h2.cp.find_imsi(imsi_n(i)).unwrap();
        assert_eq!(h2.cp.ue(s).unwrap().bearers[0].teid_ul, teids[i]);
    }
    assert_eq!(
        h2.mme.stats.attaches, 0,
        "nobody re-attached ({attaches} before)"
    );
    assert_eq!(h2.mme.stats.nas_bad_mac + h2.mme.stats.nas_replays, 0);
    // Downlink NAS after the restart: the UE that saw the uncompleted GUTI
    // Reallocation takes it (its COUNT is above), and completes.
    let mut out = vec![];
    let t = h2
        .mme
        .reallocate_guti(h2.now, imsi_n(2), &mut h2.cp, &mut out)
        .unwrap();
    let r: Vec<_> = out
        .into_iter()
        .filter_map(|o| match o {
            pepc_mme::Output::S1ap { assoc, bytes, .. } => {
                Some((assoc, S1apMessage::decode(&bytes).unwrap()))
            }
            _ => None,
        })
        .collect();
    pump(&mut h2, &mut ues[2], 1, r).unwrap();
    assert_eq!(ues[2].m_tmsi, Some(t));
    assert_eq!(h2.mme.m_tmsi_of(&h2.cp, imsi_n(2)), Some(t));
}

#[test]
fn an_idle_ue_of_a_restarted_node_is_paged_for_downlink() {
    let mut h = node();
    let mut ue = SimUe::new(&imsi(0), 10);
    attach(&mut h, &mut ue, 1).unwrap();
    release(&mut h, &mut ue);
    let ip = ue.ue_ip.unwrap();
    let mut h2 = restarted(&h);
    drop(h);
    h2.sync();
    let mut b = batch_of(&[ipv4_udp(SERVER, ip, 2, 1, 50)]);
    h2.dp.downlink(&mut b, 2);
    assert_eq!(b.bufs[0].meta.verdict, Verdict::Consumed, "buffered");
    let mut ev = vec![];
    h2.cp.poll_requests(&mut ev);
    assert_eq!(ev.len(), 1);
    let paging = h2.input(Input::Control(ev.pop().unwrap()));
    assert!(
        matches!(&paging[..], [(1, S1apMessage::Paging(p))]
            if matches!(p.paging_id, pepc_s1ap::PagingIdentity::STmsi(s) if Some(s.m_tmsi) == ue.m_tmsi)),
        "{paging:?}"
    );
    ue.enb_ue_id = 11;
    let sr = ue.service_request();
    let r = h2.send(1, initial_ue(&h2, &ue, sr, ue.m_tmsi));
    assert_eq!(
        pump(&mut h2, &mut ue, 1, r).unwrap(),
        ["InitialContextSetupRequest"]
    );
}

/// Restoring a million UEs takes seconds; the node serves meanwhile. A UE whose
/// signaling arrives before the background restore reached it is restored on the spot
/// (by S-TMSI, or by IMSI for a network-initiated procedure), so nobody is told they
/// are unknown; the rest come back in the background.
#[test]
fn a_restarting_node_serves_before_every_ue_is_restored() {
    let mut h = node();
    let mut ues: Vec<SimUe> = (0..4)
        .map(|i| SimUe::new(&imsi(i), 10 + i as u32))
        .collect();
    for ue in ues.iter_mut() {
        attach(&mut h, ue, 1).unwrap();
    }
    release(&mut h, &mut ues[0]);
    let cfg = MmeConfig {
        checkpoints: true,
        ..MmeConfig::default()
    };
    let mut h2 = Harness::new(64, cfg);
    let items: Vec<(u64, Vec<u8>)> = h.checkpoints.clone().into_iter().collect();
    drop(h);
    let now = h2.now;
    h2.mme.begin_restore(items, now);
    assert!(h2.mme.restoring());
    assert_eq!(h2.mme.ue_count(), 0, "nothing restored yet");
    assert!(matches!(
        h2.enb_setup(1, 1, 1),
        S1apMessage::S1SetupResponse(_)
    ));
    // UE 2's Service Request comes first: restored by its S-TMSI, served.
    ues[2].enb_ue_id = 102;
    let sr = ues[2].service_request();
    let r = h2.send(1, initial_ue(&h2, &ues[2], sr, ues[2].m_tmsi));
    assert_eq!(
        pump(&mut h2, &mut ues[2], 1, r).unwrap(),
        ["InitialContextSetupRequest"],
        "{:?}",
        h2.logs
    );
    assert_eq!(h2.mme.ue_count(), 1);
    // The operator detaches UE 3 by IMSI: restored by IMSI, then detached (idle since
    // the restart: locally), its checkpoint forgotten.
    let mut out = vec![];
    h2.mme
        .detach_ue(h2.now, imsi_n(3), &mut h2.cp, &mut out)
        .expect("UE 3 is known while its checkpoint waits");
    assert!(out
        .iter()
        .any(|o| matches!(o, pepc_mme::Output::Forget { imsi } if *imsi == imsi_n(3))));
    assert_eq!(h2.mme.ue_count(), 1);
    assert_eq!(h2.mme.stats.detaches, 1);
    // A new subscriber attaches meanwhile: the fresh process would hand it the M-TMSI
    // its predecessor gave UE 0 first, but that one is still held for UE 0.
    h2.hss.add(&subscriber(&imsi(9))).unwrap();
    let mut new = SimUe::new(&imsi(9), 109);
    attach(&mut h2, &mut new, 1).unwrap();
    assert!(
        ues.iter().all(|u| u.m_tmsi != new.m_tmsi),
        "a waiting UE's M-TMSI was given away"
    );
    // The background does the rest, a chunk per round.
    let mut rounds = 0;
    let report = loop {
        rounds += 1;
        let mut out = vec![];
        if let Some(r) = h2.mme.restore_some(&mut h2.cp, h2.now, 1, &mut out) {
            break r;
        }
        assert!(rounds < 10);
    };
    assert_eq!(
        (report.restored, report.on_demand, report.failed),
        (4, 2, 0)
    );
    assert_eq!(
        h2.mme.ue_count(),
        4,
        "UE 3 stays detached; the new UE is there"
    );
    assert!(!h2.mme.restoring());
    for i in [0, 1] {
        let ue = &mut ues[i];
        ue.enb_ue_id = 100 + i as u32;
        let sr = ue.service_request();
        let t = ue.m_tmsi;
        let r = h2.send(1, initial_ue(&h2, ue, sr, t));
        assert_eq!(
            pump(&mut h2, ue, 1, r).unwrap(),
            ["InitialContextSetupRequest"],
            "UE {i}"
        );
    }
    assert_eq!(
        h2.mme.stats.attaches, 1,
        "nobody re-attached (the new UE attached)"
    );
    assert_eq!(h2.mme.stats.nas_bad_mac + h2.mme.stats.nas_replays, 0);
}
