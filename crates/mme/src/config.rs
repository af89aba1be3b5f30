//! MME configuration.

use pepc_s1ap::Plmn;
use pepc_security::{Eea, Eia};
use std::net::Ipv4Addr;
use std::time::Duration;

/// MME configuration. [`Default`] gives a test network: PLMN 001/01, MME group 1,
/// MME code 1, TAC 1, EEA2/EEA1/EEA0 and EIA2/EIA1, T3412 54 min, 6 s NAS timers.
#[derive(Debug, Clone)]
pub struct MmeConfig {
    pub plmn: Plmn,
    pub mme_group_id: u16,
    pub mme_code: u8,
    pub mme_name: Option<String>,
    pub relative_capacity: u8,
    /// TACs served in `plmn`; also the TAI list handed to UEs.
    pub served_tacs: Vec<u16>,
    /// Ciphering algorithms by preference (the first one the UE supports wins).
    pub eea_preference: Vec<Eea>,
    /// Integrity algorithms by preference. EIA0 is never selected for normal service.
    pub eia_preference: Vec<Eia>,
    /// Periodic TAU timer given to UEs.
    pub t3412: Duration,
    /// Attach Accept / GUTI Reallocation / TAU Accept retransmission (TS 24.301: 6 s).
    pub t3450: Duration,
    /// Authentication / Security Mode Command retransmission (6 s).
    pub t3460: Duration,
    /// Identity Request retransmission (6 s).
    pub t3470: Duration,
    /// Network-initiated Detach Request retransmission (6 s).
    pub t3422: Duration,
    /// Paging response supervision (operator choice; 2 s here).
    pub t3413: Duration,
    /// Paging attempts before paging is declared failed.
    pub paging_attempts: u32,
    /// Mobile reachable timer after release (T3412 + 4 min by default); implicit
    /// detach follows its expiry.
    pub mobile_reachable: Duration,
    /// Ask the UE for its APN/PCO (ESM Information Request) even when it does not flag it.
    pub esm_info_request: bool,
    /// APN used when neither the UE nor the subscription gives one.
    pub default_apn: String,
    /// Our S1-U address, given in E-RAB setups.
    pub s1u_addr: Ipv4Addr,
    /// Network name sent in EMM Information after attach (None: no EMM Information).
    pub network_name: Option<String>,
    /// APN-AMBR given to UEs (bit/s) when the subscription has no UE-AMBR.
    pub default_ambr: (u64, u64),
    /// APNs every subscriber may open an additional PDN connection to besides the
    /// subscribed one (the HSS profile holds a single APN). Compared case-insensitively;
    /// other APNs get PDN Connectivity Reject #27. "ims" gets a QCI 5 default bearer,
    /// the others the subscribed QCI.
    pub extra_apns: Vec<String>,
    /// QCIs a UE may ask for in Bearer Resource Allocation Request (TS 24.301 §6.5.3);
    /// others get Bearer Resource Allocation Reject #30 (refused by the P-GW policy).
    pub ue_requested_qcis: Vec<u8>,
    /// Security contexts of detached UEs kept for a GUTI re-attach without identity
    /// and AKA (0 keeps none); the oldest is evicted at the bound.
    pub parked_contexts: usize,
    /// How long a detached UE's security context is kept.
    pub parked_context_ttl: Duration,
    /// How long a procedure waits for each HSS answer (subscription data, a vector)
    /// before it gives up: the attach is rejected with #17 (network failure, which
    /// the UE retries) and its context freed. 5 s by default: a Diameter S6a answer
    /// comes well within it, and with the two requests of an attach the reject still
    /// reaches the UE before its T3410 (15 s) expires.
    pub hss_timeout: Duration,
    /// How long a UE Context Release Command waits for its Release Complete before the
    /// context is released locally (TS 36.413 names no timer; an eNB that never
    /// answers must not keep contexts alive).
    pub release_guard: Duration,
    /// How long a context may stay without a security context (an attach that never
    /// authenticates, a first message that led nowhere) before it is released. Above
    /// the NAS timers' own end (5 x T3460 = 30 s) and the HSS timeout.
    pub unauth_context_ttl: Duration,
    /// Contexts without a security context at once, per slice and per eNB: beyond,
    /// a new UE's first message is refused (Error Indication, control processing
    /// overload) and counted. High enough for an attach storm (each such context
    /// takes ~840 B: 65,536 of them ~55 MB), low enough that no peer can grow the
    /// MME's memory without bound.
    pub max_unauth_contexts: usize,
    pub max_unauth_per_enb: usize,
    /// Purge the subscriber at the HSS (S6a PUR) at once after a UE-initiated detach.
    /// Off by default: the Purge UE goes when the context is deleted (TS 29.272
    /// §5.2.1.3), which for a detached UE is when its parked security context expires
    /// or is evicted without a re-attach taking it back.
    pub purge_on_detach: bool,
    /// Emit [`crate::Output::Checkpoint`] with a registered UE's snapshot at the end of
    /// each of its procedures (and [`crate::Output::Forget`] when it goes), for the
    /// node's state store: a restarted node then loses no registered UE.
    pub checkpoints: bool,
    /// Overload control: backlog bounds, T3346, the action asked of eNBs.
    pub overload: crate::overload::OverloadConfig,
    /// The PCRF: whether it is asked, its timeout and Failure-Handling, usage
    /// monitoring and interim records.
    pub policy: crate::pcrf::PolicyConfig,
}

impl Default for MmeConfig {
    fn default() -> Self {
        let t3412 = Duration::from_secs(54 * 60);
        MmeConfig {
            plmn: Plmn([0x00, 0xf1, 0x10]),
            mme_group_id: 1,
            mme_code: 1,
            mme_name: Some("pepc".into()),
            relative_capacity: 255,
            served_tacs: vec![1],
            eea_preference: vec![Eea::Eea2, Eea::Eea1, Eea::Eea0],
            eia_preference: vec![Eia::Eia2, Eia::Eia1],
            t3412,
            t3450: Duration::from_secs(6),
            t3460: Duration::from_secs(6),
            t3470: Duration::from_secs(6),
            t3422: Duration::from_secs(6),
            t3413: Duration::from_secs(2),
            paging_attempts: 3,
            mobile_reachable: t3412 + Duration::from_secs(240),
            esm_info_request: false,
            default_apn: "internet".into(),
            s1u_addr: Ipv4Addr::LOCALHOST,
            network_name: Some("pepc".into()),
            default_ambr: (100_000_000, 100_000_000),
            extra_apns: vec!["ims".into()],
            ue_requested_qcis: (1..=9).collect(),
            parked_contexts: 65_536,
            parked_context_ttl: Duration::from_secs(3600),
            hss_timeout: Duration::from_secs(5),
            release_guard: Duration::from_secs(10),
            unauth_context_ttl: Duration::from_secs(45),
            max_unauth_contexts: 262_144,
            max_unauth_per_enb: 65_536,
            purge_on_detach: false,
            checkpoints: false,
            overload: crate::overload::OverloadConfig::default(),
            policy: crate::pcrf::PolicyConfig::default(),
        }
    }
}
