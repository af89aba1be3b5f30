//! Replaying a recording: a fresh MME and slice control plane built from its start
//! record, the same calls at the same times with the same counter values, and every
//! output compared byte for byte with the recorded one.

use super::{codec, Call, CallRecord, Header, Record, RecordError, Records};
use crate::mme::{Mme, Output};
use crate::ControlPlane;
use pepc_slice::datapath::DataPlane;
use pepc_slice::slice::{build_with_signaling, SliceConfig};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// The first place where a replay differs from its recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Index of the call (0: the first after the start record).
    pub call: u64,
    /// The call, briefly (its kind and identifiers, never key material).
    pub what: String,
    /// What differs: an output (its index), the result, the number of outputs or
    /// of counter reads.
    pub detail: String,
    /// Recorded and replayed bytes (hex, the first 96 bytes from where they differ).
    pub expected: String,
    pub got: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "call {} ({}): {}\n  recorded: {}\n  replayed: {}",
            self.call, self.what, self.detail, self.expected, self.got
        )
    }
}

/// How a replay went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayReport {
    /// The recorded slice (index, count).
    pub slice: (usize, usize),
    pub calls: u64,
    pub outputs: u64,
    /// `None`: every output and result came out byte-identical.
    pub mismatch: Option<Mismatch>,
}

/// A recorded MME rebuilt and driven call by call.
pub struct Replayer {
    pub mme: Mme,
    pub cp: ControlPlane,
    /// What it was built from.
    header: Box<Header>,
    dp: DataPlane,
    epoch: Instant,
    out: Vec<Output>,
    buf: Vec<u8>,
}

impl Replayer {
    /// The MME and slice control plane of `h`, as they were built, at `epoch` (the
    /// driver's clock: only times relative to it matter).
    pub fn new(h: &Header, epoch: Instant) -> Replayer {
        let mut sc = SliceConfig::for_users(h.slice.ue_slots);
        sc.slice = h.slice.slice;
        sc.layout = h.slice.layout;
        sc.iot = h.slice.iot;
        sc.ue_slots = h.slice.ue_slots;
        sc.bearer_slots = h.slice.bearer_slots;
        sc.default_rule_set = h.slice.default_rule_set;
        sc.s1u_addr = h.mme.s1u_addr;
        let (mut cp, dp) = build_with_signaling(&sc);
        let mut mme = Mme::new(h.mme.clone(), epoch);
        mme.set_role(h.role);
        cp.replay_counter_reads(&[]);
        Replayer {
            mme,
            cp,
            header: Box::new(h.clone()),
            dp,
            epoch,
            out: Vec::new(),
            buf: Vec::new(),
        }
    }

    /// Make the recorded call `c` again; `None` if its outputs, result and counter
    /// reads are the recorded ones, else what differs.
    pub fn step(&mut self, index: u64, c: CallRecord<'_>) -> Option<Mismatch> {
        let CallRecord {
            at_ns,
            call,
            counter_reads,
            draws,
            result,
            outputs,
        } = c;
        let what = describe(&call);
        self.cp.replay_counter_reads(&counter_reads);
        self.mme.draws.replay(&draws, false);
        let got_result = self.call(at_ns, call);
        let mismatch = |detail: String, expected: &[u8], got: &[u8]| {
            Some(mismatch_at(index, &what, detail, expected, got))
        };
        for (k, o) in self.out.iter().enumerate() {
            self.buf.clear();
            codec::put_output(&mut codec::W(&mut self.buf), o);
            match outputs.get(k) {
                Some(e) if *e == self.buf.as_slice() => {}
                Some(e) => {
                    return mismatch(format!("output {k} ({})", output_name(o)), e, &self.buf);
                }
                None => {
                    return mismatch(
                        format!("output {k} ({}) was not recorded", kind(o)),
                        &[],
                        &self.buf,
                    );
                }
            }
        }
        if outputs.len() > self.out.len() {
            let k = self.out.len();
            return mismatch(
                format!("recorded output {k} was not produced"),
                outputs[k],
                &[],
            );
        }
        if got_result != result {
            return mismatch("result".into(), result.as_bytes(), got_result.as_bytes());
        }
        let reads = self.cp.replay_counter_balance();
        let own = self.mme.draws.balance();
        if reads != Default::default() || own != Default::default() {
            return mismatch(
                format!(
                    "counter reads and slice draws {reads:?}, MME draws {own:?} \
                     (left: recorded not taken; short: taken beyond them; diverged: \
                     drawn other than recorded)"
                ),
                &[],
                &[],
            );
        }
        None
    }

    /// The start record it was built from.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The outputs of the last call.
    pub fn out(&self) -> &[Output] {
        &self.out
    }

    /// Make `call` at `at_ns` (its reads and draws set up by the caller); its outputs
    /// are in `self.out`, its result returned as text (empty for calls without one).
    pub(crate) fn call(&mut self, at_ns: u64, call: Call) -> String {
        let now = self.epoch + Duration::from_nanos(at_ns);
        self.out.clear();
        let (mme, cp, out) = (&mut self.mme, &mut self.cp, &mut self.out);
        let got_result = match call {
            Call::Handle(i) => {
                mme.handle(now, i, cp, out);
                String::new()
            }
            Call::Timeout => {
                mme.handle_timeout(now, cp, out);
                String::new()
            }
            Call::DetachUe { imsi } => format!("{:?}", mme.detach_ue(now, imsi, cp, out)),
            Call::ReallocateGuti { imsi } => {
                format!("{:?}", mme.reallocate_guti(now, imsi, cp, out))
            }
            Call::ReapplyPolicy { imsi, decisions } => {
                format!(
                    "{:?}",
                    mme.apply_policy_decisions(now, imsi, decisions, cp, out)
                )
            }
            Call::BeginRestore { items } => {
                mme.begin_restore(items, now);
                String::new()
            }
            Call::RestoreSome { max } => format!(
                "{:?}",
                mme.restore_some(cp, now, usize::try_from(max).unwrap_or(usize::MAX), out)
            ),
            Call::Import { bytes, checkpoint } => {
                let r = if checkpoint {
                    crate::snapshot::restore_checkpoint(mme, cp, &bytes, now)
                } else {
                    crate::snapshot::restore_whole_ue(mme, cp, &bytes, now)
                };
                format!("{r:?}")
            }
            Call::RemoveMigrated { key } => {
                mme.now = now;
                format!("{:?}", mme.remove_migrated_ue(key, cp))
            }
        };
        // The data thread takes the control plane's updates (nothing else of it is
        // replayed: no packets). The End Markers a path switch makes are dropped as
        // the node's driver sends them: a full batch of them stops sync from applying
        // updates, which would spin here for ever.
        while self.cp.in_flight() > 0 {
            self.cp.flush();
            self.dp.sync(0);
            self.dp.generated.clear();
        }
        got_result
    }
}

fn mismatch_at(index: u64, what: &str, detail: String, expected: &[u8], got: &[u8]) -> Mismatch {
    let from = expected
        .iter()
        .zip(got)
        .position(|(a, b)| a != b)
        .unwrap_or(expected.len().min(got.len()));
    Mismatch {
        call: index,
        what: what.to_string(),
        detail,
        expected: hex_from(expected, from),
        got: hex_from(got, from),
    }
}

/// A recording's calls after its start record, the slice rebuilt from that record,
/// and an empty report of it.
pub(crate) fn start(
    bytes: &[u8],
    epoch: Instant,
) -> Result<(Records<'_>, Replayer, ReplayReport), RecordError> {
    let mut records = Records::new(bytes)?;
    let Some(first) = records.next() else {
        return Err(RecordError::NoStart);
    };
    let Record::Start(h) = first? else {
        return Err(RecordError::NoStart);
    };
    let report = ReplayReport {
        slice: (h.role.index, h.role.count),
        ..ReplayReport::default()
    };
    Ok((records, Replayer::new(&h, epoch), report))
}

/// Replay a whole recording from its start; `epoch` stands for the recorded MME's
/// construction (the driver's clock, read outside the MME).
pub fn replay(bytes: &[u8], epoch: Instant) -> Result<ReplayReport, RecordError> {
    let (records, mut r, mut report) = start(bytes, epoch)?;
    for rec in records {
        match rec? {
            Record::Start(_) => return Err(RecordError::Invalid("second start record")),
            Record::Call(c) => {
                report.outputs += c.outputs.len() as u64;
                let i = report.calls;
                report.calls += 1;
                if let Some(m) = r.step(i, *c) {
                    report.mismatch = Some(m);
                    return Ok(report);
                }
            }
        }
    }
    Ok(report)
}

pub(crate) fn kind(o: &Output) -> &'static str {
    match o {
        Output::S1ap { .. } => "S1AP",
        Output::CloseAssoc { .. } => "close association",
        Output::Page { .. } => "paging",
        Output::ResetDone { .. } => "reset done",
        Output::ClaimImsi { .. } => "IMSI claim",
        Output::ReleaseImsi { .. } => "IMSI release",
        Output::Hss(_) => "HSS request",
        Output::Checkpoint { .. } => "checkpoint",
        Output::Forget { .. } => "forget",
        Output::Congestion { .. } => "congestion",
        Output::Pcrf(_) => "PCRF request",
        Output::UsageRecord(_) => "usage record",
    }
}

/// A call, briefly: its kind and identifiers (no key material, no IMSI beyond the
/// call's own argument).
pub(crate) fn describe(c: &Call) -> String {
    use crate::mme::Input;
    match c {
        Call::Handle(i) => match i {
            Input::S1ap {
                assoc,
                stream,
                bytes,
            } => format!("{} on assoc {assoc} stream {stream}", s1ap_name(bytes)),
            Input::Hss(a) => format!("HSS answer for MME UE S1AP ID {}", a.r.mme_ue_id),
            Input::Pcrf(a) => format!("PCRF answer for MME UE S1AP ID {}", a.r.mme_ue_id),
            other => {
                let s = format!("{other:?}");
                s.split([' ', '(', '{'])
                    .next()
                    .unwrap_or("input")
                    .to_string()
            }
        },
        Call::Timeout => "timeout".into(),
        Call::DetachUe { .. } => "operator detach".into(),
        Call::ReallocateGuti { .. } => "operator GUTI reallocation".into(),
        Call::ReapplyPolicy { .. } => "policy push".into(),
        Call::BeginRestore { items } => format!("restore of {} checkpoints", items.len()),
        Call::RestoreSome { max } => format!("restore of up to {max}"),
        Call::Import { checkpoint, .. } => if *checkpoint {
            "checkpoint restore"
        } else {
            "snapshot import"
        }
        .into(),
        Call::RemoveMigrated { .. } => "removal of a migrated UE".into(),
    }
}

/// The S1AP message's name (its type's), or "S1AP" if it does not decode.
pub(crate) fn s1ap_name(bytes: &[u8]) -> String {
    match pepc_s1ap::msg::S1apMessage::decode(bytes) {
        Ok(pepc_s1ap::msg::S1apMessage::Other { procedure_code, .. }) => {
            format!("S1AP procedure {procedure_code}")
        }
        Ok(m) => {
            let d = format!("{m:?}");
            d.split(['(', ' ', '{'])
                .next()
                .unwrap_or("S1AP")
                .to_string()
        }
        Err(_) => "S1AP".into(),
    }
}

/// An output, briefly: its kind, and an S1AP message's name.
pub(crate) fn output_name(o: &Output) -> String {
    match o {
        Output::S1ap { bytes, .. } => s1ap_name(bytes),
        o => kind(o).to_string(),
    }
}

pub(crate) fn hex_from(b: &[u8], from: usize) -> String {
    let mut s = String::new();
    if from > 0 {
        let _ = write!(s, "[{from} bytes alike] ");
    }
    for x in b.iter().skip(from).take(96) {
        let _ = write!(s, "{x:02x}");
    }
    if b.len() > from + 96 {
        let _ = write!(s, "... ({} bytes in all)", b.len());
    }
    s
}
