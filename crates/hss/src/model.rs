//! Subscriber profile. Keys serialise as hex (the DB is the HSS's secret
//! store); `Debug` never shows K, OP or OPc.

use crate::HssError;
use pepc_security::Key128;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Operator variant: either OPc (preferred) or OP (OPc derived per use).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    Opc(#[serde(with = "hex16")] [u8; 16]),
    Op(#[serde(with = "hex16")] [u8; 16]),
}

impl core::fmt::Debug for OpKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            OpKind::Opc(_) => f.write_str("Opc(<redacted>)"),
            OpKind::Op(_) => f.write_str("Op(<redacted>)"),
        }
    }
}

/// Defined with the plain types so the S6a seam and the MME share it; stored under
/// its lowercase name, as the derive of its old home here did.
pub use pepc_types::PdnType;

mod pdn_type_name {
    use super::PdnType;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    const NAMES: &[&str] = &["ipv4", "ipv6", "ipv4v6"];

    pub fn serialize<S: Serializer>(t: &PdnType, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(t.as_str())
    }

    /// Exact lowercase names only, as before (files written by older versions read back).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PdnType, D::Error> {
        let s = String::deserialize(d)?;
        [PdnType::Ipv4, PdnType::Ipv6, PdnType::Ipv4v6]
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| D::Error::unknown_variant(&s, NAMES))
    }
}

#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscriber {
    pub imsi: String,
    #[serde(serialize_with = "ser_key", deserialize_with = "de_key")]
    pub k: Key128,
    pub op_kind: OpKind,
    #[serde(with = "hex2")]
    pub amf: [u8; 2],
    /// Last SQN issued (48 bits). The live value is kept in the SQN table;
    /// [`crate::Hss::get`] fills it in.
    pub sqn: u64,
    pub msisdn: String,
    pub apn: String,
    #[serde(with = "pdn_type_name")]
    pub pdn_type: PdnType,
    pub qci: u8,
    pub arp_priority: u8,
    pub ambr_ul_bps: u64,
    pub ambr_dl_bps: u64,
}

impl core::fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Subscriber")
            .field("imsi", &self.imsi)
            .field("k", &self.k)
            .field("op_kind", &self.op_kind)
            .field("amf", &hex::encode(self.amf))
            .field("sqn", &self.sqn)
            .field("msisdn", &self.msisdn)
            .field("apn", &self.apn)
            .field("pdn_type", &self.pdn_type)
            .field("qci", &self.qci)
            .field("arp_priority", &self.arp_priority)
            .field("ambr_ul_bps", &self.ambr_ul_bps)
            .field("ambr_dl_bps", &self.ambr_dl_bps)
            .finish()
    }
}

impl Subscriber {
    /// Checks shared by `add` and CSV import. Returns the offending field.
    pub fn validate(&self) -> Result<(), HssError> {
        let bad = |field, what: String| Err(HssError::Invalid { field, what });
        if !(6..=15).contains(&self.imsi.len()) || !self.imsi.bytes().all(|b| b.is_ascii_digit()) {
            return bad("imsi", format!("must be 6-15 digits, got {:?}", self.imsi));
        }
        if self.sqn > pepc_security::SQN_MAX {
            return bad("sqn", format!("must fit 48 bits, got {}", self.sqn));
        }
        if !self.msisdn.bytes().all(|b| b.is_ascii_digit()) || self.msisdn.len() > 15 {
            return bad(
                "msisdn",
                format!("must be up to 15 digits, got {:?}", self.msisdn),
            );
        }
        if self.apn.is_empty() || self.apn.len() > 100 {
            return bad("apn", "must be 1-100 characters".into());
        }
        if self.qci == 0 || self.qci == 255 {
            return bad("qci", format!("must be 1-254, got {}", self.qci));
        }
        if !(1..=15).contains(&self.arp_priority) {
            return bad(
                "arp",
                format!("priority level must be 1-15, got {}", self.arp_priority),
            );
        }
        Ok(())
    }
}

fn ser_key<S: Serializer>(k: &Key128, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex::encode(k.as_bytes()))
}

fn de_key<'de, D: Deserializer<'de>>(d: D) -> Result<Key128, D::Error> {
    let text = String::deserialize(d)?;
    Key128::from_hex(&text).map_err(serde::de::Error::custom)
}

macro_rules! hex_array {
    ($m:ident, $n:literal) => {
        mod $m {
            use serde::{Deserialize, Deserializer, Serializer};
            pub fn serialize<S: Serializer>(v: &[u8; $n], s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&hex::encode(v))
            }
            pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; $n], D::Error> {
                let text = String::deserialize(d)?;
                let mut out = [0u8; $n];
                hex::decode_to_slice(text.trim(), &mut out).map_err(serde::de::Error::custom)?;
                Ok(out)
            }
        }
    };
}
hex_array!(hex16, 16);
hex_array!(hex2, 2);
