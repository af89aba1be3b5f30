//! Recording an MME (`[debug] record`) and replaying the recording (`pepc replay`).
//!
//! A slice's MME is a fold over (state, input, time): every public entry point that
//! changes it (an input, an S1AP PDU, a timeout, an operator's detach or GUTI
//! reallocation, a policy push, a restore) is one *call*, and its outputs are a
//! function of the state and the call alone. The recording holds, per call, the time
//! it ran at, its arguments, the data thread's counter values it read (the one thing
//! the MME reads that its inputs do not determine, see
//! `pepc_slice::control::ControlPlane::record_counter_reads`), the identifiers it drew
//! (the slice's UE entries and bearer slots in the same stream as the counters; the
//! MME's own S1AP IDs, M-TMSIs and HSS request numbers apart), its result and its
//! outputs. A replay builds a fresh MME and slice control plane from the recorded
//! configuration, makes the same calls at the same times, and compares every output
//! byte for byte ([`replay`]).
//!
//! The recording holds what the MME was given, key material included (HSS vectors,
//! checkpoints): like a UE snapshot, it is written to a file of mode 0600 and never
//! logged.
//!
//! Format: the magic `PEPCREC` and a version byte, then records
//! `[kind u8][length LEB128][payload]`:
//! * kind 0, start: slice index and count, slice policy, the [`MmeConfig`] and the
//!   slice's `ControlConfig`, field by field (`header.rs`);
//! * kind 1, call: time in ns since the MME was built (LEB128), the call
//!   ([`Call`]), the counter words read and slice identifiers drawn, then the MME's
//!   identifiers drawn (each an entry `[header: kind, length, key][values]`, see
//!   `pepc_slice::control::TapKey`), the result (its `Debug` text) and the outputs, each in the
//!   canonical form of `codec::put_output`.
//!
//! A whole replay draws every identifier again and checks it against the recorded
//! one; a replay of one UE from its snapshot ([`replay::replay_ue`]) takes them.
//!
//! Recording is off unless asked for (one branch per call); on, it costs an encoding
//! of the call and its outputs into a buffer that the driver writes out between
//! calls ([`Mme::take_recorded`]).

pub(crate) mod codec;
mod header;
pub mod replay;
pub mod replay_ue;

pub use header::Header;

use crate::mme::{Input, Mme, Output};
use crate::pcrf::PolicyDecision;
use crate::ControlPlane;
use std::time::Instant;

/// The magic and version at the start of a recording.
pub const MAGIC: &[u8; 8] = b"PEPCREC\x02";

const KIND_START: u8 = 0;
const KIND_CALL: u8 = 1;

/// What is wrong with a recording.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("the recording ends inside a record")]
    Truncated,
    #[error("not a pepc recording (bad magic or version)")]
    Magic,
    #[error("invalid {0} in the recording")]
    Invalid(&'static str),
    #[error("the recording has no start record before its first call")]
    NoStart,
}

/// One call of a public entry point of the MME, as recorded.
#[derive(Debug)]
pub enum Call {
    /// An input; `Mme::handle_s1ap` (a PDU the driver keeps) is recorded as
    /// `Input::S1ap`, the same call.
    Handle(Input),
    Timeout,
    DetachUe {
        imsi: u64,
    },
    ReallocateGuti {
        imsi: u64,
    },
    /// A policy push (`Mme::reapply_policy`): the decisions its closure gave, per
    /// APN asked, in order.
    ReapplyPolicy {
        imsi: u64,
        decisions: Vec<(String, PolicyDecision)>,
    },
    BeginRestore {
        items: Vec<(u64, Vec<u8>)>,
    },
    RestoreSome {
        max: u64,
    },
    /// A whole-UE snapshot restored (`checkpoint`: as after a restart).
    Import {
        bytes: Vec<u8>,
        checkpoint: bool,
    },
    /// A UE that lives on elsewhere removed (`Mme::remove_migrated_ue`).
    RemoveMigrated {
        key: crate::snapshot::UeKey,
    },
}

/// The recording of one MME: the bytes of its records so far, for the driver to
/// write out.
pub struct Recording {
    /// Calls' times are counted from here (the MME's construction).
    epoch: Instant,
    buf: Vec<u8>,
    /// The record being made (reused).
    scratch: Vec<u8>,
}

impl Recording {
    fn record(&mut self, kind: u8, payload: impl FnOnce(&mut codec::W<'_>)) {
        self.scratch.clear();
        payload(&mut codec::W(&mut self.scratch));
        let mut w = codec::W(&mut self.buf);
        w.u8(kind);
        w.bytes(&self.scratch);
    }
}

impl Mme {
    /// Record every call from now on (`[debug] record`); `cp` is this MME's slice
    /// control plane, whose counter reads are recorded too. The start record names
    /// the configuration a replay rebuilds.
    pub fn start_recording(&mut self, cp: &mut ControlPlane) {
        cp.record_counter_reads();
        self.draws.record();
        let mut rec = Recording {
            epoch: self.epoch,
            buf: MAGIC.to_vec(),
            scratch: Vec::new(),
        };
        let h = Header {
            role: self.role(),
            mme: self.config().clone(),
            slice: cp.config().clone(),
        };
        rec.record(KIND_START, |w| h.put(w));
        self.recording = Some(Box::new(rec));
    }

    pub fn is_recording(&self) -> bool {
        self.recording.is_some()
    }

    /// Stop recording (what was recorded and not taken is dropped); `cp`'s counter
    /// reads are no longer kept either.
    pub fn stop_recording(&mut self, cp: &mut ControlPlane) {
        self.recording = None;
        self.draws = Default::default();
        cp.live_counter_reads();
    }

    /// The recorded bytes not taken yet (the whole recording if none were taken).
    pub fn recorded(&self) -> Option<&[u8]> {
        self.recording.as_ref().map(|r| r.buf.as_slice())
    }

    /// The recorded bytes not taken yet, appended to `into` (the driver writes them to
    /// the recording's file).
    pub fn take_recorded(&mut self, into: &mut Vec<u8>) {
        if let Some(r) = self.recording.as_mut() {
            into.append(&mut r.buf);
        }
    }

    /// Run `f`, a public entry point's body, as the call `call` at `now`: recorded
    /// with its counter reads, result and outputs when recording is on.
    pub(crate) fn run_recorded<T: std::fmt::Debug>(
        &mut self,
        now: Instant,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
        call: impl FnOnce(&mut codec::W<'_>),
        f: impl FnOnce(&mut Mme, &mut ControlPlane, &mut Vec<Output>) -> T,
    ) -> T {
        let rec = self.begin_call(now, Some(cp), out.len(), call);
        let r = f(self, cp, out);
        self.end_call(rec, cp, out, Some(&r));
        r
    }

    /// A call at `now` begins (its arguments written by `call`; `from`: the length of
    /// its output vector now). `None` when not recording: one branch per call.
    pub(crate) fn begin_call(
        &mut self,
        now: Instant,
        cp: Option<&mut ControlPlane>,
        from: usize,
        call: impl FnOnce(&mut codec::W<'_>),
    ) -> Option<OpenCall> {
        let mut rec = self.recording.take()?;
        // Reads made between calls (a snapshot the driver took) are not the call's.
        if let Some(cp) = cp {
            cp.drain_counter_reads(|_| {});
        }
        self.draws.drain_kept(|_| {});
        let at = now.saturating_duration_since(rec.epoch).as_nanos() as u64;
        rec.scratch.clear();
        let mut w = codec::W(&mut rec.scratch);
        w.uv(at);
        call(&mut w);
        Some(OpenCall { rec, from })
    }

    /// The call begun by [`Mme::begin_call`] ended with `result` (`None`: it returns
    /// nothing), having produced
    /// `out[from..]`; calls made meanwhile were part of it (not recorded apart).
    pub(crate) fn end_call(
        &mut self,
        open: Option<OpenCall>,
        cp: &mut ControlPlane,
        out: &[Output],
        result: Option<&dyn std::fmt::Debug>,
    ) {
        if open.is_some() {
            self.close_call(open, Some(cp), out, result);
        }
    }

    /// [`Mme::end_call`], `cp` the control plane whose counter reads the call made
    /// (`None`: it made none).
    pub(crate) fn close_call(
        &mut self,
        open: Option<OpenCall>,
        cp: Option<&mut ControlPlane>,
        out: &[Output],
        result: Option<&dyn std::fmt::Debug>,
    ) {
        let Some(OpenCall { mut rec, from }) = open else {
            return;
        };
        let mut payload = std::mem::take(&mut rec.scratch);
        {
            let mut w = codec::W(&mut payload);
            let mut words = |v: &[u64]| {
                w.uv(v.len() as u64);
                for &x in v {
                    w.uv(x);
                }
            };
            match cp {
                Some(cp) => cp.drain_counter_reads(&mut words),
                None => words(&[]),
            }
            self.draws.drain_kept(&mut words);
            // A call that returns nothing records an empty result (no formatting).
            match result {
                Some(r) => w.str(&format!("{r:?}")),
                None => w.str(""),
            }
            let outs = out.get(from..).unwrap_or_default();
            w.uv(outs.len() as u64);
            for o in outs {
                codec::put_output(&mut w, o);
            }
        }
        let mut w = codec::W(&mut rec.buf);
        w.u8(KIND_CALL);
        w.bytes(&payload);
        payload.clear();
        rec.scratch = payload;
        self.recording = Some(rec);
    }
}

/// A call being recorded: the recording is out of the MME meanwhile, so calls the
/// call makes are not recorded apart.
pub(crate) struct OpenCall {
    rec: Box<Recording>,
    from: usize,
}

/// The encoders of each call's arguments (borrowed, before the call runs).
pub(crate) mod put {
    use super::codec::W;
    use super::*;

    pub(crate) fn handle(input: &Input) -> impl FnOnce(&mut W<'_>) + '_ {
        move |w| {
            w.u8(0);
            codec::put_input(w, input);
        }
    }
    pub(crate) fn s1ap(assoc: u64, stream: u16, bytes: &[u8]) -> impl FnOnce(&mut W<'_>) + '_ {
        move |w| {
            w.u8(0);
            codec::put_s1ap_input(w, assoc, stream, bytes);
        }
    }
    pub(crate) fn timeout(w: &mut W<'_>) {
        w.u8(2);
    }
    pub(crate) fn detach_ue(imsi: u64) -> impl FnOnce(&mut W<'_>) {
        move |w| {
            w.u8(3);
            w.uv(imsi);
        }
    }
    pub(crate) fn reallocate_guti(imsi: u64) -> impl FnOnce(&mut W<'_>) {
        move |w| {
            w.u8(4);
            w.uv(imsi);
        }
    }
    pub(crate) fn reapply_policy(
        imsi: u64,
        decisions: &[(String, PolicyDecision)],
    ) -> impl FnOnce(&mut W<'_>) + '_ {
        move |w| {
            w.u8(5);
            w.uv(imsi);
            w.uv(decisions.len() as u64);
            for (apn, d) in decisions {
                w.str(apn);
                codec::put_decision(w, d);
            }
        }
    }
    pub(crate) fn begin_restore(items: &[(u64, Vec<u8>)]) -> impl FnOnce(&mut W<'_>) + '_ {
        move |w| {
            w.u8(6);
            w.uv(items.len() as u64);
            for (imsi, b) in items {
                w.uv(*imsi);
                w.bytes(b);
            }
        }
    }
    pub(crate) fn restore_some(max: usize) -> impl FnOnce(&mut W<'_>) {
        move |w| {
            w.u8(7);
            w.uv(max as u64);
        }
    }
    pub(crate) fn import(bytes: &[u8], checkpoint: bool) -> impl FnOnce(&mut W<'_>) + '_ {
        move |w| {
            w.u8(8);
            w.bytes(bytes);
            w.bool(checkpoint);
        }
    }
    pub(crate) fn remove_migrated(key: crate::snapshot::UeKey) -> impl FnOnce(&mut W<'_>) {
        use crate::snapshot::UeKey;
        move |w| {
            w.u8(9);
            match key {
                UeKey::MmeUeId(i) => {
                    w.u8(0);
                    w.uv(u64::from(i));
                }
                UeKey::Imsi(i) => {
                    w.u8(1);
                    w.uv(i);
                }
            }
        }
    }
}

/// `c` in its recorded form.
fn put_call(w: &mut codec::W<'_>, c: &Call) {
    match c {
        Call::Handle(i) => put::handle(i)(w),
        Call::Timeout => put::timeout(w),
        Call::DetachUe { imsi } => put::detach_ue(*imsi)(w),
        Call::ReallocateGuti { imsi } => put::reallocate_guti(*imsi)(w),
        Call::ReapplyPolicy { imsi, decisions } => put::reapply_policy(*imsi, decisions)(w),
        Call::BeginRestore { items } => put::begin_restore(items)(w),
        Call::RestoreSome { max } => {
            put::restore_some(usize::try_from(*max).unwrap_or(usize::MAX))(w)
        }
        Call::Import { bytes, checkpoint } => put::import(bytes, *checkpoint)(w),
        Call::RemoveMigrated { key } => put::remove_migrated(*key)(w),
    }
}

impl Call {
    /// A copy, through the recorded form (inputs that hold key material have no
    /// `Clone`).
    pub fn copy(&self) -> Call {
        let mut b = Vec::new();
        put_call(&mut codec::W(&mut b), self);
        get_call(&mut codec::R::new(&b)).expect("a call reads back as written")
    }
}

fn get_call(r: &mut codec::R<'_>) -> Result<Call, RecordError> {
    Ok(match r.u8()? {
        0 => Call::Handle(codec::get_input(r)?),
        // 1: unused (a kept S1AP PDU is recorded as an input, 0).
        2 => Call::Timeout,
        3 => Call::DetachUe { imsi: r.uv()? },
        4 => Call::ReallocateGuti { imsi: r.uv()? },
        5 => {
            let imsi = r.uv()?;
            let n = r.uv()?;
            let mut decisions = Vec::new();
            for _ in 0..n {
                decisions.push((r.str()?, codec::get_decision(r)?));
            }
            Call::ReapplyPolicy { imsi, decisions }
        }
        6 => {
            let n = r.uv()?;
            let mut items = Vec::new();
            for _ in 0..n {
                items.push((r.uv()?, r.bytes()?.to_vec()));
            }
            Call::BeginRestore { items }
        }
        7 => Call::RestoreSome { max: r.uv()? },
        8 => Call::Import {
            bytes: r.bytes()?.to_vec(),
            checkpoint: r.bool()?,
        },
        9 => Call::RemoveMigrated {
            key: match r.u8()? {
                0 => crate::snapshot::UeKey::MmeUeId(r.u32()?),
                1 => crate::snapshot::UeKey::Imsi(r.uv()?),
                _ => return Err(RecordError::Invalid("UE key")),
            },
        },
        _ => return Err(RecordError::Invalid("call kind")),
    })
}

/// A recorded call as read back: when, what, and what it read and produced.
pub struct CallRecord<'a> {
    pub at_ns: u64,
    pub call: Call,
    pub counter_reads: Vec<u64>,
    /// The MME's identifiers drawn (the slice's are among `counter_reads`).
    pub draws: Vec<u64>,
    pub result: String,
    /// The outputs in canonical form, one slice each.
    pub outputs: Vec<&'a [u8]>,
}

/// A record of a recording, as read back.
pub enum Record<'a> {
    Start(Box<Header>),
    Call(Box<CallRecord<'a>>),
}

/// The records of a recording, in order.
pub struct Records<'a> {
    r: codec::R<'a>,
}

impl<'a> Records<'a> {
    pub fn new(bytes: &'a [u8]) -> Result<Self, RecordError> {
        let rest = bytes.strip_prefix(MAGIC).ok_or(RecordError::Magic)?;
        Ok(Records {
            r: codec::R::new(rest),
        })
    }

    fn next_record(&mut self) -> Result<Record<'a>, RecordError> {
        let kind = self.r.u8()?;
        let payload = self.r.bytes()?;
        let mut p = codec::R::new(payload);
        let rec = match kind {
            KIND_START => Record::Start(Box::new(Header::get(&mut p)?)),
            KIND_CALL => {
                let at_ns = p.uv()?;
                let call = get_call(&mut p)?;
                let n = p.uv()?;
                let mut counter_reads = Vec::new();
                for _ in 0..n {
                    counter_reads.push(p.uv()?);
                }
                let n = p.uv()?;
                let mut draws = Vec::new();
                for _ in 0..n {
                    draws.push(p.uv()?);
                }
                let result = p.str()?;
                let n = p.uv()?;
                let mut outputs = Vec::new();
                for _ in 0..n {
                    let before = p.b;
                    codec::get_output(&mut p)?;
                    outputs.push(&before[..before.len() - p.b.len()]);
                }
                Record::Call(Box::new(CallRecord {
                    at_ns,
                    call,
                    counter_reads,
                    draws,
                    result,
                    outputs,
                }))
            }
            _ => return Err(RecordError::Invalid("record kind")),
        };
        if !p.done() {
            return Err(RecordError::Invalid("record length"));
        }
        Ok(rec)
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, RecordError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.r.done() {
            return None;
        }
        let r = self.next_record();
        if r.is_err() {
            // Nothing after a bad record can be framed.
            self.r.b = &[];
        }
        Some(r)
    }
}
