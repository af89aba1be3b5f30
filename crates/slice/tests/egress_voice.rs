//! Voice on a dedicated QCI 1 bearer keeps its latency while a download saturates the
//! slice's downlink egress. The bearer and its flow are the emulator's
//! (`pepc_emulator` asks for QCI 1, 64 kbit/s GBR, UDP remote port 5002); the packets
//! go through the real downlink path (PCEF binding, policing, encapsulation) and the
//! egress scheduler, in virtual time: nothing here reads a clock.

use pepc_slice::control::{AttachParams, BearerParams};
use pepc_slice::packets::ipv4_udp;
use pepc_slice::pcef::{PortRange, Rule};
use pepc_slice::slice::{build, SliceConfig};
use pepc_wire::{Batch, Verdict, BATCH_SIZE};
use std::net::Ipv4Addr;

const MS: u64 = 1_000_000;
/// The emulator's dedicated flow (`pepc_emulator::ue::esm::DEDICATED_FLOW_PORT`).
const VOICE_PORT: u16 = 5002;

#[test]
fn voice_on_a_qci1_bearer_keeps_its_latency_under_a_saturating_download() {
    let mut cfg = SliceConfig::for_users(16);
    cfg.egress[1].rate_mbps = 20;
    let (mut cp, mut dp) = build(&cfg);
    cp.install_rule_set(
        1,
        vec![Rule {
            protocol: Some(17),
            remote_ports: PortRange::single(VOICE_PORT),
            bearer: Some(6),
            ..Rule::any(1)
        }],
    )
    .unwrap();
    let enb = Ipv4Addr::new(127, 1, 0, 1);
    let mut p = AttachParams::new(1_010_000_000_001);
    (p.enb_teid, p.enb_addr, p.rule_set) = (0x100, enb, Some(1));
    let voice_ue = cp.attach(&p).unwrap();
    let mut b = BearerParams::new(6, 1);
    (b.gbr_dl, b.mbr_dl, b.gbr_ul, b.mbr_ul) = (64_000, 64_000, 64_000, 64_000);
    cp.add_bearer(voice_ue.ue_slot, b).unwrap();
    cp.set_enb_tunnel(voice_ue.ue_slot, 6, enb, 0x101).unwrap();
    let mut p = AttachParams::new(1_010_000_000_002);
    (p.enb_teid, p.enb_addr, p.rule_set) = (0x200, enb, Some(1));
    let bulk_ue = cp.attach(&p).unwrap();
    while cp.in_flight() > 0 {
        cp.flush();
        dp.sync(0);
    }
    let server = Ipv4Addr::new(8, 8, 8, 8);
    // 64 kbit/s: a 160-byte packet every 20 ms; the download: 60 Mbit/s of 1400-byte
    // packets (3x the egress), in bursts every millisecond.
    let voice = ipv4_udp(server, voice_ue.ue_ip, VOICE_PORT, 40000, 160);
    let bulk = ipv4_udp(server, bulk_ue.ue_ip, 5001, 40000, 1400);
    let bulk_per_ms = 60_000_000 / 8 / 1400 / 1000 + 1;
    let mut batch = Batch::new(BATCH_SIZE);
    let mut out = Batch::new(BATCH_SIZE);
    let (mut voice_sent, mut voice_delays, mut bulk_bytes) = (0u32, Vec::new(), 0usize);
    let mut record = |b: &Batch, now: u64| {
        for p in b.bufs[..b.len]
            .iter()
            .filter(|p| p.meta.verdict == Verdict::ToS1u)
        {
            // The eNB TEID tells the bearer: 0x101 the voice bearer.
            let teid = u32::from_be_bytes(p.as_slice()[4..8].try_into().unwrap());
            if teid == 0x101 {
                voice_delays.push(now - p.meta.rx_ns);
            } else {
                bulk_bytes += p.len();
            }
        }
    };
    for t in 0..2000u64 {
        let now = t * MS + 1;
        let mut pkts: Vec<&[u8]> = vec![&bulk[..]; bulk_per_ms];
        if t % 20 == 0 {
            // Voice arrives in the middle of the burst.
            pkts.insert(bulk_per_ms / 2, &voice);
            voice_sent += 1;
        }
        for chunk in pkts.chunks(BATCH_SIZE) {
            batch.len = chunk.len();
            for (b, p) in batch.bufs.iter_mut().zip(chunk) {
                b.reset();
                b.fill(p);
                b.meta.rx_ns = now;
            }
            dp.downlink(&mut batch, now);
            record(&batch, now);
        }
        // The data thread drains its egress as the rate allows, every 100 µs.
        for k in 0..10 {
            let at = now + k * MS / 10;
            while dp.egress_drain(false, &mut out, at) > 0 {
                record(&out, at);
            }
        }
    }
    // Every voice packet left, none waited behind the download for more than a
    // drain interval; the download got the rest of the egress and was dropped.
    assert_eq!(voice_delays.len() as u32, voice_sent);
    assert!(
        voice_delays.iter().all(|&d| d <= MS / 10),
        "{voice_delays:?}"
    );
    let bulk_mbps = bulk_bytes as f64 * 8.0 / 2.0 / 1e6;
    assert!((19.0..=20.5).contains(&bulk_mbps), "download {bulk_mbps}");
    let egress = &dp.counters().egress[1];
    assert!(egress.dropped() > 0);
}
