//! `pepc ran`: the emulator as a command against any EPC. [`RanArgs`] is the clap
//! argument set (the `pepc` binary flattens it into its `ran` subcommand);
//! [`RanArgs::to_config`] turns it into an [`EmulatorConfig`] and a [`Scenario`], and
//! [`ran_main`] runs them.
//!
//! A scenario comes from `--scenario FILE.toml` (keys in [`Scenario`]; examples in
//! `crates/emulator/scenarios/`), then each flag given overrides its key. Subscriber
//! keys are never printed: `RanArgs`'s `Debug` hides them and errors about them do not
//! repeat the value.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;

use clap::ValueEnum;

use crate::config::{EmulatorConfig, Scenario, SctpMode, SgiMode, TrafficProfile};
use crate::report::Report;
use crate::EmuError;

/// Data traffic profile on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TrafficArg {
    /// No data traffic.
    None,
    /// PEPC Table 2: 64 B downlink, 128 B uplink, UL:DL = 1:3.
    Pepc,
    /// Rajan et al. Table IV: per-class packet sizes and UL/DL rates.
    TableIv,
}

impl From<TrafficArg> for TrafficProfile {
    fn from(t: TrafficArg) -> Self {
        match t {
            TrafficArg::None => TrafficProfile::None,
            TrafficArg::Pepc => TrafficProfile::Pepc,
            TrafficArg::TableIv => TrafficProfile::TableIv,
        }
    }
}

/// S1-MME transport on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SctpArg {
    /// Userspace SCTP over UDP (RFC 6951); `--mme` is the EPC's UDP encapsulation port.
    Udp,
    /// Kernel SCTP; `--mme` is the EPC's SCTP address and port (36412).
    Kernel,
}

/// PDN side (behind the EPC's SGi) on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SgiArg {
    /// Userspace UDP sink: the EPC's SGi carries each IP packet as one UDP datagram.
    Udp,
    /// A TUN device routed by the kernel (needs root / CAP_NET_ADMIN); falls back to
    /// the UDP sink with a message when it cannot be created.
    Tun,
}

/// A clap value parser for a count, rate or duration: a finite number ≥ 0, refused
/// naming the flag (clap prefixes the flag to the message).
pub fn non_negative(v: &str) -> Result<f64, String> {
    match v.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        Ok(_) => Err("must be a finite number ≥ 0".into()),
        Err(e) => Err(format!("not a number ({e})")),
    }
}

/// `pepc ran`: play eNBs and UEs against an EPC.
#[derive(clap::Args, Clone)]
pub struct RanArgs {
    /// Scenario file (TOML, keys of `pepc_emulator::Scenario`); flags below override it.
    #[arg(long, value_name = "FILE.toml")]
    pub scenario: Option<PathBuf>,
    /// UEs to emulate (at least 1).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub ues: Option<u32>,
    /// eNBs to emulate (UEs are spread over them; handovers need 2 or more).
    #[arg(long)]
    pub enbs: Option<u32>,
    /// Attach storm rate, UEs per second (also the detach rate at the end).
    #[arg(long, allow_negative_numbers = true, value_parser = non_negative)]
    pub attach_rate: Option<f64>,
    /// Seconds of steady state (signalling mix and traffic) after the attach storm.
    #[arg(long, allow_negative_numbers = true, value_parser = non_negative)]
    pub seconds: Option<f64>,
    /// Signalling events per second in steady state (Table I mix of the scenario).
    #[arg(long, allow_negative_numbers = true, value_parser = non_negative)]
    pub events: Option<f64>,
    /// Data packets per second, uplink + downlink, over all UEs.
    #[arg(long, allow_negative_numbers = true, value_parser = non_negative)]
    pub pps: Option<f64>,
    /// Data traffic mix.
    #[arg(long, value_enum)]
    pub traffic: Option<TrafficArg>,
    /// Share (0..=1) of UEs that are stateless IoT devices.
    #[arg(long, allow_negative_numbers = true, value_parser = non_negative)]
    pub iot_share: Option<f64>,
    /// Per-procedure timeout, seconds.
    #[arg(long, allow_negative_numbers = true, value_parser = non_negative)]
    pub timeout: Option<f64>,
    /// RRC wait time of an eNB that the MME told to shed load (OVERLOAD START), ms:
    /// a refused UE waits between half and all of it before trying again.
    #[arg(long, default_value_t = 4000)]
    pub rrc_wait_ms: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,

    /// EPC S1-MME address: UDP encapsulation port with `--sctp udp` (9899), SCTP port
    /// with `--sctp kernel` (36412).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:9899")]
    pub mme: SocketAddr,
    /// S1-MME transport.
    #[arg(long, value_enum, default_value = "udp")]
    pub sctp: SctpArg,
    /// Destination SCTP port inside the UDP encapsulation (`--sctp udp` only).
    #[arg(long, default_value_t = pepc_sctp::S1AP_SCTP_PORT)]
    pub mme_sctp_port: u16,
    /// Local address for the S1-MME associations.
    #[arg(long, default_value = "127.0.0.1")]
    pub local: IpAddr,
    /// The eNBs' S1-U GTP-U endpoint (advertised to the EPC in E-RAB answers).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.2:2152")]
    pub gtpu_local: SocketAddrV4,
    /// PDN side: userspace UDP sink or a kernel-routed TUN device.
    #[arg(long, value_enum, default_value = "udp")]
    pub sgi: SgiArg,
    /// UDP sink: where the EPC's SGi sends uplink IP packets.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:5201")]
    pub pdn_local: SocketAddr,
    /// UDP sink: the EPC's SGi socket, where downlink IP packets go (default: learn it
    /// from the first uplink datagram).
    #[arg(long, value_name = "ADDR:PORT")]
    pub sgi_peer: Option<SocketAddr>,
    /// TUN sink: device name.
    #[arg(long, default_value = "pemu%d")]
    pub tun_name: String,
    /// TUN sink: the UE address pool the EPC routes (a route to it via the EPC is
    /// expected to exist already; the emulator only routes the server address).
    #[arg(long, default_value = "198.51.100.1")]
    pub server_ip: Ipv4Addr,
    /// Serving PLMN, MCC+MNC (5 or 6 digits).
    #[arg(long, default_value = "00101")]
    pub plmn: String,
    /// Tracking area code of every emulated cell.
    #[arg(long, default_value_t = 1)]
    pub tac: u16,
    /// First eNB ID (macro, 20 bits); the others follow.
    #[arg(long, default_value_t = 0x19b)]
    pub enb_id: u32,
    /// First IMSI; UE i has IMSI imsi_start + i.
    #[arg(long, default_value = "001010000000001")]
    pub imsi_start: String,
    /// Subscriber key K, 32 hex digits, shared by all UEs [default: the Open5GS test
    /// key].
    #[arg(long, value_name = "HEX", hide_default_value = true)]
    pub k: Option<String>,
    /// OPc, 32 hex digits [default: the Open5GS test OPc].
    #[arg(long, value_name = "HEX", conflicts_with = "op")]
    pub opc: Option<String>,
    /// OP, 32 hex digits (OPc is derived from it and K).
    #[arg(long, value_name = "HEX")]
    pub op: Option<String>,
    /// Initial SQN of the USIMs (0 accepts any first SQN).
    #[arg(long)]
    pub sqn: Option<u64>,
    /// APN sent in the ESM Information Response (default: "internet").
    #[arg(long)]
    pub apn: Option<String>,
}

impl std::fmt::Debug for RanArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RanArgs")
            .field("scenario", &self.scenario)
            .field("ues", &self.ues)
            .field("mme", &self.mme)
            .field("sctp", &self.sctp)
            .field("plmn", &self.plmn)
            .field("imsi_start", &self.imsi_start)
            .finish_non_exhaustive()
    }
}

/// Split a 5- or 6-digit PLMN into MCC and MNC.
pub fn split_plmn(plmn: &str) -> Result<(String, String), EmuError> {
    if !(plmn.len() == 5 || plmn.len() == 6) || !plmn.bytes().all(|b| b.is_ascii_digit()) {
        return Err(EmuError::Config(format!(
            "--plmn {plmn:?}: expected MCC+MNC, 5 or 6 digits (e.g. 00101)"
        )));
    }
    Ok((plmn[..3].to_string(), plmn[3..].to_string()))
}

/// Check a 128-bit key given in hex; the error names the flag, never the value.
fn key_hex(flag: &str, v: &str) -> Result<[u8; 16], EmuError> {
    let v = v.trim();
    if v.len() != 32 {
        return Err(EmuError::Config(format!(
            "--{flag}: expected 32 hex digits, got {} characters",
            v.len()
        )));
    }
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&v[2 * i..2 * i + 2], 16)
            .map_err(|_| EmuError::Config(format!("--{flag}: not a hexadecimal string")))?;
    }
    Ok(out)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}

impl RanArgs {
    /// The scenario (file, then flag overrides) and the EPC-side configuration.
    pub fn to_config(&self) -> Result<(EmulatorConfig, Scenario), EmuError> {
        let mut scen = match &self.scenario {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| EmuError::Config(format!("scenario {}: {e}", p.display())))?;
                Scenario::from_toml(&text)
                    .map_err(|e| EmuError::Config(format!("{}: {e}", p.display())))?
            }
            None => Scenario::default(),
        };
        if let Some(v) = self.ues {
            scen.ues = v;
        }
        if let Some(v) = self.attach_rate {
            scen.attach_rate = v;
        }
        if let Some(v) = self.seconds {
            scen.duration_s = v;
        }
        if let Some(v) = self.events {
            scen.event_rate = v;
        }
        if let Some(v) = self.pps {
            scen.traffic.rate_pps = v;
        }
        if let Some(v) = self.traffic {
            scen.traffic.profile = v.into();
        }
        if let Some(v) = self.iot_share {
            scen.iot_share = v;
        }
        if let Some(v) = self.timeout {
            scen.timeout_s = v;
        }
        scen.validate()?;

        let (mcc, mnc) = split_plmn(&self.plmn)?;
        let mut cfg = EmulatorConfig {
            mme_ip: self.mme.ip(),
            local_ip: self.local,
            gtpu_addr: self.gtpu_local,
            pdn_addr: self.pdn_local,
            sgi_peer: self.sgi_peer,
            sgi: match self.sgi {
                SgiArg::Udp => SgiMode::Udp,
                SgiArg::Tun => SgiMode::Tun,
            },
            tun_name: self.tun_name.clone(),
            server_ip: self.server_ip,
            mcc,
            mnc,
            tac: self.tac,
            enb_id_start: self.enb_id,
            progress: !self.quiet && !self.json,
            rrc_wait_ms: self.rrc_wait_ms,
            ..Default::default()
        };
        match self.sctp {
            SctpArg::Udp => {
                cfg.sctp = SctpMode::Udp;
                cfg.mme_udp_port = self.mme.port();
                cfg.mme_sctp_port = self.mme_sctp_port;
            }
            SctpArg::Kernel => {
                cfg.sctp = SctpMode::Kernel;
                cfg.mme_sctp_port = self.mme.port();
            }
        }
        if let Some(n) = self.enbs {
            cfg.enbs = n;
        }
        if let Some(a) = &self.apn {
            cfg.apn = Some(a.clone());
        }
        cfg.subscribers.imsi_start = self.imsi_start.clone();
        let digits = &self.imsi_start;
        if !(6..=15).contains(&digits.len())
            || !digits.bytes().all(|b| b.is_ascii_digit())
            || cfg.subscribers.imsi(0).is_none()
        {
            return Err(EmuError::Config(format!(
                "--imsi-start {:?}: expected 6 to 15 digits",
                self.imsi_start
            )));
        }
        if let Some(k) = &self.k {
            cfg.subscribers.k = hex(&key_hex("k", k)?);
        }
        if let Some(opc) = &self.opc {
            cfg.subscribers.opc = hex(&key_hex("opc", opc)?);
        }
        if let Some(op) = &self.op {
            let op = key_hex("op", op)?;
            let k = pepc_security::Key128::from_hex(&cfg.subscribers.k)
                .map_err(|_| EmuError::Config("--k: not a valid key".into()))?;
            let m = pepc_security::Milenage::new_with_op(&k, op);
            cfg.subscribers.opc = hex(m.opc().as_bytes());
        }
        if let Some(s) = self.sqn {
            cfg.subscribers.sqn_ms = s;
        }
        Ok((cfg, scen))
    }
}

/// Run `pepc ran`: build the configuration from `args` and run the scenario.
pub fn ran_main(args: &RanArgs) -> Result<Report, EmuError> {
    let (cfg, scen) = args.to_config()?;
    crate::run(cfg, scen)
}

/// [`ran_main`] then print the report (JSON with `--json`, else the table) on stdout.
pub fn ran_command(args: &RanArgs) -> Result<Report, EmuError> {
    let r = ran_main(args)?;
    let text = if args.json { r.to_json() } else { r.to_table() };
    use std::io::Write as _;
    // A reader that closed stdout (`| head`) is no failure of the run (println! would
    // panic): the exit status still tells how the run went.
    let _ = writeln!(std::io::stdout().lock(), "{text}");
    Ok(r)
}
