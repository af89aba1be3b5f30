//! The UE context, split as in PEPC Table 1.
//!
//! * **Control state**: the signaling part (the MME's: EMM/ECM, security, location,
//!   GUTI, procedures; see [`crate::control`]) and the data-path part ([`UeContext`],
//!   [`BearerContext`]): identity, bearers, UE address, AMBR, PCEF rules. Written only by the slice's control thread, which
//!   owns it outright (the *secondary* table holds every UE). The data thread never
//!   reads it in place: the control thread *publishes* the part the data path needs as
//!   immutable, versioned records ([`DpUeRecord`], [`DpBearerRecord`]) through the
//!   update ring, and the data thread installs them between packet batches. So the
//!   per-packet path reads only memory its own thread owns: no lock, no seqlock retry,
//!   no shared cache line bouncing with signaling (see the benchmark's `rwlock` design
//!   for the alternative the paper used).
//! * **Counter state** ([`crate::counters`]): packets/bytes per bearer and per rule,
//!   drops by reason. Written only by the data thread, read by the control thread.

use crate::ids::MAX_PDNS;
use std::net::Ipv4Addr;

/// Highest EPS bearer identity + 1; EBIs 5..=15 are valid (TS 24.301 §9.3.2).
pub const MAX_BEARERS: usize = 11;
pub const FIRST_EBI: u8 = 5;
/// "No slot" marker in published records.
pub const NO_SLOT: u32 = u32::MAX;

// Identifiers and the ARP are pepc-types', the very values the S1AP/NAS codecs decode.
pub use pepc_types::{Arp, Ecgi, Guti, Plmn, Tai};

/// One EPS bearer as the control thread knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BearerContext {
    pub ebi: u8,
    pub qci: u8,
    pub arp: Arp,
    /// Bit rates in bits/s; GBR/MBR only for GBR bearers (QCI 1-4), 0 otherwise.
    pub mbr_ul: u64,
    pub mbr_dl: u64,
    pub gbr_ul: u64,
    pub gbr_dl: u64,
    /// Our S1-U TEID (uplink) and its bearer slot.
    pub slot: u32,
    pub teid_ul: u32,
    /// The eNB's S1-U tunnel (downlink); 0/unspecified while the UE is idle.
    pub enb_teid: u32,
    pub enb_addr: Ipv4Addr,
    /// Default charging key (rating group) for the bearer's traffic.
    pub charging_key: u32,
    /// PDN index ([`crate::ids`] address pool) of the PDN connection it belongs to.
    pub pdn: u8,
}

/// One PDN connection: an address from PDN pool `index` and a default bearer; the
/// bearers with `pdn == index` belong to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdnContext {
    pub index: u8,
    pub apn: String,
    pub ip: Ipv4Addr,
    pub default_ebi: u8,
}

/// Device classes with their own pipelines (PEPC §4.2 customization).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceClass {
    #[default]
    Normal,
    /// Single application, best effort: identifiers from a pre-assigned pool, no per-UE
    /// lookup on the data path, only policy and aggregate charging.
    StatelessIot,
}

/// ECM state: whether the UE has an S1 connection (and so a downlink tunnel).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EcmState {
    #[default]
    Idle,
    Connected,
}

/// All control state of one UE. Owned and written only by the slice's control thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UeContext {
    pub imsi: u64,
    pub class: DeviceClass,
    pub ecm: EcmState,
    pub ue_slot: u32,
    /// Address of the first PDN connection (`pdns[0]`).
    pub ue_ip: Ipv4Addr,
    /// UE-AMBR (bits/s).
    pub ambr_ul: u64,
    pub ambr_dl: u64,
    /// The PCEF rule set applied to this UE's traffic.
    pub rule_set: u16,
    /// Default bearer of the first PDN connection (`pdns[0]`).
    pub default_ebi: u8,
    /// PDN connections, oldest first (never empty while the UE exists).
    pub pdns: Vec<PdnContext>,
    pub bearers: Vec<BearerContext>,
    /// Bumped on every change published to the data thread.
    pub version: u32,
    /// In the data thread's primary table right now?
    pub in_primary: bool,
}

impl UeContext {
    pub fn bearer(&self, ebi: u8) -> Option<&BearerContext> {
        self.bearers.iter().find(|b| b.ebi == ebi)
    }

    pub fn bearer_mut(&mut self, ebi: u8) -> Option<&mut BearerContext> {
        self.bearers.iter_mut().find(|b| b.ebi == ebi)
    }

    /// The PDN connection whose default bearer is `default_ebi`.
    pub fn pdn_by_default_ebi(&self, default_ebi: u8) -> Option<&PdnContext> {
        self.pdns.iter().find(|p| p.default_ebi == default_ebi)
    }

    /// The PDN connection bearer `ebi` belongs to.
    pub fn pdn_of_bearer(&self, ebi: u8) -> Option<&PdnContext> {
        let b = self.bearer(ebi)?;
        self.pdns.iter().find(|p| p.index == b.pdn)
    }

    /// Bitmask of the PDN indexes in use (bit k: PDN pool k).
    pub fn pdn_mask(&self) -> u8 {
        self.pdns.iter().fold(0, |m, p| m | (1 << p.index))
    }

    /// The projection of this UE the data path needs.
    pub fn dp_record(&self) -> DpUeRecord {
        let mut bearers = [NO_SLOT; MAX_BEARERS];
        let mut bearer_pdn = [0u8; MAX_BEARERS];
        for b in &self.bearers {
            if let Some(i) = (b.ebi as usize).checked_sub(FIRST_EBI as usize) {
                if i < MAX_BEARERS {
                    bearers[i] = b.slot;
                    bearer_pdn[i] = b.pdn;
                }
            }
        }
        let mut ips = [0u32; MAX_PDNS];
        let mut default_ebis = [0u8; MAX_PDNS];
        for p in &self.pdns {
            if (p.index as usize) < MAX_PDNS {
                ips[p.index as usize] = u32::from(p.ip);
                default_ebis[p.index as usize] = p.default_ebi;
            }
        }
        DpUeRecord {
            ips,
            ue_slot: self.ue_slot,
            ambr_ul: self.ambr_ul,
            ambr_dl: self.ambr_dl,
            rule_set: self.rule_set,
            default_ebis,
            bearers,
            bearer_pdn,
            version: self.version,
        }
    }

    pub fn dp_bearer(&self, b: &BearerContext) -> DpBearerRecord {
        DpBearerRecord {
            teid_ul: b.teid_ul,
            enb_teid: b.enb_teid,
            enb_addr: u32::from(b.enb_addr),
            ue_slot: self.ue_slot,
            ue_ip: self
                .pdns
                .iter()
                .find(|p| p.index == b.pdn)
                .map_or(0, |p| u32::from(p.ip)),
            ebi: b.ebi,
            pdn: b.pdn,
            qci: b.qci,
            mbr_ul: b.mbr_ul,
            mbr_dl: b.mbr_dl,
            gbr_ul: b.gbr_ul,
            gbr_dl: b.gbr_dl,
            charging_key: b.charging_key,
            version: self.version,
        }
    }
}

/// What the data path needs of a UE (published by the control thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DpUeRecord {
    /// Address per PDN index, 0 where the UE has no PDN connection in that pool.
    pub ips: [u32; MAX_PDNS],
    pub ue_slot: u32,
    pub ambr_ul: u64,
    pub ambr_dl: u64,
    pub rule_set: u16,
    /// Default EBI per PDN index (0 where none).
    pub default_ebis: [u8; MAX_PDNS],
    /// Bearer slot per EBI (index ebi-5), [`NO_SLOT`] where absent.
    pub bearers: [u32; MAX_BEARERS],
    /// PDN index per EBI (index ebi-5): downlink bearer binding stays inside the PDN
    /// the destination address belongs to.
    pub bearer_pdn: [u8; MAX_BEARERS],
    pub version: u32,
}

impl DpUeRecord {
    #[inline]
    pub fn bearer_slot(&self, ebi: u8) -> u32 {
        match (ebi as usize).checked_sub(FIRST_EBI as usize) {
            Some(i) if i < MAX_BEARERS => self.bearers[i],
            _ => NO_SLOT,
        }
    }

    /// Bearer slot for `ebi` if it belongs to PDN `pdn`, else [`NO_SLOT`].
    #[inline]
    pub fn bearer_slot_in(&self, pdn: usize, ebi: u8) -> u32 {
        match (ebi as usize).checked_sub(FIRST_EBI as usize) {
            Some(i) if i < MAX_BEARERS && self.bearer_pdn[i] as usize == pdn => self.bearers[i],
            _ => NO_SLOT,
        }
    }

    /// Default bearer slot of PDN `pdn` ([`NO_SLOT`] if none).
    #[inline]
    pub fn default_slot(&self, pdn: usize) -> u32 {
        match self.default_ebis.get(pdn) {
            Some(&e) if e != 0 => self.bearer_slot(e),
            _ => NO_SLOT,
        }
    }

    /// Address of the first PDN in pool order (0 if none).
    pub fn first_ip(&self) -> u32 {
        self.ips.iter().copied().find(|a| *a != 0).unwrap_or(0)
    }
}

/// What the data path needs of a bearer (published by the control thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DpBearerRecord {
    pub teid_ul: u32,
    pub enb_teid: u32,
    pub enb_addr: u32,
    pub ue_slot: u32,
    /// Address of the bearer's PDN connection (the uplink's only valid source).
    pub ue_ip: u32,
    pub ebi: u8,
    /// PDN index of the bearer's PDN connection (its source address on the uplink).
    pub pdn: u8,
    pub qci: u8,
    pub mbr_ul: u64,
    pub mbr_dl: u64,
    /// GBR in bit/s (0: non-GBR), for the egress scheduler.
    pub gbr_ul: u64,
    pub gbr_dl: u64,
    pub charging_key: u32,
    pub version: u32,
}
