//! Plain common types of S1AP messages, and their conversion to and from the bindings.

use crate::enums;
use crate::S1apError;
use oxirush_s1ap::s1ap as raw;
use oxirush_s1ap::{BitString, Bits};
use std::net::Ipv4Addr;

pub use pepc_types::{Arp, Ecgi, Gummei, Plmn, PlmnError, STmsi, Tai};

impl From<PlmnError> for S1apError {
    fn from(e: PlmnError) -> Self {
        S1apError::Invalid(e.0)
    }
}

// The identifier types are pepc-types'; their conversions to and from the bindings
// are these extension traits, one per type (crate-private, like the bindings).

pub(crate) trait PlmnRaw: Sized {
    fn to_raw(self) -> raw::PLMNidentity;
    fn from_raw(p: &raw::PLMNidentity) -> Self;
}

impl PlmnRaw for Plmn {
    fn to_raw(self) -> raw::PLMNidentity {
        raw::PLMNidentity(raw::TBCDSTRING(self.0))
    }
    fn from_raw(p: &raw::PLMNidentity) -> Self {
        Plmn(p.0 .0)
    }
}

pub(crate) trait TaiRaw: Sized {
    fn to_raw(self) -> raw::TAI;
    fn from_raw(t: &raw::TAI) -> Self;
}

impl TaiRaw for Tai {
    fn to_raw(self) -> raw::TAI {
        raw::TAI::new(self.plmn.to_raw(), raw::TAC(self.tac.to_be_bytes()), None)
    }
    fn from_raw(t: &raw::TAI) -> Self {
        Tai {
            plmn: Plmn::from_raw(&t.plmn_identity),
            tac: u16::from_be_bytes(t.tac.0),
        }
    }
}

pub(crate) trait EcgiRaw: Sized {
    fn to_raw(self) -> Result<raw::EUTRANCGI, S1apError>;
    fn from_raw(e: &raw::EUTRANCGI) -> Self;
}

impl EcgiRaw for Ecgi {
    fn to_raw(self) -> Result<raw::EUTRANCGI, S1apError> {
        let bits = Bits::new(self.cell_id.into(), 28).map_err(|_| {
            S1apError::Invalid(format!("cell id {:#x} exceeds 28 bits", self.cell_id))
        })?;
        Ok(raw::EUTRANCGI::new(
            self.plmn.to_raw(),
            raw::CellIdentity(bits),
            None,
        ))
    }
    fn from_raw(e: &raw::EUTRANCGI) -> Self {
        Ecgi {
            plmn: Plmn::from_raw(&e.plmn_identity),
            cell_id: e.cell_id.0.value() as u32,
        }
    }
}

pub(crate) trait STmsiRaw: Sized {
    fn to_raw(self) -> raw::STMSI;
    fn from_raw(s: &raw::STMSI) -> Self;
}

impl STmsiRaw for STmsi {
    fn to_raw(self) -> raw::STMSI {
        raw::STMSI::new(
            raw::MMECode([self.mmec]),
            raw::MTMSI(self.m_tmsi.to_be_bytes()),
            None,
        )
    }
    fn from_raw(s: &raw::STMSI) -> Self {
        STmsi {
            mmec: s.mmec.0[0],
            m_tmsi: u32::from_be_bytes(s.m_tmsi.0),
        }
    }
}

pub(crate) trait GummeiRaw: Sized {
    fn to_raw(self) -> raw::GUMMEI;
    fn from_raw(g: &raw::GUMMEI) -> Self;
}

impl GummeiRaw for Gummei {
    fn to_raw(self) -> raw::GUMMEI {
        raw::GUMMEI::new(
            self.plmn.to_raw(),
            raw::MMEGroupID(self.mme_group_id.to_be_bytes()),
            raw::MMECode([self.mme_code]),
            None,
        )
    }
    fn from_raw(g: &raw::GUMMEI) -> Self {
        Gummei {
            plmn: Plmn::from_raw(&g.plmn_identity),
            mme_group_id: u16::from_be_bytes(g.mme_group_id.0),
            mme_code: g.mme_code.0[0],
        }
    }
}

/// eNB ID by kind (TS 36.413 §9.2.1.37); the value is right-aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EnbId {
    /// 20 bits.
    Macro(u32),
    /// 28 bits.
    Home(u32),
    /// 18 bits.
    ShortMacro(u32),
    /// 21 bits.
    LongMacro(u32),
}

/// Global eNB ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GlobalEnbId {
    pub plmn: Plmn,
    pub enb_id: EnbId,
}

impl GlobalEnbId {
    pub(crate) fn to_raw(self) -> Result<raw::GlobalENBID, S1apError> {
        let b = |v: u32, n: usize| {
            Bits::new(v.into(), n)
                .map_err(|_| S1apError::Invalid(format!("eNB id {v:#x} exceeds {n} bits")))
        };
        let id = match self.enb_id {
            EnbId::Macro(v) => raw::ENBID::macroENB_ID(b(v, 20)?),
            EnbId::Home(v) => raw::ENBID::homeENB_ID(b(v, 28)?),
            EnbId::ShortMacro(v) => raw::ENBID::short_macroENB_ID(b(v, 18)?),
            EnbId::LongMacro(v) => raw::ENBID::long_macroENB_ID(b(v, 21)?),
        };
        Ok(raw::GlobalENBID::new(self.plmn.to_raw(), id, None))
    }
    pub(crate) fn from_raw(g: &raw::GlobalENBID) -> Result<Self, S1apError> {
        let enb_id = match &g.enb_id {
            raw::ENBID::macroENB_ID(b) => EnbId::Macro(b.value() as u32),
            raw::ENBID::homeENB_ID(b) => EnbId::Home(b.value() as u32),
            raw::ENBID::short_macroENB_ID(b) => EnbId::ShortMacro(b.value() as u32),
            raw::ENBID::long_macroENB_ID(b) => EnbId::LongMacro(b.value() as u32),
            _ => {
                return Err(S1apError::InvalidIe {
                    ie: "Global-ENB-ID",
                    reason: "unknown eNB-ID alternative".into(),
                })
            }
        };
        Ok(GlobalEnbId {
            plmn: Plmn::from_raw(&g.plmn_identity),
            enb_id,
        })
    }
}

/// S1AP Cause (TS 36.413 §9.2.1.3): the group and the spec's enumeration value within
/// it. Named constants cover the causes this core uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cause {
    RadioNetwork(u8),
    Transport(u8),
    Nas(u8),
    Protocol(u8),
    Misc(u8),
}

impl Cause {
    pub const RADIO_UNSPECIFIED: Cause = Cause::RadioNetwork(0);
    pub const SUCCESSFUL_HANDOVER: Cause = Cause::RadioNetwork(2);
    pub const RELEASE_DUE_TO_EUTRAN_GENERATED_REASON: Cause = Cause::RadioNetwork(3);
    pub const HANDOVER_CANCELLED: Cause = Cause::RadioNetwork(4);
    pub const HO_FAILURE_IN_TARGET: Cause = Cause::RadioNetwork(6);
    pub const HO_TARGET_NOT_ALLOWED: Cause = Cause::RadioNetwork(7);
    pub const TS1_RELOC_PREP_EXPIRY: Cause = Cause::RadioNetwork(9);
    pub const UNKNOWN_TARGET_ID: Cause = Cause::RadioNetwork(11);
    pub const UNKNOWN_MME_UE_S1AP_ID: Cause = Cause::RadioNetwork(13);
    pub const UNKNOWN_ENB_UE_S1AP_ID: Cause = Cause::RadioNetwork(14);
    pub const UNKNOWN_PAIR_UE_S1AP_ID: Cause = Cause::RadioNetwork(15);
    pub const HANDOVER_DESIRABLE_FOR_RADIO_REASON: Cause = Cause::RadioNetwork(16);
    pub const USER_INACTIVITY: Cause = Cause::RadioNetwork(20);
    pub const RADIO_CONNECTION_WITH_UE_LOST: Cause = Cause::RadioNetwork(21);
    pub const UNKNOWN_E_RAB_ID: Cause = Cause::RadioNetwork(30);
    pub const TRANSPORT_RESOURCE_UNAVAILABLE: Cause = Cause::Transport(0);
    pub const NAS_NORMAL_RELEASE: Cause = Cause::Nas(0);
    pub const NAS_AUTHENTICATION_FAILURE: Cause = Cause::Nas(1);
    pub const NAS_DETACH: Cause = Cause::Nas(2);
    pub const NAS_UNSPECIFIED: Cause = Cause::Nas(3);
    pub const TRANSFER_SYNTAX_ERROR: Cause = Cause::Protocol(0);
    pub const ABSTRACT_SYNTAX_ERROR_REJECT: Cause = Cause::Protocol(1);
    pub const MESSAGE_NOT_COMPATIBLE_WITH_RECEIVER_STATE: Cause = Cause::Protocol(3);
    pub const SEMANTIC_ERROR: Cause = Cause::Protocol(4);
    pub const PROTOCOL_UNSPECIFIED: Cause = Cause::Protocol(6);
    pub const CONTROL_PROCESSING_OVERLOAD: Cause = Cause::Misc(0);
    pub const HARDWARE_FAILURE: Cause = Cause::Misc(2);
    pub const OM_INTERVENTION: Cause = Cause::Misc(3);
    pub const MISC_UNSPECIFIED: Cause = Cause::Misc(4);
    pub const UNKNOWN_PLMN: Cause = Cause::Misc(5);

    pub(crate) fn to_raw(self) -> Result<raw::Cause, S1apError> {
        let bad = |g: &str, v: u8| S1apError::Invalid(format!("no {g} cause {v}"));
        Ok(match self {
            Cause::RadioNetwork(v) => raw::Cause::radioNetwork(
                enums::cause_radio_network_from(v).ok_or_else(|| bad("radio network", v))?,
            ),
            Cause::Transport(v) => raw::Cause::transport(
                enums::cause_transport_from(v).ok_or_else(|| bad("transport", v))?,
            ),
            Cause::Nas(v) => {
                raw::Cause::nas(enums::cause_nas_from(v).ok_or_else(|| bad("NAS", v))?)
            }
            Cause::Protocol(v) => raw::Cause::protocol(
                enums::cause_protocol_from(v).ok_or_else(|| bad("protocol", v))?,
            ),
            Cause::Misc(v) => {
                raw::Cause::misc(enums::cause_misc_from(v).ok_or_else(|| bad("misc", v))?)
            }
        })
    }
    pub(crate) fn from_raw(c: &raw::Cause) -> Result<Self, S1apError> {
        Ok(match *c {
            raw::Cause::radioNetwork(v) => Cause::RadioNetwork(enums::cause_radio_network_to(v)),
            raw::Cause::transport(v) => Cause::Transport(enums::cause_transport_to(v)),
            raw::Cause::nas(v) => Cause::Nas(enums::cause_nas_to(v)),
            raw::Cause::protocol(v) => Cause::Protocol(enums::cause_protocol_to(v)),
            raw::Cause::misc(v) => Cause::Misc(enums::cause_misc_to(v)),
            _ => {
                return Err(S1apError::InvalidIe {
                    ie: "Cause",
                    reason: "unknown cause group".into(),
                })
            }
        })
    }
}

/// GBR QoS information, bit/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GbrQos {
    pub mbr_dl: u64,
    pub mbr_ul: u64,
    pub gbr_dl: u64,
    pub gbr_ul: u64,
}

/// E-RAB level QoS parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ERabQos {
    pub qci: u8,
    pub arp: Arp,
    pub gbr: Option<GbrQos>,
}

pub(crate) fn qos_to_raw(qci: u8, arp: Arp, gbr: Option<GbrQos>) -> raw::ERABLevelQoSParameters {
    let cap = if arp.pre_emption_capability {
        raw::PreEmptionCapability::may_trigger_pre_emption
    } else {
        raw::PreEmptionCapability::shall_not_trigger_pre_emption
    };
    let vul = if arp.pre_emption_vulnerability {
        raw::PreEmptionVulnerability::pre_emptable
    } else {
        raw::PreEmptionVulnerability::not_pre_emptable
    };
    let arp = raw::AllocationAndRetentionPriority::new(
        raw::PriorityLevel(arp.priority_level),
        cap,
        vul,
        None,
    );
    let gbr = gbr.map(|g| {
        raw::GBRQosInformation::new(
            raw::BitRate(g.mbr_dl),
            raw::BitRate(g.mbr_ul),
            raw::BitRate(g.gbr_dl),
            raw::BitRate(g.gbr_ul),
            None,
        )
    });
    raw::ERABLevelQoSParameters::new(raw::QCI(qci), arp, gbr, None)
}

pub(crate) fn qos_from_raw(q: &raw::ERABLevelQoSParameters) -> ERabQos {
    let a = &q.allocation_retention_priority;
    ERabQos {
        qci: q.qci.0,
        arp: Arp {
            priority_level: a.priority_level.0,
            pre_emption_capability: enums::pre_emption_capability_to(a.pre_emption_capability) == 1,
            pre_emption_vulnerability: enums::pre_emption_vulnerability_to(
                a.pre_emption_vulnerability,
            ) == 1,
        },
        gbr: q.gbr_qos_information.as_ref().map(|g| GbrQos {
            mbr_dl: g.e_rab_maximum_bitrate_dl.0,
            mbr_ul: g.e_rab_maximum_bitrate_ul.0,
            gbr_dl: g.e_rab_guaranteed_bitrate_dl.0,
            gbr_ul: g.e_rab_guaranteed_bitrate_ul.0,
        }),
    }
}

/// An E-RAB to be set up (Initial Context Setup, E-RAB Setup, Handover Request).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ERab {
    pub id: u8,
    pub qci: u8,
    pub arp: Arp,
    pub gbr: Option<GbrQos>,
    /// S-GW S1-U address (uplink tunnel endpoint).
    pub transport: Ipv4Addr,
    /// S-GW S1-U TEID.
    pub teid: u32,
    pub nas_pdu: Option<Vec<u8>>,
}

/// An E-RAB and a GTP tunnel endpoint (setup results, path switch lists).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ERabTunnel {
    pub id: u8,
    pub transport: Ipv4Addr,
    pub teid: u32,
}

/// An E-RAB with a cause (failed / to-release lists).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ERabCause {
    pub id: u8,
    pub cause: Cause,
}

/// An E-RAB to be modified.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ERabModify {
    pub id: u8,
    pub qci: u8,
    pub arp: Arp,
    pub gbr: Option<GbrQos>,
    pub nas_pdu: Vec<u8>,
}

/// Data forwarding tunnels of one E-RAB in a handover.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ERabForwarding {
    pub id: u8,
    pub dl: Option<(Ipv4Addr, u32)>,
    pub ul: Option<(Ipv4Addr, u32)>,
}

/// An E-RAB admitted by the target eNB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ERabAdmitted {
    pub id: u8,
    pub transport: Ipv4Addr,
    pub teid: u32,
    pub dl_forwarding: Option<(Ipv4Addr, u32)>,
    pub ul_forwarding: Option<(Ipv4Addr, u32)>,
}

/// UE aggregate maximum bit rate, bit/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Ambr {
    pub dl: u64,
    pub ul: u64,
}

impl Ambr {
    pub(crate) fn to_raw(self) -> raw::UEAggregateMaximumBitrate {
        raw::UEAggregateMaximumBitrate::new(raw::BitRate(self.dl), raw::BitRate(self.ul), None)
    }
    pub(crate) fn from_raw(a: &raw::UEAggregateMaximumBitrate) -> Self {
        Ambr {
            dl: a.ue_aggregate_maximum_bit_rate_dl.0,
            ul: a.ue_aggregate_maximum_bit_rate_ul.0,
        }
    }
}

/// UE security capabilities as S1AP carries them (TS 36.413 §9.2.1.40): 16-bit bitmaps
/// whose most significant bit is 128-EEA1 / 128-EIA1 (EEA0/EIA0 are implicit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct UeSecurityCapabilities {
    pub eea: u16,
    pub eia: u16,
}

impl UeSecurityCapabilities {
    pub(crate) fn to_raw(self) -> raw::UESecurityCapabilities<'static> {
        raw::UESecurityCapabilities::new(
            raw::EncryptionAlgorithms(BitString::from(self.eea.to_be_bytes())),
            raw::IntegrityProtectionAlgorithms(BitString::from(self.eia.to_be_bytes())),
            None,
        )
    }
    pub(crate) fn from_raw(c: &raw::UESecurityCapabilities<'_>) -> Self {
        let w = |b: &BitString<'_>| {
            let o = b.as_octets();
            u16::from_be_bytes([
                o.first().copied().unwrap_or(0),
                o.get(1).copied().unwrap_or(0),
            ])
        };
        UeSecurityCapabilities {
            eea: w(&c.encryption_algorithms.0),
            eia: w(&c.integrity_protection_algorithms.0),
        }
    }
}

/// A 256-bit key (KeNB, NH). Debug never shows it.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Key256(pub [u8; 32]);

impl core::fmt::Debug for Key256 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Key256(<redacted>)")
    }
}

impl Key256 {
    pub(crate) fn to_raw(&self) -> raw::SecurityKey<'static> {
        raw::SecurityKey(BitString::from(self.0))
    }
    pub(crate) fn from_raw(k: &raw::SecurityKey<'_>) -> Result<Self, S1apError> {
        let o = k.0.as_octets();
        if k.0.len() != 256 || o.len() != 32 {
            return Err(S1apError::InvalidIe {
                ie: "SecurityKey",
                reason: format!("{} bits, not 256", k.0.len()),
            });
        }
        let mut a = [0u8; 32];
        a.copy_from_slice(o);
        Ok(Key256(a))
    }
}

/// Security Context IE of handover / path switch: NCC and Next Hop.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct SecurityContext {
    pub ncc: u8,
    pub next_hop: Key256,
}

impl SecurityContext {
    pub(crate) fn to_raw(&self) -> raw::SecurityContext<'static> {
        raw::SecurityContext::new(self.ncc, self.next_hop.to_raw(), None)
    }
    pub(crate) fn from_raw(s: &raw::SecurityContext<'_>) -> Result<Self, S1apError> {
        Ok(SecurityContext {
            ncc: s.next_hop_chaining_count,
            next_hop: Key256::from_raw(&s.next_hop_parameter)?,
        })
    }
}

/// UE-S1AP-IDs of UE Context Release Command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UeS1apIds {
    Pair { mme_ue_id: u32, enb_ue_id: u32 },
    MmeOnly(u32),
}

/// UE paging identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PagingIdentity {
    STmsi(STmsi),
    /// IMSI as TBCD octets (TS 36.413 §9.2.3.11).
    Imsi(Vec<u8>),
}

/// Target ID of Handover Required.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TargetId {
    Enb {
        global_enb_id: GlobalEnbId,
        tai: Tai,
    },
    /// Another RAT's target, kept as its APER encoding (the MME does not handle these).
    Other(Vec<u8>),
}

/// One UE-associated logical S1 connection (Reset, Reset Acknowledge).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct UeConnection {
    pub mme_ue_id: Option<u32>,
    pub enb_ue_id: Option<u32>,
}

/// What a Reset resets.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ResetKind {
    All,
    Partial(Vec<UeConnection>),
}

/// A tracking area an eNB supports (S1 Setup Request).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SupportedTa {
    pub tac: u16,
    pub plmns: Vec<Plmn>,
}

/// One Served GUMMEIs item (S1 Setup Response).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServedGummei {
    pub plmns: Vec<Plmn>,
    pub group_ids: Vec<u16>,
    pub codes: Vec<u8>,
}

/// CN domain of Paging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CnDomain {
    Ps,
    Cs,
}

/// IPv4 GTP endpoint from a TransportLayerAddress: 32 bits, or the IPv4 part of a
/// 160-bit IPv4+IPv6 address (TS 36.414 §5.1).
pub(crate) fn addr_from_raw(
    a: &raw::TransportLayerAddress<'_>,
    ie: &'static str,
) -> Result<Ipv4Addr, S1apError> {
    let o = a.0.as_octets();
    match a.0.len() {
        32 | 160 => Ok(Ipv4Addr::new(o[0], o[1], o[2], o[3])),
        n => Err(S1apError::InvalidIe {
            ie,
            reason: format!("transport layer address of {n} bits is not IPv4"),
        }),
    }
}

pub(crate) fn addr_to_raw(a: Ipv4Addr) -> raw::TransportLayerAddress<'static> {
    raw::TransportLayerAddress(BitString::from(a.octets()))
}

pub(crate) fn erab_id(v: u64, ie: &'static str) -> Result<u8, S1apError> {
    if v > 15 {
        return Err(S1apError::InvalidIe {
            ie,
            reason: format!("E-RAB ID {v} beyond 15"),
        });
    }
    Ok(v as u8)
}
