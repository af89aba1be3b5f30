//! Every GTP-U frame of the real captures in /work/shared/captures parses, and every
//! G-PDU survives decap + encap.

use pepc_wire::gtpu::{self, GtpuPacket, GtpuRepr};
use pepc_wire::pcap::{ipv4_datagrams, read_capture};
use pepc_wire::{five_tuple, Ipv4Packet, PacketBuf, UdpPacket, GTPU_PORT};
use std::path::PathBuf;

fn captures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/captures")
}

/// GTP-U message counts per file, as counted by `tshark -Y 'gtp && udp.port==2152'`
/// (which counts a fragmented datagram once, at its last fragment).
const GTPU_FRAMES: &[(&str, usize)] = &[
    ("magma_gx_gy_combined_03_210505_132953-1.pcapng", 22),
    ("magma_inbound_roaming_01_210505_130828-1.pcapng", 44),
    ("magma_nsa_connection.pcap", 0),
    ("ngic_cp_in.pcap", 0),
    ("ngic_downlink_100flows.pcap", 0),
    ("ngic_uplink_100flows.pcap", 100),
    ("srsenb.pcapng", 1844),
    ("testattach.pcapng", 12),
    ("volte.pcapng", 268),
];

#[derive(Default, Debug)]
struct Stats {
    gtpu: usize,
    gpdu: usize,
    exact_round_trip: usize,
    with_optional: usize,
    inner_ipv4: usize,
    signalling: usize,
}

fn check_file(name: &str) -> Stats {
    let frames = read_capture(captures_dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut st = Stats::default();
    // Outer IPv4 fragments (magma captures) are reassembled first, as tshark does.
    for d in ipv4_datagrams(&frames) {
        let i = d.frame;
        let ip = Ipv4Packet::new_checked(&d.bytes[..])
            .unwrap_or_else(|e| panic!("{name} #{}: {e}", i + 1));
        // (IP checksums are not asserted: senders with checksum offload capture zeros.)
        if ip.protocol() != 17 || ip.is_fragment() {
            continue;
        }
        let udp = UdpPacket::new_checked(ip.payload()).unwrap();
        if udp.src_port() != GTPU_PORT && udp.dst_port() != GTPU_PORT {
            continue;
        }
        let bytes = udp.payload();
        let p = GtpuPacket::new_checked(bytes)
            .unwrap_or_else(|e| panic!("{name} frame {}: GTP-U: {e}", i + 1));
        st.gtpu += 1;
        let repr = GtpuRepr::parse(&p).unwrap();
        assert_eq!(repr.header_len(), p.header_len());
        if p.msg_type() != gtpu::G_PDU {
            st.signalling += 1;
            match p.msg_type() {
                gtpu::ECHO_REQUEST | gtpu::ECHO_RESPONSE => {
                    gtpu::parse_echo(&p).unwrap();
                }
                gtpu::ERROR_INDICATION => {
                    gtpu::parse_error_indication(&p).unwrap();
                }
                gtpu::END_MARKER => assert!(p.ies().all(|ie| ie.is_ok())),
                t => panic!("{name} frame {}: unexpected GTP-U type {t}", i + 1),
            }
            continue;
        }
        st.gpdu += 1;
        let inner = p.payload().to_vec();
        if inner.first().is_some_and(|b| b >> 4 == 4) {
            five_tuple(&inner).unwrap_or_else(|e| panic!("{name} frame {}: inner: {e}", i + 1));
            st.inner_ipv4 += 1;
        }
        let mut b = PacketBuf::new();
        assert!(b.fill(bytes));
        let teid = gtpu::decap_gpdu(&mut b).unwrap();
        assert_eq!(teid, p.teid());
        assert_eq!(b.as_slice(), &inner[..]);
        gtpu::encap_gpdu(&mut b, teid).unwrap();
        if p.flags() & 0x07 == 0 && bytes.len() == 8 + p.length() as usize {
            assert_eq!(b.as_slice(), bytes, "{name} frame {}", i + 1);
            st.exact_round_trip += 1;
        } else {
            st.with_optional += 1;
            let q = GtpuPacket::new_checked(b.as_slice()).unwrap();
            assert_eq!((q.teid(), q.payload()), (teid, &inner[..]));
        }
    }
    st
}

#[test]
fn every_gtpu_frame_in_every_capture_parses_and_round_trips() {
    let mut total = 0;
    for (name, want) in GTPU_FRAMES {
        let st = check_file(name);
        eprintln!("{name}: {st:?}");
        assert_eq!(st.gtpu, *want, "{name}: GTP-U frame count");
        assert_eq!(st.gpdu, st.exact_round_trip + st.with_optional);
        if *want > 0 {
            assert!(st.gpdu > 0, "{name}: no G-PDU");
            assert!(st.inner_ipv4 > 0, "{name}: no inner IPv4");
        }
        total += st.gtpu;
    }
    assert_eq!(total, 22 + 44 + 100 + 1844 + 12 + 268);
}
