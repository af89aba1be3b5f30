//! UE snapshots, the MME's part: one UE's MME context as a compact versioned byte
//! string, the `mme` section of the slice's container ([`pepc_slice::snapshot`]), and
//! the whole-UE convenience that writes and restores both sections.
//!
//! A snapshot continues the UE exactly where it was: EMM state, S1 connection and
//! MME UE S1AP ID, the EMM procedure in progress ([`Procedure`] with what its state
//! holds: the authentication vector, the security context being established, the new
//! M-TMSI), the NAS message under retransmission and its count, handover state, the NAS security context
//! (KASME, algorithms, KSI, NAS COUNTs, NH/NCC), M-TMSIs, subscription figures, and
//! timers as time remaining. K_NASint and K_NASenc are carried beside KASME, so that
//! restore does not derive them again; the KASME-keyed KDF is rebuilt on restore,
//! and the keyed EIA/EEA contexts are set up when the restored UE next signals.
//!
//! Key material is what a snapshot is for, so the section's bytes are never logged:
//! no type here has a `Debug` that shows them (errors name fields, not values).
//!
//! ## MME section, version 3
//! Integers are LEB128 varints (`v`, minimal) unless sized; sized ones little endian;
//! durations are microseconds remaining, rounded up, 0 for a deadline already past.
//! ```text
//! version u8 (3) | mme_ue_id u32 | flags v (bits below; others must be 0) | state u8
//! [imsi v]                                   F_IMSI
//! [conn: assoc v | enb_ue_id v]              F_CONN
//! m_tmsi u32 | [pending_tmsi u32]            F_PENDING_TMSI
//! tai: plmn 3 | tac u16 | ecgi: plmn 3 | cell_id u32
//! ambr_ul v | ambr_dl v | qci u8 | arp_priority u8 | next_ksi u8 (<7) | pti u8 | ncc u8 (<8)
//! paging_left v | retx_count v
//! ue_net_cap: len u8 (<=32) | octets ; apn: len u8 (<=100) | UTF-8 ;
//! pending_bearers: len u8 (<=16) | octets
//! [subscribed_apn: len u8 (<=100) | UTF-8]               F_SUBSCRIBED_APN
//! [hss_seq v | attach_digest u16]                          states 12-14
//! [resume u8: 0 attach, 1/2 TAU (active false/true), 3 detach]   states 2, 3, 14
//! [sec] F_SEC, [new_sec] F_NEW_SEC, each:
//!   kasme 32 | knas_int 16 | knas_enc 16 | ksi u8 (<7) | algs u8 (bits 0-2 EIA, 4-6 EEA, 7 rx_started; 3 zero)
//!   | ul_count v | dl_count v | last_ul_count v (each < 2^24)
//!   | n_recent u8 (<=16) | n_recent x (MAC 4, SEQ 1), oldest first
//! [vector: rand 16 | xres 8 | autn 16 | kasme 32]          F_VECTOR
//! [nh 32]                                                  F_NH
//! [retx: len v (<=1024) | plain downlink NAS message]      F_RETX (F_RETX_NEW_CTX)
//! [ho: target_assoc v | flags u8 (bit0 target eNB id) | [target_enb_ue_id v]
//!      | source assoc v | source enb_ue_id v | n u8 (<=16), each:
//!      e-rab id u8 | flags u8 (bit0 DL fwd, bit1 UL fwd) | addr 4 | teid u32
//!      | [dl fwd addr 4 | teid u32] | [ul fwd addr 4 | teid u32]]   F_HO
//! [old_conn: assoc v | enb_ue_id v]                        F_OLD_CONN
//! [x2_source: assoc v | enb_ue_id v | remaining v]         F_X2_SOURCE
//! [nas_timer v] [paging_timer v] [reach_timer v] [guard_timer v]   F_*_TIMER
//! ```
//! Version 2 is version 3 without F_ESM_INFO (the flag was a 0xff pending bearer);
//! version 1 is version 2 without `knas_int` and `knas_enc` (restore derives them
//! from KASME). Both are still read.
//!
//! `state` ([`Procedure`]): 0 Idle, 1 ExpectIdentity, 2 ExpectAuthResponse (needs
//! F_VECTOR), 3 ExpectSmcComplete (needs F_NEW_SEC), 4 ExpectEsmInfo,
//! 5/6 ExpectIcsResponse (attach false/true), 7 ExpectAttachComplete,
//! 8 ExpectGutiReallocComplete (needs F_PENDING_TMSI), 9 ExpectDetachAccept,
//! 10/11 ExpectReleaseComplete (then_remove false/true), 12 ExpectHssProfile (13, a
//! profile for a parked context's attach in earlier versions, is read as 12),
//! 14 ExpectHssVector; F_RESYNC_DONE only with 2 and 14. The
//! parts a state holds appear with it and with no other state.
//!
//! The UE's PCC state (rules and their bearers, monitoring grants, charging figures)
//! is the container's PCC section (`pcc.rs`), not this one.
//!
//! Not carried: the slice's UE slot (local to a slice; the restoring caller gives the
//! one [`ControlPlane::restore_ue`] chose, F_SLOT records that there was one), the
//! timer generation (local to the timer heap), and parked contexts (those of detached
//! UEs, not in any UE context).
//!
//! Determinism: snapshot → restore → snapshot at the same instants gives the same
//! bytes, except `mme_ue_id` when restore had to renumber it (see [`MmeRestored`]).

use crate::mme::{
    AssocId, ConnKey, Emm_, HoState, Mme, Procedure, Resume, TimerKind, Ue, CHECKPOINT_DL_LEASE,
};
use crate::nasx::{Direction, NasEpsMessage, RecentTags, SecCtx};
use crate::ControlPlane;
use oxirush_nas::common::Encode;
use pepc_s1ap::{ERabAdmitted, Ecgi, Plmn, Tai};
use pepc_security::{AuthVector, Eea, Eia, Key128, Key256};
use pepc_slice::control::{CtrlError, Restored};
use pepc_slice::snapshot as container;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

mod pcc;
mod section;

use section::*;

/// The MME section's format version written. This and version 1 (no NAS keys in the
/// security contexts) are read.
pub const MME_SECTION_VERSION: u8 = 3;
/// The oldest MME section version read.
pub const MME_SECTION_VERSION_MIN: u8 = 1;
/// Longest NAS message carried for retransmission.
pub const MAX_RETX_NAS: usize = 1024;
const MAX_NET_CAP: usize = 32;
const MAX_APN: usize = 100;
const MAX_PENDING_BEARERS: usize = 16;
const MAX_ADMITTED: usize = 16;

const F_IMSI: u32 = 1 << 0;
const F_REGISTERED: u32 = 1 << 1;
const F_CONN: u32 = 1 << 2;
const F_SEC: u32 = 1 << 3;
const F_NEW_SEC: u32 = 1 << 4;
const F_VECTOR: u32 = 1 << 5;
const F_NH: u32 = 1 << 6;
const F_RETX: u32 = 1 << 7;
const F_RETX_NEW_CTX: u32 = 1 << 8;
const F_PENDING_TMSI: u32 = 1 << 9;
const F_HO: u32 = 1 << 10;
const F_OLD_CONN: u32 = 1 << 11;
const F_X2_SOURCE: u32 = 1 << 12;
const F_RESYNC_DONE: u32 = 1 << 13;
const F_RESUMED: u32 = 1 << 14;
const F_SUPERSEDED: u32 = 1 << 15;
const F_SLOT: u32 = 1 << 16;
const F_NAS_TIMER: u32 = 1 << 17;
const F_PAGING_TIMER: u32 = 1 << 18;
const F_REACH_TIMER: u32 = 1 << 19;
const F_PAGE_AFTER_RELEASE: u32 = 1 << 20;
const F_SUBSCRIBED_APN: u32 = 1 << 21;
/// Version 3: the ESM information transfer flag (before: a 0xff pending bearer).
const F_ESM_INFO: u32 = 1 << 22;
const F_NAS_SECURED: u32 = 1 << 23;
const F_CLAIM_IMSI: u32 = 1 << 24;
const F_GUARD_TIMER: u32 = 1 << 25;
const F_ALL: u32 = (1 << 26) - 1;

/// Which UE to snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UeKey {
    MmeUeId(u32),
    Imsi(u64),
}

/// What was wrong with a snapshot, or why it could not be taken or restored here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotError {
    /// No such UE in this MME.
    UnknownUe(UeKey),
    Truncated {
        need: usize,
        have: usize,
    },
    UnsupportedVersion(u8),
    TooLong {
        what: &'static str,
        len: usize,
        max: usize,
    },
    /// Bytes after the section's last field.
    Trailing(usize),
    /// A field out of range or fields inconsistent with each other (names which).
    Invalid(&'static str),
    /// Another context of this MME holds the IMSI (restore does not replace it).
    ImsiExists(u64),
    /// Another context holds this S1 connection (association, eNB UE S1AP ID).
    ConnectionInUse(AssocId, u32),
    /// Another context (or a parked one) holds this M-TMSI.
    TmsiInUse(u32),
    /// The snapshot had a slice UE slot and none was given, or the reverse.
    SlotMismatch {
        had_slot: bool,
    },
    /// The whole-UE container.
    Container(container::SnapshotError),
    /// The slice refused its part (snapshot or restore).
    Slice(CtrlError),
}

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use SnapshotError as E;
        match self {
            E::UnknownUe(k) => write!(f, "no UE {k:?} in this MME"),
            E::Truncated { need, have } => {
                write!(f, "MME section truncated: need {need} bytes, have {have}")
            }
            E::UnsupportedVersion(v) => write!(
                f,
                "MME section version {v} not supported (this reads \
                 {MME_SECTION_VERSION_MIN} to {MME_SECTION_VERSION})"
            ),
            E::TooLong { what, len, max } => write!(f, "{what} is {len} bytes, at most {max}"),
            E::Trailing(n) => write!(f, "{n} bytes after the MME section's last field"),
            E::Invalid(what) => write!(f, "invalid MME section: {what}"),
            E::ImsiExists(i) => write!(f, "IMSI {i} already has a context here"),
            E::ConnectionInUse(a, e) => {
                write!(f, "S1 connection (assoc {a}, eNB UE S1AP ID {e}) in use")
            }
            E::TmsiInUse(t) => write!(f, "M-TMSI {t:#010x} in use here"),
            E::SlotMismatch { had_slot } => write!(
                f,
                "snapshot {} a slice UE slot, restore was given {}",
                if *had_slot { "has" } else { "has no" },
                if *had_slot { "none" } else { "one" }
            ),
            E::Container(e) => write!(f, "snapshot container: {e}"),
            E::Slice(e) => write!(f, "slice: {e}"),
        }
    }
}

impl std::error::Error for SnapshotError {}

impl From<container::SnapshotError> for SnapshotError {
    fn from(e: container::SnapshotError) -> Self {
        SnapshotError::Container(e)
    }
}

impl From<CtrlError> for SnapshotError {
    fn from(e: CtrlError) -> Self {
        SnapshotError::Slice(e)
    }
}

/// What [`Mme::restore_ue`] did, and what its caller must see to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MmeRestored {
    /// The UE's MME UE S1AP ID here.
    pub mme_ue_id: u32,
    /// The ID the snapshot carried when it could not be kept (it names another slice,
    /// or another context has it here). A connected UE's eNB knows the old one: the
    /// node must map it (the S1AP demux's exception) or the UE be released.
    pub renumbered_from: Option<u32>,
    /// The UE's M-TMSI (or the one being assigned) names another slice: the demux does
    /// not find this slice by it. Reallocate the GUTI ([`Mme::reallocate_guti`]) once
    /// the UE is connected.
    pub guti_reallocation_needed: bool,
    /// The IMSI's policy slice is another one: the node must route the IMSI here (as
    /// for [`crate::Output::ClaimImsi`]).
    pub imsi_exception: bool,
}

/// What [`restore_whole_ue`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WholeRestored {
    pub mme: MmeRestored,
    /// The slice's part, if the snapshot had one.
    pub slice: Option<Restored>,
}

impl Mme {
    fn id_of(&self, key: UeKey) -> Option<u32> {
        match key {
            UeKey::MmeUeId(id) => self.index.contains(id).then_some(id),
            UeKey::Imsi(imsi) => self.index.by_imsi(imsi),
        }
    }

    /// The slice UE slot of a UE's session (the data-path part of its entry), if it
    /// has one yet.
    pub fn ue_slot_of(&self, cp: &ControlPlane, key: UeKey) -> Option<u32> {
        self.ue(cp, self.id_of(key)?)?.slot
    }

    /// Append the MME section of UE `key` to `out`, timers relative to `now`.
    pub fn snapshot_ue(
        &self,
        cp: &ControlPlane,
        key: UeKey,
        now: Instant,
        out: &mut Vec<u8>,
    ) -> Result<(), SnapshotError> {
        let id = self.id_of(key).ok_or(SnapshotError::UnknownUe(key))?;
        let u = self.ue(cp, id).ok_or(SnapshotError::UnknownUe(key))?;
        let start = out.len();
        let apn = self.apn_name(u.subscribed_apn);
        let r = write_ue(id, u, apn, now, out, MME_SECTION_VERSION);
        if r.is_err() {
            out.truncate(start);
        }
        r
    }

    /// Recreate a UE from its MME section in this MME: `slot` is the slice UE slot the
    /// caller's [`ControlPlane::restore_ue`] gave its session (None for a UE with no
    /// session yet, which gets a new entry). Timers are re-armed relative to `now`.
    /// Nothing here changes unless it succeeds.
    pub fn restore_ue(
        &mut self,
        cp: &mut ControlPlane,
        section: &[u8],
        slot: Option<u32>,
        now: Instant,
    ) -> Result<MmeRestored, SnapshotError> {
        let mut d = read_ue(section, now)?;
        if d.had_slot != slot.is_some() {
            return Err(SnapshotError::SlotMismatch {
                had_slot: d.had_slot,
            });
        }
        d.ue.slot = slot;
        let u = &d.ue;
        if let Some(i) = u.imsi {
            if self.index.has_imsi(i) {
                return Err(SnapshotError::ImsiExists(i));
            }
        }
        let conns = restored_conns(u);
        for (i, c) in conns.iter().enumerate() {
            if let Some(c) = c {
                if self.index.has_conn(*c) || conns[..i].contains(&Some(*c)) {
                    return Err(SnapshotError::ConnectionInUse(c.assoc, c.enb_ue_id));
                }
            }
        }
        let pending_tmsi = match u.proc {
            Procedure::ExpectGutiReallocComplete { m_tmsi } => Some(m_tmsi),
            _ => None,
        };
        let tmsis = [(u.m_tmsi != 0).then_some(u.m_tmsi), pending_tmsi];
        for t in tmsis.into_iter().flatten() {
            if self.index.has_tmsi(t) || self.parked.contains_key(&t) {
                return Err(SnapshotError::TmsiInUse(t));
            }
        }
        if tmsis[0].is_some() && tmsis[0] == tmsis[1] {
            return Err(SnapshotError::Invalid("pending M-TMSI equals the M-TMSI"));
        }
        let (ids, index) = (self.role.ids(), self.role.index);
        let mine = |v: u32| ids.slice_of(v) == index;
        let keep = d.mme_ue_id != 0 && mine(d.mme_ue_id) && !self.index.contains(d.mme_ue_id);
        let id = if keep {
            d.mme_ue_id
        } else {
            self.alloc_mme_ue_id()
        };
        let imsi = u.imsi;
        // The entry: the session's, or a new one. The last thing that can fail.
        let mut ue = d.ue;
        ue.id = id;
        ue.subscribed_apn = d.subscribed_apn.as_deref().map_or(0, |a| self.apn_id(a));
        let hss_wait = ue.proc.hss_seq().is_some();
        // Without security it counts against its eNB's budget here too.
        ue.unauth_on = ue.conn.filter(|_| ue.sec.is_none()).map(|c| c.assoc);
        let unauth = ue.unauth_on;
        let entry = match slot {
            Some(s) => cp.set_signaling(s, ue).map(|()| s),
            None => cp.reserve_ue(ue),
        }
        .map_err(SnapshotError::Slice)?;
        self.index.insert(id, entry);
        if let Some(a) = unauth {
            *self.admission.per_enb.entry(a).or_insert(0) += 1;
            self.admission.total += 1;
        }
        let result = MmeRestored {
            mme_ue_id: id,
            renumbered_from: (!keep).then_some(d.mme_ue_id),
            guti_reallocation_needed: tmsis.into_iter().flatten().any(|t| !mine(t)),
            imsi_exception: imsi.is_some_and(|i| !self.role.is_home_of(i)),
        };
        for c in conns.into_iter().flatten() {
            self.index.link_conn(c, id);
        }
        if let Some(i) = imsi {
            self.index.link_imsi(i, id);
        }
        for t in tmsis.into_iter().flatten() {
            self.index.link_tmsi(t, id);
        }
        // A UE waiting for the HSS: its request went to the proxy of the MME it
        // left, whose answer cannot reach it here. Its deadline is due at once (or with
        // the requests queued before it: deadlines stay in order), so the attach is
        // rejected (#17, the UE retries) rather than waiting for nothing; snapshots for
        // migration or restart are taken between procedures, so this is rare.
        if hss_wait {
            let seq = self.next_hss_seq();
            if let Some(
                Procedure::ExpectHssProfile { seq: s, .. }
                | Procedure::ExpectHssVector { seq: s, .. },
            ) = self.ue_mut(cp, id).map(|u| &mut u.proc)
            {
                *s = seq;
            }
            let at = self.hss_deadlines.back().map_or(now, |b| b.0.max(now));
            self.hss_deadlines.push_back((at, id, seq));
        }
        self.now = now;
        self.rearm(cp, id);
        Ok(result)
    }

    /// Drop UE `key` from this MME without signaling or parking its security context:
    /// it lives on elsewhere (restored from a snapshot). Frees its slice UE slot.
    pub fn remove_migrated_ue(
        &mut self,
        key: UeKey,
        cp: &mut ControlPlane,
    ) -> Result<(), SnapshotError> {
        let rec = self.begin_call(
            self.now,
            Some(cp),
            0,
            crate::record::put::remove_migrated(key),
        );
        let r = self.remove_migrated(key, cp);
        self.end_call(rec, cp, &[], Some(&r));
        r
    }

    fn remove_migrated(&mut self, key: UeKey, cp: &mut ControlPlane) -> Result<(), SnapshotError> {
        let id = self.id_of(key).ok_or(SnapshotError::UnknownUe(key))?;
        // The HSS keeps this node's MME for it: no Purge UE.
        if let Some(u) = self.ue_mut(cp, id) {
            u.hss_location = false;
        }
        self.remove_ue(cp, id, false);
        Ok(())
    }

    /// Push every live timer of UE `id` under a new generation.
    fn rearm(&mut self, cp: &mut ControlPlane, id: u32) {
        let Some(u) = self.ue_mut(cp, id) else {
            return;
        };
        for (t, k) in u.timers() {
            self.timers.push(t, id, k);
        }
    }
}

/// The S1 connections a context is found by: its own, a handover's source side
/// awaiting release, and an S1 handover's target once acknowledged. (An X2 source is
/// deliberately not in `by_conn`, see handover/x2.rs.)
fn restored_conns(u: &Ue) -> [Option<ConnKey>; 3] {
    let target = u
        .handover
        .as_ref()
        .and_then(|h| h.target_enb_ue_id.map(|e| ConnKey::new(h.target_assoc, e)));
    [u.conn, u.old_conn, target]
}

/// Append a whole-UE snapshot (the slice's section, if the UE has slice state yet, and
/// the MME's) of UE `key` to `out`; returns its length.
pub fn snapshot_whole_ue(
    mme: &Mme,
    cp: &ControlPlane,
    key: UeKey,
    now: Instant,
    out: &mut Vec<u8>,
) -> Result<usize, SnapshotError> {
    snapshot_whole_ue_with(&mut Scratch::default(), mme, cp, key, now, out)
}

/// Buffers a caller that takes many snapshots keeps between them (no allocation per
/// snapshot once warm).
#[derive(Default)]
pub struct Scratch {
    slice: container::UeSliceSnapshot,
    mme: Vec<u8>,
    pcc: Vec<u8>,
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `mme` may hold a section's key material: lengths only.
        f.debug_struct("Scratch")
            .field("mme_len", &self.mme.len())
            .finish_non_exhaustive()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // The last section's keys do not outlive the buffer.
        self.mme.fill(0);
    }
}

/// [`snapshot_whole_ue`] with the caller's buffers.
pub fn snapshot_whole_ue_with(
    scratch: &mut Scratch,
    mme: &Mme,
    cp: &ControlPlane,
    key: UeKey,
    now: Instant,
    out: &mut Vec<u8>,
) -> Result<usize, SnapshotError> {
    scratch.mme.fill(0);
    scratch.mme.clear();
    mme.snapshot_ue(cp, key, now, &mut scratch.mme)?;
    let slot = mme.ue_slot_of(cp, key);
    let slice = match slot {
        Some(slot) => {
            cp.snapshot_ue_into(slot, &mut scratch.slice)?;
            Some(&scratch.slice)
        }
        None => None,
    };
    // The PCC section, if the UE has policy state (sessions, or an interim schedule).
    scratch.pcc.clear();
    let policy = mme
        .id_of(key)
        .and_then(|id| mme.ue(cp, id))
        .and_then(|u| u.policy.as_deref())
        .filter(|p| !p.sessions.is_empty());
    if let Some(p) = policy {
        pcc::write(p, p.interim_due, cp, slot, now, &mut scratch.pcc);
    }
    let pcc = (!scratch.pcc.is_empty()).then_some(scratch.pcc.as_slice());
    let n = container::encode_sections(slice, Some(&scratch.mme), pcc, out)?;
    scratch.mme.fill(0);
    Ok(n)
}

/// Why a UE cannot be exported now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExportError {
    #[error("no UE {0:?} in this MME")]
    UnknownUe(UeKey),
    /// A procedure awaits a message (named): the UE moves at its next boundary.
    #[error("the UE is in a procedure ({0}): it can be exported once that ends")]
    Busy(&'static str),
    #[error("snapshot: {0}")]
    Snapshot(SnapshotError),
}

impl Mme {
    /// What keeps UE `key` from being exported now: the EMM procedure it is in (an
    /// HSS or PCRF answer awaited included), an S1 handover, an ESM procedure (bearers
    /// awaiting the UE's answer) or a NAS message under retransmission. `None`: it is
    /// between two procedures.
    pub fn busy(&self, cp: &ControlPlane, key: UeKey) -> Result<Option<&'static str>, ExportError> {
        let u = self
            .id_of(key)
            .and_then(|id| self.ue(cp, id))
            .ok_or(ExportError::UnknownUe(key))?;
        Ok(if !matches!(u.proc, Procedure::Idle) {
            Some(u.proc.name())
        } else if u.handover.is_some() {
            Some("S1 handover")
        } else if !u.pending_bearers.is_empty() {
            Some("ESM bearer procedure")
        } else if u.retx.is_some() {
            Some("NAS retransmission")
        } else {
            None
        })
    }

    /// Export UE `key` between two of its procedures: its whole snapshot (the slice's
    /// part with its counters, the MME's, the PCC section) appended to `out`, for
    /// [`Mme::import`] elsewhere; returns its length. Refused while a procedure awaits
    /// a message ([`ExportError::Busy`]). The UE stays here until the caller removes
    /// it ([`Mme::remove_migrated_ue`]) once the other side has it.
    pub fn export(
        &self,
        cp: &ControlPlane,
        key: UeKey,
        now: Instant,
        out: &mut Vec<u8>,
    ) -> Result<usize, ExportError> {
        if let Some(p) = self.busy(cp, key)? {
            return Err(ExportError::Busy(p));
        }
        snapshot_whole_ue(self, cp, key, now, out).map_err(ExportError::Snapshot)
    }

    /// Import a UE exported by [`Mme::export`] (another slice's, node's or process's).
    pub fn import(
        &mut self,
        cp: &mut ControlPlane,
        bytes: &[u8],
        now: Instant,
    ) -> Result<WholeRestored, SnapshotError> {
        restore_whole_ue(self, cp, bytes, now)
    }
}

/// Restore a whole-UE snapshot: the slice's part with [`ControlPlane::restore_ue`],
/// then the MME's with the slot it got. If the MME refuses its part, the slice's is
/// undone.
pub fn restore_whole_ue(
    mme: &mut Mme,
    cp: &mut ControlPlane,
    bytes: &[u8],
    now: Instant,
) -> Result<WholeRestored, SnapshotError> {
    let rec = mme.begin_call(now, Some(cp), 0, crate::record::put::import(bytes, false));
    let r = restore_whole_ue_adjusted(mme, cp, bytes, now, |_| {});
    mme.end_call(rec, cp, &[], Some(&r));
    r
}

/// [`restore_whole_ue`], with the slice's part adjusted before it is installed.
fn restore_whole_ue_adjusted(
    mme: &mut Mme,
    cp: &mut ControlPlane,
    bytes: &[u8],
    now: Instant,
    adjust: impl FnOnce(&mut container::UeSliceSnapshot),
) -> Result<WholeRestored, SnapshotError> {
    let view = container::SnapshotView::parse(bytes)?;
    let section = view
        .mme()
        .ok_or(container::SnapshotError::MissingSection("mme"))?;
    // Read before anything changes: a bad PCC section refuses the whole restore.
    let pcc = view.pcc().map(|b| pcc::read(b, now)).transpose()?;
    let slice = if view.has_slice() {
        let mut s = view.decode_slice()?;
        // A PCC rule set id is an index into the registry of the MME that gave it:
        // the UE starts on the slice's default set, never on another UE's set of the
        // same id, and gets its own from its rules (the PCC section) once restored.
        if s.rule_set >= crate::esm::policy::FIRST_POLICY_SET {
            s.rule_set = cp.config().default_rule_set;
        }
        adjust(&mut s);
        Some(cp.restore_ue(&s)?)
    } else {
        None
    };
    match mme.restore_ue(cp, section.bytes(), slice.map(|r| r.ue_slot), now) {
        Ok(m) => {
            if let Some(d) = pcc {
                mme.restore_pcc(cp, m.mme_ue_id, d, now);
            }
            Ok(WholeRestored { mme: m, slice })
        }
        Err(e) => {
            if let Some(r) = slice {
                // The slot was created just above: its removal cannot find it gone.
                let _ = cp.detach(r.ue_slot);
            }
            Err(e)
        }
    }
}

/// The M-TMSI of the UE of a whole snapshot (0: none): its slice bits say which slice
/// its S-TMSI routes to, where a restart restores it.
pub fn snapshot_m_tmsi(bytes: &[u8]) -> Result<u32, SnapshotError> {
    Ok(snapshot_tmsis(bytes)?.0)
}

/// The identities a whole snapshot's UE is found by, read without decoding the rest:
/// its M-TMSI (0: none) and the new one of a GUTI reallocation it had not confirmed.
pub fn snapshot_tmsis(bytes: &[u8]) -> Result<(u32, Option<u32>), SnapshotError> {
    let view = container::SnapshotView::parse(bytes)?;
    let section = view
        .mme()
        .ok_or(container::SnapshotError::MissingSection("mme"))?;
    let mut r = Reader::new(section.bytes());
    let v = r.u8()?;
    if !(MME_SECTION_VERSION_MIN..=MME_SECTION_VERSION).contains(&v) {
        return Err(SnapshotError::UnsupportedVersion(v));
    }
    r.version = v;
    let _mme_ue_id = r.u32()?;
    let flags = r.varint()? as u32;
    let _code = r.u8()?;
    if flags & F_IMSI != 0 {
        r.varint()?;
    }
    if flags & F_CONN != 0 {
        r.conn()?;
    }
    let m_tmsi = r.u32()?;
    let pending = if flags & F_PENDING_TMSI != 0 {
        Some(r.u32()?)
    } else {
        None
    };
    Ok((m_tmsi, pending))
}

/// Restore a checkpoint a dead process of this node wrote (`Output::Checkpoint`): as
/// [`restore_whole_ue`], then what that process's end means for the UE:
/// * its S1 connections died with the old process's associations, so it is
///   ECM-IDLE: eNB tunnels gone (its uplink TEIDs and addresses stay), a procedure in
///   flight dropped, reachable by paging once its eNBs have set up again;
/// * its downlink NAS COUNT resumes [`CHECKPOINT_DL_LEASE`] above the checkpointed
///   one, above any the dead process can have used (it checkpoints again before
///   using half of that), so no COUNT is ever used twice with the same keys.
pub fn restore_checkpoint(
    mme: &mut Mme,
    cp: &mut ControlPlane,
    bytes: &[u8],
    now: Instant,
) -> Result<WholeRestored, SnapshotError> {
    let rec = mme.begin_call(now, Some(cp), 0, crate::record::put::import(bytes, true));
    let r = restore_checkpoint_now(mme, cp, bytes, now);
    mme.end_call(rec, cp, &[], Some(&r));
    r
}

fn restore_checkpoint_now(
    mme: &mut Mme,
    cp: &mut ControlPlane,
    bytes: &[u8],
    now: Instant,
) -> Result<WholeRestored, SnapshotError> {
    // The data path gets the UE as it is now, ECM-IDLE: no eNB tunnels, not in the
    // primary table (nothing published only to be evicted).
    let r = restore_whole_ue_adjusted(mme, cp, bytes, now, |s| {
        s.ecm = pepc_slice::context::EcmState::Idle;
        s.in_primary = false;
        for b in &mut s.bearers {
            b.enb_teid = 0;
            b.enb_addr = Ipv4Addr::UNSPECIFIED;
        }
    })?;
    mme.after_restart(cp, r.mme.mme_ue_id, now);
    Ok(r)
}

impl Mme {
    fn after_restart(&mut self, cp: &mut ControlPlane, id: u32, now: Instant) {
        let mobile_reachable = self.cfg.mobile_reachable;
        let Some(u) = self.ue_mut(cp, id) else {
            return;
        };
        if let Some(s) = u.sec.as_mut() {
            let c = &mut s.ctx;
            let (ul, dl, rx) = (c.ul_count, c.dl_count, c.rx_started());
            c.set_counts(ul, dl.wrapping_add(CHECKPOINT_DL_LEASE), rx);
        }
        let conns = [u.conn.take(), u.old_conn.take()];
        u.x2_source = None;
        u.handover = None;
        // A GUTI reallocation the UE may or may not have seen stays pending (both
        // GUTIs valid) until the UE shows which one it uses; nothing else in flight
        // survives its S1 connection.
        if !matches!(u.proc, Procedure::ExpectGutiReallocComplete { .. }) {
            u.proc = Procedure::Idle;
        }
        u.retx = None;
        u.nas_timer = None;
        u.guard_timer = None;
        u.nas_secured = false;
        u.page_after_release = false;
        let registered = u.emm == Emm_::Registered;
        let reach = u.reach_timer.is_none();
        for c in conns.into_iter().flatten() {
            self.index.unlink_conn_of(c, id);
        }
        if !registered {
            // Checkpoints are of registered UEs: anything else has nothing to resume.
            return self.remove_ue(cp, id, false);
        }
        if reach {
            self.arm(cp, id, TimerKind::Reachable, now + mobile_reachable);
        }
    }
}

fn varint_into(mut v: u64, buf: &mut [u8; 10]) -> usize {
    let mut n = 0;
    while v >= 0x80 {
        buf[n] = v as u8 | 0x80;
        v >>= 7;
        n += 1;
    }
    buf[n] = v as u8;
    n + 1
}

/// The output (with the shared snapshot byte coding) and the version written (an
/// older one only in tests).
struct Writer<'a>(container::Writer<'a>, u8);

impl<'a> std::ops::Deref for Writer<'a> {
    type Target = container::Writer<'a>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Writer<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Writer<'_> {
    fn conn(&mut self, c: ConnKey) {
        self.varint(c.assoc);
        self.varint(u64::from(c.enb_ue_id));
    }
    /// Length u8 then the octets (the caller checked the bound).
    fn short_bytes(&mut self, b: &[u8]) {
        self.u8(b.len() as u8);
        self.bytes(b);
    }
    fn sec(&mut self, s: &SecCtx) {
        let c = &s.ctx;
        self.bytes(s.kasme.as_bytes());
        if self.1 >= 2 {
            self.bytes(c.knas_int().as_bytes());
            self.bytes(c.knas_enc().as_bytes());
        }
        self.u8(s.ksi);
        self.u8(s.eia as u8 | (s.eea as u8) << 4 | (c.rx_started() as u8) << 7);
        self.varint(u64::from(c.ul_count));
        self.varint(u64::from(c.dl_count));
        self.varint(u64::from(s.last_ul_count));
        self.u8(s.recent.len() as u8);
        for t in s.recent.oldest_first() {
            self.bytes(t);
        }
    }
}

/// The shared snapshot byte coding, with the section's version (set once read) and
/// errors in this module's terms.
struct Reader<'a> {
    r: container::Reader<'a>,
    version: u8,
}

/// The byte coding's errors as this section reports them.
fn section_error(e: container::SnapshotError) -> SnapshotError {
    match e {
        container::SnapshotError::Truncated { need, have } => {
            SnapshotError::Truncated { need, have }
        }
        container::SnapshotError::Invalid(what) => SnapshotError::Invalid(what),
        other => SnapshotError::Container(other),
    }
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader {
            r: container::Reader::new(buf),
            version: MME_SECTION_VERSION,
        }
    }

    fn remaining(&self) -> usize {
        self.r.remaining()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], SnapshotError> {
        self.r.take(n).map_err(section_error)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], SnapshotError> {
        self.r.array().map_err(section_error)
    }

    fn u8(&mut self) -> Result<u8, SnapshotError> {
        self.r.u8().map_err(section_error)
    }

    fn u16(&mut self) -> Result<u16, SnapshotError> {
        self.r.u16().map_err(section_error)
    }

    fn u32(&mut self) -> Result<u32, SnapshotError> {
        self.r.u32().map_err(section_error)
    }

    fn varint(&mut self) -> Result<u64, SnapshotError> {
        self.r.varint().map_err(section_error)
    }

    fn varint_u32(&mut self) -> Result<u32, SnapshotError> {
        self.r.varint_u32().map_err(section_error)
    }

    fn key(&mut self) -> Result<Key256, SnapshotError> {
        Ok(Key256::new(self.array()?))
    }

    fn key128(&mut self) -> Result<Key128, SnapshotError> {
        Ok(Key128::new(self.array()?))
    }

    fn count(&mut self) -> Result<u32, SnapshotError> {
        let c = self.varint()?;
        if c > 0x00ff_ffff {
            return Err(SnapshotError::Invalid("NAS COUNT beyond 24 bits"));
        }
        Ok(c as u32)
    }

    fn conn(&mut self) -> Result<ConnKey, SnapshotError> {
        Ok(ConnKey::new(self.varint()?, self.varint_u32()?))
    }

    fn short_bytes(&mut self, max: usize, what: &'static str) -> Result<&'a [u8], SnapshotError> {
        let n = self.u8()? as usize;
        if n > max {
            return Err(SnapshotError::TooLong { what, len: n, max });
        }
        self.take(n)
    }

    fn sec(&mut self) -> Result<SecCtx, SnapshotError> {
        use SnapshotError::Invalid;
        let kasme = self.key()?;
        let nas_keys = if self.version >= 2 {
            Some((self.key128()?, self.key128()?))
        } else {
            None
        };
        let ksi = self.u8()?;
        if ksi >= 7 {
            return Err(Invalid("KSI"));
        }
        let algs = self.u8()?;
        if algs & 0x08 != 0 {
            return Err(Invalid("reserved algorithm bit set"));
        }
        let eia = eia_of(algs & 7)?;
        let eea = eea_of((algs >> 4) & 7)?;
        let rx_started = algs & 0x80 != 0;
        let ul = self.count()?;
        let dl = self.count()?;
        let last_ul_count = self.count()?;
        let n = self.u8()? as usize;
        if n > RecentTags::LEN {
            return Err(Invalid("recent uplink tag count"));
        }
        let mut recent = RecentTags::default();
        for _ in 0..n {
            recent.push(self.array()?);
        }
        let s = match nas_keys {
            Some((int, enc)) => SecCtx::from_nas_keys(kasme, int, enc, ksi, eea, eia),
            None => SecCtx::new(kasme, ksi, eea, eia),
        };
        let mut s = s.map_err(|_| Invalid("EIA0 with a ciphering algorithm"))?;
        s.ctx.set_counts(ul, dl, rx_started);
        s.last_ul_count = last_ul_count;
        s.recent = recent;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{attach, pump, subscriber, Harness, SimUe};
    use crate::MmeConfig;
    use pepc_s1ap::msg::{S1apMessage, UplinkNasTransport};

    const IMSI: &str = "001010000000001";
    const IMSI_N: u64 = 1010000000001;

    fn node() -> Harness {
        let mut h = Harness::new(16, MmeConfig::default());
        // Sections restored one by one: not a recording's calls.
        h.stop_recording();
        h.hss.add(&subscriber(IMSI)).unwrap();
        assert!(matches!(
            h.enb_setup(1, 1, 1),
            S1apMessage::S1SetupResponse(_)
        ));
        h
    }

    fn attached() -> (Harness, SimUe) {
        let mut h = node();
        let mut ue = SimUe::new(IMSI, 10);
        attach(&mut h, &mut ue, 1).unwrap();
        (h, ue)
    }

    fn sec_of<'c>(m: &Mme, cp: &'c ControlPlane) -> &'c SecCtx {
        let id = m.mme_ue_id_of(IMSI_N).unwrap();
        m.ue(cp, id).unwrap().sec.as_ref().unwrap()
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Restore into a fresh node; the restored context has keyed nothing yet, and a
    /// snapshot of it is the original's bytes.
    fn restored(h: &Harness) -> (Harness, Vec<u8>) {
        let mut bytes = vec![];
        snapshot_whole_ue(&h.mme, &h.cp, UeKey::Imsi(IMSI_N), h.now, &mut bytes).unwrap();
        let mut h2 = node();
        restore_whole_ue(&mut h2.mme, &mut h2.cp, &bytes, h2.now).unwrap();
        let s = sec_of(&h2.mme, &h2.cp);
        assert!(!s.ctx.keyed(), "EIA/EEA set up on restore");
        assert!(s.kdf.is_none(), "KASME KDF keyed on restore");
        let mut again = vec![];
        snapshot_whole_ue(&h2.mme, &h2.cp, UeKey::Imsi(IMSI_N), h2.now, &mut again).unwrap();
        assert_eq!(
            bytes, again,
            "snapshot of the restored UE is the same bytes"
        );
        (h2, bytes)
    }

    #[test]
    fn restored_context_protects_on_first_use() {
        let (h, mut ue) = attached();
        let (mut h2, _) = restored(&h);
        // First use is the downlink protect of a GUTI Reallocation Command; the UE's
        // own (oxirush) context verifies and deciphers it, and the MME verifies the
        // Complete.
        let mut out = vec![];
        let t = h2
            .mme
            .reallocate_guti(h2.now, IMSI_N, &mut h2.cp, &mut out)
            .unwrap();
        let msgs = out
            .into_iter()
            .filter_map(|o| match o {
                crate::Output::S1ap { assoc, bytes, .. } => {
                    Some((assoc, S1apMessage::decode(&bytes).unwrap()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            pump(&mut h2, &mut ue, 1, msgs).unwrap(),
            ["DownlinkNASTransport"]
        );
        assert_eq!(h2.mme.m_tmsi_of(&h2.cp, IMSI_N), Some(t));
        assert_eq!(ue.m_tmsi, Some(t));
        assert!(sec_of(&h2.mme, &h2.cp).ctx.keyed());
        assert_eq!(h2.mme.stats.nas_bad_mac + h2.mme.stats.nas_replays, 0);
    }

    #[test]
    fn restored_context_verifies_on_first_use() {
        let (h, mut ue) = attached();
        let (mut h2, _) = restored(&h);
        // First use is verifying (and deciphering) an uplink Detach Request.
        let plmn = h2.mme.config().plmn;
        let nas = ue.detach_request(false);
        let r = h2.send(
            1,
            UplinkNasTransport {
                mme_ue_id: ue.mme_ue_id.unwrap(),
                enb_ue_id: ue.enb_ue_id,
                nas_pdu: nas,
                ecgi: Ecgi {
                    plmn,
                    cell_id: 0x101,
                },
                tai: Tai { plmn, tac: 1 },
            },
        );
        pump(&mut h2, &mut ue, 1, r).unwrap();
        assert_eq!(ue.received.last().unwrap(), "DetachAccept");
        assert_eq!(h2.mme.stats.nas_bad_mac + h2.mme.stats.nas_replays, 0);
        assert!(h2.cp.find_imsi(IMSI_N).is_none());
    }

    #[test]
    fn version_1_sections_are_read_and_give_the_same_context() {
        let (h, _ue) = attached();
        let id = h.mme.mme_ue_id_of(IMSI_N).unwrap();
        let slot = h.mme.ue_slot_of(&h.cp, UeKey::Imsi(IMSI_N));
        let (mut v1, mut v2) = (vec![], vec![]);
        let u = h.mme.ue(&h.cp, id).unwrap();
        let apn = h.mme.apn_name(u.subscribed_apn);
        write_ue(id, u, apn, h.now, &mut v1, 1).unwrap();
        h.mme
            .snapshot_ue(&h.cp, UeKey::Imsi(IMSI_N), h.now, &mut v2)
            .unwrap();
        assert_eq!((v1[0], v2[0]), (1, MME_SECTION_VERSION));
        assert_eq!(v2.len(), v1.len() + 32, "K_NASint and K_NASenc");
        // Into a node whose slice took the session part of the same UE.
        let mut whole = vec![];
        snapshot_whole_ue(&h.mme, &h.cp, UeKey::Imsi(IMSI_N), h.now, &mut whole).unwrap();
        let session = container::SnapshotView::parse(&whole)
            .unwrap()
            .decode_slice()
            .unwrap();
        let mut h2 = node();
        let slot = slot.map(|_| h2.cp.restore_ue(&session).unwrap().ue_slot);
        h2.mme.restore_ue(&mut h2.cp, &v1, slot, h.now).unwrap();
        let s = sec_of(&h2.mme, &h2.cp);
        let o = sec_of(&h.mme, &h.cp);
        assert_eq!(s.ctx.knas_int(), o.ctx.knas_int());
        assert_eq!(s.ctx.knas_enc(), o.ctx.knas_enc());
        // Restored from version 1, snapshotted as the current version: the original's.
        let mut again = vec![];
        h2.mme
            .snapshot_ue(&h2.cp, UeKey::Imsi(IMSI_N), h.now, &mut again)
            .unwrap();
        assert_eq!(again, v2);
    }

    #[test]
    fn no_nas_key_bytes_in_debug_output() {
        let (h, _ue) = attached();
        let (mut h2, bytes) = restored(&h);
        let o = sec_of(&h.mme, &h.cp);
        let keys = [
            o.kasme.as_bytes().to_vec(),
            o.ctx.knas_int().as_bytes().to_vec(),
            o.ctx.knas_enc().as_bytes().to_vec(),
        ];
        for k in &keys[1..] {
            assert!(
                bytes.windows(16).any(|w| w == &k[..]),
                "the snapshot carries the NAS keys"
            );
        }
        let mut texts = vec![format!("{o:?}"), format!("{:?}", o.ctx)];
        // Before and after the restored context is keyed.
        texts.push(format!("{:?}", sec_of(&h2.mme, &h2.cp)));
        let mut out = vec![];
        h2.mme
            .reallocate_guti(h2.now, IMSI_N, &mut h2.cp, &mut out)
            .unwrap();
        let s = sec_of(&h2.mme, &h2.cp);
        assert!(s.ctx.keyed());
        texts.push(format!("{s:?}"));
        texts.push(format!("{:?}", s.ctx));
        texts.push(format!("{:?}", s.ctx.knas_int()));
        texts.push(format!("{:?}", s.ctx.knas_enc()));
        for k in &keys {
            let (hx, dec) = (hex(k), format!("{}, {}, {}, {}", k[0], k[1], k[2], k[3]));
            for t in &texts {
                assert!(!t.to_lowercase().contains(&hx[..16]), "hex key in {t}");
                assert!(!t.contains(&dec), "key bytes in {t}");
            }
        }
    }
}
