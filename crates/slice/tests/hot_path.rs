//! The data path's hot/cold split: packets that leave the common case (first PDN's
//! default bearer) take the cold records and still get the same treatment, and the hot
//! record follows control changes (PDN removal, MBR, handover, eviction).

use pepc_slice::control::{AttachParams, BearerParams, ControlPlane, PdnParams};
use pepc_slice::counters::DropReason;
use pepc_slice::datapath::DataPlane;
use pepc_slice::packets::{gpdu, ipv4_udp};
use pepc_slice::pcef::{Action, PortRange, Rule};
use pepc_slice::slice::{build, SliceConfig};
use pepc_wire::gtpu::GtpuPacket;
use pepc_wire::{Batch, Verdict};
use std::net::Ipv4Addr;

const ENB: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const ENB2: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);

fn slice() -> (ControlPlane, DataPlane) {
    build(&SliceConfig::for_users(1000))
}

fn attach(cp: &mut ControlPlane, p: AttachParams) -> pepc_slice::control::Attached {
    cp.attach(&p).unwrap()
}

fn params(imsi: u64, enb_teid: u32) -> AttachParams {
    let mut p = AttachParams::new(imsi);
    p.enb_addr = ENB;
    p.enb_teid = enb_teid;
    p
}

fn run(dp: &mut DataPlane, pkts: &[Vec<u8>], uplink: bool, now: u64) -> Batch {
    let mut b = Batch::default();
    for (i, p) in pkts.iter().enumerate() {
        assert!(b.bufs[i].fill(p));
    }
    b.len = pkts.len();
    if uplink {
        dp.uplink(&mut b, now);
    } else {
        dp.downlink(&mut b, now);
    }
    b
}

fn verdicts(b: &Batch) -> Vec<Verdict> {
    b.packets().iter().map(|p| p.meta.verdict).collect()
}

fn teid_of(b: &Batch, i: usize) -> u32 {
    GtpuPacket::new_checked(b.bufs[i].as_slice())
        .unwrap()
        .teid()
}

fn forwarded(b: &Batch, v: Verdict) -> usize {
    b.packets().iter().filter(|p| p.meta.verdict == v).count()
}

/// A second PDN connection ("ims") with default EBI `ebi`.
fn ims(ebi: u8) -> PdnParams {
    PdnParams {
        apn: "ims".into(),
        ebi,
        qci: 5,
        arp: Default::default(),
        charging_key: 0,
    }
}

fn gbr_bearer(ebi: u8, mbr_ul: u64, mbr_dl: u64) -> BearerParams {
    BearerParams {
        ebi,
        linked_ebi: 0,
        qci: 1,
        arp: Default::default(),
        mbr_ul,
        mbr_dl,
        gbr_ul: mbr_ul,
        gbr_dl: mbr_dl,
        charging_key: 0,
    }
}

#[test]
fn removing_the_first_pdn_moves_the_hot_record_to_the_next() {
    let (mut cp, mut dp) = slice();
    let a = attach(&mut cp, params(1, 0x10));
    let p = cp.add_pdn(a.ue_slot, &ims(6)).unwrap();
    cp.set_enb_tunnel(a.ue_slot, 6, ENB, 0x66).unwrap();
    cp.remove_pdn(a.ue_slot, 5).unwrap();
    let b = run(
        &mut dp,
        &[
            ipv4_udp(SERVER, p.ue_ip, 1, 2, 100),
            ipv4_udp(SERVER, a.ue_ip, 1, 2, 100),
        ],
        false,
        1,
    );
    assert_eq!(verdicts(&b), [Verdict::ToS1u, Verdict::Drop]);
    assert_eq!(teid_of(&b, 0), 0x66);
    assert_eq!(dp.counters().drop_count(DropReason::UnknownUeIp), 1);
    // Uplink: the remaining PDN's bearer forwards; the removed one's TEID is stale.
    let b = run(
        &mut dp,
        &[
            gpdu(p.teid_ul, &ipv4_udp(p.ue_ip, SERVER, 1, 2, 60)),
            gpdu(a.teid_ul, &ipv4_udp(a.ue_ip, SERVER, 1, 2, 60)),
        ],
        true,
        2,
    );
    assert_eq!(verdicts(&b)[0], Verdict::ToSgi);
    assert_ne!(verdicts(&b)[1], Verdict::ToSgi);
    let u = cp.usage(a.ue_slot, 6).unwrap();
    assert_eq!((u.ul_packets, u.dl_packets), (1, 1));
}

/// A UE's first default bearer has the bearer slot equal to its UE slot (the data path
/// finds both hot records in one pair of lines); other bearers come from above the UE
/// slots, and the pair is taken again once free, with a new TEID generation.
#[test]
fn a_ues_first_default_bearer_shares_its_slot_and_the_others_come_after() {
    let cfg = SliceConfig::for_users(1000);
    let (mut cp, mut dp) = build(&cfg);
    let slot_of = |cp: &ControlPlane, ue: u32, ebi: u8| {
        let b = cp
            .ue(ue)
            .unwrap()
            .bearers
            .iter()
            .find(|b| b.ebi == ebi)
            .cloned();
        b.unwrap().slot
    };
    let mut ues = Vec::new();
    for i in 0..50 {
        let a = attach(&mut cp, params(100 + i, 0x10 + i as u32));
        assert_eq!(slot_of(&cp, a.ue_slot, 5), a.ue_slot);
        ues.push(a);
    }
    let a = ues[7];
    cp.add_bearer(a.ue_slot, gbr_bearer(6, 0, 0)).unwrap();
    let p = cp.add_pdn(a.ue_slot, &ims(7)).unwrap();
    assert!(
        slot_of(&cp, a.ue_slot, 6) as usize >= cfg.ue_slots,
        "dedicated: above"
    );
    assert!(
        slot_of(&cp, a.ue_slot, 7) as usize >= cfg.ue_slots,
        "pair in use: above"
    );
    // The first PDN goes; a new one's default bearer takes the pair, with a TEID of a
    // new generation: the old one is stale.
    cp.remove_pdn(a.ue_slot, 5).unwrap();
    let q = cp
        .add_pdn(
            a.ue_slot,
            &PdnParams {
                apn: "web".into(),
                ..ims(8)
            },
        )
        .unwrap();
    assert_eq!(slot_of(&cp, a.ue_slot, 8), a.ue_slot);
    assert_ne!(q.teid_ul, a.teid_ul);
    cp.set_enb_tunnel(a.ue_slot, 8, ENB, 0x88).unwrap();
    let b = run(
        &mut dp,
        &[
            gpdu(q.teid_ul, &ipv4_udp(q.ue_ip, SERVER, 1, 2, 60)),
            gpdu(a.teid_ul, &ipv4_udp(a.ue_ip, SERVER, 1, 2, 60)),
            gpdu(p.teid_ul, &ipv4_udp(p.ue_ip, SERVER, 1, 2, 60)),
        ],
        true,
        1,
    );
    let v = verdicts(&b);
    assert_eq!((v[0], v[2]), (Verdict::ToSgi, Verdict::ToSgi));
    assert_ne!(v[1], Verdict::ToSgi);
    assert_eq!(dp.counters().drop_count(DropReason::StaleTeid), 1);
    let b = run(&mut dp, &[ipv4_udp(SERVER, q.ue_ip, 1, 2, 100)], false, 2);
    assert_eq!(verdicts(&b), [Verdict::ToS1u]);
    assert_eq!(teid_of(&b, 0), 0x88);
    let u = cp.usage(a.ue_slot, 8).unwrap();
    assert_eq!(
        (u.ul_packets, u.dl_packets),
        (1, 1),
        "the reused slot counts from zero"
    );
    // A detached UE's slots are free again; every UE attached later is paired too.
    cp.detach(ues[3].ue_slot).unwrap();
    for i in 0..1000 {
        let a = attach(&mut cp, params(5000 + i, 1));
        assert_eq!(slot_of(&cp, a.ue_slot, 5), a.ue_slot);
        cp.detach(a.ue_slot).unwrap();
    }
}

/// Whatever the configured counts, at most half the bearer slots are reserved for
/// first default bearers: with as many bearer slots as UE slots, dedicated bearers and
/// further PDNs still find room.
#[test]
fn dedicated_bearers_find_room_when_bearer_slots_are_few() {
    let mut cfg = SliceConfig::for_users(100);
    cfg.bearer_slots = cfg.ue_slots;
    let (mut cp, _dp) = build(&cfg);
    let a = attach(&mut cp, params(1, 0x10));
    cp.add_bearer(a.ue_slot, gbr_bearer(6, 0, 0)).unwrap();
    let b = attach(&mut cp, params(2, 0x20));
    cp.add_pdn(b.ue_slot, &ims(6)).unwrap();
    let slots: Vec<u32> = [a.ue_slot, b.ue_slot]
        .iter()
        .flat_map(|u| {
            cp.ue(*u)
                .unwrap()
                .bearers
                .iter()
                .map(|b| b.slot)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(slots[0], a.ue_slot);
    assert_eq!(slots[2], b.ue_slot);
    assert!(slots[1] as usize >= cfg.bearer_slots / 2 && slots[3] as usize >= cfg.bearer_slots / 2);
}

#[test]
fn dedicated_bearer_mbr_is_enforced_and_default_bearer_is_not_limited() {
    let (mut cp, mut dp) = slice();
    let mut sip = Rule::any(1);
    sip.remote_ports = PortRange::single(5060);
    sip.bearer = Some(6);
    cp.install_rule_set(4, vec![sip]).unwrap();
    let a = attach(&mut cp, params(1, 0x10));
    cp.set_rule_set(a.ue_slot, 4).unwrap();
    // 30 KB/s each way: burst is the 3000-byte minimum.
    let teid6 = cp
        .add_bearer(a.ue_slot, gbr_bearer(6, 8 * 30_000, 8 * 30_000))
        .unwrap();
    cp.set_enb_tunnel(a.ue_slot, 6, ENB, 0x66).unwrap();
    let mut pkts: Vec<_> = (0..16)
        .map(|_| ipv4_udp(SERVER, a.ue_ip, 5060, 5060, 1000))
        .collect();
    pkts.extend((0..16).map(|_| ipv4_udp(SERVER, a.ue_ip, 80, 5000, 1000)));
    let b = run(&mut dp, &pkts, false, 1);
    assert_eq!(forwarded(&b, Verdict::ToS1u), 3 + 16);
    assert_eq!(dp.counters().drop_count(DropReason::MbrExceeded), 13);
    assert_eq!(cp.usage(a.ue_slot, 6).unwrap().dl_dropped, 13);
    assert_eq!(cp.usage(a.ue_slot, 5).unwrap().dl_packets, 16);
    // Uplink on the dedicated bearer is limited by its own MBR, the default is not.
    let mut pkts: Vec<_> = (0..16)
        .map(|_| gpdu(teid6, &ipv4_udp(a.ue_ip, SERVER, 5060, 5060, 1000)))
        .collect();
    pkts.extend((0..16).map(|_| gpdu(a.teid_ul, &ipv4_udp(a.ue_ip, SERVER, 5000, 80, 1000))));
    let b = run(&mut dp, &pkts, true, 2);
    assert_eq!(forwarded(&b, Verdict::ToSgi), 3 + 16);
    // Lifting the MBR (bearer modification) takes effect on the next packets.
    cp.modify_bearer_qos(a.ue_slot, 6, 1, 0, 0).unwrap();
    let pkts: Vec<_> = (0..16)
        .map(|_| ipv4_udp(SERVER, a.ue_ip, 5060, 5060, 1000))
        .collect();
    let b = run(&mut dp, &pkts, false, 3);
    assert_eq!(forwarded(&b, Verdict::ToS1u), 16);
}

#[test]
fn ambr_limits_uplink_and_rate_limit_rules_count_in_both_directions() {
    let (mut cp, mut dp) = slice();
    let mut limited = Rule::any(1);
    limited.remote_ports = PortRange::single(9);
    limited.action = Action::RateLimit {
        bits_per_s: 8 * 10_000,
    };
    cp.install_rule_set(5, vec![limited]).unwrap();
    let mut p = params(1, 0x10);
    p.ambr_ul = 8 * 30_000;
    let a = attach(&mut cp, p);
    let pkts: Vec<_> = (0..32)
        .map(|_| gpdu(a.teid_ul, &ipv4_udp(a.ue_ip, SERVER, 1, 2, 1000)))
        .collect();
    let b = run(&mut dp, &pkts, true, 1);
    assert_eq!(forwarded(&b, Verdict::ToSgi), 3);
    assert_eq!(dp.counters().drop_count(DropReason::AmbrExceeded), 29);
    assert_eq!(cp.usage(a.ue_slot, 5).unwrap().ul_dropped, 29);
    // The downlink has no AMBR here; a rate-limit rule is counted as such.
    let b2 = attach(&mut cp, params(2, 0x20));
    cp.set_rule_set(b2.ue_slot, 5).unwrap();
    let pkts: Vec<_> = (0..32)
        .map(|_| ipv4_udp(SERVER, b2.ue_ip, 9, 9, 1000))
        .collect();
    let b = run(&mut dp, &pkts, false, 2);
    assert_eq!(forwarded(&b, Verdict::ToS1u), 3);
    assert_eq!(dp.counters().drop_count(DropReason::RuleRateLimit), 29);
}

#[test]
fn hot_tunnel_follows_handover_eviction_and_promotion() {
    let (mut cp, mut dp) = slice();
    let a = attach(&mut cp, params(1, 0x10));
    let pkt = ipv4_udp(SERVER, a.ue_ip, 1, 2, 100);
    let b = run(&mut dp, std::slice::from_ref(&pkt), false, 1);
    assert_eq!(teid_of(&b, 0), 0x10);
    cp.set_enb_tunnel(a.ue_slot, 5, ENB2, 0x20).unwrap();
    let b = run(&mut dp, std::slice::from_ref(&pkt), false, 2);
    assert_eq!(teid_of(&b, 0), 0x20);
    assert_eq!(b.bufs[0].meta.peer.ip(), &ENB2);
    // Evicted: the packet waits for promotion, then leaves on the same tunnel.
    cp.evict(a.ue_slot).unwrap();
    let b = run(&mut dp, std::slice::from_ref(&pkt), false, 3);
    assert_eq!(verdicts(&b), [Verdict::Consumed]);
    let mut evs = Vec::new();
    cp.poll_requests(&mut evs);
    let b = run(&mut dp, &[], false, 4);
    assert_eq!(b.len, 0);
    assert_eq!(dp.ready_len(), 1);
    let mut b = Batch::default();
    assert_eq!(dp.take_ready(&mut b, false), 1);
    dp.downlink(&mut b, 5);
    assert_eq!(verdicts(&b), [Verdict::ToS1u]);
    assert_eq!(teid_of(&b, 0), 0x20);
    assert_eq!(cp.usage(a.ue_slot, 5).unwrap().dl_packets, 3);
}
