//! UE snapshots: a UE's whole state as a compact, versioned, self-contained byte string
//! that restores to an equal context in another slice or process (the base of live
//! migration and of failover from checkpoints).
//!
//! A snapshot holds the slice's view of the UE ([`UeSliceSnapshot`]: control state and
//! usage counters) and, optionally, the MME's per-UE record as opaque bytes supplied by
//! the caller. The MME section will carry key material, so nothing here ever prints
//! it: [`MmeSection`] and [`SnapshotView`] show lengths only.
//!
//! ## Container, version 2
//! ```text
//! offset  size  field
//! 0       2     magic "PU" (0x50 0x55)
//! 2       1     format version (2; 1 is still read); any other is UnsupportedVersion
//! 3       2     body length B, u16 LE, <= MAX_BODY
//! 5       B     sections: tag u8 | length u16 LE | bytes
//! 5+B     4     check, u32 LE: a multiply-xorshift hash of bytes 0..5+B
//! ```
//! Sections: `0x01` slice (once), `0x02` mme (once, opaque), `0x81` pcc (once, opaque:
//! the MME's policy and charging state of the UE, optional to readers); at least one of
//! the first two. A
//! snapshot without a slice section is that of a UE the slice holds nothing of yet (in
//! the middle of attach, before its session): the MME section alone. Tags
//! `0x80..=0xFF` are optional to readers (skipped when unknown); an unknown tag below
//! `0x80` is an error. Input must end right after the check (no trailing bytes).
//!
//! ## Slice section, version 2
//! Integers are LEB128 varints (`v`) unless sized; fixed-size integers are little
//! endian; IPv4 addresses are their 4 octets in network order.
//! ```text
//! imsi v | flags u8 (bit0 StatelessIot, bit1 ECM-CONNECTED, bit3 in primary)
//! ambr_ul v | ambr_dl v | rule_set v | version v
//! n_pdns u8 (1..=4), each: index u8 | ip 4 | default_ebi u8 | apn_len u8 (<=100) | apn
//! n_bearers u8 (1..=11), each:
//!   ebi u8 | pdn u8 | qci u8 | arp u8 (bits0-3 level, bit6 PCI, bit7 PVI)
//!   | flags u8 (bit0 eNB tunnel, bit1 rates, bit2 usage) | teid_ul u32 | charging_key v
//!   [tunnel: enb_teid u32 | enb_addr 4] [rates: mbr_ul v | mbr_dl v | gbr_ul v | gbr_dl v]
//!   [usage: ul_packets v | ul_bytes v | dl_packets v | dl_bytes v | ul_dropped v | dl_dropped v]
//! ```
//! The UE address and default EBI are those of `pdns[0]` (an invariant of
//! [`UeContext`]); bearer and UE *slots* are local to a slice and not carried: the
//! restoring slice allocates its own (see [`crate::control::ControlPlane::restore_ue`]).
//! Reserved flag bits must be zero.
//!
//! Version 1 also had, after the flags, `[guti: plmn 3 | mme_group_id u16 | mme_code u8
//! | m_tmsi u32]` (flag bit2) and `location: tai.plmn 3 | tac u16 | ecgi.plmn 3 |
//! cell_id u32 | enb_assoc v`: the UE's location and GUTI are the signaling part's
//! (one copy, in the MME section), and a version 1 reader skips them.

use crate::context::*;
use crate::counters::Usage;
use crate::ids::MAX_PDNS;
use std::net::Ipv4Addr;

pub const MAGIC: [u8; 2] = *b"PU";
/// The format version written.
pub const VERSION: u8 = 2;
/// The oldest format version read.
pub const VERSION_MIN: u8 = 1;
/// Header: magic, version, body length.
const HEADER: usize = 5;
const CHECK: usize = 4;
/// Upper bound of a body; a longer one is an error (before anything is read).
pub const MAX_BODY: usize = 16384;
/// Upper bound of the PCC section (16 rules of 8 flows, 8 monitoring keys, per PDN).
pub const MAX_PCC_SECTION: usize = 12288;
/// Upper bound of the MME section.
pub const MAX_MME_SECTION: usize = 2048;
/// Longest APN (TS 23.003 §9.1: 100 octets).
pub const MAX_APN_LEN: usize = 100;

pub const TAG_SLICE: u8 = 0x01;
pub const TAG_MME: u8 = 0x02;
/// Tags from here up may be skipped by readers that do not know them.
pub const TAG_OPTIONAL: u8 = 0x80;
/// The MME's PCC state of the UE (opaque here); a reader without it restores the UE
/// under the slice's default rules.
pub const TAG_PCC: u8 = 0x81;

/// What was wrong with a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotError {
    Truncated {
        need: usize,
        have: usize,
    },
    BadMagic([u8; 2]),
    UnsupportedVersion(u8),
    TooLong {
        what: &'static str,
        len: usize,
        max: usize,
    },
    TrailingBytes(usize),
    BadCheck {
        stored: u32,
        computed: u32,
    },
    UnknownSection(u8),
    DuplicateSection(u8),
    MissingSection(&'static str),
    /// A section's bytes left over after its last field.
    SectionTrailing {
        tag: u8,
        extra: usize,
    },
    /// A field out of range, or fields inconsistent with each other (names which).
    Invalid(&'static str),
}

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotError::Truncated { need, have } => {
                write!(f, "snapshot truncated: need {need} bytes, have {have}")
            }
            SnapshotError::BadMagic(m) => write!(f, "not a UE snapshot (magic {m:02x?})"),
            SnapshotError::UnsupportedVersion(v) => {
                write!(
                    f,
                    "snapshot format version {v} not supported (this reads {VERSION_MIN} to {VERSION})"
                )
            }
            SnapshotError::TooLong { what, len, max } => {
                write!(f, "{what} is {len} bytes, at most {max}")
            }
            SnapshotError::TrailingBytes(n) => write!(f, "{n} bytes after the snapshot"),
            SnapshotError::BadCheck { stored, computed } => write!(
                f,
                "snapshot check mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            SnapshotError::UnknownSection(t) => write!(f, "unknown snapshot section {t:#04x}"),
            SnapshotError::DuplicateSection(t) => write!(f, "snapshot section {t:#04x} twice"),
            SnapshotError::MissingSection(s) => write!(f, "snapshot has no {s} section"),
            SnapshotError::SectionTrailing { tag, extra } => {
                write!(
                    f,
                    "section {tag:#04x} has {extra} bytes after its last field"
                )
            }
            SnapshotError::Invalid(what) => write!(f, "invalid snapshot: {what}"),
        }
    }
}

impl std::error::Error for SnapshotError {}

/// One bearer as a snapshot carries it: its control state (no slot: that is local to a
/// slice) and its usage counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BearerSnapshot {
    pub ebi: u8,
    pub qci: u8,
    pub arp: Arp,
    pub mbr_ul: u64,
    pub mbr_dl: u64,
    pub gbr_ul: u64,
    pub gbr_dl: u64,
    pub teid_ul: u32,
    pub enb_teid: u32,
    pub enb_addr: Ipv4Addr,
    pub charging_key: u32,
    pub pdn: u8,
    /// Counters as the data thread held them (zero for stateless IoT: aggregate only).
    pub usage: Usage,
}

impl BearerSnapshot {
    pub fn from_context(b: &BearerContext, usage: Usage) -> Self {
        BearerSnapshot {
            ebi: b.ebi,
            qci: b.qci,
            arp: b.arp,
            mbr_ul: b.mbr_ul,
            mbr_dl: b.mbr_dl,
            gbr_ul: b.gbr_ul,
            gbr_dl: b.gbr_dl,
            teid_ul: b.teid_ul,
            enb_teid: b.enb_teid,
            enb_addr: b.enb_addr,
            charging_key: b.charging_key,
            pdn: b.pdn,
            usage,
        }
    }

    /// The bearer's control state in bearer slot `slot`.
    pub fn to_context(&self, slot: u32) -> BearerContext {
        BearerContext {
            ebi: self.ebi,
            qci: self.qci,
            arp: self.arp,
            mbr_ul: self.mbr_ul,
            mbr_dl: self.mbr_dl,
            gbr_ul: self.gbr_ul,
            gbr_dl: self.gbr_dl,
            slot,
            teid_ul: self.teid_ul,
            enb_teid: self.enb_teid,
            enb_addr: self.enb_addr,
            charging_key: self.charging_key,
            pdn: self.pdn,
        }
    }
}

/// The slice's view of one UE: everything needed to rebuild its control state
/// ([`UeContext`]) and the data path's view of it, counters included. The plain `Repr`
/// of the slice section.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UeSliceSnapshot {
    pub imsi: u64,
    pub class: DeviceClass,
    pub ecm: EcmState,
    pub ambr_ul: u64,
    pub ambr_dl: u64,
    pub rule_set: u16,
    pub version: u32,
    /// Was in the source data thread's primary table (restored there too).
    pub in_primary: bool,
    /// PDN connections, oldest first; `pdns[0]` gives the UE's address and default EBI.
    pub pdns: Vec<PdnContext>,
    pub bearers: Vec<BearerSnapshot>,
}

impl UeSliceSnapshot {
    /// Fill `self` from a UE's context, reusing its vectors and strings; `usage` reads a
    /// bearer's counters.
    pub fn fill_from(&mut self, ue: &UeContext, mut usage: impl FnMut(&BearerContext) -> Usage) {
        self.imsi = ue.imsi;
        self.class = ue.class;
        self.ecm = ue.ecm;
        self.ambr_ul = ue.ambr_ul;
        self.ambr_dl = ue.ambr_dl;
        self.rule_set = ue.rule_set;
        self.version = ue.version;
        self.in_primary = ue.in_primary;
        self.pdns.clone_from(&ue.pdns);
        self.bearers.clear();
        self.bearers.extend(
            ue.bearers
                .iter()
                .map(|b| BearerSnapshot::from_context(b, usage(b))),
        );
    }

    /// The UE's address (`pdns[0]`).
    pub fn ue_ip(&self) -> Ipv4Addr {
        self.pdns.first().map_or(Ipv4Addr::UNSPECIFIED, |p| p.ip)
    }

    /// Check what a [`UeContext`] guarantees: 1..=4 PDN connections on distinct
    /// indexes, 1..=11 bearers with distinct valid EBIs and TEIDs, each bearer in an
    /// existing PDN connection, each PDN's default bearer present in it, and the
    /// encoding's bounds. Decoding runs it; so does restoring.
    pub fn validate(&self) -> Result<(), SnapshotError> {
        use SnapshotError::Invalid;
        if self.pdns.is_empty() || self.pdns.len() > MAX_PDNS {
            return Err(Invalid("PDN connection count"));
        }
        if self.bearers.is_empty() || self.bearers.len() > MAX_BEARERS {
            return Err(Invalid("bearer count"));
        }
        if self.class == DeviceClass::StatelessIot
            && (self.pdns.len() != 1 || self.bearers.len() != 1)
        {
            return Err(Invalid(
                "stateless IoT has one PDN connection and one bearer",
            ));
        }
        let mut pdn_mask = 0u8;
        for p in &self.pdns {
            if p.index as usize >= MAX_PDNS {
                return Err(Invalid("PDN index"));
            }
            if pdn_mask & (1 << p.index) != 0 {
                return Err(Invalid("PDN index used twice"));
            }
            pdn_mask |= 1 << p.index;
            if p.apn.len() > MAX_APN_LEN {
                return Err(Invalid("APN longer than 100 bytes"));
            }
        }
        for (i, p) in self.pdns.iter().enumerate() {
            if self.pdns[..i].iter().any(|o| o.ip == p.ip) {
                return Err(Invalid("UE address used twice"));
            }
        }
        let mut ebi_mask = 0u16;
        for (i, b) in self.bearers.iter().enumerate() {
            if !(FIRST_EBI..FIRST_EBI + MAX_BEARERS as u8).contains(&b.ebi) {
                return Err(Invalid("EBI outside 5..=15"));
            }
            if ebi_mask & (1 << b.ebi) != 0 {
                return Err(Invalid("EBI used twice"));
            }
            ebi_mask |= 1 << b.ebi;
            if b.pdn as usize >= MAX_PDNS || pdn_mask & (1 << b.pdn) == 0 {
                return Err(Invalid("bearer of no PDN connection"));
            }
            if b.arp.priority_level > 15 {
                return Err(Invalid("ARP priority level above 15"));
            }
            if self.bearers[..i].iter().any(|o| o.teid_ul == b.teid_ul) {
                return Err(Invalid("uplink TEID used twice"));
            }
        }
        for p in &self.pdns {
            if !self
                .bearers
                .iter()
                .any(|b| b.ebi == p.default_ebi && b.pdn == p.index)
            {
                return Err(Invalid("PDN default bearer missing"));
            }
        }
        Ok(())
    }

    /// Append the slice section's body (no tag or length) to `out`.
    fn write_body(&self, w: &mut Writer<'_>) {
        let mut flags = 0u8;
        if self.class == DeviceClass::StatelessIot {
            flags |= 1;
        }
        if self.ecm == EcmState::Connected {
            flags |= 2;
        }
        if self.in_primary {
            flags |= 8;
        }
        w.varint(self.imsi);
        w.u8(flags);
        w.varint(self.ambr_ul);
        w.varint(self.ambr_dl);
        w.varint(self.rule_set as u64);
        w.varint(self.version as u64);
        w.u8(self.pdns.len() as u8);
        for p in &self.pdns {
            w.u8(p.index);
            w.bytes(&p.ip.octets());
            w.u8(p.default_ebi);
            w.u8(p.apn.len() as u8);
            w.bytes(p.apn.as_bytes());
        }
        w.u8(self.bearers.len() as u8);
        for b in &self.bearers {
            let tunnel = b.enb_teid != 0 || !b.enb_addr.is_unspecified();
            let rates = (b.mbr_ul | b.mbr_dl | b.gbr_ul | b.gbr_dl) != 0;
            let usage = b.usage != Usage::default();
            w.u8(b.ebi);
            w.u8(b.pdn);
            w.u8(b.qci);
            w.u8((b.arp.priority_level & 0x0f)
                | (b.arp.pre_emption_capability as u8) << 6
                | (b.arp.pre_emption_vulnerability as u8) << 7);
            w.u8(tunnel as u8 | (rates as u8) << 1 | (usage as u8) << 2);
            w.u32(b.teid_ul);
            w.varint(b.charging_key as u64);
            if tunnel {
                w.u32(b.enb_teid);
                w.bytes(&b.enb_addr.octets());
            }
            if rates {
                for v in [b.mbr_ul, b.mbr_dl, b.gbr_ul, b.gbr_dl] {
                    w.varint(v);
                }
            }
            if usage {
                let u = &b.usage;
                for v in [
                    u.ul_packets,
                    u.ul_bytes,
                    u.dl_packets,
                    u.dl_bytes,
                    u.ul_dropped,
                    u.dl_dropped,
                ] {
                    w.varint(v);
                }
            }
        }
    }

    /// Decode a slice section's body of container version `version` into `self`,
    /// reusing its vectors and strings. On error `self` holds a partial value.
    pub fn read_body(&mut self, body: &[u8], version: u8) -> Result<(), SnapshotError> {
        use SnapshotError::Invalid;
        let mut r = Reader::new(body);
        self.imsi = r.varint()?;
        let flags = r.u8()?;
        let known = if version >= 2 { 0x0b } else { 0x0f };
        if flags & !known != 0 {
            return Err(Invalid("reserved UE flag bits set"));
        }
        self.class = if flags & 1 != 0 {
            DeviceClass::StatelessIot
        } else {
            DeviceClass::Normal
        };
        self.ecm = if flags & 2 != 0 {
            EcmState::Connected
        } else {
            EcmState::Idle
        };
        self.in_primary = flags & 8 != 0;
        if version < 2 {
            // Version 1's GUTI and location: the MME section carries them now.
            if flags & 4 != 0 {
                r.take(3 + 2 + 1 + 4)?;
            }
            r.take(3 + 2 + 3 + 4)?;
            r.varint()?;
        }
        self.ambr_ul = r.varint()?;
        self.ambr_dl = r.varint()?;
        self.rule_set = r.varint_u16()?;
        self.version = r.varint_u32()?;
        let n = r.u8()? as usize;
        if n == 0 || n > MAX_PDNS {
            return Err(Invalid("PDN connection count"));
        }
        self.pdns.truncate(n);
        for i in 0..n {
            let index = r.u8()?;
            let ip = Ipv4Addr::from(r.array::<4>()?);
            let default_ebi = r.u8()?;
            let len = r.u8()? as usize;
            if len > MAX_APN_LEN {
                return Err(Invalid("APN longer than 100 bytes"));
            }
            let apn = std::str::from_utf8(r.take(len)?).map_err(|_| Invalid("APN not UTF-8"))?;
            match self.pdns.get_mut(i) {
                Some(p) => {
                    p.index = index;
                    p.ip = ip;
                    p.default_ebi = default_ebi;
                    p.apn.clear();
                    p.apn.push_str(apn);
                }
                None => self.pdns.push(PdnContext {
                    index,
                    apn: apn.to_owned(),
                    ip,
                    default_ebi,
                }),
            }
        }
        let n = r.u8()? as usize;
        if n == 0 || n > MAX_BEARERS {
            return Err(Invalid("bearer count"));
        }
        self.bearers.clear();
        for _ in 0..n {
            let ebi = r.u8()?;
            let pdn = r.u8()?;
            let qci = r.u8()?;
            let arp = r.u8()?;
            if arp & 0x30 != 0 {
                return Err(Invalid("reserved ARP bits set"));
            }
            let bflags = r.u8()?;
            if bflags & !0x07 != 0 {
                return Err(Invalid("reserved bearer flag bits set"));
            }
            let teid_ul = r.u32()?;
            let charging_key = r.varint_u32()?;
            let (enb_teid, enb_addr) = if bflags & 1 != 0 {
                (r.u32()?, Ipv4Addr::from(r.array::<4>()?))
            } else {
                (0, Ipv4Addr::UNSPECIFIED)
            };
            let [mbr_ul, mbr_dl, gbr_ul, gbr_dl] = if bflags & 2 != 0 {
                [r.varint()?, r.varint()?, r.varint()?, r.varint()?]
            } else {
                [0; 4]
            };
            let usage = if bflags & 4 != 0 {
                Usage {
                    ul_packets: r.varint()?,
                    ul_bytes: r.varint()?,
                    dl_packets: r.varint()?,
                    dl_bytes: r.varint()?,
                    ul_dropped: r.varint()?,
                    dl_dropped: r.varint()?,
                }
            } else {
                Usage::default()
            };
            self.bearers.push(BearerSnapshot {
                ebi,
                qci,
                arp: Arp {
                    priority_level: arp & 0x0f,
                    pre_emption_capability: arp & 0x40 != 0,
                    pre_emption_vulnerability: arp & 0x80 != 0,
                },
                mbr_ul,
                mbr_dl,
                gbr_ul,
                gbr_dl,
                teid_ul,
                enb_teid,
                enb_addr,
                charging_key,
                pdn,
                usage,
            });
        }
        if r.remaining() != 0 {
            return Err(SnapshotError::SectionTrailing {
                tag: TAG_SLICE,
                extra: r.remaining(),
            });
        }
        self.validate()
    }
}

/// The MME's per-UE record, opaque here. It carries key material: its `Debug` shows the
/// length only, and nothing in this crate logs its bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct MmeSection<'a>(&'a [u8]);

impl<'a> MmeSection<'a> {
    pub fn bytes(&self) -> &'a [u8] {
        self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for MmeSection<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MmeSection {{ len: {} }}", self.0.len())
    }
}

/// A checked snapshot over a byte buffer: magic, version, lengths, check and section
/// structure verified once; sections read in place.
#[derive(Clone, Copy)]
pub struct SnapshotView<'a> {
    version: u8,
    slice: Option<&'a [u8]>,
    mme: Option<&'a [u8]>,
    pcc: Option<&'a [u8]>,
}

impl std::fmt::Debug for SnapshotView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotView")
            .field("slice_len", &self.slice_section().len())
            .field("mme_len", &self.mme.map(|m| m.len()))
            .finish()
    }
}

impl<'a> SnapshotView<'a> {
    pub fn parse(buf: &'a [u8]) -> Result<Self, SnapshotError> {
        if buf.len() < HEADER {
            return Err(SnapshotError::Truncated {
                need: HEADER,
                have: buf.len(),
            });
        }
        if buf[0..2] != MAGIC {
            return Err(SnapshotError::BadMagic([buf[0], buf[1]]));
        }
        let version = buf[2];
        if !(VERSION_MIN..=VERSION).contains(&version) {
            return Err(SnapshotError::UnsupportedVersion(version));
        }
        let body_len = u16::from_le_bytes([buf[3], buf[4]]) as usize;
        if body_len > MAX_BODY {
            return Err(SnapshotError::TooLong {
                what: "snapshot body",
                len: body_len,
                max: MAX_BODY,
            });
        }
        let total = HEADER + body_len + CHECK;
        if buf.len() < total {
            return Err(SnapshotError::Truncated {
                need: total,
                have: buf.len(),
            });
        }
        if buf.len() > total {
            return Err(SnapshotError::TrailingBytes(buf.len() - total));
        }
        let end = HEADER + body_len;
        let stored = u32::from_le_bytes([buf[end], buf[end + 1], buf[end + 2], buf[end + 3]]);
        let computed = check(&buf[..end]);
        if stored != computed {
            return Err(SnapshotError::BadCheck { stored, computed });
        }
        let mut r = Reader::new(&buf[HEADER..end]);
        let (mut slice, mut mme, mut pcc) = (None, None, None);
        while r.remaining() > 0 {
            let tag = r.u8()?;
            let len = r.u16()? as usize;
            let body = r.take(len)?;
            let seen = match tag {
                TAG_SLICE => slice.replace(body).is_some(),
                TAG_MME => {
                    if len > MAX_MME_SECTION {
                        return Err(SnapshotError::TooLong {
                            what: "MME section",
                            len,
                            max: MAX_MME_SECTION,
                        });
                    }
                    mme.replace(body).is_some()
                }
                TAG_PCC => pcc.replace(body).is_some(),
                t if t >= TAG_OPTIONAL => false,
                t => return Err(SnapshotError::UnknownSection(t)),
            };
            if seen {
                return Err(SnapshotError::DuplicateSection(tag));
            }
        }
        if slice.is_none() && mme.is_none() {
            return Err(SnapshotError::MissingSection("slice"));
        }
        Ok(SnapshotView {
            version,
            slice,
            mme,
            pcc,
        })
    }

    /// The PCC section's bytes, if the snapshot has one (opaque here).
    pub fn pcc(&self) -> Option<&'a [u8]> {
        self.pcc
    }

    /// The slice section's bytes (empty when there is none: see [`Self::has_slice`]).
    pub fn slice_section(&self) -> &'a [u8] {
        self.slice.unwrap_or(&[])
    }

    /// Whether the snapshot has a slice section (an MME-only snapshot has none).
    pub fn has_slice(&self) -> bool {
        self.slice.is_some()
    }

    pub fn mme(&self) -> Option<MmeSection<'a>> {
        self.mme.map(MmeSection)
    }

    pub fn decode_slice(&self) -> Result<UeSliceSnapshot, SnapshotError> {
        let mut s = UeSliceSnapshot::default();
        self.decode_slice_into(&mut s)?;
        Ok(s)
    }

    /// Decode the slice section into `out`, reusing its allocations.
    pub fn decode_slice_into(&self, out: &mut UeSliceSnapshot) -> Result<(), SnapshotError> {
        out.read_body(
            self.slice.ok_or(SnapshotError::MissingSection("slice"))?,
            self.version,
        )
    }
}

/// Append a snapshot of `slice` (with the MME's opaque record, if any) to `out`;
/// returns its length. Allocates nothing but `out`'s growth: reuse `out`.
pub fn encode(
    slice: &UeSliceSnapshot,
    mme: Option<&[u8]>,
    out: &mut Vec<u8>,
) -> Result<usize, SnapshotError> {
    encode_parts(Some(slice), mme, out)
}

/// [`encode`] of a snapshot with either section or both (not neither).
pub fn encode_parts(
    slice: Option<&UeSliceSnapshot>,
    mme: Option<&[u8]>,
    out: &mut Vec<u8>,
) -> Result<usize, SnapshotError> {
    encode_sections(slice, mme, None, out)
}

/// [`encode_parts`] with the MME's PCC section, if the UE has policy state.
pub fn encode_sections(
    slice: Option<&UeSliceSnapshot>,
    mme: Option<&[u8]>,
    pcc: Option<&[u8]>,
    out: &mut Vec<u8>,
) -> Result<usize, SnapshotError> {
    if let Some(p) = pcc {
        if p.len() > MAX_PCC_SECTION {
            return Err(SnapshotError::TooLong {
                what: "PCC section",
                len: p.len(),
                max: MAX_PCC_SECTION,
            });
        }
    }
    if let Some(s) = slice {
        s.validate()?;
    } else if mme.is_none() {
        return Err(SnapshotError::MissingSection("slice"));
    }
    if let Some(m) = mme {
        if m.len() > MAX_MME_SECTION {
            return Err(SnapshotError::TooLong {
                what: "MME section",
                len: m.len(),
                max: MAX_MME_SECTION,
            });
        }
    }
    let start = out.len();
    out.reserve(160 + mme.map_or(0, |m| m.len() + 3));
    let mut w = Writer(out);
    w.bytes(&MAGIC);
    w.u8(VERSION);
    w.u16(0); // body length, patched below
    if let Some(slice) = slice {
        w.u8(TAG_SLICE);
        let len_at = w.0.len();
        w.u16(0);
        slice.write_body(&mut w);
        let slice_len = w.0.len() - len_at - 2;
        w.0[len_at..len_at + 2].copy_from_slice(&(slice_len as u16).to_le_bytes());
    }
    if let Some(m) = mme {
        w.u8(TAG_MME);
        w.u16(m.len() as u16);
        w.bytes(m);
    }
    if let Some(p) = pcc {
        w.u8(TAG_PCC);
        w.u16(p.len() as u16);
        w.bytes(p);
    }
    let body_len = out.len() - start - HEADER;
    if body_len > MAX_BODY {
        out.truncate(start);
        return Err(SnapshotError::TooLong {
            what: "snapshot body",
            len: body_len,
            max: MAX_BODY,
        });
    }
    out[start + 3..start + 5].copy_from_slice(&(body_len as u16).to_le_bytes());
    let c = check(&out[start..]);
    out.extend_from_slice(&c.to_le_bytes());
    Ok(out.len() - start)
}

/// Parse and decode a whole snapshot.
pub fn decode(buf: &[u8]) -> Result<(UeSliceSnapshot, Option<MmeSection<'_>>), SnapshotError> {
    let v = SnapshotView::parse(buf)?;
    Ok((v.decode_slice()?, v.mme()))
}

/// The container's check: not cryptographic, it catches truncation the lengths missed
/// and corruption in storage or transit. Each 8-byte word goes through a bijective
/// mix, so any change confined to one word always changes the 64-bit state.
fn check(bytes: &[u8]) -> u32 {
    #[inline(always)]
    fn mix(x: u64) -> u64 {
        let x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^ (x >> 29)
    }
    let mut h = 0x243F_6A88_85A3_08D3u64 ^ bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        h = mix(h ^ u64::from_le_bytes(a));
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut a = [0u8; 8];
        a[..rest.len()].copy_from_slice(rest);
        h = mix(h ^ u64::from_le_bytes(a));
    }
    let h = mix(h);
    (h ^ (h >> 32)) as u32
}

/// Little-endian fields and LEB128 varints appended to a buffer: the byte coding of
/// every snapshot section (the MME's too).
pub struct Writer<'a>(pub &'a mut Vec<u8>);

impl Writer<'_> {
    #[inline(always)]
    pub fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    #[inline(always)]
    pub fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    #[inline(always)]
    pub fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    #[inline(always)]
    pub fn bytes(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }
    #[inline(always)]
    pub fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
}

/// The reading side of [`Writer`]: bounded, every error typed, never a panic.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    #[inline(always)]
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], SnapshotError> {
        match self.buf.get(self.pos..self.pos.saturating_add(n)) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(SnapshotError::Truncated {
                need: self.pos.saturating_add(n),
                have: self.buf.len(),
            }),
        }
    }

    #[inline(always)]
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], SnapshotError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    #[inline(always)]
    pub fn u8(&mut self) -> Result<u8, SnapshotError> {
        Ok(self.array::<1>()?[0])
    }

    #[inline(always)]
    pub fn u16(&mut self) -> Result<u16, SnapshotError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    #[inline(always)]
    pub fn u32(&mut self) -> Result<u32, SnapshotError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// LEB128, at most 10 bytes, no bits beyond 64, no redundant trailing zero byte
    /// (so each value has one encoding).
    #[inline]
    pub fn varint(&mut self) -> Result<u64, SnapshotError> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.u8()?;
            if i == 9 && b > 1 {
                return Err(SnapshotError::Invalid("varint beyond 64 bits"));
            }
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                if b == 0 && i > 0 {
                    return Err(SnapshotError::Invalid("varint not minimal"));
                }
                return Ok(v);
            }
        }
        Err(SnapshotError::Invalid("varint longer than 10 bytes"))
    }

    pub fn varint_u32(&mut self) -> Result<u32, SnapshotError> {
        u32::try_from(self.varint()?).map_err(|_| SnapshotError::Invalid("varint beyond 32 bits"))
    }

    pub fn varint_u16(&mut self) -> Result<u16, SnapshotError> {
        u16::try_from(self.varint()?).map_err(|_| SnapshotError::Invalid("varint beyond 16 bits"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_bad_forms() {
        let mut out = Vec::new();
        let vals = [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX];
        for v in vals {
            Writer(&mut out).varint(v);
        }
        let mut r = Reader::new(&out);
        for v in vals {
            assert_eq!(r.varint().unwrap(), v);
        }
        assert_eq!(r.remaining(), 0);
        // Not minimal, 65 bits, 11 bytes, truncated.
        for bad in [
            &[0x80, 0x00][..],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
            &[0x80; 11],
            &[0x80],
        ] {
            assert!(Reader::new(bad).varint().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn check_sees_any_single_byte_change() {
        let buf: Vec<u8> = (0..77u8).collect();
        let c = check(&buf);
        for i in 0..buf.len() {
            let mut b = buf.clone();
            b[i] ^= 0x20;
            assert_ne!(check(&b), c, "byte {i}");
        }
        assert_ne!(check(&buf[..76]), c);
    }

    /// A container around raw sections, sealed with a valid check.
    fn container(sections: &[(u8, &[u8])]) -> Vec<u8> {
        let mut out = vec![MAGIC[0], MAGIC[1], VERSION, 0, 0];
        for (tag, body) in sections {
            out.push(*tag);
            out.extend_from_slice(&(body.len() as u16).to_le_bytes());
            out.extend_from_slice(body);
        }
        let body_len = (out.len() - HEADER) as u16;
        out[3..5].copy_from_slice(&body_len.to_le_bytes());
        let c = check(&out);
        out.extend_from_slice(&c.to_le_bytes());
        out
    }

    #[test]
    fn sections_unknown_duplicate_and_missing() {
        let s = b"slice";
        let c = container(&[(TAG_SLICE, s), (0x90, b"future")]);
        let v = SnapshotView::parse(&c).unwrap();
        assert_eq!(v.slice_section(), s);
        assert!(v.mme().is_none());
        let e = |c: Vec<u8>| SnapshotView::parse(&c).unwrap_err();
        assert_eq!(
            e(container(&[(TAG_SLICE, s), (0x03, b"")])),
            SnapshotError::UnknownSection(3)
        );
        assert_eq!(
            e(container(&[(TAG_SLICE, s), (TAG_SLICE, s)])),
            SnapshotError::DuplicateSection(TAG_SLICE)
        );
        // The MME section alone is a snapshot (a UE the slice holds nothing of yet).
        let m = container(&[(TAG_MME, b"k")]);
        let v = SnapshotView::parse(&m).unwrap();
        assert!(!v.has_slice());
        assert_eq!(
            v.decode_slice().unwrap_err(),
            SnapshotError::MissingSection("slice")
        );
        assert_eq!(
            e(container(&[(0x90, b"future")])),
            SnapshotError::MissingSection("slice")
        );
        assert!(matches!(
            e(container(&[
                (TAG_SLICE, s),
                (TAG_MME, &[0; MAX_MME_SECTION + 1])
            ])),
            SnapshotError::TooLong { .. }
        ));
        // A section header cut short inside the body.
        let mut c = container(&[(TAG_SLICE, s)]);
        c.truncate(c.len() - CHECK);
        c.push(TAG_MME);
        c[3] += 1;
        let chk = check(&c);
        c.extend_from_slice(&chk.to_le_bytes());
        assert!(matches!(e(c), SnapshotError::Truncated { .. }));
    }

    #[test]
    fn mme_section_debug_shows_length_only() {
        let s = MmeSection(&[0xAB; 32]);
        assert_eq!(format!("{s:?}"), "MmeSection { len: 32 }");
    }
}
