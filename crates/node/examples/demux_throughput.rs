//! Demux stage throughput without sockets: an in-memory generator of uplink G-PDUs
//! spread over N slices feeds the demux (classify + hand-off over the batch rings) on
//! one thread; another thread drains every slice's ring. Measures what the demux adds
//! per packet, not the data path or the kernel.
//!
//! `cargo run --release -p pepc-node --example demux_throughput -- [slices] [seconds] [inline]`
//! With `inline` one thread runs the demux and drains the rings after each round: the
//! per-packet cost of classify + hand-off without a second core.

use pepc_node::demux::Demux;
use pepc_node::dispatch::DemuxStage;
use pepc_node::io::{MemGenerator, MemSink, PacketIo};
use pepc_node::ring::batch_ring;
use pepc_slice::ids::IdLayout;
use pepc_slice::packets::{gpdu, ipv4_udp};
use pepc_wire::{Batch, PacketBuf};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let slices: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(4);
    let secs: f64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3.0);
    let inline = args.get(3).is_some_and(|a| a == "inline");
    let layout = IdLayout::new(slices, Ipv4Addr::new(10, 0, 0, 0), 8).unwrap();
    // 1024 distinct packets, round-robin over slices and UE slots.
    let pkts: Vec<Vec<u8>> = (0..1024u32)
        .map(|i| {
            let s = i % slices as u32;
            let slot = 1 + i / slices as u32;
            let inner = ipv4_udp(layout.ue_ip(s, slot), Ipv4Addr::new(8, 8, 8, 8), 1, 2, 64);
            gpdu(layout.teid(s, slot, 0), &inner)
        })
        .collect();
    let gen: Box<dyn PacketIo> = Box::new(MemGenerator::new(
        Box::new(move |b: &mut PacketBuf, seq: u64| {
            b.fill(&pkts[(seq & 1023) as usize]);
        }),
        None,
    ));
    let (mut ul, mut dl, mut drains) = (vec![], vec![], vec![]);
    for _ in 0..slices {
        let (f, d) = batch_ring(64);
        ul.push(f);
        drains.push(d);
        let (f, d) = batch_ring(64);
        dl.push(f);
        drains.push(d);
    }
    let mut stage = DemuxStage::new(
        Demux::new(layout, slices, vec![]),
        gen,
        Box::new(MemSink::default()),
        ul,
        dl,
    )
    .unwrap();
    let counters = stage.counters();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    if inline {
        let mut b = Batch::default();
        let mut drained = 0u64;
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs_f64(secs) {
            for _ in 0..1000 {
                stage.run_once();
                for d in drains.iter_mut() {
                    drained += d.recv_into(&mut b) as u64;
                }
            }
        }
        let el = t0.elapsed().as_secs_f64();
        let c = counters.snapshot();
        println!(
            "{slices} slices inline: {:.2} Mpps through demux + rings ({:.1} ns/packet incl. generation), ring-full {}",
            drained as f64 / el / 1e6,
            el * 1e9 / drained.max(1) as f64,
            c.ring_full
        );
        return;
    }
    let drainer = std::thread::spawn(move || {
        let mut b = Batch::default();
        let mut n = 0u64;
        while !s2.load(Ordering::Relaxed) {
            for d in drains.iter_mut() {
                n += d.recv_into(&mut b) as u64;
            }
        }
        n
    });
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs_f64(secs) {
        for _ in 0..1000 {
            stage.run_once();
        }
    }
    let el = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let drained = drainer.join().unwrap();
    let c = counters.snapshot();
    let handed: u64 = c.slices.iter().map(|s| s.ul).sum();
    println!(
        "{slices} slices: demux received {:.2} Mpps, handed {:.2} Mpps to slices, drained {:.2} Mpps, ring-full {:.1}%",
        c.rx_s1u as f64 / el / 1e6,
        handed as f64 / el / 1e6,
        drained as f64 / el / 1e6,
        100.0 * c.ring_full as f64 / c.rx_s1u.max(1) as f64
    );
}
