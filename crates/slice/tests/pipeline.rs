//! The slice's data path driven through its control thread API, without sockets.

use pepc_slice::context::FIRST_EBI;
use pepc_slice::control::{
    AttachParams, BearerParams, ControlEvent, ControlPlane, CtrlError, PdnParams,
};
use pepc_slice::counters::DropReason;
use pepc_slice::datapath::DataPlane;
use pepc_slice::ids::IotPool;
use pepc_slice::packets::{gpdu, ipv4_udp};
use pepc_slice::pcef::{Action, PortRange, Rule};
use pepc_slice::slice::{build, SliceConfig};
use pepc_wire::gtpu::{self, GtpuPacket};
use pepc_wire::{Batch, Verdict, BATCH_SIZE};
use std::net::Ipv4Addr;
use std::sync::atomic::Ordering::Relaxed;

const ENB: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);

fn slice() -> (ControlPlane, DataPlane) {
    let mut cfg = SliceConfig::for_users(1000);
    cfg.iot = Some(IotPool::new(0xC000_0000, Ipv4Addr::new(100, 64, 0, 0), 100).unwrap());
    build(&cfg)
}

fn attach(cp: &mut ControlPlane, imsi: u64, enb_teid: u32) -> pepc_slice::control::Attached {
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

fn ul(dp: &mut DataPlane, pkts: &[Vec<u8>], now: u64) -> Batch {
    let mut b = batch_of(pkts);
    dp.uplink(&mut b, now);
    b
}

fn dl(dp: &mut DataPlane, pkts: &[Vec<u8>], now: u64) -> Batch {
    let mut b = batch_of(pkts);
    dp.downlink(&mut b, now);
    b
}

#[test]
fn uplink_decapsulates_and_downlink_encapsulates() {
    let (mut cp, mut dp) = slice();
    let a = attach(&mut cp, 1, 0x1111);
    let inner = ipv4_udp(a.ue_ip, SERVER, 4000, 53, 128 - 8);
    let b = ul(&mut dp, &[gpdu(a.teid_ul, &inner)], 1);
    assert_eq!(b.bufs[0].meta.verdict, Verdict::ToSgi);
    assert_eq!(
        b.bufs[0].as_slice(),
        &inner[..],
        "decap yields the inner packet"
    );

    let down = ipv4_udp(SERVER, a.ue_ip, 53, 4000, 64);
    let b = dl(&mut dp, std::slice::from_ref(&down), 2);
    let out = &b.bufs[0];
    assert_eq!(out.meta.verdict, Verdict::ToS1u);
    assert_eq!(out.meta.peer, std::net::SocketAddrV4::new(ENB, 2152));
    let g = GtpuPacket::new_checked(out.as_slice()).unwrap();
    assert_eq!((g.msg_type(), g.teid()), (gtpu::G_PDU, 0x1111));
    assert_eq!(g.payload(), &down[..]);

    let u = cp.usage(a.ue_slot, FIRST_EBI).unwrap();
    assert_eq!(
        (u.ul_packets, u.ul_bytes, u.dl_packets, u.dl_bytes),
        (1, 120, 1, 64)
    );
}

#[test]
fn stale_teid_after_detach_gets_error_indication() {
    let (mut cp, mut dp) = slice();
    let a = attach(&mut cp, 1, 0x1111);
    cp.detach(a.ue_slot).unwrap();
    // The slot is reused by the next UE (FIFO free list: after the fresh ones, so force
    // reuse by exhausting nothing: attach until the same slot comes back).
    let inner = ipv4_udp(a.ue_ip, SERVER, 1, 2, 60);
    let b = ul(&mut dp, &[gpdu(a.teid_ul, &inner)], 1);
    let out = &b.bufs[0];
    assert_eq!(
        out.meta.verdict,
        Verdict::ToS1u,
        "error indication goes back to the sender"
    );
    let g = GtpuPacket::new_checked(out.as_slice()).unwrap();
    assert_eq!(g.msg_type(), gtpu::ERROR_INDICATION);
    let ei = gtpu::parse_error_indication(&g).unwrap();
    assert_eq!(ei.teid_data_i, a.teid_ul);
    assert_eq!(dp.counters().drop_count(DropReason::UnknownTeid), 1);
}

#[test]
fn reused_slot_rejects_the_old_generation() {
    let mut cfg = SliceConfig::for_users(0);
    cfg.ue_slots = 3; // slots 1 and 2 usable
    cfg.bearer_slots = 2; // bearer slot 1 only: forces reuse
    let (mut cp, mut dp) = build(&cfg);
    let a = attach(&mut cp, 1, 7);
    cp.detach(a.ue_slot).unwrap();
    let b2 = attach(&mut cp, 2, 8);
    let (_, slot_a, gen_a) = cfg.layout.split_teid(a.teid_ul).unwrap();
    let (_, slot_b, gen_b) = cfg.layout.split_teid(b2.teid_ul).unwrap();
    assert_eq!(slot_a, slot_b, "slot reused");
    assert_ne!(gen_a, gen_b, "generation advanced");
    // Old TEID: stale, rejected with an Error Indication; new TEID forwards.
    let old = ul(
        &mut dp,
        &[gpdu(a.teid_ul, &ipv4_udp(b2.ue_ip, SERVER, 1, 2, 60))],
        1,
    );
    assert_eq!(dp.counters().drop_count(DropReason::StaleTeid), 1);
    assert_eq!(old.bufs[0].meta.verdict, Verdict::ToS1u);
    let new = ul(
        &mut dp,
        &[gpdu(b2.teid_ul, &ipv4_udp(b2.ue_ip, SERVER, 1, 2, 60))],
        2,
    );
    assert_eq!(new.bufs[0].meta.verdict, Verdict::ToSgi);
}

#[test]
fn error_indications_are_rate_limited() {
    let (_cp, mut dp) = slice();
    let inner = ipv4_udp(Ipv4Addr::new(10, 0, 0, 9), SERVER, 1, 2, 60);
    let pkts: Vec<_> = (0..32)
        .map(|i| gpdu(0x0100_0000 + (i << 6), &inner))
        .collect();
    let mut answered = 0;
    for round in 0..40 {
        let b = ul(&mut dp, &pkts, 1000 + round); // all within one second
        answered += b
            .packets()
            .iter()
            .filter(|p| p.meta.verdict == Verdict::ToS1u)
            .count();
    }
    assert_eq!(answered, 1000, "default limit is 1000 per second");
    assert_eq!(
        dp.counters()
            .drop_count(DropReason::ErrorIndicationSuppressed),
        280
    );
}

#[test]
fn echo_request_is_answered_in_place() {
    let (_cp, mut dp) = slice();
    let mut req = [0u8; 16];
    let n = gtpu::echo_request(0x1234, &mut req).unwrap();
    let b = ul(&mut dp, &[req[..n].to_vec()], 1);
    let out = &b.bufs[0];
    assert_eq!(out.meta.verdict, Verdict::ToS1u);
    let g = GtpuPacket::new_checked(out.as_slice()).unwrap();
    assert_eq!((g.msg_type(), g.seq()), (gtpu::ECHO_RESPONSE, Some(0x1234)));
}

#[test]
fn malformed_and_spoofed_packets_are_dropped_by_reason() {
    let (mut cp, mut dp) = slice();
    let a = attach(&mut cp, 1, 5);
    let good_inner = ipv4_udp(a.ue_ip, SERVER, 1, 2, 60);
    let mut bad_version = gpdu(a.teid_ul, &good_inner);
    bad_version[0] = 0x50;
    let truncated = gpdu(a.teid_ul, &good_inner)[..20].to_vec();
    let spoofed = gpdu(
        a.teid_ul,
        &ipv4_udp(Ipv4Addr::new(10, 9, 9, 9), SERVER, 1, 2, 60),
    );
    let mut bad_inner = gpdu(a.teid_ul, &good_inner);
    bad_inner[8] = 0x65; // inner IP version 6 in an IPv4 PDN
    let b = ul(&mut dp, &[bad_version, truncated, spoofed, bad_inner], 1);
    assert!(b.packets().iter().all(|p| p.meta.verdict == Verdict::Drop));
    let c = dp.counters();
    assert_eq!(c.drop_count(DropReason::MalformedGtpu), 2);
    assert_eq!(c.drop_count(DropReason::SpoofedSource), 1);
    assert_eq!(c.drop_count(DropReason::MalformedIp), 1);
    let b = dl(
        &mut dp,
        &[
            vec![0x45, 0, 0],
            ipv4_udp(SERVER, Ipv4Addr::new(11, 0, 0, 1), 1, 2, 40),
        ],
        1,
    );
    assert!(b.packets().iter().all(|p| p.meta.verdict == Verdict::Drop));
    assert_eq!(dp.counters().drop_count(DropReason::UnknownUeIp), 1);
}

#[test]
fn handover_switches_the_tunnel_and_sends_an_end_marker() {
    let (mut cp, mut dp) = slice();
    let a = attach(&mut cp, 1, 0xAAAA);
    dl(&mut dp, &[ipv4_udp(SERVER, a.ue_ip, 1, 2, 64)], 1);
    let target = Ipv4Addr::new(127, 0, 0, 3);
    cp.set_enb_tunnel(a.ue_slot, FIRST_EBI, target, 0xBBBB)
        .unwrap();
    let b = dl(&mut dp, &[ipv4_udp(SERVER, a.ue_ip, 1, 2, 64)], 2);
    assert_eq!(b.bufs[0].meta.peer.ip(), &target);
    assert_eq!(
        GtpuPacket::new_checked(b.bufs[0].as_slice())
            .unwrap()
            .teid(),
        0xBBBB
    );
    // The End Marker went to the source eNB with the old TEID.
    assert_eq!(dp.generated.len, 1);
    let em = &dp.generated.bufs[0];
    assert_eq!(em.meta.peer.ip(), &ENB);
    let g = GtpuPacket::new_checked(em.as_slice()).unwrap();
    assert_eq!((g.msg_type(), g.teid()), (gtpu::END_MARKER, 0xAAAA));
}

#[test]
fn idle_ue_downlink_is_buffered_paged_and_drained_after_service_request() {
    let (mut cp, mut dp) = slice();
    let a = attach(&mut cp, 1, 0x10);
    cp.release_to_idle(a.ue_slot).unwrap();
    let pkts: Vec<_> = (0..5)
        .map(|i| ipv4_udp(SERVER, a.ue_ip, 1, 2, 40 + i))
        .collect();
    let b = dl(&mut dp, &pkts, 1);
    assert!(b
        .packets()
        .iter()
        .all(|p| p.meta.verdict == Verdict::Consumed));
    assert_eq!(dp.buffered_now(), 5);
    // One request reached the ring (what wakes an idle control thread).
    assert_eq!(dp.requests_pushed(), 1);
    // The control thread is asked once and pages the UE.
    let mut ev = Vec::new();
    cp.poll_requests(&mut ev);
    assert_eq!(
        ev,
        vec![ControlEvent::Page {
            ue_slot: a.ue_slot,
            imsi: 1
        }]
    );
    // Service Request → Initial Context Setup → new eNB tunnel: buffer drains in order.
    cp.set_enb_tunnel(a.ue_slot, FIRST_EBI, ENB, 0x20).unwrap();
    dp.sync(2);
    let mut again = Batch::default();
    assert_eq!(dp.take_ready(&mut again, false), 5);
    dp.downlink(&mut again, 3);
    let mut lens: Vec<usize> = again
        .packets()
        .iter()
        .map(|p| {
            assert_eq!(p.meta.verdict, Verdict::ToS1u);
            let g = GtpuPacket::new_checked(p.as_slice()).unwrap();
            assert_eq!(g.teid(), 0x20);
            g.payload().len()
        })
        .collect();
    lens.sort();
    assert_eq!(lens, vec![40, 41, 42, 43, 44]);
    assert_eq!(dp.buffered_now(), 0);
}

#[test]
fn evicted_ue_is_promoted_on_uplink_without_loss() {
    let (mut cp, mut dp) = slice();
    let a = attach(&mut cp, 1, 0x10);
    ul(
        &mut dp,
        &[gpdu(a.teid_ul, &ipv4_udp(a.ue_ip, SERVER, 1, 2, 60))],
        1_000,
    );
    // Idle for longer than the threshold: the control thread evicts it from the primary.
    assert_eq!(cp.evict_idle(10_000_000_000, 1_000_000_000, 100), 1);
    assert!(!cp.ue(a.ue_slot).unwrap().in_primary);
    let b = ul(
        &mut dp,
        &[gpdu(a.teid_ul, &ipv4_udp(a.ue_ip, SERVER, 1, 2, 61))],
        10_000_000_001,
    );
    assert_eq!(
        b.bufs[0].meta.verdict,
        Verdict::Consumed,
        "buffered, not lost"
    );
    let mut ev = Vec::new();
    cp.poll_requests(&mut ev);
    assert!(
        ev.is_empty(),
        "a connected UE is promoted without signaling"
    );
    dp.sync(10_000_000_002);
    let mut again = Batch::default();
    assert_eq!(dp.take_ready(&mut again, true), 1);
    dp.uplink(&mut again, 10_000_000_003);
    assert_eq!(again.bufs[0].meta.verdict, Verdict::ToSgi);
    assert_eq!(cp.usage(a.ue_slot, FIRST_EBI).unwrap().ul_packets, 2);
}

/// Uplink the eNB forwarded before a release can reach the data thread after the UE
/// went ECM-IDLE: it is the UE's (live TEID) and goes on to the PDN; a stale TEID of a
/// removed bearer is still refused.
/// A bearer's last activity is the later of its two directions (each direction's
/// line keeps its own): downlink alone keeps a UE in the primary table.
#[test]
fn downlink_activity_alone_keeps_a_ue_in_the_primary_table() {
    let (mut cp, mut dp) = slice();
    let a = attach(&mut cp, 1, 0x10);
    let b = attach(&mut cp, 2, 0x20);
    ul(
        &mut dp,
        &[
            gpdu(a.teid_ul, &ipv4_udp(a.ue_ip, SERVER, 1, 2, 60)),
            gpdu(b.teid_ul, &ipv4_udp(b.ue_ip, SERVER, 1, 2, 60)),
        ],
        1_000,
    );
    let out = dl(
        &mut dp,
        &[ipv4_udp(SERVER, a.ue_ip, 2, 1, 80)],
        9_500_000_000,
    );
    assert_eq!(out.bufs[0].meta.verdict, Verdict::ToS1u);
    // At 10 s with a 1 s threshold: b (last packet at 1 us) goes, a (downlink at 9.5 s)
    // stays.
    assert_eq!(cp.evict_idle(10_000_000_000, 1_000_000_000, 100), 1);
    assert!(cp.ue(a.ue_slot).unwrap().in_primary);
    assert!(!cp.ue(b.ue_slot).unwrap().in_primary);
}

#[test]
fn uplink_in_flight_after_release_to_idle_is_forwarded() {
    let (mut cp, mut dp) = slice();
    let a = attach(&mut cp, 1, 0x10);
    cp.release_to_idle(a.ue_slot).unwrap();
    dp.sync(1);
    let b = ul(
        &mut dp,
        &[gpdu(a.teid_ul, &ipv4_udp(a.ue_ip, SERVER, 1, 2, 60))],
        2,
    );
    assert_eq!(b.bufs[0].meta.verdict, Verdict::Consumed, "buffered");
    let mut ev = Vec::new();
    cp.poll_requests(&mut ev);
    assert!(ev.is_empty(), "no paging for uplink");
    dp.sync(3);
    let mut again = Batch::default();
    assert_eq!(dp.take_ready(&mut again, true), 1);
    dp.uplink(&mut again, 4);
    assert_eq!(again.bufs[0].meta.verdict, Verdict::ToSgi);
    assert_eq!(dp.counters().drop_count(DropReason::PromotionFailed), 0);
    // Detached: its TEID is stale and refused.
    cp.detach(a.ue_slot).unwrap();
    dp.sync(5);
    let b = ul(
        &mut dp,
        &[gpdu(a.teid_ul, &ipv4_udp(a.ue_ip, SERVER, 1, 2, 61))],
        6,
    );
    assert_ne!(b.bufs[0].meta.verdict, Verdict::ToSgi);
}

#[test]
fn promotion_buffer_is_bounded_and_counts_drops() {
    let (mut cp, mut dp) = slice();
    let a = attach(&mut cp, 1, 0x10);
    cp.release_to_idle(a.ue_slot).unwrap();
    let pkts: Vec<_> = (0..32)
        .map(|_| ipv4_udp(SERVER, a.ue_ip, 1, 2, 40))
        .collect();
    dl(&mut dp, &pkts, 1);
    assert_eq!(dp.buffered_now(), pepc_slice::datapath::PENDING_PER_UE);
    assert_eq!(dp.counters().drop_count(DropReason::BufferFull), 32 - 16);
    // Paging fails: the buffered packets are dropped and counted.
    let mut ev = Vec::new();
    cp.poll_requests(&mut ev);
    cp.paging_failed(a.ue_slot);
    dp.sync(2);
    assert_eq!(dp.buffered_now(), 0);
    assert_eq!(dp.counters().drop_count(DropReason::PromotionFailed), 16);
}

#[test]
fn pcef_rules_drop_bind_bearers_and_count() {
    let (mut cp, mut dp) = slice();
    let mut deny = Rule::any(1);
    deny.remote_ports = PortRange::single(23);
    deny.action = Action::Drop;
    let mut voice = Rule::any(2);
    voice.remote_ports = PortRange { lo: 5060, hi: 5061 };
    voice.bearer = Some(6);
    cp.install_rule_set(3, vec![deny, voice]).unwrap();
    let a = attach(&mut cp, 1, 0x10);
    cp.set_rule_set(a.ue_slot, 3).unwrap();
    let teid6 = cp
        .add_bearer(
            a.ue_slot,
            BearerParams {
                charging_key: 9,
                ..BearerParams::new(6, 1)
            },
        )
        .unwrap();
    cp.set_enb_tunnel(a.ue_slot, 6, ENB, 0x66).unwrap();
    let b = ul(
        &mut dp,
        &[gpdu(a.teid_ul, &ipv4_udp(a.ue_ip, SERVER, 1, 23, 60))],
        1,
    );
    assert_eq!(b.bufs[0].meta.verdict, Verdict::Drop);
    assert_eq!(dp.counters().drop_count(DropReason::PolicyDrop), 1);
    // Downlink SIP goes on bearer 6; other traffic on the default bearer.
    let b = dl(
        &mut dp,
        &[
            ipv4_udp(SERVER, a.ue_ip, 5060, 5060, 100),
            ipv4_udp(SERVER, a.ue_ip, 80, 5000, 100),
        ],
        2,
    );
    let teid_of = |i: usize| {
        GtpuPacket::new_checked(b.bufs[i].as_slice())
            .unwrap()
            .teid()
    };
    assert_eq!((teid_of(0), teid_of(1)), (0x66, 0x10));
    // Uplink on the dedicated bearer's own TEID forwards and counts on that bearer.
    ul(
        &mut dp,
        &[gpdu(teid6, &ipv4_udp(a.ue_ip, SERVER, 5060, 5060, 100))],
        3,
    );
    assert_eq!(cp.usage(a.ue_slot, 6).unwrap().ul_packets, 1);
    assert_eq!(cp.usage(a.ue_slot, 6).unwrap().dl_packets, 1);
    let rc = dp.counters().rule(3, 1);
    assert_eq!(rc.dl_packets.load(Relaxed), 1);
    assert_eq!(rc.ul_packets.load(Relaxed), 1);
}

/// A full batch with dedicated bearers' packets scattered among default ones: the
/// dedicated ones run their second stage early (their owner's line is a second
/// miss), and every packet still leaves decapsulated, in order, counted on its bearer.
#[test]
fn uplink_batch_mixing_dedicated_and_default_bearers_keeps_order_and_counts() {
    let (mut cp, mut dp) = slice();
    let ues: Vec<_> = (0..3)
        .map(|i| attach(&mut cp, 10 + i, 0x20 + i as u32))
        .collect();
    let teid6: Vec<u32> = ues
        .iter()
        .map(|a| cp.add_bearer(a.ue_slot, BearerParams::new(6, 1)).unwrap())
        .collect();
    // Packet i: UE i % 3, on its dedicated bearer when i % 4 == 1 or i % 7 == 0.
    let on_dedicated = |i: usize| i % 4 == 1 || i.is_multiple_of(7);
    let inner: Vec<Vec<u8>> = (0..BATCH_SIZE)
        .map(|i| ipv4_udp(ues[i % 3].ue_ip, SERVER, 4000 + i as u16, 53, 100))
        .collect();
    let pkts: Vec<Vec<u8>> = (0..BATCH_SIZE)
        .map(|i| {
            let teid = if on_dedicated(i) {
                teid6[i % 3]
            } else {
                ues[i % 3].teid_ul
            };
            gpdu(teid, &inner[i])
        })
        .collect();
    let b = ul(&mut dp, &pkts, 1);
    assert_eq!(b.len, BATCH_SIZE);
    for (i, p) in b.packets().iter().enumerate() {
        assert_eq!(p.meta.verdict, Verdict::ToSgi, "packet {i}");
        assert_eq!(p.as_slice(), &inner[i][..], "packet {i}");
    }
    for (u, a) in ues.iter().enumerate() {
        let of_ue = (0..BATCH_SIZE).filter(|i| i % 3 == u);
        let ded = of_ue.clone().filter(|&i| on_dedicated(i)).count() as u64;
        let def = of_ue.count() as u64 - ded;
        assert!(ded > 0 && def > 0);
        assert_eq!(cp.usage(a.ue_slot, 6).unwrap().ul_packets, ded, "UE {u}");
        assert_eq!(cp.usage(a.ue_slot, 5).unwrap().ul_packets, def, "UE {u}");
    }
}

#[test]
fn ambr_limits_downlink() {
    let (mut cp, mut dp) = slice();
    let mut p = AttachParams::new(1);
    p.enb_addr = ENB;
    p.enb_teid = 1;
    p.ambr_dl = 8 * 30_000; // 30 KB/s, burst 3000 B (minimum)
    let a = cp.attach(&p).unwrap();
    let pkts: Vec<_> = (0..32)
        .map(|_| ipv4_udp(SERVER, a.ue_ip, 1, 2, 1000))
        .collect();
    let b = dl(&mut dp, &pkts, 1);
    let sent = b
        .packets()
        .iter()
        .filter(|p| p.meta.verdict == Verdict::ToS1u)
        .count();
    assert_eq!(sent, 3);
    assert_eq!(dp.counters().drop_count(DropReason::AmbrExceeded), 29);
}

#[test]
fn stateless_iot_needs_no_per_ue_state() {
    let (mut cp, mut dp) = slice();
    let mut p = AttachParams::new(77);
    p.class = pepc_slice::context::DeviceClass::StatelessIot;
    p.enb_addr = ENB;
    p.enb_teid = 0x77;
    let a = cp.attach(&p).unwrap();
    assert!(a.teid_ul & 0x8000_0000 != 0);
    let b = ul(
        &mut dp,
        &[gpdu(a.teid_ul, &ipv4_udp(a.ue_ip, SERVER, 1, 2, 60))],
        1,
    );
    assert_eq!(b.bufs[0].meta.verdict, Verdict::ToSgi);
    let b = dl(&mut dp, &[ipv4_udp(SERVER, a.ue_ip, 2, 1, 60)], 2);
    assert_eq!(
        GtpuPacket::new_checked(b.bufs[0].as_slice())
            .unwrap()
            .teid(),
        0x77
    );
    let iot = &dp.counters().iot;
    assert_eq!(iot.ul_packets.load(Relaxed), 1);
    assert_eq!(iot.dl_packets.load(Relaxed), 1);
    // Downlink to a pool address with no device attached has no tunnel.
    let other = Ipv4Addr::new(100, 64, 0, 50);
    dl(&mut dp, &[ipv4_udp(SERVER, other, 2, 1, 60)], 3);
    assert_eq!(dp.counters().drop_count(DropReason::NoDownlinkTunnel), 1);
}

/// Control state is written only by the control thread and counters only by the data
/// thread: run both concurrently (attach/handover/detach against live traffic) and check
/// (a) traffic never changes control state, (b) counters the control thread reads only
/// grow while a bearer lives, (c) every forwarded downlink packet used a tunnel the
/// control thread published for that UE.
#[test]
fn single_writer_invariants_hold_under_concurrency() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let (mut cp, mut dp) = slice();
    let users: Vec<_> = (0..64)
        .map(|i| attach(&mut cp, i, 0x1000 + i as u32))
        .collect();
    let before: Vec<_> = users
        .iter()
        .map(|a| cp.ue(a.ue_slot).unwrap().clone())
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let ips: Vec<_> = users.iter().map(|a| (a.ue_ip, a.teid_ul)).collect();
    let data = std::thread::spawn(move || {
        let mut seen_teids = std::collections::HashMap::<Ipv4Addr, Vec<u32>>::new();
        let mut now = 1;
        while !stop2.load(Ordering::Relaxed) {
            for chunk in ips.chunks(16) {
                let down: Vec<_> = chunk
                    .iter()
                    .map(|(ip, _)| ipv4_udp(SERVER, *ip, 1, 2, 64))
                    .collect();
                let up: Vec<_> = chunk
                    .iter()
                    .map(|(ip, teid)| gpdu(*teid, &ipv4_udp(*ip, SERVER, 2, 1, 64)))
                    .collect();
                let mut b = batch_of(&down);
                dp.downlink(&mut b, now);
                for (p, (ip, _)) in b.packets().iter().zip(chunk.iter()) {
                    if p.meta.verdict == Verdict::ToS1u {
                        let t = GtpuPacket::new_checked(p.as_slice()).unwrap().teid();
                        seen_teids.entry(*ip).or_default().push(t);
                    }
                }
                let mut b = batch_of(&up);
                dp.uplink(&mut b, now);
                now += 1000;
            }
        }
        (dp, seen_teids)
    });
    // Both threads must really run at once: on a loaded machine the rounds below
    // can end before the data thread has been scheduled at all.
    let t0 = std::time::Instant::now();
    while cp.counters().dl_forwarded.load(Ordering::Relaxed) == 0
        && t0.elapsed() < std::time::Duration::from_secs(10)
    {
        std::thread::yield_now();
    }
    // Control thread: handovers publish new eNB TEIDs of the form ue<<16 | n.
    let mut published = std::collections::HashMap::<Ipv4Addr, Vec<u32>>::new();
    let mut last_ul = vec![0u64; users.len()];
    for round in 1..200u32 {
        for (i, a) in users.iter().enumerate() {
            let teid = ((i as u32) << 16) | round;
            cp.set_enb_tunnel(a.ue_slot, FIRST_EBI, ENB, teid).unwrap();
            published.entry(a.ue_ip).or_default().push(teid);
            cp.flush();
            let u = cp.usage(a.ue_slot, FIRST_EBI).unwrap();
            assert!(u.ul_packets >= last_ul[i], "counter went backwards");
            last_ul[i] = u.ul_packets;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let (dp, seen) = data.join().unwrap();
    for (i, a) in users.iter().enumerate() {
        let ue = cp.ue(a.ue_slot).unwrap();
        // Only what the control thread itself changed differs from the snapshot.
        assert_eq!(ue.imsi, before[i].imsi);
        assert_eq!(ue.ue_ip, before[i].ue_ip);
        assert_eq!(ue.bearers[0].teid_ul, before[i].bearers[0].teid_ul);
        let ok: std::collections::HashSet<u32> = published[&a.ue_ip]
            .iter()
            .copied()
            .chain([0x1000 + i as u32])
            .collect();
        for t in seen.get(&a.ue_ip).into_iter().flatten() {
            assert!(
                ok.contains(t),
                "downlink used a TEID never published for this UE"
            );
        }
    }
    assert!(dp.counters().dl_forwarded.load(Ordering::Relaxed) > 0);
}

fn pdn(apn: &str, ebi: u8) -> PdnParams {
    PdnParams {
        apn: apn.into(),
        ebi,
        qci: 5,
        arp: Default::default(),
        charging_key: 0,
    }
}

fn teid_of(b: &Batch, i: usize) -> u32 {
    GtpuPacket::new_checked(b.bufs[i].as_slice())
        .unwrap()
        .teid()
}

#[test]
fn second_pdn_downlink_reaches_its_bearer_and_is_dropped_after_disconnect() {
    let (mut cp, mut dp) = slice();
    let a = attach(&mut cp, 1, 0x10);
    let layout = cp.config().layout;
    let p = cp.add_pdn(a.ue_slot, &pdn("ims", 6)).unwrap();
    assert_eq!(p.pdn, 1);
    assert_eq!(Some(p.ue_ip), layout.pdn_ip(1, 0, a.ue_slot));
    assert_ne!(p.ue_ip, a.ue_ip);
    cp.set_enb_tunnel(a.ue_slot, 6, ENB, 0x66).unwrap();
    // A dedicated bearer of the first PDN must not carry the second PDN's traffic,
    // even when a PCEF rule names it.
    let mut rule = Rule::any(1);
    rule.bearer = Some(7);
    cp.install_rule_set(2, vec![rule]).unwrap();
    cp.set_rule_set(a.ue_slot, 2).unwrap();
    let mut bp = BearerParams {
        ebi: 7,
        linked_ebi: FIRST_EBI,
        qci: 2,
        arp: Default::default(),
        mbr_ul: 0,
        mbr_dl: 0,
        gbr_ul: 0,
        gbr_dl: 0,
        charging_key: 0,
    };
    cp.add_bearer(a.ue_slot, bp).unwrap();
    cp.set_enb_tunnel(a.ue_slot, 7, ENB, 0x77).unwrap();
    let b = dl(
        &mut dp,
        &[
            ipv4_udp(SERVER, p.ue_ip, 5060, 5060, 100),
            ipv4_udp(SERVER, a.ue_ip, 80, 5000, 100),
        ],
        1,
    );
    assert_eq!(b.bufs[0].meta.verdict, Verdict::ToS1u);
    assert_eq!(
        (teid_of(&b, 0), teid_of(&b, 1)),
        (0x66, 0x77),
        "second PDN: its default bearer; first PDN: the rule's bearer"
    );
    // Uplink: the second PDN's bearer takes only the second PDN's source address.
    let b = ul(
        &mut dp,
        &[
            gpdu(p.teid_ul, &ipv4_udp(p.ue_ip, SERVER, 1, 2, 60)),
            gpdu(p.teid_ul, &ipv4_udp(a.ue_ip, SERVER, 1, 2, 60)),
        ],
        2,
    );
    assert_eq!(b.bufs[0].meta.verdict, Verdict::ToSgi);
    assert_eq!(b.bufs[1].meta.verdict, Verdict::Drop);
    assert_eq!(dp.counters().drop_count(DropReason::SpoofedSource), 1);
    assert_eq!(cp.usage(a.ue_slot, 6).unwrap().dl_packets, 1);
    assert_eq!(cp.usage(a.ue_slot, 6).unwrap().ul_packets, 1);

    // A dedicated bearer joined to the second PDN.
    bp.ebi = 8;
    bp.linked_ebi = 6;
    cp.add_bearer(a.ue_slot, bp).unwrap();
    assert_eq!(cp.ue(a.ue_slot).unwrap().bearer(8).unwrap().pdn, 1);
    bp.ebi = 9;
    bp.linked_ebi = 7; // not a default bearer
    assert!(matches!(
        cp.add_bearer(a.ue_slot, bp),
        Err(CtrlError::NoSuchPdn { .. })
    ));

    // Disconnect: both bearers of the PDN go, the address stops reaching the UE.
    let removed = cp.remove_pdn(a.ue_slot, 6).unwrap();
    assert_eq!(removed, vec![6, 8]);
    let ue = cp.ue(a.ue_slot).unwrap();
    assert_eq!(ue.pdns.len(), 1);
    assert!(ue.bearer(6).is_none() && ue.bearer(8).is_none() && ue.bearer(7).is_some());
    let before = dp.counters().drop_count(DropReason::UnknownUeIp);
    let b = dl(
        &mut dp,
        &[
            ipv4_udp(SERVER, p.ue_ip, 5060, 5060, 100),
            ipv4_udp(SERVER, a.ue_ip, 80, 5000, 100),
        ],
        3,
    );
    assert_eq!(b.bufs[0].meta.verdict, Verdict::Drop);
    assert_eq!(b.bufs[1].meta.verdict, Verdict::ToS1u);
    assert_eq!(
        dp.counters().drop_count(DropReason::UnknownUeIp),
        before + 1
    );
    // The old uplink TEID is stale now.
    let b = ul(
        &mut dp,
        &[gpdu(p.teid_ul, &ipv4_udp(p.ue_ip, SERVER, 1, 2, 60))],
        4,
    );
    assert_ne!(b.bufs[0].meta.verdict, Verdict::ToSgi);
    // The last PDN stays.
    assert_eq!(
        cp.remove_pdn(a.ue_slot, FIRST_EBI),
        Err(CtrlError::LastPdn(a.ue_slot))
    );
    // The pool index is free again: a new PDN gets the same address back.
    let again = cp.add_pdn(a.ue_slot, &pdn("ims", 6)).unwrap();
    assert_eq!(again.ue_ip, p.ue_ip);
}

#[test]
fn idle_second_pdn_buffers_and_pages_but_disconnected_one_is_dropped() {
    let (mut cp, mut dp) = slice();
    let a = attach(&mut cp, 1, 0x10);
    let p = cp.add_pdn(a.ue_slot, &pdn("ims", 6)).unwrap();
    let q = cp.add_pdn(a.ue_slot, &pdn("sos", 7)).unwrap();
    assert_eq!((p.pdn, q.pdn), (1, 2));
    cp.release_to_idle(a.ue_slot).unwrap();
    // Downlink to the idle UE's second PDN: buffered and a page requested.
    let b = dl(&mut dp, &[ipv4_udp(SERVER, p.ue_ip, 1, 2, 60)], 1);
    assert_eq!(b.bufs[0].meta.verdict, Verdict::Consumed);
    let mut ev = vec![];
    cp.poll_requests(&mut ev);
    assert_eq!(
        ev,
        vec![ControlEvent::Page {
            ue_slot: a.ue_slot,
            imsi: 1
        }]
    );
    // Disconnecting the third PDN while idle: its address is dropped, not buffered.
    cp.remove_pdn(a.ue_slot, 7).unwrap();
    let before = dp.counters().drop_count(DropReason::UnknownUeIp);
    let b = dl(&mut dp, &[ipv4_udp(SERVER, q.ue_ip, 1, 2, 60)], 2);
    assert_eq!(b.bufs[0].meta.verdict, Verdict::Drop);
    assert_eq!(
        dp.counters().drop_count(DropReason::UnknownUeIp),
        before + 1
    );
    // Service request: every bearer gets its tunnel; the buffered packet drains onto
    // the second PDN's default bearer.
    cp.set_enb_tunnel(a.ue_slot, FIRST_EBI, ENB, 0x10).unwrap();
    cp.set_enb_tunnel(a.ue_slot, 6, ENB, 0x66).unwrap();
    dp.sync(3);
    let mut b = Batch::default();
    assert_eq!(dp.take_ready(&mut b, false), 1);
    dp.downlink(&mut b, 4);
    assert_eq!(b.bufs[0].meta.verdict, Verdict::ToS1u);
    assert_eq!(teid_of(&b, 0), 0x66);
}

#[test]
fn pdn_pools_run_out_and_iot_has_one_pdn() {
    let (mut cp, _dp) = slice();
    let a = attach(&mut cp, 1, 0x10);
    let n = cp.config().layout.pdn_count;
    for k in 1..n {
        cp.add_pdn(a.ue_slot, &pdn("ims", 5 + k)).unwrap();
    }
    assert_eq!(
        cp.add_pdn(a.ue_slot, &pdn("x", 14)),
        Err(CtrlError::Exhausted("PDN address pools"))
    );
    assert!(matches!(
        cp.add_pdn(a.ue_slot, &pdn("x", FIRST_EBI)),
        Err(CtrlError::BearerExists { .. })
    ));
}

#[test]
fn a_handover_storm_between_batches_keeps_every_end_marker_and_the_last_tunnel() {
    // The updates waiting before a batch are applied before its packets; each may
    // make an End Marker, so a sync takes no more than the originated batch has room
    // for, and the rest wait for the next batch rather than lose their End Marker.
    let (mut cp, mut dp) = slice();
    let a = attach(&mut cp, 1, 0x100);
    dl(&mut dp, &[ipv4_udp(SERVER, a.ue_ip, 1, 2, 64)], 1);
    let applied0 = dp.counters().updates_applied.load(Relaxed);
    let moves = dp.generated.capacity() as u32 + 5;
    for i in 1..=moves {
        cp.set_enb_tunnel(a.ue_slot, FIRST_EBI, ENB, 0x100 + i)
            .unwrap();
    }
    let mut markers = Vec::new();
    let mut last_teid = 0;
    for round in 0..10 {
        let b = dl(&mut dp, &[ipv4_udp(SERVER, a.ue_ip, 1, 2, 64)], 2 + round);
        last_teid = GtpuPacket::new_checked(b.bufs[0].as_slice())
            .unwrap()
            .teid();
        for i in 0..dp.generated.len {
            let g = GtpuPacket::new_checked(dp.generated.bufs[i].as_slice()).unwrap();
            assert_eq!(g.msg_type(), gtpu::END_MARKER);
            markers.push(g.teid());
        }
        dp.generated.clear();
    }
    // One End Marker per move, on the path it left, in order; none lost.
    assert_eq!(markers, (0..moves).map(|i| 0x100 + i).collect::<Vec<_>>());
    assert_eq!(dp.counters().drop_count(DropReason::TxFailed), 0);
    assert_eq!(last_teid, 0x100 + moves);
    assert!(dp.counters().updates_applied.load(Relaxed) >= applied0 + moves as u64);
}
