//! `[debug] record` and its replay: an MME's calls recorded and made again on a fresh
//! MME give byte-identical outputs; a recording that does not match its replay names
//! the first difference. (Every harness of the other tests is recorded and replayed
//! when it goes; these tests look at the recording itself.)

use pepc_mme::record::replay::replay;
use pepc_mme::record::replay_ue::{replay_ues, Pick};
use pepc_mme::record::{Record, RecordError, Records};
use pepc_mme::MmeConfig;
use pepc_s1ap::msg::*;
use pepc_s1ap::Cause;
use pepc_testkit::*;
use std::time::{Duration, Instant};

const SLICES: usize = 2;

/// Attaches, idle and back, detaches and timers of a few UEs on a node of two slices:
/// the recording of every slice.
fn recorded_run() -> Vec<Vec<u8>> {
    let mut h = Harness::sliced(100, MmeConfig::default(), SLICES);
    h.enb_setup(1, 1, 1);
    let mut ues = vec![];
    for k in 0..6 {
        let imsi = format!("00101{:010}", k + 1);
        h.hss.add(&subscriber(&imsi)).unwrap();
        let mut ue = SimUe::new(&imsi, 10 + k);
        attach(&mut h, &mut ue, 1).unwrap();
        ues.push(ue);
    }
    for ue in ues.iter_mut().step_by(2) {
        let r = h.send(
            1,
            UeContextReleaseRequest {
                mme_ue_id: ue.mme_ue_id.unwrap(),
                enb_ue_id: ue.enb_ue_id,
                cause: Cause::USER_INACTIVITY,
            },
        );
        pump(&mut h, ue, 1, r).unwrap();
    }
    let ue = &mut ues[1];
    let d = ue.detach_request(false);
    let loc = initial_ue(&h, ue, vec![], None);
    let r = h.send(
        1,
        UplinkNasTransport {
            mme_ue_id: ue.mme_ue_id.unwrap(),
            enb_ue_id: ue.enb_ue_id,
            nas_pdu: d,
            ecgi: loc.ecgi,
            tai: loc.tai,
        },
    );
    pump(&mut h, ue, 1, r).unwrap();
    h.advance(Duration::from_secs(3600));
    let out = (0..SLICES)
        .map(|s| h.slice(s).0.recorded().unwrap().to_vec())
        .collect();
    h.stop_recording();
    out
}

#[test]
fn a_recorded_run_replays_byte_identical() {
    for (s, bytes) in recorded_run().iter().enumerate() {
        let r = replay(bytes, Instant::now()).unwrap();
        assert_eq!(r.mismatch, None, "slice {s}");
        assert_eq!(r.slice, (s, SLICES));
        assert!(r.calls > 10 && r.outputs > 10, "slice {s}: {r:?}");
    }
}

#[test]
fn a_changed_output_is_named_with_its_call() {
    let runs = recorded_run();
    let bytes = &runs[0];
    // The last call that produced an output: its last output's last byte changes.
    let calls: Vec<_> = Records::new(bytes)
        .unwrap()
        .map(|r| r.unwrap())
        .filter_map(|r| match r {
            Record::Call(c) => Some(c.outputs.len()),
            Record::Start(_) => None,
        })
        .collect();
    let last = calls.iter().rposition(|n| *n > 0).unwrap();
    let mut seen = 0;
    let mut at = 0;
    // Find where that call's record ends: the records are framed, so walk them.
    let mut rest = &bytes[pepc_mme::record::MAGIC.len()..];
    let mut offset = pepc_mme::record::MAGIC.len();
    let mut index = 0usize;
    while !rest.is_empty() {
        let kind = rest[0];
        let (len, n) = leb128(&rest[1..]);
        let end = 1 + n + len;
        if kind == 1 {
            if index == last {
                at = offset + end - 1;
                seen += 1;
            }
            index += 1;
        }
        offset += end;
        rest = &rest[end..];
    }
    assert_eq!(seen, 1);
    let mut bad = bytes.clone();
    bad[at] ^= 0x01;
    let r = replay(&bad, Instant::now()).unwrap();
    let m = r.mismatch.expect("a difference");
    assert_eq!(m.call, last as u64, "{m}");
    assert!(m.detail.starts_with("output"), "{m}");
    assert_ne!(m.expected, m.got);
}

#[test]
fn broken_recordings_are_errors_not_panics() {
    let runs = recorded_run();
    let bytes = &runs[1];
    assert_eq!(
        replay(b"nonsense", Instant::now()).unwrap_err(),
        RecordError::Magic
    );
    assert_eq!(
        replay(pepc_mme::record::MAGIC, Instant::now()).unwrap_err(),
        RecordError::NoStart
    );
    // Cut anywhere inside a record: an error, never a panic.
    for cut in (pepc_mme::record::MAGIC.len()..bytes.len()).step_by(97) {
        let _ = replay(&bytes[..cut], Instant::now());
    }
    assert!(replay(&bytes[..bytes.len() - 1], Instant::now()).is_err());
}

fn leb128(b: &[u8]) -> (usize, usize) {
    let mut v = 0usize;
    for (i, x) in b.iter().enumerate() {
        v |= ((x & 0x7f) as usize) << (7 * i);
        if x & 0x80 == 0 {
            return (v, i + 1);
        }
    }
    panic!("unterminated")
}

/// A path switch makes an End Marker on the data thread; the replay has no port to send
/// them to, and more of them than a batch holds once made it spin for ever (the data
/// thread stops applying updates while its batch of originated packets is full).
#[test]
fn more_end_markers_than_a_batch_holds_replay() {
    let mut h = Harness::new(10, MmeConfig::default());
    h.enb_setup(1, 1, 1);
    h.enb_setup(2, 2, 1);
    let imsi = "001010000000001";
    h.hss.add(&subscriber(imsi)).unwrap();
    let mut ue = SimUe::new(imsi, 10);
    attach(&mut h, &mut ue, 1).unwrap();
    let plmn = h.mme.config().plmn;
    let switches = pepc_slice::datapath::GENERATED_CAPACITY as u32 + 40;
    for k in 0..switches {
        let assoc = 1 + u64::from(k % 2);
        let r = h.send(
            assoc,
            PathSwitchRequest {
                enb_ue_id: 100 + k,
                erabs: vec![pepc_s1ap::ERabTunnel {
                    id: 5,
                    transport: std::net::Ipv4Addr::new(127, 0, 0, 2 + (k % 2) as u8),
                    teid: 0x100 + k,
                }],
                source_mme_ue_id: ue.mme_ue_id.unwrap(),
                ecgi: pepc_s1ap::Ecgi {
                    plmn,
                    cell_id: 0x100 + k % 2,
                },
                tai: pepc_s1ap::Tai { plmn, tac: 1 },
                ue_security_capabilities: pepc_s1ap::UeSecurityCapabilities {
                    eea: 0xc000,
                    eia: 0xc000,
                },
            },
        );
        assert!(
            matches!(&r[..], [(_, S1apMessage::PathSwitchRequestAcknowledge(_))]),
            "switch {k}: {r:?}"
        );
        h.sync();
        h.dp.generated.clear();
    }
    // The harness replays its recording when it goes; here once more, by hand, to
    // count the calls.
    let r = h.replay_recordings();
    assert_eq!(r[0].mismatch, None);
    assert!(r[0].calls > u64::from(switches), "{:?}", r[0]);
}

/// Each UE replayed on an MME of its own from its snapshot (taken at its first
/// procedure boundary from a given call on), taking only its calls, node-level ones
/// and timeouts: its outputs come out byte-identical to the slice's for it.
#[test]
fn each_ue_replays_byte_identical_from_its_snapshot() {
    let runs = recorded_run();
    let imsis: Vec<u64> = (1..=6).map(|k| 1_010_000_000_000 + k).collect();
    for (s, bytes) in runs.iter().enumerate() {
        let calls = replay(bytes, Instant::now()).unwrap().calls;
        for from in [0, calls / 3, calls / 2] {
            let (whole, ues) =
                replay_ues(bytes, Instant::now(), &Pick::Imsis(imsis.clone()), from).unwrap();
            assert_eq!(whole.mismatch, None, "slice {s}");
            let mut replayed = 0;
            for u in &ues {
                assert_eq!(u.mismatch, None, "slice {s} from {from}: {u:?}");
                if let Some(at) = u.snapshot_at {
                    assert!(at >= from && u.snapshot_bytes > 0, "{u:?}");
                    replayed += 1;
                }
            }
            if from == 0 {
                // The UEs of this slice (IMSI routing shares them out), each taking
                // more than the timeouts.
                assert!(replayed >= 2, "slice {s}: {ues:?}");
                assert!(ues.iter().any(|u| u.outputs > 3), "slice {s}: {ues:?}");
            }
        }
    }
}
