//! Packets built by our encoders, written to a pcap and dissected by tshark: no malformed
//! packet, no expert warning or error, and the fields tshark reads are ours.

use pepc_wire::gtpu::{self, GtpuPacket, GtpuRepr};
use pepc_wire::pcap::{tshark_check, PcapWriter};
use pepc_wire::{Ipv4Packet, Ipv4Repr, PacketBuf, UdpPacket, UdpRepr, GTPU_PORT};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;

const ENB: Ipv4Addr = Ipv4Addr::new(192, 168, 10, 2);
const SGW: Ipv4Addr = Ipv4Addr::new(192, 168, 10, 1);
const UE: Ipv4Addr = Ipv4Addr::new(45, 45, 0, 2);
const SERVER: Ipv4Addr = Ipv4Addr::new(8, 8, 8, 8);

/// A UE's IPv4/UDP packet built with our Repr emitters.
fn inner_packet(payload: &[u8]) -> Vec<u8> {
    let udp = UdpRepr {
        src_port: 40000,
        dst_port: 9, // discard: no application dissector to trip on our text
        payload_len: payload.len(),
    };
    let ip = Ipv4Repr {
        src: SERVER,
        dst: UE,
        protocol: 17,
        payload_len: 8 + payload.len(),
        ttl: 63,
        dscp_ecn: 0,
        ident: 7,
        dont_frag: true,
    };
    let mut b = vec![0u8; 28 + payload.len()];
    b[28..].copy_from_slice(payload);
    udp.emit(&mut UdpPacket::new_unchecked(&mut b[20..]), SERVER, UE)
        .unwrap();
    ip.emit(&mut Ipv4Packet::new_unchecked(&mut b[..])).unwrap();
    b
}

struct TempDir(PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
fn temp_dir(tag: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!("pepc-wire-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

const CHECKSUMS: &[&str] = &["ip.check_checksum:TRUE", "udp.check_checksum:TRUE"];

#[test]
fn our_gtpu_messages_are_clean_in_tshark() {
    let dir = temp_dir("gtpu-tshark");
    let path = dir.0.join("gtpu.pcap");
    let mut w = PcapWriter::new(std::fs::File::create(&path).unwrap()).unwrap();
    let s1u_sgw = SocketAddrV4::new(SGW, GTPU_PORT);
    let s1u_enb = SocketAddrV4::new(ENB, GTPU_PORT);
    let mut ts = 1_700_000_000_000_000_000u64;
    let mut write = |w: &mut PcapWriter<std::fs::File>, from, to, msg: &[u8]| {
        ts += 1_000_000;
        w.write_ipv4_udp(ts, from, to, msg).unwrap();
    };

    // 1. Downlink G-PDU via the in-place hot-path encap.
    let mut b = PacketBuf::new();
    b.fill(&inner_packet(b"downlink query"));
    gtpu::encap_gpdu(&mut b, 0x0000_0101).unwrap();
    write(&mut w, s1u_sgw, s1u_enb, b.as_slice());

    // 2. G-PDU with seq and a PDU Session Container via the Repr.
    let inner = inner_packet(b"with extension");
    let r = GtpuRepr {
        msg_type: gtpu::G_PDU,
        teid: 0x0000_0202,
        seq: Some(5),
        npdu: None,
        ext: vec![(gtpu::ext::PDU_SESSION_CONTAINER, vec![0x00, 0x09])],
        payload_len: inner.len(),
    };
    let mut m = vec![0u8; r.buffer_len()];
    r.emit(&mut GtpuPacket::new_unchecked(&mut m[..])).unwrap();
    m[r.header_len()..].copy_from_slice(&inner);
    write(&mut w, s1u_sgw, s1u_enb, &m);

    // 3-4. Echo Request and the Response to it.
    let mut req = [0u8; 64];
    let n = gtpu::echo_request(0x4242, &mut req).unwrap();
    write(&mut w, s1u_enb, s1u_sgw, &req[..n]);
    let mut resp = [0u8; 64];
    let rq = GtpuPacket::new_checked(&req[..n]).unwrap();
    let k = gtpu::echo_response(&rq, &mut resp).unwrap();
    write(&mut w, s1u_sgw, s1u_enb, &resp[..k]);

    // 5. Error Indication for an unknown TEID from an eNB sending from port 2152.
    let mut ei = [0u8; 64];
    let n = gtpu::error_indication(0xdead_beef, SGW, GTPU_PORT, &mut ei).unwrap();
    write(&mut w, s1u_sgw, s1u_enb, &ei[..n]);

    // 6. End Marker.
    let mut em = [0u8; 16];
    let n = gtpu::end_marker(0x0000_0101, &mut em).unwrap();
    write(&mut w, s1u_sgw, s1u_enb, &em[..n]);

    // 7. Supported Extension Headers Notification.
    let mut sn = [0u8; 32];
    let n = gtpu::supported_ext_headers_notification(1, &[0x40, 0x85], &mut sn).unwrap();
    write(&mut w, s1u_sgw, s1u_enb, &sn[..n]);
    drop(w);

    let rep = tshark_check(&path, CHECKSUMS).unwrap();
    assert_eq!(rep.frames, 7);
    assert!(
        rep.is_clean(),
        "malformed {:?}\nwarnings {:?}\nerrors {:?}",
        rep.malformed,
        rep.warnings,
        rep.errors
    );
    let t = &rep.text;
    for needle in [
        "Message Type: T-PDU (0xff)",
        "TEID: 0x00000101",
        "Message Type: Echo request (0x01)",
        "Message Type: Echo response (0x02)",
        "Sequence number: 0x4242",
        "Recovery: 0",
        "Message Type: Error indication (0x1a)",
        "UDP Port: 2152",
        "TEID Data I: 0xdeadbeef",
        "GSN address IPv4: 192.168.10.1",
        "Message Type: End Marker (0xfe)",
        "PDU Session container",
        "Src: 8.8.8.8, Dst: 45.45.0.2",
    ] {
        assert!(t.contains(needle), "tshark output lacks {needle:?}:\n{t}");
    }
    // The inner packets' checksums (ours) verify too.
    assert!(!t.contains("Checksum Status: Bad"));
}

/// Control: the checker does see a broken message, so the test above means something.
#[test]
fn tshark_check_reports_a_broken_gtpu_message() {
    let dir = temp_dir("gtpu-tshark-bad");
    let path = dir.0.join("bad.pcap");
    let mut w = PcapWriter::new(std::fs::File::create(&path).unwrap()).unwrap();
    // Error Indication whose Peer Address IE claims 16 bytes but carries 4.
    let mut ei = [0u8; 64];
    let n = gtpu::error_indication(1, SGW, GTPU_PORT, &mut ei).unwrap();
    ei[n - 5] = 16;
    let a = SocketAddrV4::new(SGW, GTPU_PORT);
    let b = SocketAddrV4::new(ENB, GTPU_PORT);
    w.write_ipv4_udp(1, a, b, &ei[..n]).unwrap();
    drop(w);
    let rep = tshark_check(&path, CHECKSUMS).unwrap();
    assert_eq!(rep.frames, 1);
    assert!(!rep.is_clean(), "{}", rep.text);
}
