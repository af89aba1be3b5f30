//! Replaying one UE from its snapshot: what a node that takes over a UE does (its
//! checkpoint, then the messages logged since), checked against a recording.
//!
//! The recording is replayed whole, as [`super::replay::replay`] does, on one MME
//! (*the slice*). For each UE asked for, at the first call from `from_call` on before
//! which the UE is between two procedures, the slice exports the UE's snapshot
//! ([`Mme::export`]), and a second MME (*the UE's own*) is built from the same
//! start record. It is given the node-level calls made so far (eNB setups, resets,
//! congestion: what any MME that takes over a UE knows of its eNBs), imports the
//! snapshot, and from then on takes only:
//! * the calls that concern the UE: S1AP naming its MME UE S1AP ID, an Initial UE
//!   Message that gives it a new S1 connection, HSS and PCRF answers to its requests,
//!   and the operator's and the HSS's calls naming its IMSI;
//! * node-level calls and timeouts (its own timers only fire there).
//!
//! Each of these calls takes the identifiers the slice drew in it (directed draws,
//! `pepc_slice::control::ControlPlane::direct_counter_reads`): the slice's
//! allocators had moved on for the other UEs. The UE's outputs (the S1AP messages
//! naming it, its HSS, PCRF, checkpoint and usage outputs, its paging) must come out
//! byte-identical to the slice's outputs for it, in order; so must the result of an
//! operator's call.
//!
//! Not replayable this way: restart restores (their calls concern many UEs at once)
//! after the snapshot; a timeout call in which the slice read counters or drew
//! identifiers for several UEs gives the UE's own MME the first ones (a difference
//! then shows as one).

use super::replay::{describe, hex_from, output_name, Mismatch, Replayer};
use super::{codec, Call, CallRecord, Header, Record, RecordError};
use crate::mme::{Input, Mme, Output};
use crate::snapshot::UeKey;
use crate::ControlPlane;
use pepc_s1ap::peek::peek;
use pepc_s1ap::PagingIdentity;
use std::time::Instant;

/// How the replay of one UE went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UeReplayReport {
    pub imsi: u64,
    /// The call before which its snapshot was taken (`None`: it never was between
    /// two procedures from `from_call` on).
    pub snapshot_at: Option<u64>,
    pub snapshot_bytes: usize,
    /// Calls its own MME took after the snapshot: those naming the UE, and the
    /// timeouts and node-level calls every MME takes; the UE's outputs compared.
    pub calls: u64,
    pub shared_calls: u64,
    pub outputs: u64,
    /// `None`: every output of the UE came out byte-identical.
    pub mismatch: Option<Mismatch>,
}

/// The UE's identifiers in an MME, as far as routing calls and outputs to it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Handles {
    mme_ue_id: u32,
    conn: Option<(u64, u32)>,
    m_tmsi: u32,
}

impl Mme {
    fn handles(&self, cp: &ControlPlane, imsi: u64) -> Option<Handles> {
        let id = self.index.by_imsi(imsi)?;
        let u = self.ue(cp, id)?;
        Some(Handles {
            mme_ue_id: id,
            conn: u.conn.map(|c| (c.assoc, c.enb_ue_id)),
            m_tmsi: u.m_tmsi,
        })
    }
}

/// Whom an output is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Node,
    MmeUeId(u32),
    Imsi(u64),
    MTmsi(u32),
}

fn owner(o: &Output) -> Owner {
    match o {
        Output::S1ap { bytes, .. } => match peek(bytes) {
            Ok(p) if !p.is_non_ue_associated() => p
                .mme_ue_id
                .or(p.source_mme_ue_id)
                .map_or(Owner::Node, Owner::MmeUeId),
            _ => Owner::Node,
        },
        Output::Page { bytes, .. } => match pepc_s1ap::msg::Paging::decode(bytes) {
            Ok(p) => match p.paging_id {
                PagingIdentity::STmsi(s) => Owner::MTmsi(s.m_tmsi),
                PagingIdentity::Imsi(tbcd) => Owner::Imsi(imsi_of_tbcd(&tbcd)),
            },
            Err(_) => Owner::Node,
        },
        Output::Hss(r) => Owner::Imsi(r.imsi()),
        Output::Pcrf(r) => Owner::Imsi(r.session().imsi),
        Output::UsageRecord(r) => Owner::Imsi(r.imsi),
        Output::Checkpoint { imsi, .. }
        | Output::Forget { imsi }
        | Output::ClaimImsi { imsi }
        | Output::ReleaseImsi { imsi } => Owner::Imsi(*imsi),
        Output::CloseAssoc { .. } | Output::ResetDone { .. } | Output::Congestion { .. } => {
            Owner::Node
        }
    }
}

fn imsi_of_tbcd(b: &[u8]) -> u64 {
    let mut v = 0u64;
    for d in b.iter().flat_map(|o| [o & 0x0f, o >> 4]) {
        if d > 9 {
            break;
        }
        v = v.wrapping_mul(10).wrapping_add(u64::from(d));
    }
    v
}

/// Is `c` a call every MME that holds UEs of the node takes (eNB and node events)?
fn node_level(c: &Call) -> bool {
    let Call::Handle(i) = c else {
        return false;
    };
    match i {
        Input::Congestion { .. }
        | Input::EnbUp { .. }
        | Input::EnbDown { .. }
        | Input::EnbSetup { .. }
        | Input::EnbReset { .. } => true,
        Input::S1ap { bytes, .. } => peek(bytes).is_ok_and(|p| p.is_non_ue_associated()),
        _ => false,
    }
}

/// How a call concerns a UE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Concern {
    No,
    /// It names the UE.
    Own,
    /// Every MME takes it (a timeout, a node-level call).
    Shared,
}

/// How `c` concerns UE `imsi`, whose handles in the slice were `before` the call and
/// are `after` it.
fn concerns(c: &Call, imsi: u64, before: Option<Handles>, after: Option<Handles>) -> Concern {
    let named = |id: Option<u32>| id.is_some_and(|id| before.is_some_and(|h| h.mme_ue_id == id));
    let own = |b: bool| if b { Concern::Own } else { Concern::No };
    if node_level(c) {
        return Concern::Shared;
    }
    own(match c {
        Call::Timeout => return Concern::Shared,
        Call::DetachUe { imsi: i }
        | Call::ReallocateGuti { imsi: i }
        | Call::ReapplyPolicy { imsi: i, .. } => *i == imsi,
        Call::RemoveMigrated { key } => match key {
            UeKey::Imsi(i) => *i == imsi,
            UeKey::MmeUeId(id) => named(Some(*id)),
        },
        Call::BeginRestore { .. } | Call::RestoreSome { .. } | Call::Import { .. } => false,
        Call::Handle(i) => match i {
            Input::S1ap { bytes, .. } => match peek(bytes) {
                Ok(p) if p.mme_ue_id.is_some() || p.source_mme_ue_id.is_some() => {
                    named(p.mme_ue_id) || named(p.source_mme_ue_id)
                }
                // An Initial UE Message: the UE's if it gave the UE a new connection
                // (or ended its context).
                Ok(_) => before != after,
                Err(_) => false,
            },
            Input::Hss(a) => named(Some(a.r.mme_ue_id)),
            Input::Pcrf(a) => named(Some(a.r.mme_ue_id)),
            Input::Supersede { imsi: i }
            | Input::HssCancelLocation { imsi: i, .. }
            | Input::HssInsertSubscriberData { imsi: i, .. }
            | Input::PolicyUpdate { imsi: i, .. } => *i == imsi,
            Input::Control(pepc_slice::control::ControlEvent::Page { imsi: i, .. }) => *i == imsi,
            // An eNB's error indication for a tunnel: the MME finds the UE by it.
            Input::Control(_) => return Concern::Shared,
            Input::Congestion { .. }
            | Input::EnbUp { .. }
            | Input::EnbDown { .. }
            | Input::EnbSetup { .. }
            | Input::EnbReset { .. } => return Concern::Shared,
        },
    })
}

/// A UE being replayed on its own MME.
struct Own {
    imsi: u64,
    r: Option<Replayer>,
    report: UeReplayReport,
}

/// Which UEs to replay on their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pick {
    /// These subscribers.
    Imsis(Vec<u64>),
    /// Up to this many of the UEs the slice holds at `from_call`, lowest IMSIs first.
    Held(usize),
}

/// UEs replayed on their own beside one pass over the recording: each has an MME
/// and slice tables of its own (megabytes), so many UEs take several passes.
pub const UES_PER_PASS: usize = 16;

/// Replay the whole recording `bytes` (its report first: a whole-replay mismatch
/// stops everything) and, beside it, each UE picked on its own MME from its first
/// snapshot at or after call `from_call` ([`UES_PER_PASS`] at a time).
pub fn replay_ues(
    bytes: &[u8],
    epoch: Instant,
    pick: &Pick,
    from_call: u64,
) -> Result<(super::replay::ReplayReport, Vec<UeReplayReport>), RecordError> {
    let (whole, mut reports, picked) = one_pass(bytes, epoch, pick, 0..UES_PER_PASS, from_call)?;
    if whole.mismatch.is_some() {
        return Ok((whole, reports));
    }
    let all = Pick::Imsis(picked.clone());
    for from in (UES_PER_PASS..picked.len()).step_by(UES_PER_PASS) {
        let (_, more, _) = one_pass(bytes, epoch, &all, from..from + UES_PER_PASS, from_call)?;
        reports.extend(more);
    }
    Ok((whole, reports))
}

/// One pass: the whole replay, and the UEs of `range` among those picked on their
/// own; with every IMSI picked.
#[allow(clippy::type_complexity)]
fn one_pass(
    bytes: &[u8],
    epoch: Instant,
    pick: &Pick,
    range: std::ops::Range<usize>,
    from_call: u64,
) -> Result<(super::replay::ReplayReport, Vec<UeReplayReport>, Vec<u64>), RecordError> {
    let (records, mut slice, mut report) = super::replay::start(bytes, epoch)?;
    let h = slice.header().clone();
    let own_of = |imsi: u64| Own {
        imsi,
        r: None,
        report: UeReplayReport {
            imsi,
            snapshot_at: None,
            snapshot_bytes: 0,
            calls: 0,
            shared_calls: 0,
            outputs: 0,
            mismatch: None,
        },
    };
    let mut picked = match pick {
        Pick::Imsis(v) => v.clone(),
        Pick::Held(_) => Vec::new(),
    };
    let part = |picked: &[u64]| -> Vec<Own> {
        picked
            .iter()
            .skip(range.start)
            .take(range.len())
            .map(|&i| own_of(i))
            .collect()
    };
    let mut own = part(&picked);
    // Node-level calls so far, for the UEs' own MMEs built later.
    let mut node_calls: Vec<(u64, Call)> = Vec::new();
    let mut snap = Vec::new();
    for rec in records {
        let c = match rec? {
            Record::Start(_) => return Err(RecordError::Invalid("second start record")),
            Record::Call(c) => c,
        };
        let index = report.calls;
        if let (Pick::Held(n), true) = (pick, index == from_call) {
            let mut held: Vec<u64> = slice.mme.index.imsis().map(|(i, _)| i).collect();
            held.sort_unstable();
            held.truncate(*n);
            picked = held;
            own = part(&picked);
        }
        if index >= from_call {
            for o in own
                .iter_mut()
                .filter(|o| o.r.is_none() && o.report.snapshot_at.is_none())
            {
                snap.clear();
                if let Some(r) = take_over(&h, epoch, &mut slice, o.imsi, &node_calls, &mut snap) {
                    o.r = Some(r);
                    o.report.snapshot_at = Some(index);
                    o.report.snapshot_bytes = snap.len();
                }
            }
        }
        if node_level(&c.call) {
            node_calls.push((c.at_ns, c.call.copy()));
        }
        let before: Vec<_> = own
            .iter()
            .map(|o| {
                o.r.as_ref()
                    .and_then(|_| slice.mme.handles(&slice.cp, o.imsi))
            })
            .collect();
        let CallRecord {
            at_ns,
            call,
            counter_reads,
            draws,
            result,
            outputs,
        } = *c;
        // The UEs' own MMEs take the call first (it is consumed by the slice's).
        let copies: Vec<Option<Call>> = own
            .iter()
            .map(|o| o.r.as_ref().and_then(|_| copy_call(&call)))
            .collect();
        report.outputs += outputs.len() as u64;
        report.calls += 1;
        let what = describe(&call);
        if let Some(m) = slice.step(
            index,
            CallRecord {
                at_ns,
                call,
                counter_reads: counter_reads.clone(),
                draws: draws.clone(),
                result: result.clone(),
                outputs,
            },
        ) {
            report.mismatch = Some(m);
            break;
        }
        for ((o, copy), before) in own.iter_mut().zip(copies).zip(before) {
            let (Some(r), Some(copy)) = (o.r.as_mut(), copy) else {
                continue;
            };
            let after = slice.mme.handles(&slice.cp, o.imsi);
            match concerns(&copy, o.imsi, before, after) {
                Concern::No => continue,
                Concern::Own => o.report.calls += 1,
                Concern::Shared => o.report.shared_calls += 1,
            }
            let ours = |w: Owner| match w {
                Owner::Node => false,
                Owner::MmeUeId(id) => [before, after].iter().flatten().any(|h| h.mme_ue_id == id),
                Owner::Imsi(i) => i == o.imsi,
                Owner::MTmsi(t) => [before, after].iter().flatten().any(|h| h.m_tmsi == t),
            };
            let expected: Vec<&Output> = slice.out().iter().filter(|x| ours(owner(x))).collect();
            let operator = matches!(
                copy,
                Call::DetachUe { .. } | Call::ReallocateGuti { .. } | Call::ReapplyPolicy { .. }
            );
            r.cp.direct_counter_reads(&counter_reads);
            r.mme.draws.replay(&draws, true);
            let got_result = r.call(at_ns, copy);
            r.cp.replay_counter_balance();
            r.mme.draws.balance();
            let got: Vec<&Output> = r.out().iter().filter(|x| owner(x) != Owner::Node).collect();
            o.report.outputs += expected.len() as u64;
            if let Some(m) = compare(index, &what, &expected, &got) {
                o.report.mismatch = Some(m);
            } else if operator && got_result != result {
                o.report.mismatch = Some(Mismatch {
                    call: index,
                    what: what.clone(),
                    detail: "result".into(),
                    expected: result.clone(),
                    got: got_result,
                });
            }
            if o.report.mismatch.is_some() {
                o.r = None;
            }
        }
    }
    Ok((report, own.into_iter().map(|o| o.report).collect(), picked))
}

/// The UE's own MME, if the UE can be exported from the slice now: built from the
/// start record, given the node-level calls, and the snapshot imported.
fn take_over(
    h: &Header,
    epoch: Instant,
    slice: &mut Replayer,
    imsi: u64,
    node_calls: &[(u64, Call)],
    snap: &mut Vec<u8>,
) -> Option<Replayer> {
    let now = slice.mme.now;
    // The snapshot's counter reads are the replayed data path's own (no recorded
    // value is taken from the next call).
    slice.cp.live_counter_reads();
    let r = slice.mme.export(&slice.cp, UeKey::Imsi(imsi), now, snap);
    slice.cp.replay_counter_reads(&[]);
    r.ok()?;
    let mut own = Replayer::new(h, epoch);
    for (at, c) in node_calls {
        own.call(*at, c.copy());
    }
    own.cp.live_counter_reads();
    let imported = own.mme.import(&mut own.cp, snap, now).is_ok();
    own.cp.replay_counter_reads(&[]);
    imported.then_some(own)
}

/// A copy of a call the UEs' own MMEs take (`None` for restart restores, which they
/// do not take).
fn copy_call(c: &Call) -> Option<Call> {
    match c {
        Call::BeginRestore { .. } | Call::RestoreSome { .. } | Call::Import { .. } => None,
        c => Some(c.copy()),
    }
}

fn compare(index: u64, what: &str, expected: &[&Output], got: &[&Output]) -> Option<Mismatch> {
    let enc = |o: &Output| {
        let mut b = Vec::new();
        codec::put_output(&mut codec::W(&mut b), o);
        b
    };
    for k in 0..expected.len().max(got.len()) {
        let (e, g) = (expected.get(k).map(|o| enc(o)), got.get(k).map(|o| enc(o)));
        if e == g {
            continue;
        }
        let (e, g) = (e.unwrap_or_default(), g.unwrap_or_default());
        let from = e
            .iter()
            .zip(&g)
            .position(|(a, b)| a != b)
            .unwrap_or(e.len().min(g.len()));
        return Some(Mismatch {
            call: index,
            what: what.to_string(),
            detail: format!(
                "the UE's output {k}: {} recorded, {} on its own MME",
                expected.get(k).map_or("none".into(), |o| output_name(o)),
                got.get(k).map_or("none".into(), |o| output_name(o)),
            ),
            expected: hex_from(&e, from),
            got: hex_from(&g, from),
        });
    }
    None
}
