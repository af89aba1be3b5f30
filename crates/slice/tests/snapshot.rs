//! UE snapshots: round trips through bytes into another slice's control plane, with
//! packets through the restored slice's data path; decoding of damaged input.

use pepc_slice::context::*;
use pepc_slice::control::{
    AttachParams, Attached, BearerParams, ControlEvent, ControlPlane, CtrlError, PdnParams,
    Restored,
};
use pepc_slice::counters::{DropReason, Usage};
use pepc_slice::datapath::DataPlane;
use pepc_slice::ids::{IdLayout, IotPool};
use pepc_slice::packets::{gpdu, ipv4_udp};
use pepc_slice::pcef::{PortRange, Rule};
use pepc_slice::slice::{build, SliceConfig};
use pepc_slice::snapshot::{self, SnapshotError, SnapshotView, UeSliceSnapshot};
use pepc_wire::gtpu::GtpuPacket;
use pepc_wire::{Batch, Verdict};
use std::net::Ipv4Addr;

const ENB: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const ENB2: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
const VOICE_RULES: u16 = 3;

/// Slice `index` of a node of four slices (so identifiers carry slice bits).
fn slice(index: u32) -> (ControlPlane, DataPlane) {
    let mut cfg = SliceConfig::for_users(1000);
    cfg.layout = IdLayout::new(4, Ipv4Addr::new(10, 0, 0, 0), 8).unwrap();
    cfg.slice = index;
    cfg.iot = Some(IotPool::new(0xC000_0000, Ipv4Addr::new(100, 64, 0, 0), 100).unwrap());
    let (mut cp, dp) = build(&cfg);
    // Rule sets are the node's policy, installed in every slice.
    let mut voice = Rule::any(1);
    voice.remote_ports = PortRange { lo: 5060, hi: 5061 };
    voice.bearer = Some(7);
    cp.install_rule_set(VOICE_RULES, vec![voice]).unwrap();
    (cp, dp)
}

/// A UE attached with its default bearer's downlink tunnel at `ENB`, `enb_teid`.
fn attach(cp: &mut ControlPlane, imsi: u64, enb_teid: u32) -> Attached {
    let mut p = AttachParams::new(imsi);
    p.enb_addr = ENB;
    p.enb_teid = enb_teid;
    cp.attach(&p).unwrap()
}

fn batch_of(pkts: &[Vec<u8>]) -> Batch {
    let mut b = Batch::default();
    for (i, p) in pkts.iter().enumerate() {
        assert!(b.bufs[i].fill(p));
    }
    b.len = pkts.len();
    b
}

fn ul(dp: &mut DataPlane, pkt: Vec<u8>, now: u64) -> Batch {
    let mut b = batch_of(&[pkt]);
    dp.uplink(&mut b, now);
    b
}

fn dl(dp: &mut DataPlane, pkt: Vec<u8>, now: u64) -> Batch {
    let mut b = batch_of(&[pkt]);
    dp.downlink(&mut b, now);
    b
}

/// One uplink packet on each of `ue`'s bearers, from its PDN's address: all forwarded.
fn uplink_on_every_bearer(dp: &mut DataPlane, ue: &UeContext, len: usize, now: u64) {
    for b in &ue.bearers {
        let src = ue.pdns.iter().find(|p| p.index == b.pdn).unwrap().ip;
        let out = ul(dp, gpdu(b.teid_ul, &ipv4_udp(src, SERVER, 1, 2, len)), now);
        assert_eq!(out.bufs[0].meta.verdict, Verdict::ToSgi, "bearer {}", b.ebi);
    }
}

fn teid_of(b: &Batch) -> u32 {
    GtpuPacket::new_checked(b.bufs[0].as_slice())
        .unwrap()
        .teid()
}

#[derive(Clone, Copy, Debug)]
struct Shape {
    pdns: usize,
    dedicated: bool,
    connected: bool,
}

/// A UE with `shape`, some traffic counted on each bearer, in ECM state as asked.
fn make_ue(cp: &mut ControlPlane, dp: &mut DataPlane, imsi: u64, shape: Shape) -> u32 {
    let mut p = AttachParams::new(imsi);
    p.ambr_ul = 50_000_000;
    p.ambr_dl = 150_000_000;
    p.apn = "internet".into();
    p.charging_key = 7;
    p.enb_addr = ENB;
    p.enb_teid = 0x100 + imsi as u32;
    p.arp = Arp {
        priority_level: 3,
        pre_emption_capability: true,
        pre_emption_vulnerability: false,
    };
    let a = cp.attach(&p).unwrap();
    let slot = a.ue_slot;
    cp.set_rule_set(slot, VOICE_RULES).unwrap();
    for k in 1..shape.pdns {
        let ebi = 7 + k as u8; // 8, 9, 10 (7 is the dedicated bearer)
        cp.add_pdn(
            slot,
            &PdnParams {
                apn: format!("apn{k}.example"),
                ebi,
                qci: 5,
                arp: Arp::default(),
                charging_key: 100 + k as u32,
            },
        )
        .unwrap();
    }
    if shape.dedicated {
        cp.add_bearer(
            slot,
            BearerParams {
                ebi: 7,
                linked_ebi: 0,
                qci: 1,
                arp: Arp {
                    priority_level: 2,
                    pre_emption_capability: false,
                    pre_emption_vulnerability: false,
                },
                mbr_ul: 128_000,
                mbr_dl: 256_000,
                gbr_ul: 64_000,
                gbr_dl: 64_000,
                charging_key: 9,
            },
        )
        .unwrap();
    }
    let ebis: Vec<u8> = cp.ue(slot).unwrap().bearers.iter().map(|b| b.ebi).collect();
    for (i, ebi) in ebis.iter().enumerate() {
        cp.set_enb_tunnel(slot, *ebi, ENB, 0x1000 * (i as u32 + 1) + imsi as u32)
            .unwrap();
    }
    // Traffic on every bearer so that counters are not zero.
    let ue = cp.ue(slot).unwrap().clone();
    for b in &ue.bearers {
        let src = ue.pdns.iter().find(|p| p.index == b.pdn).unwrap().ip;
        for n in 0..=b.ebi as usize {
            let out = ul(dp, gpdu(b.teid_ul, &ipv4_udp(src, SERVER, 1, 2, 60 + n)), 1);
            assert_eq!(out.bufs[0].meta.verdict, Verdict::ToSgi);
        }
    }
    if !shape.connected {
        cp.release_to_idle(slot).unwrap();
    }
    dp.sync(2);
    slot
}

/// Field by field: everything but the slots, which are the restoring slice's own.
fn assert_same_ue(a: &UeContext, b: &UeContext) {
    assert_eq!(a.imsi, b.imsi);
    assert_eq!(a.class, b.class);
    assert_eq!(a.ecm, b.ecm);
    assert_eq!(a.ue_ip, b.ue_ip);
    assert_eq!((a.ambr_ul, a.ambr_dl), (b.ambr_ul, b.ambr_dl));
    assert_eq!(a.rule_set, b.rule_set);
    assert_eq!(a.default_ebi, b.default_ebi);
    assert_eq!(a.pdns, b.pdns);
    assert_eq!(a.version, b.version);
    assert_eq!(a.in_primary, b.in_primary);
    assert_eq!(a.bearers.len(), b.bearers.len());
    for (x, y) in a.bearers.iter().zip(&b.bearers) {
        let mut y = y.clone();
        y.slot = x.slot;
        assert_eq!(*x, y);
    }
}

fn plus_one_ul(u: Usage, len: u64) -> Usage {
    Usage {
        ul_packets: u.ul_packets + 1,
        ul_bytes: u.ul_bytes + len,
        ..u
    }
}

#[test]
fn round_trip_into_another_slice_for_every_shape() {
    let mut imsi = 1_010_000_000_001u64;
    for connected in [false, true] {
        for pdns in 1..=4 {
            for dedicated in [false, true] {
                let shape = Shape {
                    pdns,
                    dedicated,
                    connected,
                };
                imsi += 1;
                round_trip(imsi, shape);
            }
        }
    }
}

fn round_trip(imsi: u64, shape: Shape) {
    let (mut src_cp, mut src_dp) = slice(1);
    let (mut cp, mut dp) = slice(2);
    let slot = make_ue(&mut src_cp, &mut src_dp, imsi, shape);
    let snap = src_cp.snapshot_ue(slot).unwrap();
    assert!(snap.bearers.iter().all(|b| b.usage.ul_packets > 0));

    let mme = [0x5Au8; 64];
    let mut bytes = Vec::new();
    let n = snapshot::encode(&snap, Some(&mme), &mut bytes).unwrap();
    assert_eq!(n, bytes.len());
    if pdns_bearers(&shape) == (1, 1) {
        assert!(n <= 512, "{shape:?}: {n} bytes");
    }
    let (back, mme_back) = snapshot::decode(&bytes).unwrap();
    assert_eq!(back, snap, "{shape:?}");
    assert_eq!(mme_back.unwrap().bytes(), &mme[..]);

    let r: Restored = cp.restore_ue(&back).unwrap();
    assert_eq!(r.renumbered, 0, "{shape:?}");
    // Every TEID and address carries slice 1's bits: all kept through exceptions.
    assert_eq!(
        r.exceptions as usize,
        snap.pdns.len() + snap.bearers.len(),
        "{shape:?}"
    );
    dp.sync(3);
    let orig = src_cp.ue(slot).unwrap();
    let ue = cp.ue(r.ue_slot).unwrap().clone();
    assert_same_ue(orig, &ue);
    assert_eq!(cp.find_imsi(imsi), Some((DeviceClass::Normal, r.ue_slot)));
    // The data thread's counters came along.
    assert_eq!(cp.snapshot_ue(r.ue_slot).unwrap(), snap, "{shape:?}");

    if shape.connected {
        // Uplink on every bearer, with the TEID and source address of slice 1.
        for b in &ue.bearers {
            let src = ue.pdns.iter().find(|p| p.index == b.pdn).unwrap().ip;
            let out = ul(
                &mut dp,
                gpdu(b.teid_ul, &ipv4_udp(src, SERVER, 1, 2, 100)),
                4,
            );
            assert_eq!(out.bufs[0].meta.verdict, Verdict::ToSgi, "{shape:?}");
            let before = snap.bearers.iter().find(|s| s.ebi == b.ebi).unwrap().usage;
            assert_eq!(
                cp.usage(r.ue_slot, b.ebi).unwrap(),
                plus_one_ul(before, 100)
            );
        }
        // Downlink to every PDN address reaches its default bearer's eNB tunnel.
        for p in &ue.pdns {
            let out = dl(&mut dp, ipv4_udp(SERVER, p.ip, 80, 1, 90), 5);
            assert_eq!(out.bufs[0].meta.verdict, Verdict::ToS1u, "{shape:?}");
            assert_eq!(teid_of(&out), ue.bearer(p.default_ebi).unwrap().enb_teid);
        }
        // Rule set restored: SIP to the first PDN binds to the dedicated bearer.
        if shape.dedicated {
            let out = dl(&mut dp, ipv4_udp(SERVER, ue.ue_ip, 5060, 1, 90), 6);
            assert_eq!(out.bufs[0].meta.verdict, Verdict::ToS1u);
            assert_eq!(teid_of(&out), ue.bearer(7).unwrap().enb_teid);
        }
    } else {
        // Idle: downlink is held and the UE paged; after the Service Request it flows.
        let out = dl(&mut dp, ipv4_udp(SERVER, ue.ue_ip, 80, 1, 90), 4);
        assert_eq!(out.bufs[0].meta.verdict, Verdict::Consumed);
        let mut ev = Vec::new();
        cp.poll_requests(&mut ev);
        assert_eq!(
            ev,
            vec![ControlEvent::Page {
                ue_slot: r.ue_slot,
                imsi
            }]
        );
        cp.set_enb_tunnel(r.ue_slot, ue.default_ebi, ENB2, 0x7777)
            .unwrap();
        dp.sync(5);
        let mut again = Batch::default();
        assert_eq!(dp.take_ready(&mut again, false), 1);
        dp.downlink(&mut again, 6);
        assert_eq!(again.bufs[0].meta.verdict, Verdict::ToS1u);
        assert_eq!(teid_of(&again), 0x7777);
        let b = &ue.bearers[0];
        let out = ul(
            &mut dp,
            gpdu(b.teid_ul, &ipv4_udp(ue.ue_ip, SERVER, 1, 2, 70)),
            7,
        );
        assert_eq!(out.bufs[0].meta.verdict, Verdict::ToSgi);
    }

    // Detach removes the exception entries: the old identifiers are unknown again.
    let teid = ue.bearers[0].teid_ul;
    cp.detach(r.ue_slot).unwrap();
    dp.sync(8);
    let before = dp.counters().drop_count(DropReason::UnknownTeid);
    ul(
        &mut dp,
        gpdu(teid, &ipv4_udp(ue.ue_ip, SERVER, 1, 2, 60)),
        9,
    );
    assert_eq!(
        dp.counters().drop_count(DropReason::UnknownTeid),
        before + 1
    );
    let out = dl(&mut dp, ipv4_udp(SERVER, ue.ue_ip, 80, 1, 90), 10);
    assert_eq!(out.bufs[0].meta.verdict, Verdict::Drop);
    assert_eq!(cp.ue_count(), 0);
}

fn pdns_bearers(s: &Shape) -> (usize, usize) {
    (s.pdns, s.pdns + s.dedicated as usize)
}

#[test]
fn same_slice_index_in_a_fresh_process_keeps_identifiers_without_exceptions() {
    let (mut src_cp, mut src_dp) = slice(1);
    let shape = Shape {
        pdns: 2,
        dedicated: true,
        connected: true,
    };
    // Some other UEs first, so that slots are not the first ones.
    for i in 0..5 {
        make_ue(&mut src_cp, &mut src_dp, 900 + i, shape);
    }
    let slot = make_ue(&mut src_cp, &mut src_dp, 77, shape);
    let snap = src_cp.snapshot_ue(slot).unwrap();
    let (mut cp, mut dp) = slice(1);
    let r = cp.restore_ue(&snap).unwrap();
    assert_eq!((r.ue_slot, r.exceptions, r.renumbered), (slot, 0, 0));
    dp.sync(1);
    let ue = cp.ue(r.ue_slot).unwrap().clone();
    assert_eq!(&ue, src_cp.ue(slot).unwrap(), "slots kept as well");
    uplink_on_every_bearer(&mut dp, &ue, 100, 2);
    // The claimed slots are skipped by later attaches, and everything else is usable.
    for i in 0..20 {
        let a = attach(&mut cp, 5000 + i, 1);
        assert_ne!(a.ue_slot, r.ue_slot);
        assert!(ue.bearers.iter().all(|b| b.teid_ul != a.teid_ul));
    }
    dp.sync(3);
    let out = ul(
        &mut dp,
        gpdu(
            ue.bearers[0].teid_ul,
            &ipv4_udp(ue.ue_ip, SERVER, 1, 2, 100),
        ),
        4,
    );
    assert_eq!(out.bufs[0].meta.verdict, Verdict::ToSgi);
}

#[test]
fn identifiers_taken_at_the_destination_are_renumbered() {
    let (mut src_cp, mut src_dp) = slice(1);
    let shape = Shape {
        pdns: 1,
        dedicated: false,
        connected: true,
    };
    let slot = make_ue(&mut src_cp, &mut src_dp, 11, shape);
    let snap = src_cp.snapshot_ue(slot).unwrap();
    // Same slice index, and another UE already holds the slots.
    let (mut cp, mut dp) = slice(1);
    let other = attach(&mut cp, 12, 5);
    assert_eq!(other.ue_slot, slot);
    let r = cp.restore_ue(&snap).unwrap();
    assert_eq!((r.exceptions, r.renumbered), (0, 2));
    assert_ne!(r.ue_slot, slot);
    dp.sync(1);
    let ue = cp.ue(r.ue_slot).unwrap().clone();
    assert_ne!(ue.ue_ip, snap.ue_ip());
    assert_eq!(
        ue.bearers[0].slot, r.ue_slot,
        "the renumbered default bearer takes the bearer slot of its new UE slot"
    );
    let out = ul(
        &mut dp,
        gpdu(
            ue.bearers[0].teid_ul,
            &ipv4_udp(ue.ue_ip, SERVER, 1, 2, 100),
        ),
        2,
    );
    assert_eq!(out.bufs[0].meta.verdict, Verdict::ToSgi);
    // The other UE still owns its identifiers.
    let out = ul(
        &mut dp,
        gpdu(other.teid_ul, &ipv4_udp(other.ue_ip, SERVER, 1, 2, 100)),
        3,
    );
    assert_eq!(out.bufs[0].meta.verdict, Verdict::ToSgi);
    assert_eq!(cp.usage(other.ue_slot, FIRST_EBI).unwrap().ul_packets, 1);
    // The same IMSI twice is refused.
    assert_eq!(cp.restore_ue(&snap), Err(CtrlError::ImsiExists(11)));
}

/// A restored UE whose first bearer must be renumbered takes its UE slot's paired
/// bearer slot; a later bearer whose TEID names that same slot must then not take it
/// too (reserved slots keep no claim record: the restore checks its own bearers).
#[test]
fn a_renumbered_default_bearer_and_a_kept_one_never_share_a_slot() {
    let (mut src_cp, mut src_dp) = slice(1);
    attach(&mut src_cp, 1, 1);
    let x = attach(&mut src_cp, 2, 2);
    let pdn = |ebi: u8| PdnParams {
        apn: format!("apn{ebi}"),
        ebi,
        qci: 5,
        arp: Arp::default(),
        charging_key: 0,
    };
    // Bearer order [6 (above the UE slots), 7 (the pair, taken again after 5 left)].
    src_cp.add_pdn(x.ue_slot, &pdn(6)).unwrap();
    src_cp.remove_pdn(x.ue_slot, 5).unwrap();
    src_cp.add_pdn(x.ue_slot, &pdn(7)).unwrap();
    src_dp.sync(1);
    let before = src_cp.ue(x.ue_slot).unwrap().clone();
    assert_eq!(before.bearers[1].slot, x.ue_slot);
    let snap = src_cp.snapshot_ue(x.ue_slot).unwrap();
    // The destination: another UE holds bearer 6's slot (its dedicated bearer), the
    // UE slot is free.
    let (mut cp, mut dp) = slice(1);
    let z = attach(&mut cp, 3, 3);
    let ded = BearerParams {
        mbr_ul: 1_000_000,
        ..BearerParams::new(6, 1)
    };
    cp.add_bearer(z.ue_slot, ded).unwrap();
    let z_slots: Vec<u32> = cp
        .ue(z.ue_slot)
        .unwrap()
        .bearers
        .iter()
        .map(|b| b.slot)
        .collect();
    assert!(z_slots.contains(&before.bearers[0].slot));
    let r = cp.restore_ue(&snap).unwrap();
    assert_eq!(r.ue_slot, x.ue_slot);
    let ue = cp.ue(r.ue_slot).unwrap().clone();
    let slots: Vec<u32> = ue.bearers.iter().map(|b| b.slot).collect();
    assert_eq!(slots[0], r.ue_slot, "renumbered into the pair");
    assert_ne!(slots[1], slots[0]);
    assert!(slots.iter().all(|s| !z_slots.contains(s)));
    assert_eq!(r.renumbered, 2);
    dp.sync(2);
    uplink_on_every_bearer(&mut dp, &ue, 80, 3);
    for b in &ue.bearers {
        assert_eq!(cp.usage(r.ue_slot, b.ebi).unwrap().ul_packets, 1);
    }
}

#[test]
fn stateless_iot_device_round_trips() {
    let (mut src_cp, _src_dp) = slice(0);
    let mut p = AttachParams::new(4242);
    p.class = DeviceClass::StatelessIot;
    p.enb_addr = ENB;
    p.enb_teid = 0x99;
    p.apn = "iot".into();
    let a = src_cp.attach(&p).unwrap();
    let snap = src_cp.snapshot_imsi(4242).unwrap();
    assert_eq!(snap.class, DeviceClass::StatelessIot);
    let mut bytes = Vec::new();
    snapshot::encode(&snap, None, &mut bytes).unwrap();
    let (back, mme) = snapshot::decode(&bytes).unwrap();
    assert!(mme.is_none());
    assert_eq!(back, snap);
    let (mut cp, mut dp) = slice(3);
    let r = cp.restore_ue(&back).unwrap();
    assert_eq!(
        (r.ue_slot, r.class, r.renumbered),
        (a.ue_slot, DeviceClass::StatelessIot, 0)
    );
    assert_eq!(cp.snapshot_imsi(4242).unwrap(), snap);
    let out = ul(
        &mut dp,
        gpdu(a.teid_ul, &ipv4_udp(a.ue_ip, SERVER, 1, 2, 60)),
        1,
    );
    assert_eq!(out.bufs[0].meta.verdict, Verdict::ToSgi);
    let out = dl(&mut dp, ipv4_udp(SERVER, a.ue_ip, 2, 1, 60), 2);
    assert_eq!(teid_of(&out), 0x99);
}

// ------------------------------------------------------------- damaged input

fn sample() -> (UeSliceSnapshot, Vec<u8>) {
    let (mut cp, mut dp) = slice(1);
    let slot = make_ue(
        &mut cp,
        &mut dp,
        1_010_123_456_789,
        Shape {
            pdns: 2,
            dedicated: true,
            connected: true,
        },
    );
    let snap = cp.snapshot_ue(slot).unwrap();
    let mut bytes = Vec::new();
    snapshot::encode(&snap, Some(&[0xEE; 48]), &mut bytes).unwrap();
    (snap, bytes)
}

#[test]
fn every_truncation_is_an_error() {
    let (_, bytes) = sample();
    for n in 0..bytes.len() {
        assert!(
            matches!(
                SnapshotView::parse(&bytes[..n]),
                Err(SnapshotError::Truncated { .. })
            ),
            "length {n}"
        );
    }
    assert!(SnapshotView::parse(&bytes).is_ok());
}

#[test]
fn over_long_versions_and_magic_are_rejected() {
    let (_, bytes) = sample();
    let mut long = bytes.clone();
    long.push(0);
    assert_eq!(
        SnapshotView::parse(&long).unwrap_err(),
        SnapshotError::TrailingBytes(1)
    );
    for v in [0, pepc_slice::snapshot::VERSION + 1] {
        let mut other = bytes.clone();
        other[2] = v;
        assert_eq!(
            SnapshotView::parse(&other).unwrap_err(),
            SnapshotError::UnsupportedVersion(v)
        );
    }
    let mut huge = bytes.clone();
    huge[3..5].copy_from_slice(&0xFFFFu16.to_le_bytes());
    assert!(matches!(
        SnapshotView::parse(&huge),
        Err(SnapshotError::TooLong { .. })
    ));
    let mut magic = bytes.clone();
    magic[0] = b'X';
    assert!(matches!(
        SnapshotView::parse(&magic),
        Err(SnapshotError::BadMagic(_))
    ));
    // The MME section's bytes never show in Debug output.
    let v = SnapshotView::parse(&bytes).unwrap();
    let dbg = format!("{v:?} {:?}", v.mme().unwrap());
    let slice_len = v.slice_section().len();
    assert_eq!(
        dbg,
        format!(
            "SnapshotView {{ slice_len: {slice_len}, mme_len: Some(48) }} MmeSection {{ len: 48 }}"
        )
    );
}

/// xorshift64*: a fixed-seed generator, so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn random_corruption_is_an_error() {
    let (_, bytes) = sample();
    let mut rng = Rng(0x5eed_0001);
    for i in 0..5000 {
        let mut b = bytes.clone();
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(b.len());
            b[at] = rng.next() as u8;
        }
        if b == bytes {
            continue;
        }
        assert!(SnapshotView::parse(&b).is_err(), "mutation {i}");
    }
}

/// A version 1 slice section, which also carried the GUTI and the location (now the
/// MME section's), reads to the same UE.
#[test]
fn version_1_slice_section_is_read() {
    let (snap, bytes) = sample();
    let body = SnapshotView::parse(&bytes)
        .unwrap()
        .slice_section()
        .to_vec();
    // imsi (varint) | flags: the version 1 fields follow the flags.
    let flags_at = body.iter().position(|b| b & 0x80 == 0).unwrap() + 1;
    let mut v1 = body[..flags_at].to_vec();
    v1.push(body[flags_at] | 4);
    v1.extend_from_slice(&[0x00, 0xf1, 0x10, 0x01, 0x80, 0x01, 0x04, 0x03, 0x02, 0x01]);
    v1.extend_from_slice(&[
        0x00, 0xf1, 0x10, 0x34, 0x12, 0x00, 0xf1, 0x10, 1, 2, 3, 4, 42,
    ]);
    v1.extend_from_slice(&body[flags_at + 1..]);
    let mut out = UeSliceSnapshot::default();
    out.read_body(&v1, 1).unwrap();
    assert_eq!(out, snap);
    // Version 2 has no GUTI flag.
    assert!(out.read_body(&v1, 2).is_err());
}

/// Behind the container's check: the slice section decoder itself on damaged bodies
/// (as if the check were recomputed) returns errors or a valid snapshot, never panics.
#[test]
fn slice_section_decoder_survives_random_bodies() {
    let (snap, bytes) = sample();
    let body = SnapshotView::parse(&bytes)
        .unwrap()
        .slice_section()
        .to_vec();
    let mut out = UeSliceSnapshot::default();
    out.read_body(&body, pepc_slice::snapshot::VERSION).unwrap();
    assert_eq!(out, snap);
    for n in 0..body.len() {
        assert!(
            out.read_body(&body[..n], pepc_slice::snapshot::VERSION)
                .is_err(),
            "length {n}"
        );
    }
    let mut rng = Rng(0x5eed_0002);
    let (mut ok, mut err) = (0, 0);
    for _ in 0..20_000 {
        let mut b = body.clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(b.len());
            b[at] = rng.next() as u8;
        }
        match out.read_body(&b, pepc_slice::snapshot::VERSION) {
            Ok(()) => {
                ok += 1;
                // Whatever decodes is a consistent snapshot that encodes again.
                out.validate().unwrap();
                let mut again = Vec::new();
                snapshot::encode(&out, None, &mut again).unwrap();
            }
            Err(_) => err += 1,
        }
    }
    assert!(err > 0 && ok + err == 20_000);
    // Random garbage of every short length.
    for len in 0..300 {
        let g: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let _ = out.read_body(&g, pepc_slice::snapshot::VERSION);
        let _ = SnapshotView::parse(&g);
    }
}

#[test]
fn inconsistent_snapshots_are_refused_by_restore_and_encode() {
    let (snap, _) = sample();
    let (mut cp, _dp) = slice(2);
    let mut bad = snap.clone();
    bad.bearers[0].ebi = 4;
    assert!(matches!(
        cp.restore_ue(&bad),
        Err(CtrlError::BadSnapshot(SnapshotError::Invalid(_)))
    ));
    assert!(snapshot::encode(&bad, None, &mut Vec::new()).is_err());
    let mut bad = snap.clone();
    bad.pdns[1].default_ebi = 15;
    assert!(cp.restore_ue(&bad).is_err());
    let mut bad = snap.clone();
    bad.pdns.clear();
    assert!(cp.restore_ue(&bad).is_err());
    let mut bad = snap.clone();
    bad.pdns[0].apn = "a".repeat(101);
    assert!(snapshot::encode(&bad, None, &mut Vec::new()).is_err());
    assert!(snapshot::encode(&snap, Some(&[0; 4096]), &mut Vec::new()).is_err());
    // Nothing was left behind by the refusals.
    assert_eq!(cp.ue_count(), 0);
    assert!(cp.restore_ue(&snap).is_ok());
}
