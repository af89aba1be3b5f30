//! Deterministic fuzzing: random and mutated inputs into every decoder never panic, and
//! whatever a checked view accepts, its accessors and Repr handle.

use pepc_wire::gtpu::{self, GtpuPacket, GtpuRepr};
use pepc_wire::pcap::{ipv4_datagrams, ipv4_of, parse_capture, Frame};
use pepc_wire::{five_tuple, Ipv4Packet, Ipv4Repr, PacketBuf, UdpPacket, UdpRepr};
use std::net::Ipv4Addr;

/// xorshift64*: small, deterministic, good enough to spread inputs.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

/// Valid seeds that mutations start from, so the fuzzer reaches deep code paths.
fn seeds() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let mut out = [0u8; 64];
    let n = gtpu::echo_request(1, &mut out).unwrap();
    v.push(out[..n].to_vec());
    let n = gtpu::error_indication(5, Ipv4Addr::new(1, 2, 3, 4), 2152, &mut out).unwrap();
    v.push(out[..n].to_vec());
    let n = gtpu::supported_ext_headers_notification(3, &[0x40, 0x85], &mut out).unwrap();
    v.push(out[..n].to_vec());
    let r = GtpuRepr {
        msg_type: gtpu::G_PDU,
        teid: 9,
        seq: Some(1),
        npdu: Some(2),
        ext: vec![(0x40, vec![8, 0x68]), (0x85, vec![0x10, 0x05, 0, 0, 0, 0])],
        payload_len: 24,
    };
    let mut g = vec![0u8; r.buffer_len()];
    r.emit(&mut GtpuPacket::new_unchecked(&mut g[..])).unwrap();
    let ip = [
        0x45, 0, 0, 24, 0, 1, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, 0x30, 0x39, 0, 53,
    ];
    let hl = r.header_len();
    g[hl..].copy_from_slice(&ip);
    v.push(g);
    v.push(ip.to_vec());
    v
}

fn exercise(data: &[u8]) {
    if let Ok(p) = GtpuPacket::new_checked(data) {
        let hl = p.check().unwrap();
        assert_eq!(p.header_len(), hl);
        assert_eq!(p.payload().len(), 8 + p.length() as usize - hl);
        let ext_bytes: usize = p.extensions().map(|(_, c)| c.len() + 2).sum();
        if p.flags() & 0x07 != 0 {
            assert_eq!(12 + ext_bytes, hl);
        }
        let _ = (p.seq(), p.npdu(), p.teid(), p.version(), p.msg_type());
        for ie in p.ies() {
            let _ = ie;
        }
        let _ = gtpu::parse_echo(&p);
        let _ = gtpu::parse_error_indication(&p);
        let r = GtpuRepr::parse(&p).unwrap();
        let mut out = vec![0u8; r.buffer_len()];
        // Re-emitting what we parsed yields a packet that parses to the same Repr.
        if r.emit(&mut GtpuPacket::new_unchecked(&mut out[..])).is_ok() {
            let q = GtpuPacket::new_checked(&out[..]).unwrap();
            assert_eq!(GtpuRepr::parse(&q).unwrap(), r);
        }
        if p.msg_type() == gtpu::ECHO_REQUEST {
            let mut o = [0u8; 16];
            gtpu::echo_response(&p, &mut o).unwrap();
        }
    }
    let mut b = PacketBuf::new();
    if b.fill(data) {
        if let Ok(teid) = gtpu::decap_gpdu(&mut b) {
            gtpu::encap_gpdu(&mut b, teid).unwrap();
        }
    }
    if let Ok(p) = Ipv4Packet::new_checked(data) {
        let _ = (
            p.src_addr(),
            p.dst_addr(),
            p.ttl(),
            p.frag_offset(),
            p.options(),
        );
        let _ = p.verify_checksum();
        assert!(p.payload().len() <= data.len());
        if let Ok(r) = Ipv4Repr::parse(&p) {
            let mut o = [0u8; 20];
            r.emit(&mut Ipv4Packet::new_unchecked(&mut o[..])).unwrap();
            assert_eq!(&o[..], &data[..20]);
        }
        if let Ok(u) = UdpPacket::new_checked(p.payload()) {
            let _ = UdpRepr::parse(&u, p.src_addr(), p.dst_addr());
            let _ = u.payload();
        }
    }
    let _ = five_tuple(data);
    if let Ok(u) = UdpPacket::new_checked(data) {
        let _ = u.verify_checksum(Ipv4Addr::LOCALHOST, Ipv4Addr::BROADCAST);
    }
    for lt in [0u32, 1, 101, 113, 228, 276] {
        let f = Frame {
            linktype: lt,
            ts_ns: 0,
            data: data.to_vec(),
        };
        let _ = ipv4_of(&f);
        let _ = ipv4_datagrams(std::slice::from_ref(&f));
    }
}

#[test]
fn decoders_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let seeds = seeds();
    let mut gtpu_ok = 0;
    for case in 0..100_000 {
        let data: Vec<u8> = if case % 2 == 0 {
            let len = rng.below(72);
            (0..len).map(|_| rng.byte()).collect()
        } else {
            // Mutate a seed: flip a few bytes, then maybe truncate or extend.
            let mut d = seeds[rng.below(seeds.len())].clone();
            for _ in 0..1 + rng.below(3) {
                let i = rng.below(d.len());
                d[i] = rng.byte();
            }
            match rng.below(4) {
                0 => d.truncate(rng.below(d.len() + 1)),
                1 => d.extend((0..rng.below(8)).map(|_| rng.byte())),
                _ => {}
            }
            d
        };
        // Random bytes mostly fail the version check; force v1/PT for half of them.
        let mut d2 = data.clone();
        if let Some(f) = d2.first_mut() {
            *f = 0x30 | (*f & 0x07);
        }
        exercise(&data);
        exercise(&d2);
        if GtpuPacket::new_checked(&d2[..]).is_ok() {
            gtpu_ok += 1;
        }
    }
    // The fuzzer must actually reach the accepting paths.
    assert!(gtpu_ok > 1000, "only {gtpu_ok} accepted GTP-U inputs");
}

#[test]
fn capture_parser_never_panics() {
    let mut rng = Rng(42);
    // A small valid pcapng to mutate.
    let mut w = pepc_wire::pcap::PcapWriter::new(Vec::new()).unwrap();
    w.write_packet(5, &seeds()[4]).unwrap();
    let classic = w.into_inner();
    let ng = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/captures/testattach.pcapng"
    ))
    .unwrap();
    let ng = &ng[..ng.len().min(4096)];
    for _ in 0..20_000 {
        let mut d = if rng.below(2) == 0 {
            classic.clone()
        } else {
            ng.to_vec()
        };
        for _ in 0..1 + rng.below(4) {
            let i = rng.below(d.len());
            d[i] = rng.byte();
        }
        d.truncate(rng.below(d.len() + 1));
        let _ = parse_capture(&d);
    }
}
