//! Bounded state per peer: contexts that never authenticate go when their
//! timers run out, a release never completed is guarded, unauthenticated contexts are
//! bounded per eNB and per slice, and after a storm of never-answered attaches the
//! heap returns to its size before the storm.

use pepc_mme::hss::{HssData, SubscriptionData};
use pepc_mme::mme::{Proc, ProcFailure};
use pepc_mme::{HssAnswer, HssRequest, Input, MmeConfig};
use pepc_s1ap::msg::*;
use pepc_s1ap::Cause;
use pepc_security::{AuthVector, Key256};
use pepc_testkit::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

/// Live heap bytes of this test binary (tests here run one at a time: `SERIAL`).
struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);
static SERIAL: Mutex<()> = Mutex::new(());

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            LIVE.fetch_add(l.size() as isize, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size() as isize, Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            LIVE.fetch_add(new as isize - l.size() as isize, Relaxed);
        }
        q
    }
}

#[global_allocator]
static A: Counting = Counting;

fn imsi(i: usize) -> String {
    format!("00101{:010}", 1_000_000 + i)
}

fn node(users: usize, cfg: MmeConfig, enbs: u64) -> Harness {
    let mut h = Harness::new(users, cfg);
    // The heap is measured: no recording growing in it.
    h.stop_recording();
    for a in 1..=enbs {
        assert!(matches!(
            h.enb_setup(a, a as u32, 1),
            S1apMessage::S1SetupResponse(_)
        ));
    }
    h
}

/// `n` attaches by IMSI from `enbs` eNBs, never answered; what came back. The HSS's
/// requests are answered here, with made-up data (`HssMode::Hold`): what is measured
/// is the MME's and the slice's state, not the HSS store's (its SQN writes).
fn storm(h: &mut Harness, n: usize, enbs: u64, first_enb_ue_id: u32) -> Vec<(u64, S1apMessage)> {
    h.hss_mode = HssMode::Hold;
    let mut all = vec![];
    for i in 0..n {
        let ue = SimUe::new(&imsi(i), first_enb_ue_id + i as u32);
        let nas = ue.attach_request(None, false);
        let assoc = 1 + (i as u64 % enbs);
        all.extend(h.send(assoc, initial_ue(h, &ue, nas, None)));
        while let Some((_, req)) = h.held_hss.pop_front() {
            all.extend(h.input(Input::Hss(made_up_answer(req))));
        }
        h.logs.clear();
    }
    all
}

fn made_up_answer(req: HssRequest) -> HssAnswer {
    match req {
        HssRequest::Profile { r, .. } => HssAnswer {
            r,
            result: Ok(HssData::Profile(SubscriptionData {
                msisdn: String::new(),
                apn: "internet".into(),
                pdn_type: pepc_hss::PdnType::Ipv4,
                qci: 9,
                arp_priority: 8,
                ambr_ul_bps: 0,
                ambr_dl_bps: 0,
            })),
        },
        HssRequest::Vector { r, .. } | HssRequest::Resync { r, .. } => HssAnswer {
            r,
            result: Ok(HssData::Vector(Box::new(AuthVector {
                rand: [r.seq as u8; 16],
                xres: [1; 8],
                autn: [2; 16],
                kasme: Key256::from([3; 32]),
            }))),
        },
        HssRequest::Purge { .. } => unreachable!("the harness never holds a purge"),
    }
}

/// Let every timer run out (NAS retransmissions, release guards, unauthenticated TTL).
fn expire(h: &mut Harness) {
    for _ in 0..12 {
        h.advance(Duration::from_secs(6));
        h.logs.clear();
    }
}

#[test]
fn storm_of_never_answered_attaches_leaves_nothing_behind() {
    let _one = SERIAL.lock().unwrap();
    const N: usize = 10_000;
    let mut h = node(N + 16, MmeConfig::default(), 3);
    // A first storm sizes what is sized once (the timer heap, the test's own buffers):
    // the baseline is the state after it.
    storm(&mut h, N, 3, 1);
    expire(&mut h);
    assert_eq!((h.mme.ue_count(), h.cp.entry_count()), (0, 0));
    let baseline = LIVE.load(Relaxed);

    let r = storm(&mut h, N, 3, 100_000);
    assert_eq!(
        r.iter()
            .filter(|(_, m)| matches!(m, S1apMessage::DownlinkNasTransport(_)))
            .count(),
        N,
        "every attach is challenged"
    );
    drop(r); // the test's own copy of what was sent is not the node's state
    assert_eq!(h.mme.ue_count(), N);
    let peak = LIVE.load(Relaxed);
    expire(&mut h);
    let after = LIVE.load(Relaxed);
    let s = &h.mme.stats;
    assert_eq!(s.procedure_timeouts, 2 * N as u64);
    assert_eq!(s.release_guard_expiries, 2 * N as u64, "no eNB answered");
    assert_eq!((h.mme.ue_count(), h.cp.entry_count()), (0, 0));
    assert_eq!(h.cp.ue_count(), 0);
    assert!(h.mme.next_timeout(&h.cp).is_none(), "no timer left");
    println!(
        "heap: baseline {baseline} B, {N} contexts {peak} B (+{} B/UE), after {after} B",
        (peak - baseline) / N as isize
    );
    assert!(
        after <= baseline + 64 * 1024,
        "heap after the storm {after} B, baseline {baseline} B"
    );
}

/// An attach the UE leaves (it never answers the challenge) is counted failed, so
/// that started = succeeded + rejected + timed out (3,336 attaches that timed out
/// after their eNB vanished once left the failed count at 0).
#[test]
fn never_answered_attaches_are_counted_as_failed() {
    let _one = SERIAL.lock().unwrap();
    const N: usize = 50;
    let mut h = node(N + 16, MmeConfig::default(), 1);
    storm(&mut h, N, 1, 7);
    expire(&mut h);
    let s = &h.mme.stats;
    assert_eq!(s.attach_requests, N as u64);
    assert_eq!(s.attach_timeouts, N as u64);
    assert_eq!(
        s.attach_requests,
        s.attaches + s.attach_rejects + s.attach_timeouts
    );
    let l = &s.procedures;
    assert_eq!(l.started(Proc::Attach), N as u64);
    assert_eq!(l.failed_with(Proc::Attach, ProcFailure::Timeout), N as u64);
    assert_eq!(
        (l.failed(Proc::Attach), l.open(Proc::Attach)),
        (N as u64, 0)
    );
}

/// Attaches whose eNB reset every UE connection in the middle of them fail once each,
/// as released, and none stays open: the ledger still sums to what started.
#[test]
fn attaches_cut_by_an_enb_reset_fail_once_each() {
    let _one = SERIAL.lock().unwrap();
    const N: usize = 40;
    let mut h = node(N + 16, MmeConfig::default(), 1);
    storm(&mut h, N, 1, 7);
    let reset = Reset {
        cause: Cause::OM_INTERVENTION,
        kind: pepc_s1ap::ResetKind::All,
    };
    assert_eq!(h.send(1, reset).len(), 1, "Reset Acknowledge");
    expire(&mut h);
    assert_eq!((h.mme.ue_count(), h.cp.entry_count()), (0, 0));
    let l = &h.mme.stats.procedures;
    let released = ProcFailure::ConnectionReleased;
    assert_eq!(l.started(Proc::Attach), N as u64);
    assert_eq!(l.failed_with(Proc::Attach, released), N as u64);
    assert_eq!(
        l.failed(Proc::Attach),
        N as u64,
        "each once: no timeout after"
    );
    for p in Proc::ALL {
        assert_eq!(l.open(p), 0, "{p:?}");
    }
}

#[test]
fn unauthenticated_contexts_are_bounded_per_enb_and_per_slice() {
    let _one = SERIAL.lock().unwrap();
    let cfg = MmeConfig {
        max_unauth_per_enb: 50,
        max_unauth_contexts: 80,
        ..MmeConfig::default()
    };
    let mut h = node(200, cfg, 2);
    for i in 0..150 {
        h.hss.add(&subscriber(&imsi(i))).unwrap();
    }
    // A UE that authenticates does not count.
    let mut ue = SimUe::new(&imsi(149), 9_999);
    attach(&mut h, &mut ue, 1).unwrap();

    let overload = |r: &[(u64, S1apMessage)]| {
        r.iter()
            .filter(|(_, m)| {
                matches!(m, S1apMessage::ErrorIndication(e)
                    if e.cause == Some(Cause::CONTROL_PROCESSING_OVERLOAD))
            })
            .count()
    };
    // First messages that start nothing (undecodable NAS): each holds a context
    // without security until its TTL. 60 from eNB 1: 50 taken, 10 refused.
    let nowhere = || vec![0x07, 0x99, 0x01];
    let mut r = vec![];
    for i in 0..60 {
        let u = SimUe::new(&imsi(i), 1 + i as u32);
        r.extend(h.send(1, initial_ue(&h, &u, nowhere(), None)));
    }
    assert_eq!(overload(&r), 10);
    // 40 from eNB 2: 30 more reach the slice's 80, 10 refused.
    let mut r = vec![];
    for i in 60..100 {
        let u = SimUe::new(&imsi(i), 1 + i as u32);
        r.extend(h.send(2, initial_ue(&h, &u, nowhere(), None)));
    }
    assert_eq!(overload(&r), 10);
    assert_eq!(h.mme.stats.unauth_refused, 20);
    assert_eq!(h.mme.ue_count(), 81);
    // An attach at the bound is not left to time out: #22 with T3346 (overload
    // control), from a short-lived context outside the bound.
    let u = SimUe::new(&imsi(100), 400);
    let r = h.send(1, initial_ue(&h, &u, u.attach_request(None, false), None));
    assert_eq!(overload(&r), 0);
    assert_eq!(
        r.iter().map(|(_, m)| m.name()).collect::<Vec<_>>(),
        ["DownlinkNASTransport", "UEContextReleaseCommand"]
    );
    assert_eq!(h.mme.stats.congestion_rejects, 1);
    h.send(
        1,
        UeContextReleaseComplete {
            mme_ue_id: match &r[1].1 {
                S1apMessage::UeContextReleaseCommand(c) => match c.ids {
                    pepc_s1ap::UeS1apIds::Pair { mme_ue_id, .. } => mme_ue_id,
                    pepc_s1ap::UeS1apIds::MmeOnly(m) => m,
                },
                _ => unreachable!(),
            },
            enb_ue_id: 400,
        },
    );
    assert_eq!(h.mme.ue_count(), 81);
    // Once they have timed out, there is room again.
    expire(&mut h);
    assert_eq!(h.mme.ue_count(), 1, "the authenticated UE stays");
    let u = SimUe::new(&imsi(120), 500);
    let r = h.send(1, initial_ue(&h, &u, u.attach_request(None, false), None));
    assert_eq!(overload(&r), 0);
}

#[test]
fn a_first_message_that_leads_nowhere_is_released_at_its_ttl() {
    let _one = SERIAL.lock().unwrap();
    let mut h = node(16, MmeConfig::default(), 1);
    let ue = SimUe::new(&imsi(0), 7);
    // Undecodable NAS: no procedure starts, so no NAS timer would ever free it.
    let r = h.send(1, initial_ue(&h, &ue, vec![0x07, 0x99, 0x01], None));
    assert!(r.is_empty());
    assert_eq!(h.mme.ue_count(), 1);
    let ttl = MmeConfig::default().unauth_context_ttl;
    let r = h.advance(ttl);
    assert!(
        r.iter()
            .any(|(_, m)| matches!(m, S1apMessage::UeContextReleaseCommand(_))),
        "released at its TTL"
    );
    assert_eq!(h.mme.stats.unauth_expired, 1);
    // The eNB does not answer either: the release guard removes it.
    h.advance(MmeConfig::default().release_guard);
    assert_eq!((h.mme.ue_count(), h.cp.entry_count()), (0, 0));
}

/// Attach by IMSI and switch-off detach, cycle after cycle, by a few subscribers
/// (each re-attaching by IMSI): every attach queues an interim record due in an
/// hour and no UE timer ever expires, so nothing but the queue's own bound keeps
/// the entries of contexts gone (one per cycle before it: 3,000 here). The parked
/// contexts stay one per subscriber, their order within its bound.
#[test]
fn policy_timer_queue_stays_bounded_over_attach_detach_cycles() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const SUBSCRIBERS: usize = 40;
    const CYCLES: usize = 3_000;
    let imsi = |i: usize| format!("00101{:010}", 2_000_000 + i);
    let mut h = Harness::new(SUBSCRIBERS, MmeConfig::default());
    h.stop_recording();
    for i in 0..SUBSCRIBERS {
        h.hss.add(&subscriber(&imsi(i))).unwrap();
    }
    h.enb_setup(1, 1, 1);
    let plmn = h.mme.config().plmn;
    let mut peak_capacity = 0;
    for c in 0..CYCLES {
        let mut ue = SimUe::new(&imsi(c % SUBSCRIBERS), 1 + c as u32);
        let seen = attach(&mut h, &mut ue, 1).unwrap();
        assert!(
            seen.iter().any(|s| s == "InitialContextSetupRequest"),
            "cycle {c}: {seen:?}"
        );
        let detach = UplinkNasTransport {
            mme_ue_id: ue.mme_ue_id.unwrap(),
            enb_ue_id: ue.enb_ue_id,
            nas_pdu: ue.detach_request(true),
            ecgi: pepc_s1ap::Ecgi {
                plmn,
                cell_id: 0x101,
            },
            tai: pepc_s1ap::Tai { plmn, tac: 1 },
        };
        let r = h.send(1, detach);
        pump(&mut h, &mut ue, 1, r).unwrap();
        h.logs.clear();
        peak_capacity = peak_capacity.max(h.mme.interims_queued().1);
    }
    assert_eq!(h.mme.ue_count(), 0);
    assert_eq!(h.mme.stats.detaches, CYCLES as u64);
    assert!(
        h.mme.interims_queued().0 <= 1026 && peak_capacity <= 4096,
        "interim records queued: {} (capacity {}, at most {peak_capacity}) after {CYCLES} cycles",
        h.mme.interims_queued().0,
        h.mme.interims_queued().1
    );
    assert_eq!(h.mme.parked_count(), SUBSCRIBERS);
    assert!(h.mme.parked_order_len() <= 2 * SUBSCRIBERS + 64);
}
