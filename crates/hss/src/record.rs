//! Stored form of a subscriber profile: a small versioned binary record.
//!
//! The attach path decodes a profile for every subscriber a lease reads ahead, so the
//! record is fixed-order fields with length-prefixed strings (no field names, no hex),
//! decoded without allocation beyond the three strings. Version 1 was JSON; records
//! that start with `{` are still read as JSON so older databases keep working, and are
//! rewritten in this form the next time the subscriber is added or imported.
//!
//! Layout (version 2, integers little-endian):
//! `0x02 | imsi_len u8 | imsi | k[16] | op_kind u8 (0 OPc, 1 OP) | op[16] | amf[2] |
//!  sqn u64 | msisdn_len u8 | msisdn | apn_len u8 | apn | pdn_type u8 | qci u8 |
//!  arp_priority u8 | ambr_ul u64 | ambr_dl u64`

use crate::model::{OpKind, PdnType, Subscriber};
use pepc_security::Key128;

const VERSION: u8 = 2;

/// Encode `s` as a version-2 record.
pub fn encode(s: &Subscriber) -> Vec<u8> {
    let mut b = Vec::with_capacity(96 + s.imsi.len() + s.msisdn.len() + s.apn.len());
    b.push(VERSION);
    put_str(&mut b, &s.imsi);
    b.extend_from_slice(s.k.as_bytes());
    let (tag, op) = match &s.op_kind {
        OpKind::Opc(v) => (0u8, v),
        OpKind::Op(v) => (1u8, v),
    };
    b.push(tag);
    b.extend_from_slice(op);
    b.extend_from_slice(&s.amf);
    b.extend_from_slice(&s.sqn.to_le_bytes());
    put_str(&mut b, &s.msisdn);
    put_str(&mut b, &s.apn);
    b.push(match s.pdn_type {
        PdnType::Ipv4 => 0,
        PdnType::Ipv6 => 1,
        PdnType::Ipv4v6 => 2,
    });
    b.push(s.qci);
    b.push(s.arp_priority);
    b.extend_from_slice(&s.ambr_ul_bps.to_le_bytes());
    b.extend_from_slice(&s.ambr_dl_bps.to_le_bytes());
    b
}

/// Strings are validated to fit (IMSI ≤ 15, MSISDN ≤ 15, APN ≤ 100 bytes).
fn put_str(b: &mut Vec<u8>, s: &str) {
    let n = s.len().min(255);
    b.push(n as u8);
    b.extend_from_slice(&s.as_bytes()[..n]);
}

/// Why a stored record did not decode. Names the field that was wrong, never a value
/// (the record holds K and OPc).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("empty record")]
    Empty,
    #[error("unknown record version {0}")]
    Version(u8),
    /// Category and position only: serde's messages can quote field values.
    #[error("JSON record: {category} error at line {line} column {column}")]
    Json {
        category: &'static str,
        line: usize,
        column: usize,
    },
    #[error("record truncated in field {0}")]
    Truncated(&'static str),
    #[error("field {0} is not UTF-8")]
    NotUtf8(&'static str),
    #[error("field {field} has unknown value {value}")]
    UnknownValue { field: &'static str, value: u8 },
    #[error("{0} trailing bytes after the record")]
    Trailing(usize),
}

/// Decode a stored record (version 2, or a legacy JSON record).
pub fn decode(bytes: &[u8]) -> Result<Subscriber, RecordError> {
    match bytes.first() {
        Some(&VERSION) => decode_v2(&bytes[1..]),
        Some(b'{') => serde_json::from_slice(bytes).map_err(|e| RecordError::Json {
            category: match e.classify() {
                serde_json::error::Category::Io => "I/O",
                serde_json::error::Category::Syntax => "syntax",
                serde_json::error::Category::Data => "data",
                serde_json::error::Category::Eof => "end of input",
            },
            line: e.line(),
            column: e.column(),
        }),
        Some(&v) => Err(RecordError::Version(v)),
        None => Err(RecordError::Empty),
    }
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], RecordError> {
        if self.b.len() < n {
            return Err(RecordError::Truncated(field));
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u8(&mut self, field: &'static str) -> Result<u8, RecordError> {
        Ok(self.take(1, field)?[0])
    }
    fn arr<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], RecordError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, field)?);
        Ok(a)
    }
    fn u64(&mut self, field: &'static str) -> Result<u64, RecordError> {
        Ok(u64::from_le_bytes(self.arr::<8>(field)?))
    }
    fn string(&mut self, field: &'static str) -> Result<String, RecordError> {
        let n = self.u8(field)? as usize;
        let raw = self.take(n, field)?;
        std::str::from_utf8(raw)
            .map(str::to_owned)
            .map_err(|_| RecordError::NotUtf8(field))
    }
}

fn decode_v2(bytes: &[u8]) -> Result<Subscriber, RecordError> {
    let mut r = Reader { b: bytes };
    let imsi = r.string("imsi")?;
    let k = Key128::from_slice(r.take(16, "k")?).map_err(|_| RecordError::Truncated("k"))?;
    let tag = r.u8("op_kind")?;
    let op = r.arr::<16>("op")?;
    let op_kind = match tag {
        0 => OpKind::Opc(op),
        1 => OpKind::Op(op),
        t => {
            return Err(RecordError::UnknownValue {
                field: "op_kind",
                value: t,
            })
        }
    };
    let amf = r.arr::<2>("amf")?;
    let sqn = r.u64("sqn")?;
    let msisdn = r.string("msisdn")?;
    let apn = r.string("apn")?;
    let pdn_type = match r.u8("pdn_type")? {
        0 => PdnType::Ipv4,
        1 => PdnType::Ipv6,
        2 => PdnType::Ipv4v6,
        t => {
            return Err(RecordError::UnknownValue {
                field: "pdn_type",
                value: t,
            })
        }
    };
    let qci = r.u8("qci")?;
    let arp_priority = r.u8("arp_priority")?;
    let ambr_ul_bps = r.u64("ambr_ul")?;
    let ambr_dl_bps = r.u64("ambr_dl")?;
    if !r.b.is_empty() {
        return Err(RecordError::Trailing(r.b.len()));
    }
    Ok(Subscriber {
        imsi,
        k,
        op_kind,
        amf,
        sqn,
        msisdn,
        apn,
        pdn_type,
        qci,
        arp_priority,
        ambr_ul_bps,
        ambr_dl_bps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Subscriber {
        Subscriber {
            imsi: "001010000000001".into(),
            k: Key128::from_hex("465B5CE8B199B49FAA5F0A2EE238A6BC").unwrap(),
            op_kind: OpKind::Opc([0xE8; 16]),
            amf: [0x80, 0x00],
            sqn: 0x0012_3456_789a,
            msisdn: "15551230001".into(),
            apn: "internet".into(),
            pdn_type: PdnType::Ipv4v6,
            qci: 9,
            arp_priority: 8,
            ambr_ul_bps: 50_000_000,
            ambr_dl_bps: 100_000_000,
        }
    }

    #[test]
    fn round_trip() {
        let s = sample();
        assert_eq!(decode(&encode(&s)).unwrap(), s);
        let mut op = sample();
        op.op_kind = OpKind::Op([7; 16]);
        op.pdn_type = PdnType::Ipv6;
        assert_eq!(decode(&encode(&op)).unwrap(), op);
    }

    #[test]
    fn legacy_json_records_still_decode() {
        let s = sample();
        let json = serde_json::to_vec(&s).unwrap();
        assert_eq!(decode(&json).unwrap(), s);
    }

    #[test]
    fn every_truncation_is_an_error_naming_a_field() {
        let b = encode(&sample());
        for n in 0..b.len() {
            let e = decode(&b[..n]).unwrap_err();
            assert!(
                matches!(e, RecordError::Truncated(_) | RecordError::Empty),
                "prefix {n}: {e}"
            );
        }
        let mut long = b.clone();
        long.push(0);
        assert_eq!(decode(&long).unwrap_err(), RecordError::Trailing(1));
        let mut bad = b;
        bad[0] = 9;
        assert_eq!(decode(&bad).unwrap_err(), RecordError::Version(9));
    }

    #[test]
    fn errors_never_show_key_bytes() {
        let mut b = encode(&sample());
        // Corrupt the op_kind tag that follows K.
        let tag_at = 1 + 1 + 15 + 16;
        b[tag_at] = 5;
        let e = decode(&b).unwrap_err();
        assert_eq!(
            e,
            RecordError::UnknownValue {
                field: "op_kind",
                value: 5
            }
        );
        let e = e.to_string();
        assert!(!e.to_ascii_uppercase().contains("465B"), "{e}");
    }
}
