//! Plain identifier types, defined once for the whole core.
//!
//! The S1AP and NAS codecs decode into these, the MME keeps them in its UE state and
//! hands the same values to the slice's UE context: no crate has its own copy and no
//! caller converts between copies. Wire encodings live with the codecs (`pepc-s1ap`,
//! `pepc-nas`); this crate has no dependencies.
#![forbid(unsafe_code)]

use core::fmt;

/// PLMN identity as the three TBCD octets on the wire (TS 24.008 §10.5.1.13).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Plmn(pub [u8; 3]);

/// An MCC or MNC given to [`Plmn::from_mcc_mnc`] is not a digit string of its length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlmnError(pub String);

impl fmt::Display for PlmnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PlmnError {}

impl Plmn {
    /// `from_mcc_mnc("001", "01")` is `00 f1 10`.
    pub fn from_mcc_mnc(mcc: &str, mnc: &str) -> Result<Plmn, PlmnError> {
        let d = |s: &str| -> Option<Vec<u8>> {
            s.bytes()
                .map(|b| b.is_ascii_digit().then_some(b - b'0'))
                .collect()
        };
        let m = d(mcc)
            .filter(|v| v.len() == 3)
            .ok_or_else(|| PlmnError(format!("MCC {mcc:?} is not 3 digits")))?;
        let n = d(mnc)
            .filter(|v| v.len() == 2 || v.len() == 3)
            .ok_or_else(|| PlmnError(format!("MNC {mnc:?} is not 2 or 3 digits")))?;
        let n3 = if n.len() == 3 { n[2] } else { 0xf };
        Ok(Plmn([m[1] << 4 | m[0], n3 << 4 | m[2], n[1] << 4 | n[0]]))
    }

    /// MCC and MNC as digit strings; `None` if the octets are not valid TBCD.
    pub fn mcc_mnc(&self) -> Option<(String, String)> {
        let [a, b, c] = self.0;
        let dig = |x: u8| (x <= 9).then(|| char::from(b'0' + x));
        let mcc: String = [a & 0xf, a >> 4, b & 0xf]
            .into_iter()
            .map(dig)
            .collect::<Option<_>>()?;
        let mut mnc: String = [c & 0xf, c >> 4]
            .into_iter()
            .map(dig)
            .collect::<Option<_>>()?;
        if b >> 4 != 0xf {
            mnc.push(dig(b >> 4)?);
        }
        Some((mcc, mnc))
    }

    /// The MCC digits; `None` if the octets are not valid TBCD.
    pub fn mcc(&self) -> Option<String> {
        self.mcc_mnc().map(|(m, _)| m)
    }

    /// The MNC digits (2 or 3); `None` if the octets are not valid TBCD.
    pub fn mnc(&self) -> Option<String> {
        self.mcc_mnc().map(|(_, n)| n)
    }
}

/// `Plmn(001-01)`, or the octets in hex if they are not valid TBCD.
impl fmt::Debug for Plmn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mcc_mnc() {
            Some((mcc, mnc)) => write!(f, "Plmn({mcc}-{mnc})"),
            None => write!(f, "Plmn({:02x?})", self.0),
        }
    }
}

/// `001-01`, or the octets in hex if they are not valid TBCD.
impl fmt::Display for Plmn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mcc_mnc() {
            Some((mcc, mnc)) => write!(f, "{mcc}-{mnc}"),
            None => write!(f, "{:02x}{:02x}{:02x}", self.0[0], self.0[1], self.0[2]),
        }
    }
}

/// Tracking Area Identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Tai {
    pub plmn: Plmn,
    pub tac: u16,
}

/// E-UTRAN Cell Global Identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Ecgi {
    pub plmn: Plmn,
    /// 28-bit E-UTRAN Cell Identity.
    pub cell_id: u32,
}

/// Globally Unique Temporary Identity (TS 23.003 §2.8, TS 24.301 §9.9.3.12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Guti {
    pub plmn: Plmn,
    pub mme_group_id: u16,
    pub mme_code: u8,
    pub m_tmsi: u32,
}

/// S-TMSI: MME code and M-TMSI (TS 23.003 §2.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct STmsi {
    pub mmec: u8,
    pub m_tmsi: u32,
}

/// Globally Unique MME Identifier (TS 23.003 §2.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Gummei {
    pub plmn: Plmn,
    pub mme_group_id: u16,
    pub mme_code: u8,
}

/// Allocation and Retention Priority (TS 23.401 §4.7.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Arp {
    /// 1 (highest) ..= 15 (no priority).
    pub priority_level: u8,
    /// true = may trigger pre-emption.
    pub pre_emption_capability: bool,
    /// true = pre-emptable.
    pub pre_emption_vulnerability: bool,
}

/// Priority level 9, shall not trigger pre-emption, pre-emptable.
impl Default for Arp {
    fn default() -> Self {
        Arp {
            priority_level: 9,
            pre_emption_capability: false,
            pre_emption_vulnerability: true,
        }
    }
}

/// The PDN type of a subscription's APN (TS 29.272 §7.3.62), the same for the HSS that
/// stores it, the S6a client that reads it and the MME that gets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PdnType {
    Ipv4,
    Ipv6,
    Ipv4v6,
}

impl PdnType {
    /// The name written in files and the API (`ipv4`, `ipv6`, `ipv4v6`).
    pub fn as_str(&self) -> &'static str {
        match self {
            PdnType::Ipv4 => "ipv4",
            PdnType::Ipv6 => "ipv6",
            PdnType::Ipv4v6 => "ipv4v6",
        }
    }
}

/// A PDN type name that is none of `ipv4`, `ipv6`, `ipv4v6`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdnTypeError(pub String);

impl fmt::Display for PdnTypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pdn_type must be ipv4, ipv6 or ipv4v6, got {:?}", self.0)
    }
}

impl std::error::Error for PdnTypeError {}

impl core::str::FromStr for PdnType {
    type Err = PdnTypeError;
    /// Any case (`IPv4` too).
    fn from_str(s: &str) -> Result<Self, PdnTypeError> {
        [PdnType::Ipv4, PdnType::Ipv6, PdnType::Ipv4v6]
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| PdnTypeError(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plmn_digits_and_display() {
        let p = Plmn::from_mcc_mnc("001", "01").unwrap();
        assert_eq!(p, Plmn([0x00, 0xf1, 0x10]));
        assert_eq!(p.to_string(), "001-01");
        assert_eq!(format!("{p:?}"), "Plmn(001-01)");
        let q = Plmn::from_mcc_mnc("310", "410").unwrap();
        assert_eq!(q, Plmn([0x13, 0x00, 0x14]));
        assert_eq!(
            (q.mcc().unwrap(), q.mnc().unwrap()),
            ("310".into(), "410".into())
        );
        assert!(Plmn::from_mcc_mnc("31", "410").is_err());
        assert!(Plmn::from_mcc_mnc("310", "4").is_err());
        assert!(Plmn::from_mcc_mnc("31a", "41").is_err());
        let bad = Plmn([0xab, 0xff, 0xff]);
        assert_eq!(bad.mcc_mnc(), None);
        assert_eq!(bad.to_string(), "abffff");
    }

    #[test]
    fn arp_default() {
        let a = Arp::default();
        assert_eq!(a.priority_level, 9);
        assert!(!a.pre_emption_capability && a.pre_emption_vulnerability);
    }

    #[test]
    fn pdn_type_names_round_trip() {
        for t in [PdnType::Ipv4, PdnType::Ipv6, PdnType::Ipv4v6] {
            assert_eq!(t.as_str().parse::<PdnType>(), Ok(t));
        }
        assert_eq!("IPv4v6".parse::<PdnType>(), Ok(PdnType::Ipv4v6));
        let e = "ipv5".parse::<PdnType>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "pdn_type must be ipv4, ipv6 or ipv4v6, got \"ipv5\""
        );
    }
}

/// MME UE S1AP ID (TS 36.413 §9.2.3.3): the MME's name of a UE's context; its top bits
/// carry the slice (`pepc_slice::ids::SignalingIds`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MmeUeId(pub u32);

/// M-TMSI (TS 23.003 §2.8): the temporary identity of a GUTI or S-TMSI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MTmsi(pub u32);

/// IMSI as a number (at most 15 digits; TS 23.003 §2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Imsi(pub u64);

/// A UE's entry in its slice's control table (and its line in the data thread's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UeSlot(pub u32);
