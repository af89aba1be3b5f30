//! `pepc subscriber add|list|show|remove|import`: manage the embedded HSS's subscriber
//! database (the file `pepc run` serves). Output never contains K, OP or OPc.

use clap::{Args, Subcommand};
use pepc_hss::{Hss, OpKind, PdnType, Subscriber};
use pepc_security::Key128;
use std::path::PathBuf;

#[derive(Args)]
pub struct SubscriberArgs {
    /// Subscriber database (the `hss.db` key of `pepc run`'s config).
    #[arg(long, global = true, default_value = "pepc-hss.redb")]
    pub db: PathBuf,
    #[command(subcommand)]
    pub cmd: SubscriberCmd,
}

#[derive(Subcommand)]
pub enum SubscriberCmd {
    /// Add (or replace) one subscriber.
    Add(AddArgs),
    /// List subscribers (IMSI, MSISDN, APN, QoS, SQN; never keys).
    List {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Show one subscriber (never keys).
    Show { imsi: String },
    /// Remove one subscriber.
    Remove { imsi: String },
    /// Import a CSV file with a header row: imsi,k,opc|op,amf,sqn,msisdn,apn,pdn_type,qci,arp,ambr_ul,ambr_dl
    /// (only imsi, k and opc or op are required).
    Import { file: PathBuf },
}

#[derive(Args)]
pub struct AddArgs {
    #[arg(long)]
    pub imsi: String,
    /// Subscriber key K, 32 hex digits.
    #[arg(long)]
    pub k: String,
    /// OPc, 32 hex digits (give either --opc or --op).
    #[arg(long, conflicts_with = "op")]
    pub opc: Option<String>,
    /// OP, 32 hex digits (OPc is derived at each use).
    #[arg(long)]
    pub op: Option<String>,
    /// AMF, 4 hex digits.
    #[arg(long, default_value = "8000")]
    pub amf: String,
    /// Last SQN used (48 bits); the next vector uses a higher one.
    #[arg(long, default_value_t = 0)]
    pub sqn: u64,
    #[arg(long, default_value = "")]
    pub msisdn: String,
    #[arg(long, default_value = "internet")]
    pub apn: String,
    /// ipv4 | ipv6 | ipv4v6
    #[arg(long, default_value = "ipv4")]
    pub pdn_type: String,
    #[arg(long, default_value_t = 9)]
    pub qci: u8,
    /// ARP priority level 1-15.
    #[arg(long, default_value_t = 8)]
    pub arp: u8,
    /// Subscribed UE-AMBR uplink, bit/s.
    #[arg(long, default_value_t = 100_000_000)]
    pub ambr_ul: u64,
    /// Subscribed UE-AMBR downlink, bit/s.
    #[arg(long, default_value_t = 100_000_000)]
    pub ambr_dl: u64,
}

/// A subscriber the flags do not make, or an HSS database that refused (names the
/// flag, the file or the IMSI; never echoes a key: it is a secret).
#[derive(Debug, thiserror::Error)]
pub enum SubscriberError {
    #[error("--{flag}: expected 32 hex digits, got {len}")]
    HexLength { flag: &'static str, len: usize },
    #[error("--{0}: not hexadecimal")]
    NotHex(&'static str),
    #[error("give exactly one of --opc or --op")]
    OpOrOpc,
    #[error("--amf: expected 4 hex digits, got {0:?}")]
    AmfLength(String),
    #[error("--amf: {0:?} is not hexadecimal")]
    AmfNotHex(String),
    #[error("--pdn-type: {0}")]
    PdnType(#[source] <PdnType as std::str::FromStr>::Err),
    /// The subscriber is refused by the HSS's checks, or the database failed.
    #[error(transparent)]
    Hss(#[from] pepc_hss::HssError),
    /// The HSS database or the CSV file to import.
    #[error("{}: {source}", path.display())]
    File {
        path: std::path::PathBuf,
        #[source]
        source: pepc_hss::HssError,
    },
    #[error("no subscriber with IMSI {0}")]
    NoSuch(String),
}

fn hex16(flag: &'static str, v: &str) -> Result<[u8; 16], SubscriberError> {
    let mut out = [0u8; 16];
    if v.len() != 32 {
        return Err(SubscriberError::HexLength { flag, len: v.len() });
    }
    // The message never echoes the value: it is a secret.
    hex::decode_to_slice(v, &mut out).map_err(|_| SubscriberError::NotHex(flag))?;
    Ok(out)
}

impl AddArgs {
    pub fn subscriber(&self) -> Result<Subscriber, SubscriberError> {
        let op_kind = match (&self.opc, &self.op) {
            (Some(opc), None) => OpKind::Opc(hex16("opc", opc)?),
            (None, Some(op)) => OpKind::Op(hex16("op", op)?),
            _ => return Err(SubscriberError::OpOrOpc),
        };
        let mut amf = [0u8; 2];
        if self.amf.len() != 4 {
            return Err(SubscriberError::AmfLength(self.amf.clone()));
        }
        hex::decode_to_slice(&self.amf, &mut amf)
            .map_err(|_| SubscriberError::AmfNotHex(self.amf.clone()))?;
        let s = Subscriber {
            imsi: self.imsi.clone(),
            k: Key128::from(hex16("k", &self.k)?),
            op_kind,
            amf,
            sqn: self.sqn,
            msisdn: self.msisdn.clone(),
            apn: self.apn.clone(),
            pdn_type: self
                .pdn_type
                .parse::<PdnType>()
                .map_err(SubscriberError::PdnType)?,
            qci: self.qci,
            arp_priority: self.arp,
            ambr_ul_bps: self.ambr_ul,
            ambr_dl_bps: self.ambr_dl,
        };
        s.validate()?;
        Ok(s)
    }
}

/// One line of `list`: everything but the secrets.
pub fn describe(s: &Subscriber) -> String {
    format!(
        "{:<15}  msisdn {:<15}  apn {:<12} {:?}  qci {:>3}  arp {:>2}  ambr {}/{} bit/s  sqn {}  {}",
        s.imsi,
        if s.msisdn.is_empty() { "-" } else { &s.msisdn },
        s.apn,
        s.pdn_type,
        s.qci,
        s.arp_priority,
        s.ambr_ul_bps,
        s.ambr_dl_bps,
        s.sqn,
        match s.op_kind {
            OpKind::Opc(_) => "opc",
            OpKind::Op(_) => "op",
        }
    )
}

/// The JSON form of `list --json`: the same fields, no secrets.
pub fn to_json(s: &Subscriber) -> serde_json::Value {
    serde_json::json!({
        "imsi": s.imsi,
        "msisdn": s.msisdn,
        "apn": s.apn,
        "pdn_type": format!("{:?}", s.pdn_type).to_ascii_lowercase(),
        "qci": s.qci,
        "arp": s.arp_priority,
        "ambr_ul": s.ambr_ul_bps,
        "ambr_dl": s.ambr_dl_bps,
        "sqn": s.sqn,
        "op_kind": match s.op_kind { OpKind::Opc(_) => "opc", OpKind::Op(_) => "op" },
    })
}

/// Run one subscriber command; returns what to print.
pub fn run(a: &SubscriberArgs) -> Result<String, SubscriberError> {
    let hss = Hss::open(&a.db).map_err(|source| SubscriberError::File {
        path: a.db.clone(),
        source,
    })?;
    match &a.cmd {
        SubscriberCmd::Add(add) => {
            let s = add.subscriber()?;
            hss.add(&s)?;
            Ok(format!("added {}", s.imsi))
        }
        SubscriberCmd::List { json } => {
            let subs = hss.list()?;
            let mut out = String::new();
            for s in &subs {
                if *json {
                    out += &to_json(s).to_string();
                } else {
                    out += &describe(s);
                }
                out.push('\n');
            }
            if !json {
                out += &format!("{} subscriber(s)", subs.len());
            }
            Ok(out.trim_end().to_string())
        }
        SubscriberCmd::Show { imsi } => match hss.get(imsi)? {
            Some(s) => Ok(describe(&s)),
            None => Err(SubscriberError::NoSuch(imsi.clone())),
        },
        SubscriberCmd::Remove { imsi } => {
            if hss.remove(imsi)? {
                Ok(format!("removed {imsi}"))
            } else {
                Err(SubscriberError::NoSuch(imsi.clone()))
            }
        }
        SubscriberCmd::Import { file } => {
            let n = hss
                .import_csv(file)
                .map_err(|source| SubscriberError::File {
                    path: file.clone(),
                    source,
                })?;
            Ok(format!(
                "imported {n} subscriber(s) from {}",
                file.display()
            ))
        }
    }
}
