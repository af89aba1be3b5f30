//! A capture of the data path's own S1-U and SGi output must decode in tshark with no
//! malformed packet and no expert warning.

use pepc_slice::context::FIRST_EBI;
use pepc_slice::control::AttachParams;
use pepc_slice::packets::{gpdu, ipv4_udp};
use pepc_slice::slice::{build, SliceConfig};
use pepc_wire::pcap::{tshark_check, PcapWriter};
use pepc_wire::{Batch, Verdict};
use std::net::{Ipv4Addr, SocketAddrV4};

#[test]
fn s1u_and_sgi_output_decodes_cleanly_in_tshark() {
    let mut cfg = SliceConfig::for_users(100);
    cfg.s1u_addr = Ipv4Addr::new(127, 0, 0, 1);
    let (mut cp, mut dp) = build(&cfg);
    let enb = Ipv4Addr::new(127, 0, 0, 2);
    let server = Ipv4Addr::new(198, 51, 100, 9);
    let mut ues = Vec::new();
    for i in 0..8u32 {
        let mut p = AttachParams::new(1000 + i as u64);
        p.enb_addr = enb;
        p.enb_teid = 0x500 + i;
        ues.push(cp.attach(&p).unwrap());
    }
    let path = std::env::temp_dir().join(format!("pepc-dp-{}.pcap", std::process::id()));
    let mut w = PcapWriter::new(std::fs::File::create(&path).unwrap()).unwrap();
    let s1u = SocketAddrV4::new(cfg.s1u_addr, 2152);
    let mut ts = 1_000_000u64;
    // Uplink: G-PDUs in, inner packets out on SGi (written as raw IP).
    let mut b = Batch::default();
    for (i, a) in ues.iter().enumerate() {
        b.bufs[i].fill(&gpdu(
            a.teid_ul,
            &ipv4_udp(a.ue_ip, server, 40000 + i as u16, 9000, 100),
        ));
    }
    // One unknown TEID (Error Indication back) and one Echo Request (Echo Response).
    b.bufs[8].fill(&gpdu(
        0x0abc_0000,
        &ipv4_udp(Ipv4Addr::new(10, 0, 0, 99), server, 1, 9000, 60),
    ));
    let mut echo = [0u8; 16];
    let n = pepc_wire::gtpu::echo_request(7, &mut echo).unwrap();
    b.bufs[9].fill(&echo[..n]);
    b.len = 10;
    for p in b.packets_mut() {
        p.meta.peer = SocketAddrV4::new(enb, 2152);
    }
    dp.uplink(&mut b, 1);
    for p in b.packets() {
        ts += 1000;
        match p.meta.verdict {
            Verdict::ToSgi => w.write_packet(ts, p.as_slice()).unwrap(),
            Verdict::ToS1u => w
                .write_ipv4_udp(ts, s1u, p.meta.peer, p.as_slice())
                .unwrap(),
            v => panic!("unexpected verdict {v:?}"),
        }
    }
    // Downlink: IP in, G-PDUs out on S1-U; then a handover produces an End Marker.
    let mut b = Batch::default();
    for (i, a) in ues.iter().enumerate() {
        b.bufs[i].fill(&ipv4_udp(server, a.ue_ip, 9000, 40000 + i as u16, 64 + i));
    }
    b.len = ues.len();
    dp.downlink(&mut b, 2);
    cp.set_enb_tunnel(
        ues[0].ue_slot,
        FIRST_EBI,
        Ipv4Addr::new(127, 0, 0, 3),
        0x900,
    )
    .unwrap();
    dp.sync(3);
    let mut out = 0;
    for p in b.packets().iter().chain(dp.generated.packets()) {
        assert_eq!(p.meta.verdict, Verdict::ToS1u);
        ts += 1000;
        w.write_ipv4_udp(ts, s1u, p.meta.peer, p.as_slice())
            .unwrap();
        out += 1;
    }
    assert_eq!(out, 9, "8 G-PDUs and one End Marker");
    w.flush().unwrap();
    drop(w);
    let rep = tshark_check(
        path.to_str().unwrap(),
        &["udp.check_checksum:TRUE", "ip.check_checksum:TRUE"],
    )
    .unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(rep.frames, 8 + 2 + 9, "every packet captured");
    assert!(
        rep.is_clean(),
        "tshark found problems: malformed {:?} warnings {:?} errors {:?}",
        rep.malformed,
        rep.warnings,
        rep.errors
    );
    assert!(
        rep.text.contains("GTP <Echo Response>") || rep.text.contains("Echo response"),
        "echo response decoded"
    );
    assert!(
        rep.text.contains("End Marker") || rep.text.contains("End marker"),
        "end marker decoded"
    );
    assert!(
        rep.text.contains("Error Indication") || rep.text.contains("Error indication"),
        "error indication decoded"
    );
}
