//! S1AP payloads (SCTP DATA chunks with PPID 18) from the shared real captures.
//! Shared with pepc-nas's tests via `#[path]`.
#![allow(dead_code)]

use std::path::PathBuf;

pub const S1AP_PPID: u32 = 18;
/// RFC 6951 SCTP-over-UDP port used by some captures.
pub const SCTP_UDP_PORT: u16 = 9899;

pub fn captures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/captures")
}

pub fn capture_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(captures_dir())
        .expect("shared/captures present")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pcap" || x == "pcapng"))
        .collect();
    v.sort();
    v
}

/// The SCTP packet inside an IPv4 datagram: IP protocol 132, or UDP to/from port 9899.
fn sctp_of(ip: &[u8]) -> Option<&[u8]> {
    let hl = ((ip.first()? & 0x0f) as usize) * 4;
    let payload = ip.get(hl..)?;
    match ip.get(9)? {
        132 => Some(payload),
        17 => {
            let sp = u16::from_be_bytes([*payload.first()?, *payload.get(1)?]);
            let dp = u16::from_be_bytes([*payload.get(2)?, *payload.get(3)?]);
            (sp == SCTP_UDP_PORT || dp == SCTP_UDP_PORT).then(|| payload.get(8..))?
        }
        _ => None,
    }
}

/// One S1AP message from a capture, with the frame it completed in.
pub struct S1apPayload {
    pub frame: usize,
    pub bytes: Vec<u8>,
}

/// Every S1AP payload in the file, reassembling fragmented DATA chunks per stream.
pub fn s1ap_payloads(path: &std::path::Path) -> Vec<S1apPayload> {
    use pepc_sctp::wire::{chunk_iter, Chunk};
    let frames = pepc_wire::pcap::read_capture(path).expect("capture readable");
    let mut out = Vec::new();
    let mut partial: std::collections::HashMap<(Vec<u8>, u16), Vec<u8>> = Default::default();
    for d in pepc_wire::pcap::ipv4_datagrams(&frames) {
        let Some(sctp) = sctp_of(&d.bytes) else {
            continue;
        };
        if sctp.len() < 12 {
            continue;
        }
        let assoc = [&d.bytes[12..20], &sctp[0..4]].concat();
        for c in chunk_iter(&sctp[12..]) {
            let Ok(c) = c else { break };
            let Ok(Chunk::Data(data)) = c.parse() else {
                continue;
            };
            if data.ppid != S1AP_PPID {
                continue;
            }
            let key = (assoc.clone(), data.stream);
            match (data.beginning(), data.ending()) {
                (true, true) => out.push(S1apPayload {
                    frame: d.frame,
                    bytes: data.payload.to_vec(),
                }),
                (true, false) => {
                    partial.insert(key, data.payload.to_vec());
                }
                (false, e) => {
                    if let Some(buf) = partial.get_mut(&key) {
                        buf.extend_from_slice(data.payload);
                        if e {
                            let bytes = partial.remove(&key).unwrap_or_default();
                            out.push(S1apPayload {
                                frame: d.frame,
                                bytes,
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn unhex(s: &str) -> Vec<u8> {
    let s = s.trim();
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}
