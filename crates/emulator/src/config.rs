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

/// What plays the PDN (the far end of UE traffic behind the EPC's SGi).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SgiMode {
    /// Userspace UDP sink: the EPC carries each SGi IP packet as one UDP datagram
    /// between its sink socket and [`EmulatorConfig::pdn_addr`].
    #[default]
    Udp,
    /// A TUN device owning [`EmulatorConfig::server_ip`]: the kernel routes the EPC's
    /// SGi traffic for the server to it, and downlink packets written to it are routed
    /// to the UE pool by the kernel. Needs CAP_NET_ADMIN; without it the run falls back
    /// to the UDP sink and says so on stderr.
    Tun,
}

/// Where the EPC is and how the emulated RAN presents itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmulatorConfig {
    /// EPC S1-MME IP address.
    pub mme_ip: IpAddr,
    /// UDP port of the MME's SCTP-over-UDP endpoint (RFC 6951 default 9899).
    pub mme_udp_port: u16,
    /// SCTP port of the MME (36412).
    pub mme_sctp_port: u16,
    /// S1-MME transport.
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
    /// PDN side: userspace UDP sink (default) or kernel-routed TUN device.
    pub sgi: SgiMode,
    /// TUN device name with `sgi = "tun"` (`%d`: the kernel picks a number).
    pub tun_name: String,
    /// Server address used as the far end of UE traffic.
    pub server_ip: Ipv4Addr,
    /// Mobile country code, 3 digits.
    pub mcc: String,
    /// Mobile network code, 2 or 3 digits.
    pub mnc: String,
    /// Tracking area code of every emulated cell.
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
    /// RRC wait time of an overloaded eNB's RRC Connection Reject (TS 36.331: 1-16 s):
    /// each UE waits between half and all of it (spread) before trying again.
    pub rrc_wait_ms: u64,
    /// At the end, leave the S1 associations as they are (no SHUTDOWN): for a test
    /// that looks at the EPC as the run left it. Else (default) each is shut down and
    /// the run ends once the EPC has confirmed it.
    pub leave_associations: bool,
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
            sgi: SgiMode::Udp,
            tun_name: "pemu%d".into(),
            server_ip: Ipv4Addr::new(198, 51, 100, 1),
            mcc: "001".into(),
            mnc: "01".into(),
            tac: 1,
            enbs: 1,
            enb_id_start: 0x19b,
            subscribers: SubscriberKeys::default(),
            apn: Some("internet".into()),
            progress: false,
            rrc_wait_ms: 4000,
            leave_associations: false,
        }
    }
}

/// Relative weights of the signalling events of Rajan et al. Table I (TOML table
/// `[mix]`). In steady state each event picks one type with these weights, then a UE
/// eligible for it (an event with no eligible UE counts as skipped).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SignalingMix {
    /// `attach`: a deregistered UE attaches; when none is, an idle UE detaches
    /// (switch-off) and attaches again.
    pub attach: f64,
    /// `add_default_bearer`: a connected UE opens a PDN connection to
    /// [`Scenario::extra_apn`] (TS 24.301 6.5.1), or closes it if it has one (6.5.2).
    pub add_default_bearer: f64,
    /// `dedicated_bearer`: a connected UE asks for bearer resources (UE-requested
    /// bearer resource allocation, TS 24.301 6.5.3) and the network activates a
    /// dedicated bearer (6.4.2); if the UE already has one it is released with a
    /// bearer resource modification request instead.
    pub dedicated_bearer: f64,
    /// `idle_to_connected`: an idle UE sends a Service Request.
    pub idle_to_connected: f64,
    /// `connected_to_idle`: the eNB releases a connected UE (user inactivity).
    pub connected_to_idle: f64,
    /// `x2_handover`: a connected UE moves to the next eNB over X2 (Path Switch).
    pub x2_handover: f64,
    /// `s1_handover`: a connected UE moves to the next eNB over S1 (via the MME).
    pub s1_handover: f64,
    /// `tau`: a registered UE sends a Tracking Area Update: an idle UE a periodic one
    /// or (half of the time) a normal one with the active flag; a connected UE a
    /// normal one.
    pub tau: f64,
    /// `paging`: downlink data for an idle UE: a few packets are sent to it from the
    /// PDN side, the EPC buffers them and pages, the UE answers with a Service Request
    /// and the packets are delivered (network-triggered idle-to-connected).
    pub paging: f64,
}

impl Default for SignalingMix {
    /// Table I lists the event types but not their frequencies; the default weights
    /// follow the common observation that idle/connected transitions dominate,
    /// then handovers and TAUs, with attaches and bearer setups rarer.
    fn default() -> Self {
        SignalingMix {
            attach: 0.05,
            add_default_bearer: 0.05,
            dedicated_bearer: 0.05,
            idle_to_connected: 0.3,
            connected_to_idle: 0.3,
            x2_handover: 0.1,
            s1_handover: 0.05,
            tau: 0.1,
            paging: 0.05,
        }
    }
}

/// Data traffic profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrafficProfile {
    /// `"none"`: no data traffic.
    #[default]
    None,
    /// `"pepc"`: PEPC Table 2: 64 B downlink, 128 B uplink, UL:DL = 1:3.
    Pepc,
    /// `"table_iv"`: Rajan et al. Table IV: per-class sizes and UL/DL packet rates.
    TableIv,
}

/// Data traffic (TOML table `[traffic]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Traffic {
    /// `profile`: `"none"`, `"pepc"` or `"table_iv"`.
    pub profile: TrafficProfile,
    /// `rate_pps`: aggregate packet rate, uplink + downlink, over all connected UEs.
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

/// What the emulated UEs do: an attach storm, a steady state with a signalling mix
/// and data traffic, then detach. Every key is optional in TOML (absent keys take the
/// defaults shown); unknown keys are an error naming them. Examples are in
/// `crates/emulator/scenarios/`.
///
/// ```toml
/// ues = 10            # UEs
/// iot_share = 0.0     # share of stateless IoT devices
/// attach_rate = 100.0 # attaches (and detaches at the end) per second
/// duration_s = 0.0    # steady-state seconds
/// event_rate = 0.0    # signalling events per second in steady state
/// detach_at_end = true
/// switch_off = false
/// timeout_s = 5.0
/// drain_s = 0.5
/// extra_apn = "ims"
/// seed = 1
/// [mix]               # SignalingMix weights
/// [traffic]           # profile = "pepc", rate_pps = 1000.0
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Scenario {
    /// `ues`: number of emulated UEs (IMSIs `imsi_start ..`).
    pub ues: u32,
    /// `iot_share`: share (0..=1) of UEs flagged as stateless IoT devices (PEPC §4.5);
    /// they attach and send uplink only, and take no part in the signalling mix.
    pub iot_share: f64,
    /// `attach_rate`: attaches started per second in the attach storm; also the rate
    /// of the detaches at the end.
    pub attach_rate: f64,
    /// `duration_s`: length of the steady-state phase after the storm, seconds.
    pub duration_s: f64,
    /// `event_rate`: signalling events per second in steady state (0 = none).
    pub event_rate: f64,
    /// `[mix]`: the Table I event weights.
    pub mix: SignalingMix,
    /// `[traffic]`: the data traffic during steady state.
    pub traffic: Traffic,
    /// `detach_at_end`: detach every UE at the end.
    pub detach_at_end: bool,
    /// `switch_off`: detach with switch-off (no Detach Accept expected).
    pub switch_off: bool,
    /// `timeout_s`: per-procedure timeout, seconds; a procedure running longer fails
    /// with cause "timeout".
    pub timeout_s: f64,
    /// `drain_s`: time given to in-flight packets after traffic stops, seconds.
    pub drain_s: f64,
    /// `extra_apn`: APN of additional PDN connections.
    pub extra_apn: String,
    /// `seed`: random seed for event, UE and packet choice (runs are repeatable).
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
    /// Parse a scenario from TOML; absent keys take their defaults, unknown keys and
    /// out-of-range values are errors naming the key.
    pub fn from_toml(text: &str) -> Result<Scenario, crate::EmuError> {
        let s: Scenario = toml::from_str(text)
            .map_err(|e| crate::EmuError::Config(format!("scenario TOML: {e}")))?;
        s.validate()?;
        Ok(s)
    }

    /// Range checks; the error names the key.
    pub fn validate(&self) -> Result<(), crate::EmuError> {
        let bad =
            |k: &str, why: &str| Err(crate::EmuError::Config(format!("scenario `{k}`: {why}")));
        let finite_nonneg = |v: f64| v.is_finite() && v >= 0.0;
        if self.ues == 0 {
            return bad("ues", "must be at least 1");
        }
        if !(0.0..=1.0).contains(&self.iot_share) {
            return bad("iot_share", "must be within 0..=1");
        }
        if !(self.attach_rate.is_finite() && self.attach_rate > 0.0) {
            return bad("attach_rate", "must be > 0");
        }
        for (k, v) in [
            ("duration_s", self.duration_s),
            ("event_rate", self.event_rate),
            ("timeout_s", self.timeout_s),
            ("drain_s", self.drain_s),
            ("traffic.rate_pps", self.traffic.rate_pps),
        ] {
            if !finite_nonneg(v) {
                return bad(k, "must be a finite number >= 0");
            }
        }
        let m = &self.mix;
        for (k, v) in [
            ("mix.attach", m.attach),
            ("mix.add_default_bearer", m.add_default_bearer),
            ("mix.dedicated_bearer", m.dedicated_bearer),
            ("mix.idle_to_connected", m.idle_to_connected),
            ("mix.connected_to_idle", m.connected_to_idle),
            ("mix.x2_handover", m.x2_handover),
            ("mix.s1_handover", m.s1_handover),
            ("mix.tau", m.tau),
            ("mix.paging", m.paging),
        ] {
            if !finite_nonneg(v) {
                return bad(k, "weights must be finite numbers >= 0");
            }
        }
        Ok(())
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_s.max(0.01))
    }
}
