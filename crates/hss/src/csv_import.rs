//! CSV import. Columns are found by header name (order-free); errors carry
//! the file line number and the column name, never a key value.

use crate::{HssError, OpKind, PdnType, Subscriber};
use pepc_security::Key128;
use std::io::Read;

pub const COLUMNS: [&str; 13] = [
    "imsi", "k", "opc", "op", "amf", "sqn", "msisdn", "apn", "pdn_type", "qci", "arp", "ambr_ul",
    "ambr_dl",
];

fn err(line: u64, column: &str, what: impl Into<String>) -> HssError {
    HssError::Csv {
        line,
        column: column.to_string(),
        what: what.into(),
    }
}

fn hex_arr<const N: usize>(line: u64, col: &str, v: &str) -> Result<[u8; N], HssError> {
    let mut out = [0u8; N];
    if v.len() != 2 * N {
        return Err(err(
            line,
            col,
            format!("expected {} hex digits, got {}", 2 * N, v.len()),
        ));
    }
    hex::decode_to_slice(v, &mut out).map_err(|_| err(line, col, "not hexadecimal"))?;
    Ok(out)
}

fn num<T: core::str::FromStr>(line: u64, col: &str, v: &str) -> Result<T, HssError> {
    v.parse::<T>().map_err(|_| {
        err(
            line,
            col,
            format!("expected an unsigned integer in range, got {v:?}"),
        )
    })
}

pub fn parse(input: impl Read) -> Result<Vec<Subscriber>, HssError> {
    let mut rdr = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .from_reader(input);
    let headers = rdr
        .headers()
        .map_err(|e| err(1, "", format!("cannot read header: {e}")))?
        .clone();
    // Only imsi, k and one of opc/op are required; other columns take defaults.
    let mut idx = [None; COLUMNS.len()];
    for (i, name) in COLUMNS.iter().enumerate() {
        idx[i] = headers.iter().position(|h| h.eq_ignore_ascii_case(name));
    }
    for (i, name) in COLUMNS.iter().enumerate().take(2) {
        if idx[i].is_none() {
            return Err(err(1, name, "missing column in header"));
        }
    }
    if idx[2].is_none() && idx[3].is_none() {
        return Err(err(1, "opc", "header needs an opc or an op column"));
    }
    let mut out = Vec::new();
    for rec in rdr.records() {
        let rec = rec.map_err(|e| {
            let line = e.position().map(|p| p.line()).unwrap_or(0);
            err(line, "", format!("malformed CSV record: {e}"))
        })?;
        let line = rec.position().map(|p| p.line()).unwrap_or(0);
        let f = |c: usize| idx[c].and_then(|i| rec.get(i)).unwrap_or("");
        // Absent or empty optional cells take the `pepc subscriber add` defaults.
        let or = |c: usize, d: &'static str| if f(c).is_empty() { d } else { f(c) };
        let imsi = f(0).to_string();
        if !(6..=15).contains(&imsi.len()) || !imsi.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err(line, "imsi", "must be 6-15 digits"));
        }
        let k = Key128::from_hex(f(1)).map_err(|e| err(line, "k", e.to_string()))?;
        let op_kind = match (f(2).is_empty(), f(3).is_empty()) {
            (false, true) => OpKind::Opc(hex_arr(line, "opc", f(2))?),
            (true, false) => OpKind::Op(hex_arr(line, "op", f(3))?),
            (false, false) => return Err(err(line, "opc", "give either opc or op, not both")),
            (true, true) => return Err(err(line, "opc", "one of opc or op is required")),
        };
        let amf = hex_arr(line, "amf", or(4, "8000"))?;
        let sqn: u64 = if f(5).is_empty() {
            0
        } else {
            num(line, "sqn", f(5))?
        };
        if sqn > pepc_security::SQN_MAX {
            return Err(err(line, "sqn", "must fit 48 bits"));
        }
        let pdn_type: PdnType = or(8, "ipv4")
            .parse()
            .map_err(|e: pepc_types::PdnTypeError| err(line, "pdn_type", e.to_string()))?;
        let s = Subscriber {
            imsi,
            k,
            op_kind,
            amf,
            sqn,
            msisdn: f(6).to_string(),
            apn: or(7, "internet").to_string(),
            pdn_type,
            qci: num(line, "qci", or(9, "9"))?,
            arp_priority: num(line, "arp", or(10, "8"))?,
            ambr_ul_bps: num(line, "ambr_ul", or(11, "100000000"))?,
            ambr_dl_bps: num(line, "ambr_dl", or(12, "100000000"))?,
        };
        // Remaining semantic checks, reported under the CSV column name.
        if let Err(HssError::Invalid { field, what }) = s.validate() {
            return Err(err(line, field, what));
        }
        out.push(s);
    }
    Ok(out)
}
