//! Reading the real captures in /work/shared/captures and checking our writer with tshark.

use pepc_wire::pcap::{ipv4_of, read_capture, tshark_check, PcapWriter};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;

fn captures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/captures")
}

/// Frame counts as reported by `capinfos` for each shared capture.
const EXPECTED: &[(&str, usize)] = &[
    ("magma_gx_gy_combined_03_210505_132953-1.pcapng", 291),
    ("magma_inbound_roaming_01_210505_130828-1.pcapng", 240),
    ("magma_nsa_connection.pcap", 70),
    ("ngic_cp_in.pcap", 3),
    ("ngic_downlink_100flows.pcap", 100),
    ("ngic_uplink_100flows.pcap", 100),
    ("srsenb.pcapng", 1928),
    ("testattach.pcapng", 565),
    ("volte.pcapng", 371),
];

#[test]
fn every_shared_capture_reads_completely() {
    for (name, count) in EXPECTED {
        let frames =
            read_capture(captures_dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(frames.len(), *count, "{name}");
        let ipv4 = frames.iter().filter(|f| ipv4_of(f).is_some()).count();
        assert!(ipv4 > 0, "{name}: no IPv4 frame found");
        // Timestamps of real captures are after 2010 and (mostly) ordered.
        assert!(
            frames[0].ts_ns > 1_262_304_000_000_000_000,
            "{name}: ts {}",
            frames[0].ts_ns
        );
    }
}

#[test]
fn writer_output_is_clean_for_tshark() {
    let dir = std::env::temp_dir().join(format!("pepc-wire-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("udp.pcap");
    let mut w = PcapWriter::new(std::fs::File::create(&path).unwrap()).unwrap();
    let a = SocketAddrV4::new(Ipv4Addr::new(10, 1, 1, 1), 40000);
    let b = SocketAddrV4::new(Ipv4Addr::new(10, 1, 1, 2), 9);
    for i in 0..5u64 {
        w.write_ipv4_udp(
            1_700_000_000_000_000_000 + i,
            a,
            b,
            &vec![i as u8; i as usize * 100],
        )
        .unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let rep = tshark_check(
        &path,
        &["udp.check_checksum:TRUE", "ip.check_checksum:TRUE"],
    )
    .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(rep.frames, 5);
    assert!(rep.is_clean(), "{rep:?}");
    assert!(
        rep.text.contains("[Checksum Status: Good]") || rep.text.contains("Checksum Status: Good")
    );
}
