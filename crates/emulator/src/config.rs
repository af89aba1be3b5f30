//! Emulator configuration (where the EPC is, who the subscribers are) and scenarios
//! (what the UEs do), the latter parsed from TOML.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Which S1-MME transport the eNBs use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SctpMode {
    /// Userspace SCTP over UDP (RFC 6951), works without kernel support.
    #[default]
    Udp,
    /// Kernel SCTP.
    Kernel,
}

/// Subscriber keys: IMSIs `imsi_start..imsi_start+ues` share K/OPc/AMF (as test HSSs
/// provision them). Debug hides K and OPc.
#[derive(Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct SubscriberKeys {
    /// First IMSI (15 digits).
    pub imsi_start: String,
    /// K, 32 hex digits.
    pub k: String,
    /// OPc, 32 hex digits.
    pub opc: String,
    /// AMF, 4 hex digits (informative: the HSS chooses the AMF in vectors).
    pub amf: String,
    /// Initial SQN_MS of the USIMs (0 accepts any first SQN).
    pub sqn_ms: u64,
}

impl Default for SubscriberKeys {
    fn default() -> Self {
        SubscriberKeys {
            imsi_start: "001010000000001".into(),
            k: "465B5CE8B199B49FAA5F0A2EE238A6BC".into(),
            opc: "E8ED289DEBA952E4283B54E88E6183CA".into(),
            amf: "8000".into(),
            sqn_ms: 0,
        }
    }
}

impl std::fmt::Debug for SubscriberKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubscriberKeys")
            .field("imsi_start", &self.imsi_start)
            .field("amf", &self.amf)
            .finish_non_exhaustive()
    }
}

impl SubscriberKeys {
    /// IMSI number `i` (0-based) of the range, keeping the leading zeros.
    pub fn imsi(&self, i: u32) -> Option<String> {
        let width = self.imsi_start.len();
        let start: u64 = self.imsi_start.parse().ok()?;
        let s = format!("{:0width$}", start + u64::from(i));
        (s.len() == width).then_some(s)
    }
}

/// Where the EPC is and how the emulated RAN presents itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct EmulatorConfig {
    /// EPC S1-MME IP address.
    pub mme_ip: IpAddr,
    /// UDP port of the MME's SCTP-over-UDP endpoint (RFC 6951 default 9899).
    pub mme_udp_port: u16,
    /// SCTP port of the MME (36412).
    pub mme_sctp_port: u16,
    pub sctp: SctpMode,
    /// Local address the S1-MME side binds.
    pub local_ip: IpAddr,
    /// eNB S1-U endpoint (all emulated eNBs share it; TEIDs demultiplex).
    pub gtpu_addr: SocketAddrV4,
    /// PDN side: the address the EPC's SGi UDP sink sends uplink IP packets to.
    pub pdn_addr: SocketAddr,
    /// The EPC's SGi sink-local address, where downlink IP packets go; `None` = learn
    /// it from the source of the first uplink datagram.
    pub sgi_peer: Option<SocketAddr>,
    /// Server address used as the far end of UE traffic.
    pub server_ip: Ipv4Addr,
    pub mcc: String,
    pub mnc: String,
    pub tac: u16,
    /// Number of emulated eNBs.
    pub enbs: u32,
    /// First macro eNB ID (20 bits).
    pub enb_id_start: u32,
    pub subscribers: SubscriberKeys,
    /// APN the UEs send in ESM Information Response (None: let the network choose).
    pub apn: Option<String>,
    /// Print a progress line every second to stderr.
    pub progress: bool,
}

impl Default for EmulatorConfig {
    fn default() -> Self {
        EmulatorConfig {
            mme_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            mme_udp_port: pepc_sctp::SCTP_UDP_ENCAPS_PORT,
            mme_sctp_port: pepc_sctp::S1AP_SCTP_PORT,
            sctp: SctpMode::Udp,
            local_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            gtpu_addr: SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 2), 2152),
            pdn_addr: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 5201),
            sgi_peer: None,
            server_ip: Ipv4Addr::new(198, 51, 100, 1),
            mcc: "001".into(),
            mnc: "01".into(),
            tac: 1,
            enbs: 1,
            enb_id_start: 0x19b,
            subscribers: SubscriberKeys::default(),
            apn: Some("internet".into()),
            progress: false,
        }
    }
}

/// Relative weights of the signalling events of Rajan et al. Table I.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SignalingMix {
    pub attach: f64,
    pub add_default_bearer: f64,
    /// Network-initiated: counted when the EPC starts one; the UE side cannot ask.
    pub dedicated_bearer: f64,
    pub idle_to_connected: f64,
    pub connected_to_idle: f64,
    pub x2_handover: f64,
    pub s1_handover: f64,
    pub tau: f64,
}

impl Default for SignalingMix {
    /// Table I lists the event types but not their frequencies; the default weights
    /// follow the common observation that idle/connected transitions dominate,
    /// then handovers and TAUs, with attaches and bearer setups rarer.
    fn default() -> Self {
        SignalingMix {
            attach: 0.05,
            add_default_bearer: 0.05,
            dedicated_bearer: 0.0,
            idle_to_connected: 0.3,
            connected_to_idle: 0.3,
            x2_handover: 0.1,
            s1_handover: 0.05,
            tau: 0.15,
        }
    }
}

/// Data traffic profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrafficProfile {
    #[default]
    None,
    /// PEPC Table 2: 64 B downlink, 128 B uplink, UL:DL = 1:3.
    Pepc,
    /// Rajan et al. Table IV: per-class sizes and UL/DL packet rates.
    TableIv,
}

/// Data traffic: profile and aggregate packet rate (UL + DL) across all UEs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Traffic {
    pub profile: TrafficProfile,
    pub rate_pps: f64,
}

impl Default for Traffic {
    fn default() -> Self {
        Traffic {
            profile: TrafficProfile::None,
            rate_pps: 1000.0,
        }
    }
}

/// What the emulated UEs do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Scenario {
    pub ues: u32,
    /// Share (0..=1) of UEs flagged as stateless IoT devices.
    pub iot_share: f64,
    /// Attaches started per second in the attach storm.
    pub attach_rate: f64,
    /// Length of the steady-state phase after the storm, seconds.
    pub duration_s: f64,
    /// Signalling events per second in steady state (0 = none).
    pub event_rate: f64,
    pub mix: SignalingMix,
    pub traffic: Traffic,
    /// Detach every UE at the end.
    pub detach_at_end: bool,
    /// Detach with switch-off.
    pub switch_off: bool,
    /// Per-procedure timeout, seconds.
    pub timeout_s: f64,
    /// Time given to in-flight packets after traffic stops, seconds.
    pub drain_s: f64,
    /// APN of additional PDN connections.
    pub extra_apn: String,
    /// Random seed for event and UE choice.
    pub seed: u64,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            ues: 10,
            iot_share: 0.0,
            attach_rate: 100.0,
            duration_s: 0.0,
            event_rate: 0.0,
            mix: SignalingMix::default(),
            traffic: Traffic::default(),
            detach_at_end: true,
            switch_off: false,
            timeout_s: 5.0,
            drain_s: 0.5,
            extra_apn: "ims".into(),
            seed: 1,
        }
    }
}

impl Scenario {
    /// Parse a scenario from TOML; absent keys take their defaults.
    pub fn from_toml(text: &str) -> Result<Scenario, crate::EmuError> {
        toml::from_str(text).map_err(|e| crate::EmuError::Config(format!("scenario TOML: {e}")))
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_s.max(0.01))
    }
}
