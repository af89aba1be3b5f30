//! Capture files for tests and tools: read classic pcap and pcapng, pull the IPv4 packet
//! out of common link layers, write classic pcap (LINKTYPE_RAW), and check a capture with
//! tshark. Not on the hot path: this copies freely.

use crate::checksum;
use crate::ipv4::{Ipv4Packet, Ipv4Repr, PROTO_UDP};
use crate::udp::{UdpPacket, UdpRepr};
use std::fmt;
use std::io::{self, Read, Write};
use std::net::SocketAddrV4;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const LINKTYPE_NULL: u32 = 0;
pub const LINKTYPE_ETHERNET: u32 = 1;
pub const LINKTYPE_RAW: u32 = 101;
pub const LINKTYPE_LOOP: u32 = 108;
pub const LINKTYPE_LINUX_SLL: u32 = 113;
pub const LINKTYPE_IPV4: u32 = 228;
pub const LINKTYPE_LINUX_SLL2: u32 = 276;

/// One captured frame, with the link type of the interface it was captured on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub linktype: u32,
    /// Capture time in ns since the Unix epoch (0 for pcapng Simple Packet Blocks).
    pub ts_ns: u64,
    pub data: Vec<u8>,
}

/// Why a capture could not be read.
#[derive(Debug)]
pub enum PcapError {
    Io(io::Error),
    /// The file starts with neither a pcap magic nor a pcapng Section Header Block.
    BadMagic(u32),
    /// A record or block runs past the end of the file.
    Truncated {
        what: &'static str,
        offset: usize,
    },
    /// A block or record is internally inconsistent.
    Malformed {
        what: &'static str,
        offset: usize,
    },
}

impl fmt::Display for PcapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PcapError::Io(e) => write!(f, "i/o error: {e}"),
            PcapError::BadMagic(m) => write!(f, "not a pcap/pcapng file (magic {m:#010x})"),
            PcapError::Truncated { what, offset } => {
                write!(f, "truncated {what} at offset {offset}")
            }
            PcapError::Malformed { what, offset } => {
                write!(f, "malformed {what} at offset {offset}")
            }
        }
    }
}

impl std::error::Error for PcapError {}

impl From<io::Error> for PcapError {
    fn from(e: io::Error) -> Self {
        PcapError::Io(e)
    }
}

/// Read every frame of a classic pcap or pcapng file.
pub fn read_capture(path: impl AsRef<Path>) -> Result<Vec<Frame>, PcapError> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.read_to_end(&mut bytes)?;
    parse_capture(&bytes)
}

/// Parse a whole capture file held in memory.
pub fn parse_capture(bytes: &[u8]) -> Result<Vec<Frame>, PcapError> {
    if bytes.len() < 4 {
        return Err(PcapError::Truncated {
            what: "file header",
            offset: 0,
        });
    }
    let magic = u32::from_le_bytes(bytes[0..4].try_into().unwrap());
    match magic {
        0xa1b2_c3d4 | 0xd4c3_b2a1 | 0xa1b2_3c4d | 0x4d3c_b2a1 => parse_classic(bytes),
        0x0a0d_0d0a => parse_pcapng(bytes),
        m => Err(PcapError::BadMagic(m)),
    }
}

#[derive(Clone, Copy)]
struct Endian {
    big: bool,
}

impl Endian {
    fn u16(self, b: &[u8], at: usize) -> u16 {
        let a = [b[at], b[at + 1]];
        if self.big {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        }
    }
    fn u32(self, b: &[u8], at: usize) -> u32 {
        let a = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        if self.big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    }
    fn u64(self, b: &[u8], at: usize) -> u64 {
        let a: [u8; 8] = b[at..at + 8].try_into().unwrap();
        if self.big {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        }
    }
}

fn parse_classic(b: &[u8]) -> Result<Vec<Frame>, PcapError> {
    if b.len() < 24 {
        return Err(PcapError::Truncated {
            what: "pcap file header",
            offset: 0,
        });
    }
    let le = u32::from_le_bytes(b[0..4].try_into().unwrap());
    let (big, nsec) = match le {
        0xa1b2_c3d4 => (false, false),
        0xa1b2_3c4d => (false, true),
        0xd4c3_b2a1 => (true, false),
        _ => (true, true),
    };
    let e = Endian { big };
    // The upper bits of the link-type field carry FCS information (pcap spec §"LinkType").
    let linktype = e.u32(b, 20) & 0x0fff_ffff;
    let mut frames = Vec::new();
    let mut off = 24;
    while off < b.len() {
        if b.len() - off < 16 {
            return Err(PcapError::Truncated {
                what: "pcap record header",
                offset: off,
            });
        }
        let sec = e.u32(b, off) as u64;
        let frac = e.u32(b, off + 4) as u64;
        let incl = e.u32(b, off + 8) as usize;
        let start = off + 16;
        if b.len() - start < incl {
            return Err(PcapError::Truncated {
                what: "pcap record data",
                offset: off,
            });
        }
        let ts_ns = sec * 1_000_000_000 + if nsec { frac } else { frac * 1000 };
        frames.push(Frame {
            linktype,
            ts_ns,
            data: b[start..start + incl].to_vec(),
        });
        off = start + incl;
    }
    Ok(frames)
}

/// Per-interface state from an Interface Description Block.
#[derive(Clone, Copy)]
struct Iface {
    linktype: u32,
    /// if_tsresol: exponent and whether it is a power of 2 (else 10).
    resol_exp: u8,
    resol_pow2: bool,
    /// if_tsoffset, seconds.
    offset_s: i64,
}

impl Iface {
    fn ts_ns(&self, ticks: u64) -> u64 {
        let ns: u128 = if self.resol_pow2 {
            ((ticks as u128) * 1_000_000_000) >> self.resol_exp.min(127)
        } else if self.resol_exp <= 9 {
            (ticks as u128) * 10u128.pow(9 - self.resol_exp as u32)
        } else {
            (ticks as u128) / 10u128.pow((self.resol_exp as u32 - 9).min(38))
        };
        let ns = ns as i128 + self.offset_s as i128 * 1_000_000_000;
        ns.clamp(0, u64::MAX as i128) as u64
    }
}

const SHB: u32 = 0x0a0d_0d0a;
const IDB: u32 = 1;
const OPB: u32 = 2; // obsolete Packet Block, still written by old tools
const SPB: u32 = 3;
const EPB: u32 = 6;

fn parse_pcapng(b: &[u8]) -> Result<Vec<Frame>, PcapError> {
    let mut frames = Vec::new();
    let mut ifaces: Vec<Iface> = Vec::new();
    let mut e = Endian { big: false };
    let mut off = 0;
    while off < b.len() {
        if b.len() - off < 12 {
            return Err(PcapError::Truncated {
                what: "pcapng block header",
                offset: off,
            });
        }
        // The block type of an SHB reads the same in both byte orders; its byte-order
        // magic sets the order for the whole section.
        let raw_type = u32::from_le_bytes(b[off..off + 4].try_into().unwrap());
        if raw_type == SHB {
            let bom = u32::from_le_bytes(b[off + 8..off + 12].try_into().unwrap());
            e = match bom {
                0x1a2b_3c4d => Endian { big: false },
                0x4d3c_2b1a => Endian { big: true },
                _ => {
                    return Err(PcapError::Malformed {
                        what: "pcapng byte-order magic",
                        offset: off,
                    })
                }
            };
            ifaces.clear();
        }
        let btype = e.u32(b, off);
        let blen = e.u32(b, off + 4) as usize;
        if blen < 12 || !blen.is_multiple_of(4) {
            return Err(PcapError::Malformed {
                what: "pcapng block length",
                offset: off,
            });
        }
        if b.len() - off < blen {
            return Err(PcapError::Truncated {
                what: "pcapng block",
                offset: off,
            });
        }
        let body = &b[off + 8..off + blen - 4];
        match btype {
            IDB => ifaces.push(parse_idb(e, body, off)?),
            EPB | OPB => {
                if body.len() < 20 {
                    return Err(PcapError::Malformed {
                        what: "pcapng packet block",
                        offset: off,
                    });
                }
                let ifid = if btype == EPB {
                    e.u32(body, 0) as usize
                } else {
                    e.u16(body, 0) as usize
                };
                let ts = ((e.u32(body, 4) as u64) << 32) | e.u32(body, 8) as u64;
                let caplen = e.u32(body, 12) as usize;
                if body.len() - 20 < caplen {
                    return Err(PcapError::Malformed {
                        what: "pcapng packet block captured length",
                        offset: off,
                    });
                }
                let iface = ifaces.get(ifid).ok_or(PcapError::Malformed {
                    what: "pcapng packet block interface id",
                    offset: off,
                })?;
                frames.push(Frame {
                    linktype: iface.linktype,
                    ts_ns: iface.ts_ns(ts),
                    data: body[20..20 + caplen].to_vec(),
                });
            }
            SPB => {
                if body.len() < 4 {
                    return Err(PcapError::Malformed {
                        what: "pcapng simple packet block",
                        offset: off,
                    });
                }
                let orig = e.u32(body, 0) as usize;
                let iface = ifaces.first().ok_or(PcapError::Malformed {
                    what: "pcapng simple packet block without interface",
                    offset: off,
                })?;
                // An SPB's captured length is the original length cut to the block.
                let caplen = orig.min(body.len() - 4);
                frames.push(Frame {
                    linktype: iface.linktype,
                    ts_ns: 0,
                    data: body[4..4 + caplen].to_vec(),
                });
            }
            _ => {} // SHB handled above; statistics, name resolution etc. skipped
        }
        off += blen;
    }
    Ok(frames)
}

fn parse_idb(e: Endian, body: &[u8], off: usize) -> Result<Iface, PcapError> {
    if body.len() < 8 {
        return Err(PcapError::Malformed {
            what: "pcapng interface description block",
            offset: off,
        });
    }
    let mut iface = Iface {
        linktype: e.u16(body, 0) as u32,
        resol_exp: 6,
        resol_pow2: false,
        offset_s: 0,
    };
    let mut o = 8;
    while body.len() - o >= 4 {
        let code = e.u16(body, o);
        let len = e.u16(body, o + 2) as usize;
        let v = o + 4;
        if body.len() - v < len {
            break; // a bad option list only loses options, not the interface
        }
        match (code, len) {
            (0, _) => break,
            (9, 1) => {
                iface.resol_pow2 = body[v] & 0x80 != 0;
                iface.resol_exp = body[v] & 0x7f;
            }
            (14, 8) => iface.offset_s = e.u64(body, v) as i64,
            _ => {}
        }
        o = v + len.div_ceil(4) * 4;
    }
    Ok(iface)
}

/// The IPv4 packet inside a captured frame, cut to its total length (dropping link-layer
/// padding), or `None` if the frame carries something else.
pub fn ipv4_of(frame: &Frame) -> Option<&[u8]> {
    let d = &frame.data[..];
    let ip = match frame.linktype {
        LINKTYPE_ETHERNET => {
            let mut off = 12;
            let mut ethertype = be16(d, off)?;
            // 802.1Q, 802.1ad (QinQ) and the old 0x9100 tag: skip 4 bytes each.
            while matches!(ethertype, 0x8100 | 0x88a8 | 0x9100) {
                off += 4;
                ethertype = be16(d, off)?;
            }
            if ethertype != 0x0800 {
                return None;
            }
            d.get(off + 2..)?
        }
        LINKTYPE_LINUX_SLL => {
            if be16(d, 14)? != 0x0800 {
                return None;
            }
            d.get(16..)?
        }
        LINKTYPE_LINUX_SLL2 => {
            if be16(d, 0)? != 0x0800 {
                return None;
            }
            d.get(20..)?
        }
        LINKTYPE_RAW | LINKTYPE_IPV4 => d,
        LINKTYPE_NULL | LINKTYPE_LOOP => {
            let fam = d.get(0..4)?;
            // BSD null: AF_INET (2) in the capturing host's byte order; LOOP: network order.
            let af_le = u32::from_le_bytes(fam.try_into().ok()?);
            let af_be = u32::from_be_bytes(fam.try_into().ok()?);
            if af_le != 2 && af_be != 2 {
                return None;
            }
            &d[4..]
        }
        _ => return None,
    };
    if ip.len() < 20 || ip[0] >> 4 != 4 {
        return None;
    }
    let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
    if (20..=ip.len()).contains(&total) {
        Some(&ip[..total])
    } else {
        Some(ip)
    }
}

/// A whole IPv4 datagram from a capture, reassembled if it was fragmented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    /// Index (0-based) of the frame that completed it.
    pub frame: usize,
    pub ts_ns: u64,
    /// The IPv4 packet: for a reassembled one, the first fragment's header with the
    /// fragment fields cleared, total length and checksum recomputed.
    pub bytes: Vec<u8>,
}

/// Every IPv4 datagram of a capture, in completion order, reassembling fragments (as
/// tshark does by default). Incomplete or inconsistent fragment sets are dropped.
pub fn ipv4_datagrams(frames: &[Frame]) -> Vec<Datagram> {
    use std::collections::HashMap;
    type Key = ([u8; 4], [u8; 4], u16, u8);
    /// Per datagram: (offset, payload) pieces, the total payload length once the last
    /// fragment (MF = 0) has been seen, and the first fragment's header.
    type Pieces = (Vec<(usize, Vec<u8>)>, Option<usize>, Vec<u8>);
    let mut pending: HashMap<Key, Pieces> = HashMap::new();
    let mut out = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let Some(ip) = ipv4_of(f) else { continue };
        let hl = ((ip[0] & 0x0f) as usize) * 4;
        if hl < 20 || ip.len() < hl {
            continue;
        }
        let fo = u16::from_be_bytes([ip[6], ip[7]]);
        let (mf, off) = (fo & 0x2000 != 0, ((fo & 0x1fff) as usize) * 8);
        if !mf && off == 0 {
            out.push(Datagram {
                frame: i,
                ts_ns: f.ts_ns,
                bytes: ip.to_vec(),
            });
            continue;
        }
        let key = (
            ip[12..16].try_into().unwrap(),
            ip[16..20].try_into().unwrap(),
            u16::from_be_bytes([ip[4], ip[5]]),
            ip[9],
        );
        let e = pending.entry(key).or_default();
        let data = ip[hl..].to_vec();
        if !mf {
            e.1 = Some(off + data.len());
        }
        if off == 0 {
            e.2 = ip[..hl].to_vec();
        }
        e.0.push((off, data));
        let (Some(total), false) = (e.1, e.2.is_empty()) else {
            continue;
        };
        e.0.sort_by_key(|p| p.0);
        let mut payload = Vec::with_capacity(total);
        for (o, d) in &e.0 {
            if *o > payload.len() {
                break; // a hole: wait for more fragments
            }
            let skip = payload.len() - o;
            if skip < d.len() {
                payload.extend_from_slice(&d[skip..]);
            }
        }
        if payload.len() < total {
            continue;
        }
        payload.truncate(total);
        let (_, (_, _, hdr)) = pending.remove_entry(&key).unwrap();
        let len = hdr.len() + payload.len();
        if len > u16::MAX as usize {
            continue;
        }
        let mut bytes = hdr;
        bytes.extend_from_slice(&payload);
        bytes[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        bytes[6] &= 0x40; // keep DF, clear MF and offset
        bytes[7] = 0;
        bytes[10..12].fill(0);
        let c = checksum::checksum(&bytes[..hl]);
        bytes[10..12].copy_from_slice(&c.to_be_bytes());
        out.push(Datagram {
            frame: i,
            ts_ns: f.ts_ns,
            bytes,
        });
    }
    out
}

fn be16(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*d.get(at)?, *d.get(at + 1)?]))
}

/// Writes classic pcap (nanosecond timestamps, little endian) with LINKTYPE_RAW: each
/// record is one IPv4 packet.
pub struct PcapWriter<W: Write> {
    w: W,
    ident: u16,
}

impl<W: Write> PcapWriter<W> {
    /// Write the file header.
    pub fn new(mut w: W) -> io::Result<Self> {
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&0xa1b2_3c4du32.to_le_bytes()); // ns resolution
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        h[16..20].copy_from_slice(&65535u32.to_le_bytes());
        h[20..24].copy_from_slice(&LINKTYPE_RAW.to_le_bytes());
        w.write_all(&h)?;
        Ok(PcapWriter { w, ident: 1 })
    }

    /// Append one raw IPv4 packet.
    pub fn write_packet(&mut self, ts_ns: u64, ip: &[u8]) -> io::Result<()> {
        let len = u32::try_from(ip.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "packet too large"))?;
        let mut r = [0u8; 16];
        r[0..4].copy_from_slice(&((ts_ns / 1_000_000_000) as u32).to_le_bytes());
        r[4..8].copy_from_slice(&((ts_ns % 1_000_000_000) as u32).to_le_bytes());
        r[8..12].copy_from_slice(&len.to_le_bytes());
        r[12..16].copy_from_slice(&len.to_le_bytes());
        self.w.write_all(&r)?;
        self.w.write_all(ip)
    }

    /// Append `payload` wrapped in a synthesized IPv4 + UDP header (valid checksums, TTL
    /// 64, DF set), e.g. to record what we sent on S1-U.
    pub fn write_ipv4_udp(
        &mut self,
        ts_ns: u64,
        src: SocketAddrV4,
        dst: SocketAddrV4,
        payload: &[u8],
    ) -> io::Result<()> {
        let total = 28 + payload.len();
        if total > 65535 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "UDP payload does not fit one IPv4 packet",
            ));
        }
        let mut p = vec![0u8; total];
        build_ipv4_udp(&mut p, self.ident, src, dst, payload);
        self.ident = self.ident.wrapping_add(1);
        self.write_packet(ts_ns, &p)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    pub fn into_inner(self) -> W {
        self.w
    }
}

/// Fill `p` (exactly 28 + payload bytes) with IPv4 + UDP + payload, using the same
/// emitters as the data path.
fn build_ipv4_udp(p: &mut [u8], ident: u16, src: SocketAddrV4, dst: SocketAddrV4, pl: &[u8]) {
    p[28..].copy_from_slice(pl);
    let udp = UdpRepr {
        src_port: src.port(),
        dst_port: dst.port(),
        payload_len: pl.len(),
    };
    let ip = Ipv4Repr {
        src: *src.ip(),
        dst: *dst.ip(),
        protocol: PROTO_UDP,
        payload_len: 8 + pl.len(),
        ttl: 64,
        dscp_ecn: 0,
        ident,
        dont_frag: true,
    };
    // Lengths were checked by the caller (≤ 65535 in total), so neither emit can fail.
    udp.emit(
        &mut UdpPacket::new_unchecked(&mut p[20..]),
        *src.ip(),
        *dst.ip(),
    )
    .expect("UDP length checked by caller");
    ip.emit(&mut Ipv4Packet::new_unchecked(&mut p[..]))
        .expect("IPv4 length checked by caller");
}

/// What tshark said about a capture.
#[derive(Debug, Clone, Default)]
pub struct TsharkReport {
    /// Frames dissected.
    pub frames: usize,
    /// Lines containing "[Malformed Packet", prefixed with their frame number.
    pub malformed: Vec<String>,
    /// Expert-info lines of severity Warning, prefixed with their frame number.
    pub warnings: Vec<String>,
    /// Expert-info lines of severity Error, prefixed with their frame number.
    pub errors: Vec<String>,
    /// The full `-V` text, for assertions on decoded fields.
    pub text: String,
}

impl TsharkReport {
    /// No malformed packet, no expert warning or error.
    pub fn is_clean(&self) -> bool {
        self.malformed.is_empty() && self.warnings.is_empty() && self.errors.is_empty()
    }
}

/// Run `tshark -r FILE -V` and collect malformed packets and expert warnings/errors.
///
/// Each `decode_as` entry is passed to tshark: entries like `"udp.port==2153,gtp"` as
/// `-d`, entries like `"gtp.dissect_gtp_over_udp:TRUE"` (a `pref:value`) as `-o`.
/// Fails if tshark cannot be run, exits non-zero, or takes over 120 s.
pub fn tshark_check(
    pcap_path: impl AsRef<Path>,
    decode_as: &[&str],
) -> Result<TsharkReport, String> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-n").arg("-r").arg(pcap_path.as_ref()).arg("-V");
    for opt in decode_as {
        if opt.contains("==") {
            cmd.arg("-d").arg(opt);
        } else {
            cmd.arg("-o").arg(opt);
        }
    }
    let text = run_bounded(cmd, Duration::from_secs(120))?;
    let mut rep = TsharkReport::default();
    let mut frame = String::from("?");
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Frame ") {
            if let Some((n, _)) = rest.split_once(':') {
                if n.chars().all(|c| c.is_ascii_digit()) {
                    rep.frames += 1;
                    frame = n.to_string();
                }
            }
        }
        let t = line.trim();
        if t.contains("[Malformed Packet") {
            rep.malformed.push(format!("frame {frame}: {t}"));
        }
        if t.contains("Expert Info (Warning") {
            rep.warnings.push(format!("frame {frame}: {t}"));
        } else if t.contains("Expert Info (Error") {
            rep.errors.push(format!("frame {frame}: {t}"));
        }
    }
    rep.text = text;
    Ok(rep)
}

/// Run a command to completion, returning stdout; kill it after `limit`.
fn run_bounded(mut cmd: Command, limit: Duration) -> Result<String, String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run tshark: {e}"))?;
    // Drain both pipes in threads so a full pipe cannot stall the child.
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("tshark did not finish within {limit:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for tshark: {e}")),
        }
    };
    let out = t_out.join().unwrap_or_default();
    let err = t_err.join().unwrap_or_default();
    if !status.success() {
        return Err(format!(
            "tshark failed ({status}): {}",
            String::from_utf8_lossy(&err).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn classic(big: bool, nsec: bool, linktype: u32, recs: &[(u32, u32, &[u8])]) -> Vec<u8> {
        let magic: u32 = if nsec { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
        let w32 = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let w16 = |v: u16| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut f = Vec::new();
        f.extend(w32(magic));
        f.extend(w16(2));
        f.extend(w16(4));
        f.extend([0u8; 8]);
        f.extend(w32(65535));
        f.extend(w32(linktype));
        for (s, frac, d) in recs {
            f.extend(w32(*s));
            f.extend(w32(*frac));
            f.extend(w32(d.len() as u32));
            f.extend(w32(d.len() as u32));
            f.extend(*d);
        }
        f
    }

    #[test]
    fn classic_all_variants() {
        for big in [false, true] {
            for nsec in [false, true] {
                let f = classic(big, nsec, 1, &[(10, 5, &[1, 2, 3]), (11, 0, &[])]);
                let fr = parse_capture(&f).unwrap();
                assert_eq!(fr.len(), 2);
                assert_eq!(fr[0].linktype, 1);
                assert_eq!(fr[0].data, vec![1, 2, 3]);
                let frac_ns = if nsec { 5 } else { 5000 };
                assert_eq!(fr[0].ts_ns, 10_000_000_000 + frac_ns);
                assert_eq!(fr[1].ts_ns, 11_000_000_000);
                // Every truncation is an error, never a panic.
                for cut in 1..f.len() {
                    if cut == 24 || cut == 24 + 16 + 3 {
                        continue; // record boundaries: a shorter but valid file
                    }
                    assert!(parse_capture(&f[..cut]).is_err(), "cut {cut}");
                }
            }
        }
    }

    fn ng_block(big: bool, t: u32, body: &[u8]) -> Vec<u8> {
        let w32 = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut body = body.to_vec();
        while !body.len().is_multiple_of(4) {
            body.push(0);
        }
        let len = body.len() as u32 + 12;
        let mut b = Vec::new();
        b.extend(w32(t));
        b.extend(w32(len));
        b.extend(body);
        b.extend(w32(len));
        b
    }

    #[test]
    fn pcapng_both_endians_with_tsresol_and_spb() {
        for big in [false, true] {
            let w32 = |v: u32| {
                if big {
                    v.to_be_bytes()
                } else {
                    v.to_le_bytes()
                }
            };
            let w16 = |v: u16| {
                if big {
                    v.to_be_bytes()
                } else {
                    v.to_le_bytes()
                }
            };
            let mut shb = Vec::new();
            shb.extend(w32(0x1a2b_3c4d));
            shb.extend(w16(1));
            shb.extend(w16(0));
            shb.extend([0xffu8; 8]);
            // IDB 0: raw IP, ns resolution; IDB 1: SLL, default µs.
            let mut idb0 = Vec::new();
            idb0.extend(w16(101));
            idb0.extend(w16(0));
            idb0.extend(w32(0));
            idb0.extend(w16(9));
            idb0.extend(w16(1));
            idb0.extend([9u8, 0, 0, 0]);
            idb0.extend([0u8; 4]); // opt_endofopt
            let mut idb1 = Vec::new();
            idb1.extend(w16(113));
            idb1.extend(w16(0));
            idb1.extend(w32(0));
            let epb = |ifid: u32, ts: u64, d: &[u8]| {
                let mut b = Vec::new();
                b.extend(w32(ifid));
                b.extend(w32((ts >> 32) as u32));
                b.extend(w32(ts as u32));
                b.extend(w32(d.len() as u32));
                b.extend(w32(d.len() as u32));
                b.extend(d);
                b
            };
            let mut spb = Vec::new();
            spb.extend(w32(3));
            spb.extend([7u8, 8, 9]);
            let mut f = Vec::new();
            f.extend(ng_block(big, SHB, &shb));
            f.extend(ng_block(big, IDB, &idb0));
            f.extend(ng_block(big, IDB, &idb1));
            f.extend(ng_block(big, 5, &[0u8; 8])); // ISB: skipped
            f.extend(ng_block(big, EPB, &epb(0, 1_234_567_890_123, &[0x45, 1])));
            f.extend(ng_block(big, EPB, &epb(1, 2_000_001, &[1, 2, 3, 4, 5])));
            f.extend(ng_block(big, SPB, &spb));
            let fr = parse_capture(&f).unwrap();
            assert_eq!(fr.len(), 3);
            assert_eq!((fr[0].linktype, fr[0].ts_ns), (101, 1_234_567_890_123));
            assert_eq!(fr[0].data, vec![0x45, 1]);
            assert_eq!((fr[1].linktype, fr[1].ts_ns), (113, 2_000_001_000));
            assert_eq!(fr[1].data, vec![1, 2, 3, 4, 5]);
            assert_eq!((fr[2].linktype, fr[2].data.clone()), (101, vec![7, 8, 9]));
            for cut in 1..f.len() {
                let _ = parse_capture(&f[..cut]); // must not panic
            }
        }
    }

    fn ip_bytes() -> Vec<u8> {
        let mut p = vec![0u8; 28 + 4];
        build_ipv4_udp(
            &mut p,
            7,
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 1000),
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 2152),
            &[1, 2, 3, 4],
        );
        p
    }

    #[test]
    fn ipv4_of_link_layers() {
        let ip = ip_bytes();
        let mk = |lt: u32, hdr: &[u8], pad: usize| Frame {
            linktype: lt,
            ts_ns: 0,
            data: [hdr, &ip[..], &vec![0u8; pad][..]].concat(),
        };
        let mut eth = vec![0u8; 12];
        eth.extend([0x08, 0x00]);
        assert_eq!(ipv4_of(&mk(1, &eth, 6)), Some(&ip[..]));
        let mut qinq = vec![0u8; 12];
        qinq.extend([0x88, 0xa8, 0, 1, 0x81, 0x00, 0, 2, 0x08, 0x00]);
        assert_eq!(ipv4_of(&mk(1, &qinq, 0)), Some(&ip[..]));
        let mut arp = vec![0u8; 12];
        arp.extend([0x08, 0x06]);
        assert_eq!(ipv4_of(&mk(1, &arp, 0)), None);
        let mut sll = vec![0u8; 14];
        sll.extend([0x08, 0x00]);
        assert_eq!(ipv4_of(&mk(113, &sll, 0)), Some(&ip[..]));
        let mut sll2 = vec![0x08, 0x00];
        sll2.extend([0u8; 18]);
        assert_eq!(ipv4_of(&mk(276, &sll2, 0)), Some(&ip[..]));
        assert_eq!(ipv4_of(&mk(101, &[], 0)), Some(&ip[..]));
        assert_eq!(ipv4_of(&mk(228, &[], 0)), Some(&ip[..]));
        assert_eq!(ipv4_of(&mk(0, &[2, 0, 0, 0], 0)), Some(&ip[..]));
        assert_eq!(ipv4_of(&mk(0, &[0, 0, 0, 2], 0)), Some(&ip[..]));
        assert_eq!(ipv4_of(&mk(0, &[24, 0, 0, 0], 0)), None);
        assert_eq!(ipv4_of(&mk(1, &[0u8; 5], 0)), None);
    }

    #[test]
    fn fragments_are_reassembled() {
        let mut whole = vec![0u8; 28 + 1000];
        let pl: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        build_ipv4_udp(
            &mut whole,
            99,
            SocketAddrV4::new(Ipv4Addr::new(1, 1, 1, 1), 5),
            SocketAddrV4::new(Ipv4Addr::new(2, 2, 2, 2), 6),
            &pl,
        );
        whole[6] = 0; // clear DF so it may be fragmented
        let c = checksum::checksum(&{
            let mut h = whole[..20].to_vec();
            h[10..12].fill(0);
            h
        });
        whole[10..12].copy_from_slice(&c.to_be_bytes());
        // Fragments of 512 and 496 payload bytes, delivered out of order.
        let frag = |off: usize, end: usize, mf: bool| {
            let mut f = whole[..20].to_vec();
            f.extend_from_slice(&whole[20 + off..20 + end]);
            let tl = f.len() as u16;
            f[2..4].copy_from_slice(&tl.to_be_bytes());
            let fo = ((off / 8) as u16) | if mf { 0x2000 } else { 0 };
            f[6..8].copy_from_slice(&fo.to_be_bytes());
            Frame {
                linktype: LINKTYPE_RAW,
                ts_ns: 0,
                data: f,
            }
        };
        let frames = vec![frag(512, 1008, false), ip_frame(), frag(0, 512, true)];
        let d = ipv4_datagrams(&frames);
        assert_eq!(d.len(), 2);
        assert_eq!(d[1].frame, 2);
        assert_eq!(d[1].bytes, whole);
        // Incomplete sets produce nothing.
        assert_eq!(ipv4_datagrams(&frames[..2]).len(), 1);
    }

    fn ip_frame() -> Frame {
        Frame {
            linktype: LINKTYPE_RAW,
            ts_ns: 0,
            data: ip_bytes(),
        }
    }

    #[test]
    fn writer_output_reads_back_with_valid_checksums() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        let a = SocketAddrV4::new(Ipv4Addr::new(192, 168, 1, 1), 2152);
        let b = SocketAddrV4::new(Ipv4Addr::new(192, 168, 1, 2), 2152);
        w.write_ipv4_udp(1_500_000_000_123, a, b, b"hello").unwrap();
        w.write_packet(7, &ip_bytes()).unwrap();
        let fr = parse_capture(&w.into_inner()).unwrap();
        assert_eq!(fr.len(), 2);
        assert_eq!(fr[0].ts_ns, 1_500_000_000_123);
        let ip = ipv4_of(&fr[0]).unwrap();
        assert_eq!(ip.len(), 33);
        assert_eq!(checksum::checksum(&ip[..20]), 0);
        let ps = checksum::pseudo_header_sum(
            ip[12..16].try_into().unwrap(),
            ip[16..20].try_into().unwrap(),
            17,
            13,
        );
        assert_eq!(!checksum::fold(checksum::sum(ps, &ip[20..])), 0);
        assert_eq!(&ip[28..], b"hello");
    }
}
