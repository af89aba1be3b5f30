//! Plain NAS information elements (TS 24.301 §9.9, TS 24.008 §10.5) and the codecs of
//! their contents. The message framing (IEIs, lengths, optional IEs) is oxirush-nas's.

use crate::NasError;
use std::net::Ipv4Addr;

type R<T> = Result<T, NasError>;

fn short(what: &str, need: usize, have: usize) -> NasError {
    NasError::Decode(format!("{what}: need {need} octets, have {have}"))
}

pub use pepc_types::{Guti, Plmn, Tai};

/// The TS 24.301 §9.9.3.32 encoding of a [`Tai`] (the type is pepc-types').
pub trait TaiCodec: Sized {
    fn to_bytes(self) -> [u8; 5];
    fn from_bytes(b: &[u8]) -> R<Self>;
}

impl TaiCodec for Tai {
    fn to_bytes(self) -> [u8; 5] {
        let p = self.plmn.0;
        let t = self.tac.to_be_bytes();
        [p[0], p[1], p[2], t[0], t[1]]
    }
    fn from_bytes(b: &[u8]) -> R<Tai> {
        if b.len() < 5 {
            return Err(short("TAI", 5, b.len()));
        }
        Ok(Tai {
            plmn: Plmn([b[0], b[1], b[2]]),
            tac: u16::from_be_bytes([b[3], b[4]]),
        })
    }
}

/// EPS mobile identity / mobile identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MobileIdentity {
    Imsi(String),
    Imei(String),
    Imeisv(String),
    Guti(Guti),
    /// TMSI/P-TMSI/M-TMSI (TS 24.008 type 4).
    Tmsi(u32),
    /// No identity (type 0) or a type we do not model, as received.
    Other(Vec<u8>),
}

/// The digits of a BCD identity (TS 24.008 §10.5.1.4): digit 1 in bits 8-5 of the
/// first octet, then two digits per octet, low nibble first; an even count ends with
/// an 0xF filler. `None` for any other non-digit nibble or more than `max` digits, so
/// that garbage is refused rather than read as another identity.
fn bcd_digits(b: &[u8], max: usize) -> Option<String> {
    let mut s = String::new();
    let last = b.len() - 1;
    let nibbles = b.iter().enumerate().flat_map(|(i, o)| {
        let pair = if i == 0 {
            [None, Some(o >> 4)]
        } else {
            [Some(o & 0xf), Some(o >> 4)]
        };
        pair.into_iter().flatten().map(move |d| (i, d))
    });
    for (i, d) in nibbles {
        match d {
            0..=9 if s.len() < max => s.push(char::from(b'0' + d)),
            // The filler: only the high nibble of the last octet, of an even count.
            0xf if i == last && b[0] & 0x08 == 0 => {}
            _ => return None,
        }
    }
    Some(s)
}

fn encode_digits(digits: &str, typ: u8) -> R<Vec<u8>> {
    let d: Vec<u8> = digits
        .bytes()
        .map(|c| {
            c.is_ascii_digit()
                .then_some(c - b'0')
                .ok_or_else(|| NasError::Invalid(format!("identity {digits:?} has a non-digit")))
        })
        .collect::<R<_>>()?;
    if d.is_empty() || d.len() > 16 {
        return Err(NasError::Invalid(format!("identity of {} digits", d.len())));
    }
    let odd = d.len() % 2 == 1;
    let mut out = vec![d[0] << 4 | (odd as u8) << 3 | typ];
    for pair in d[1..].chunks(2) {
        out.push(pair[0] | pair.get(1).map_or(0xf0, |x| x << 4));
    }
    Ok(out)
}

fn bad_digits(what: &str) -> NasError {
    NasError::Decode(format!("{what}: not a BCD digit string"))
}

impl MobileIdentity {
    /// Contents (after the length octet) as TS 24.301 §9.9.3.12 / TS 24.008 §10.5.1.4.
    pub fn to_bytes(&self) -> R<Vec<u8>> {
        Ok(match self {
            MobileIdentity::Imsi(s) if s.len() > 15 => {
                return Err(NasError::Invalid(format!("IMSI of {} digits", s.len())))
            }
            MobileIdentity::Imsi(s) => encode_digits(s, 1)?,
            MobileIdentity::Imei(s) => encode_digits(s, 2)?,
            MobileIdentity::Imeisv(s) => encode_digits(s, 3)?,
            MobileIdentity::Guti(g) => {
                let mut v = vec![0xf6, g.plmn.0[0], g.plmn.0[1], g.plmn.0[2]];
                v.extend_from_slice(&g.mme_group_id.to_be_bytes());
                v.push(g.mme_code);
                v.extend_from_slice(&g.m_tmsi.to_be_bytes());
                v
            }
            MobileIdentity::Tmsi(t) => {
                let mut v = vec![0xf4];
                v.extend_from_slice(&t.to_be_bytes());
                v
            }
            MobileIdentity::Other(b) => b.clone(),
        })
    }

    pub fn from_bytes(b: &[u8]) -> R<MobileIdentity> {
        let Some(first) = b.first() else {
            return Err(short("mobile identity", 1, 0));
        };
        Ok(match first & 0x7 {
            // IMSI: at most 15 digits (TS 23.003 §2.2); IMEI 15, IMEISV 16 (§6.2).
            1 => MobileIdentity::Imsi(bcd_digits(b, 15).ok_or_else(|| bad_digits("IMSI"))?),
            2 => MobileIdentity::Imei(bcd_digits(b, 16).ok_or_else(|| bad_digits("IMEI"))?),
            3 => MobileIdentity::Imeisv(bcd_digits(b, 16).ok_or_else(|| bad_digits("IMEISV"))?),
            // Exact lengths: trailing octets are not dropped silently (the value would
            // not re-encode to what was received).
            6 if b.len() == 11 => MobileIdentity::Guti(Guti {
                plmn: Plmn([b[1], b[2], b[3]]),
                mme_group_id: u16::from_be_bytes([b[4], b[5]]),
                mme_code: b[6],
                m_tmsi: u32::from_be_bytes([b[7], b[8], b[9], b[10]]),
            }),
            6 if b.len() < 11 => return Err(short("GUTI", 11, b.len())),
            6 => {
                return Err(NasError::Decode(format!(
                    "GUTI: 11 octets, have {}",
                    b.len()
                )))
            }
            4 if b.len() == 5 => MobileIdentity::Tmsi(u32::from_be_bytes([b[1], b[2], b[3], b[4]])),
            _ => MobileIdentity::Other(b.to_vec()),
        })
    }
}

/// UE network capability (TS 24.301 §9.9.3.34). Octet 1 is EEA0..EEA7 (EEA0 in bit 8),
/// octet 2 EIA0..EIA7; the rest (UEA/UIA, feature bits) is kept as received.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct UeNetworkCapability {
    pub eea: u8,
    pub eia: u8,
    pub rest: Vec<u8>,
}

impl UeNetworkCapability {
    /// Whether EEA`n` (0..=7) is supported.
    pub fn supports_eea(&self, n: u8) -> bool {
        n < 8 && self.eea & (0x80 >> n) != 0
    }
    pub fn supports_eia(&self, n: u8) -> bool {
        n < 8 && self.eia & (0x80 >> n) != 0
    }
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = vec![self.eea, self.eia];
        v.extend_from_slice(&self.rest);
        v
    }
    pub fn from_bytes(b: &[u8]) -> R<Self> {
        if b.len() < 2 {
            return Err(short("UE network capability", 2, b.len()));
        }
        Ok(UeNetworkCapability {
            eea: b[0],
            eia: b[1],
            rest: b[2..].to_vec(),
        })
    }
    /// The S1AP UE security capabilities bitmaps (TS 36.413 §9.2.1.40: 128-EEA1 first):
    /// the NAS octet shifted left by one (EEA0 is implicit there).
    pub fn s1ap_bitmaps(&self) -> (u16, u16) {
        (u16::from(self.eea << 1) << 8, u16::from(self.eia << 1) << 8)
    }
}

/// TAI list (TS 24.301 §9.9.3.33). Encoded as type-0 lists (one PLMN, listed TACs),
/// one per PLMN; decodes all three list types.
pub fn encode_tai_list(tais: &[Tai]) -> R<Vec<u8>> {
    if tais.is_empty() {
        return Err(NasError::Invalid("empty TAI list".into()));
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < tais.len() {
        let plmn = tais[i].plmn;
        let group: Vec<&Tai> = tais[i..]
            .iter()
            .take_while(|t| t.plmn == plmn)
            .take(16)
            .collect();
        out.push((group.len() - 1) as u8); // type 0, number of elements - 1
        out.extend_from_slice(&plmn.0);
        for t in &group {
            out.extend_from_slice(&t.tac.to_be_bytes());
        }
        i += group.len();
    }
    Ok(out)
}

pub fn decode_tai_list(mut b: &[u8]) -> R<Vec<Tai>> {
    let mut out = Vec::new();
    while let Some(&h) = b.first() {
        let typ = (h >> 5) & 0x3;
        let n = (h & 0x1f) as usize + 1;
        let need = match typ {
            0 => 1 + 3 + 2 * n,
            1 => 1 + 5,
            2 => 1 + 5 * n,
            _ => return Err(NasError::Decode(format!("TAI list of type {typ}"))),
        };
        if b.len() < need {
            return Err(short("partial TAI list", need, b.len()));
        }
        match typ {
            0 => {
                let plmn = Plmn([b[1], b[2], b[3]]);
                for k in 0..n {
                    out.push(Tai {
                        plmn,
                        tac: u16::from_be_bytes([b[4 + 2 * k], b[5 + 2 * k]]),
                    });
                }
            }
            1 => {
                let plmn = Plmn([b[1], b[2], b[3]]);
                let first = u16::from_be_bytes([b[4], b[5]]);
                for k in 0..n {
                    out.push(Tai {
                        plmn,
                        tac: first.wrapping_add(k as u16),
                    });
                }
            }
            _ => {
                for k in 0..n {
                    out.push(Tai::from_bytes(&b[1 + 5 * k..])?);
                }
            }
        }
        b = &b[need..];
    }
    Ok(out)
}

/// PDN address (TS 24.301 §9.9.4.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PdnAddress {
    Ipv4(Ipv4Addr),
    /// IPv6 interface identifier.
    Ipv6([u8; 8]),
    Ipv4v6([u8; 8], Ipv4Addr),
}

impl PdnAddress {
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            PdnAddress::Ipv4(a) => [&[1u8][..], &a.octets()].concat(),
            PdnAddress::Ipv6(i) => [&[2u8][..], i].concat(),
            PdnAddress::Ipv4v6(i, a) => [&[3u8][..], i, &a.octets()].concat(),
        }
    }
    pub fn from_bytes(b: &[u8]) -> R<Self> {
        let t = b.first().ok_or_else(|| short("PDN address", 1, 0))? & 0x7;
        let v4 = |o: &[u8]| Ipv4Addr::new(o[0], o[1], o[2], o[3]);
        match t {
            1 if b.len() >= 5 => Ok(PdnAddress::Ipv4(v4(&b[1..5]))),
            2 if b.len() >= 9 => Ok(PdnAddress::Ipv6(b[1..9].try_into().unwrap_or_default())),
            3 if b.len() >= 13 => Ok(PdnAddress::Ipv4v6(
                b[1..9].try_into().unwrap_or_default(),
                v4(&b[9..13]),
            )),
            1..=3 => Err(NasError::Decode(format!(
                "PDN address of type {t} is {} octets",
                b.len()
            ))),
            _ => Err(NasError::Decode(format!("PDN type {t}"))),
        }
    }
}

/// APN as dotted text; encoded as DNS labels (TS 23.003 §9.1).
pub fn encode_apn(apn: &str) -> R<Vec<u8>> {
    let mut out = Vec::new();
    for l in apn.split('.') {
        if l.is_empty() || l.len() > 63 {
            return Err(NasError::Invalid(format!("APN {apn:?} has a bad label")));
        }
        out.push(l.len() as u8);
        out.extend_from_slice(l.as_bytes());
    }
    Ok(out)
}

/// The dotted text of DNS-label octets. Labels are 1..=63 printable ASCII characters
/// other than '.', so the text encodes back to the same octets; anything else (an
/// empty label, a dot or a control octet inside one) is refused, not rewritten.
pub fn decode_apn(mut b: &[u8]) -> R<String> {
    let mut labels = Vec::new();
    while let Some(&n) = b.first() {
        let n = n as usize;
        if b.len() < 1 + n {
            return Err(short("APN label", 1 + n, b.len()));
        }
        let label = &b[1..1 + n];
        if n == 0 || n > 63 || !label.iter().all(|c| c.is_ascii_graphic() && *c != b'.') {
            return Err(NasError::Decode(format!("APN label {label:02x?}")));
        }
        labels.push(String::from_utf8_lossy(label).into_owned());
        b = &b[1 + n..];
    }
    Ok(labels.join("."))
}

/// One bit rate in the TS 24.301 §9.9.4.2/§9.9.4.3 encoding: base octet, extended
/// octet, extended-2 octet (256 Mbps units added to the others); 0 kbps is 0xff.
/// Values between steps round down to the step below.
pub fn encode_bitrate(kbps: u32) -> (u8, u8, u8) {
    match kbps {
        0 => (0xff, 0, 0),
        1..=63 => (kbps as u8, 0, 0),
        64..=568 => (64 + ((kbps - 64) / 8) as u8, 0, 0),
        569..=8640 => (128 + ((kbps - 576).min(8064) / 64) as u8, 0, 0),
        8641..=16000 => (0xfe, ((kbps - 8600) / 100) as u8, 0),
        16001..=128_000 => (0xfe, (74 + (kbps - 16000) / 1000) as u8, 0),
        128_001..=256_000 => (0xfe, (186 + (kbps - 128_000) / 2000) as u8, 0),
        _ => {
            // Extended-2 counts whole 256 Mbps; the rest goes in the octets above.
            let e2 = (kbps / 256_000).min(254);
            let (b, e, _) = encode_bitrate((kbps - e2 * 256_000).min(256_000));
            (b, e, e2 as u8)
        }
    }
}

pub fn decode_bitrate(base: u8, ext: u8, ext2: u8) -> u32 {
    let high = if ext2 == 0xff {
        0
    } else {
        u32::from(ext2) * 256_000
    };
    let low = if ext != 0 {
        let e = u32::from(ext);
        match e {
            1..=74 => 8600 + e * 100,
            75..=186 => 16_000 + (e - 74) * 1000,
            _ => 128_000 + (e.min(250) - 186) * 2000,
        }
    } else {
        match base {
            0 | 0xff => 0,
            1..=63 => u32::from(base),
            64..=127 => 64 + (u32::from(base) - 64) * 8,
            _ => 576 + (u32::from(base) - 128) * 64,
        }
    };
    high + low
}

/// APN-AMBR (TS 24.301 §9.9.4.2), kbps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ApnAmbr {
    pub dl_kbps: u32,
    pub ul_kbps: u32,
}

impl ApnAmbr {
    pub fn to_bytes(&self) -> Vec<u8> {
        let (d, de, d2) = encode_bitrate(self.dl_kbps);
        let (u, ue, u2) = encode_bitrate(self.ul_kbps);
        if d2 | u2 != 0 {
            vec![d, u, de, ue, d2, u2]
        } else if de | ue != 0 {
            vec![d, u, de, ue]
        } else {
            vec![d, u]
        }
    }
    pub fn from_bytes(b: &[u8]) -> R<Self> {
        if b.len() < 2 {
            return Err(short("APN-AMBR", 2, b.len()));
        }
        let g = |i: usize| b.get(i).copied().unwrap_or(0);
        Ok(ApnAmbr {
            dl_kbps: decode_bitrate(b[0], g(2), g(4)),
            ul_kbps: decode_bitrate(b[1], g(3), g(5)),
        })
    }
}

/// EPS QoS (TS 24.301 §9.9.4.3): QCI, and for GBR bearers the MBR/GBR in kbps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EpsQos {
    pub qci: u8,
    /// (MBR UL, MBR DL, GBR UL, GBR DL) in kbps.
    pub gbr: Option<(u32, u32, u32, u32)>,
}

impl EpsQos {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = vec![self.qci];
        if let Some((mu, md, gu, gd)) = self.gbr {
            let e: Vec<(u8, u8, u8)> = [mu, md, gu, gd].into_iter().map(encode_bitrate).collect();
            v.extend(e.iter().map(|x| x.0));
            let ext = e.iter().any(|x| x.1 != 0 || x.2 != 0);
            if ext {
                v.extend(e.iter().map(|x| x.1));
            }
            if e.iter().any(|x| x.2 != 0) {
                v.extend(e.iter().map(|x| x.2));
            }
        }
        v
    }
    pub fn from_bytes(b: &[u8]) -> R<Self> {
        let qci = *b.first().ok_or_else(|| short("EPS QoS", 1, 0))?;
        if b.len() < 5 {
            return Ok(EpsQos { qci, gbr: None });
        }
        let g = |i: usize| b.get(i).copied().unwrap_or(0);
        let r = |k: usize| decode_bitrate(g(1 + k), g(5 + k), g(9 + k));
        Ok(EpsQos {
            qci,
            gbr: Some((r(0), r(1), r(2), r(3))),
        })
    }
}
