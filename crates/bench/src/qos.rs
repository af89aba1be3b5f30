//! `pepc bench qos`: a slice's downlink egress at `--egress-mbps`, offered
//! `--overload` times its capacity by four classes of flows at once: QCI 1 voice and
//! QCI 2 video on GBR dedicated bearers sending at their GBR, QCI 5 signaling on a
//! non-GBR dedicated bearer, QCI 9 downloads on default bearers (the rest of the load).
//! Each flow is a UE of its own; a PCEF rule binds its traffic to its bearer by the
//! remote port, as PCRF-installed rules do.
//!
//! In memory: the real data path (`DataPlane::downlink`, then the egress scheduler's
//! admit and drain) runs in virtual time, advanced one tick at a time: the packets of a
//! tick enter the pipeline at its start, and the egress drains what its rate allows
//! at each tick. Latency is the time from entering the pipeline to leaving the egress
//! (the scheduler's added delay, to a tick's resolution). The CPU the run took is
//! reported too (`mpps_per_core`: packets through the pipeline and scheduler per
//! second of this thread's CPU).

use crate::hist::Histogram;
use pepc_slice::control::{AttachParams, BearerParams};
use pepc_slice::counters::DropReason;
use pepc_slice::datapath::egress::{class_qci, EXCESS};
use pepc_slice::packets::ipv4_udp;
use pepc_slice::pcef::{PortRange, Rule};
use pepc_slice::slice::{build, SliceConfig};
use pepc_wire::{Batch, Verdict, BATCH_SIZE};
use serde::Serialize;
use std::net::Ipv4Addr;
use std::sync::atomic::Ordering::Relaxed;

#[derive(Debug, Clone)]
pub struct QosOpts {
    pub egress_mbps: u64,
    /// Virtual seconds of traffic.
    pub seconds: f64,
    /// Offered load over the egress capacity.
    pub overload: f64,
    /// Virtual time per tick, µs.
    pub tick_us: u64,
    /// In memory (virtual time) or on a real port (wall time).
    pub io: QosIo,
}

/// Where the egress is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QosIo {
    /// The scheduler at `--egress-mbps`, in virtual time.
    Memory,
    /// The slice's data thread on a UDP socket in a network namespace, toward a veth
    /// shaped to `--egress-mbps`: the egress is the port's, pushing back.
    Udp,
    /// The slice's data thread on an AF_XDP socket in a network namespace: its frames
    /// pass no qdisc, so the egress is the slice's own rate at `--egress-mbps`.
    Afxdp,
}

impl QosIo {
    pub fn name(self) -> &'static str {
        match self {
            QosIo::Memory => "memory",
            QosIo::Udp => "udp",
            QosIo::Afxdp => "afxdp",
        }
    }
}

impl Default for QosOpts {
    fn default() -> Self {
        QosOpts {
            egress_mbps: 1000,
            seconds: 5.0,
            overload: 3.0,
            tick_us: 50,
            io: QosIo::Memory,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ClassResult {
    pub qci: u8,
    pub gbr: bool,
    pub flows: usize,
    /// IP packet size, bytes.
    pub packet_bytes: usize,
    pub offered_mbps: f64,
    /// IP bytes delivered while the flows ran, over their time.
    pub delivered_mbps: f64,
    /// Packets.
    pub offered: u64,
    pub delivered: u64,
    pub delivered_ratio: f64,
    pub latency_us_p50: f64,
    pub latency_us_p99: f64,
    /// The node's own figure: the p99 of the time its packets waited in the egress
    /// scheduler, as the bound of its power-of-two delay bucket (the latency above
    /// is measured at the eNB and includes what comes after: the port, the kernel,
    /// the link, the eNB's wake-up).
    pub queued_us_p99_below: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct QosResult {
    pub io: &'static str,
    /// What the node sent on ("memory" in memory).
    pub port: String,
    /// What held the egress to `egress_mbps`.
    pub bottleneck: Bottleneck,
    pub egress_mbps: u64,
    pub overload: f64,
    /// Virtual seconds of traffic and the tick.
    pub seconds: f64,
    pub tick_us: u64,
    pub classes: Vec<ClassResult>,
    /// Delivered over offered bytes of all GBR flows (which send at their GBR).
    pub gbr_delivered_ratio: f64,
    /// Bytes delivered while the flows ran, counted as the bottleneck counts them
    /// ([`Bottleneck::overhead`]), over what it could carry in that time (on real
    /// sockets, what arrived after the flows stopped, the queues draining, is in
    /// `delivered` but not here).
    pub work_conserving: f64,
    /// Packets the scheduler dropped, by QCI class (`0`: GBR traffic beyond its GBR).
    pub dropped_by_qci: std::collections::BTreeMap<u8, u64>,
    /// Packets offered to the pipeline; the thread's CPU and wall time for the run.
    pub packets: u64,
    pub cpu_s: f64,
    pub wall_s: f64,
    pub mpps_per_core: f64,
    /// Packets the port pushed back into the egress scheduler (real sockets).
    pub pushed_back: u64,
    /// Packets the eNB's socket dropped (its buffer full): sent, not counted delivered.
    pub receiver_dropped: u64,
    /// Offered packets that were neither delivered, dropped by the data path or the
    /// scheduler, nor still queued in it at the end: lost between the scheduler and
    /// the eNB's count (the port, the link, the eNB's socket) or in flight at the end.
    pub unaccounted: u64,
}

/// What holds the egress to `--egress-mbps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bottleneck {
    /// The slice's own rate (`[s1u] egress_mbps`), which counts the G-PDUs it hands
    /// to the port.
    EgressMbps,
    /// A tbf qdisc on the link, which counts Ethernet frames; the egress has no rate
    /// and sends as the port takes it.
    Tbf,
}

impl Bottleneck {
    pub fn name(self) -> &'static str {
        match self {
            Bottleneck::EgressMbps => "egress_mbps",
            Bottleneck::Tbf => "tbf",
        }
    }

    /// Bytes it counts per packet beyond the inner IP packet: the GTP-U header, and
    /// for a frame the outer UDP, IPv4 and Ethernet headers too.
    pub fn overhead(self) -> u64 {
        match self {
            Bottleneck::EgressMbps => GTPU_HEADER as u64,
            Bottleneck::Tbf => GTPU_HEADER as u64 + 8 + 20 + 14,
        }
    }
}

/// One class of flows: (QCI, GBR, share of the egress capacity, flows, packet bytes,
/// remote port that binds it to its bearer).
const MIX: [(u8, bool, f64, usize, usize, u16); 3] = [
    (1, true, 0.10, 50, 200, 1),
    (2, true, 0.20, 10, 1200, 2),
    (5, false, 0.02, 10, 300, 5),
];
/// The downloads: QCI 9 on default bearers, the rest of the offered load.
const BULK: (usize, usize, u16) = (20, 1400, 9);
/// The G-PDU header the egress counts beside the IP packet.
pub(crate) const GTPU_HEADER: usize = 8;

pub(crate) struct Flow {
    pub(crate) class: usize,
    ue_ip: Ipv4Addr,
    port: u16,
    pub(crate) len: usize,
    /// Nanoseconds between packets, and when the next is due.
    pub(crate) gap_ns: f64,
    pub(crate) next_ns: f64,
}

/// The slice, its UEs and their flows: every class's flows attached on bearers of
/// their QCI toward `enb`, the downlink egress at `egress_mbps` (0: the port's).
pub(crate) struct Setup {
    pub(crate) cp: pepc_slice::control::ControlPlane,
    pub(crate) dp: pepc_slice::datapath::DataPlane,
    pub(crate) classes: Vec<(u8, bool, f64, usize, usize, u16)>,
    pub(crate) flows: Vec<Flow>,
    /// Each flow's downlink IP packet.
    pub(crate) templates: Vec<Vec<u8>>,
}

pub(crate) fn setup(o: &QosOpts, enb: Ipv4Addr, egress_mbps: u64) -> Result<Setup, String> {
    let cap_bps = o.egress_mbps as f64 * 1e6;
    // (QCI, GBR, share, flows, bytes, port) for every class, downloads last.
    let bulk_share = (o.overload - MIX.iter().map(|m| m.2).sum::<f64>()).max(0.0);
    let mut classes: Vec<(u8, bool, f64, usize, usize, u16)> = MIX.to_vec();
    classes.push((9, false, bulk_share, BULK.0, BULK.1, BULK.2));

    let mut cfg = SliceConfig::for_users(1024);
    cfg.egress[1].rate_mbps = egress_mbps;
    let (mut cp, mut dp) = build(&cfg);
    let rules: Vec<Rule> = classes
        .iter()
        .take(MIX.len())
        .enumerate()
        .map(|(i, c)| Rule {
            remote_ports: PortRange::single(c.5),
            bearer: Some(6),
            ..Rule::any(i as u32 + 1)
        })
        .collect();
    cp.install_rule_set(1, rules).map_err(|e| e.to_string())?;
    let mut flows = Vec::new();
    let mut imsi = 1_010_000_000u64;
    let mut phase = pepc_slice::synthetic::Rng::new(7);
    for (ci, &(qci, gbr, share, n, len, port)) in classes.iter().enumerate() {
        let rate = cap_bps * share / n as f64;
        for _ in 0..n {
            imsi += 1;
            let mut p = AttachParams::new(imsi);
            p.enb_teid = 0x1000 + (imsi as u32 & 0xffff) * 2;
            p.enb_addr = enb;
            p.rule_set = Some(1);
            let a = cp.attach(&p).map_err(|e| e.to_string())?;
            if ci < MIX.len() {
                let mut b = BearerParams::new(6, qci);
                if gbr {
                    (b.gbr_dl, b.mbr_dl) = (rate as u64, rate as u64 * 2);
                }
                cp.add_bearer(a.ue_slot, b).map_err(|e| e.to_string())?;
                cp.set_enb_tunnel(a.ue_slot, 6, enb, p.enb_teid + 1)
                    .map_err(|e| e.to_string())?;
            }
            let gap_ns = len as f64 * 8.0 / rate * 1e9;
            flows.push(Flow {
                class: ci,
                ue_ip: a.ue_ip,
                port,
                len,
                gap_ns,
                // Each flow starts at a random point of its first gap, as independent
                // sources do (a class's flows were once all in a tenth of it: QCI 2's
                // ten video packets arrived together, 1.9 ms of a 50 Mbit/s link).
                next_ns: phase.below(1 << 20) as f64 / (1 << 20) as f64 * gap_ns,
            });
        }
    }
    while cp.in_flight() > 0 {
        cp.flush();
        dp.sync(0);
    }
    let templates: Vec<Vec<u8>> = flows
        .iter()
        .map(|f| ipv4_udp(Ipv4Addr::new(8, 8, 8, 8), f.ue_ip, f.port, 40000, f.len))
        .collect();
    Ok(Setup {
        cp,
        dp,
        classes,
        flows,
        templates,
    })
}

/// Per class: offered and delivered (packets, IP bytes), the IP bytes and packets
/// delivered while the flows ran, and the latency histogram.
pub(crate) struct Tally {
    pub(crate) offered: Vec<(u64, u64)>,
    pub(crate) delivered: Vec<(u64, u64)>,
    pub(crate) in_window: Vec<(u64, u64)>,
    pub(crate) hists: Vec<Histogram>,
    /// Packets the receiving socket dropped.
    pub(crate) receiver_dropped: u64,
}

impl Tally {
    pub(crate) fn new(k: usize) -> Tally {
        Tally {
            offered: vec![(0, 0); k],
            delivered: vec![(0, 0); k],
            in_window: vec![(0, 0); k],
            hists: vec![Histogram::default(); k],
            receiver_dropped: 0,
        }
    }

    /// A packet of class `c` with `ip_bytes` arrived (`in_window`: while the flows ran).
    pub(crate) fn delivered(&mut self, c: usize, ip_bytes: usize, in_window: bool) {
        self.delivered[c].0 += 1;
        self.delivered[c].1 += ip_bytes as u64;
        if in_window {
            self.in_window[c].0 += 1;
            self.in_window[c].1 += ip_bytes as u64;
        }
    }
}

/// The bound of the delay bucket holding the p99 of what QCI `qci`'s class queued
/// (0 when it queued nothing).
fn queued_p99(egress: &pepc_slice::datapath::egress::EgressCounters, qci: u8) -> u64 {
    let Some(c) = (0..EXCESS).find(|&c| class_qci(c) == qci) else {
        return 0;
    };
    let buckets: Vec<u64> = egress.classes[c]
        .delay
        .iter()
        .map(|d| d.load(Relaxed))
        .collect();
    let total: u64 = buckets.iter().sum();
    let mut seen = 0;
    for (k, n) in buckets.iter().enumerate() {
        seen += n;
        if total > 0 && seen * 100 >= total * 99 {
            return 1 << k;
        }
    }
    0
}

/// The run's figures from its tally.
#[allow(clippy::too_many_arguments)]
pub(crate) fn result(
    o: &QosOpts,
    (port, bottleneck): (String, Bottleneck),
    classes: &[(u8, bool, f64, usize, usize, u16)],
    t: &Tally,
    secs: f64,
    counters: &pepc_slice::counters::SliceCounters,
    packets: u64,
    (cpu_s, wall_s): (f64, f64),
) -> QosResult {
    let egress = &counters.egress[1];
    let cap_bps = o.egress_mbps as f64 * 1e6;
    let mut out_classes = Vec::new();
    let (mut gbr_off, mut gbr_del) = (0u64, 0u64);
    for (i, &(qci, gbr, _, n, len, _)) in classes.iter().enumerate() {
        if gbr {
            gbr_off += t.offered[i].1;
            gbr_del += t.delivered[i].1;
        }
        out_classes.push(ClassResult {
            qci,
            gbr,
            flows: n,
            packet_bytes: len,
            offered_mbps: t.offered[i].1 as f64 * 8.0 / secs / 1e6,
            delivered_mbps: t.in_window[i].1 as f64 * 8.0 / secs / 1e6,
            offered: t.offered[i].0,
            delivered: t.delivered[i].0,
            delivered_ratio: t.delivered[i].0 as f64 / t.offered[i].0.max(1) as f64,
            latency_us_p50: t.hists[i].quantile(0.5) as f64,
            latency_us_p99: t.hists[i].quantile(0.99) as f64,
            queued_us_p99_below: queued_p99(egress, qci),
        });
    }
    let sent_wire: u64 = (0..classes.len())
        .map(|i| t.in_window[i].1 + bottleneck.overhead() * t.in_window[i].0)
        .sum();
    let dropped_by_qci = (0..=EXCESS)
        .filter_map(|c| {
            let n: u64 = egress.classes[c]
                .dropped
                .iter()
                .map(|d| d.load(Relaxed))
                .sum();
            (n > 0).then_some((class_qci(c), n))
        })
        .collect();
    let pushed_back = egress
        .classes
        .iter()
        .map(|c| c.pushed_back.load(Relaxed))
        .sum();
    let queued: u64 = egress.classes.iter().map(|c| c.depth.load(Relaxed)).sum();
    // Each suppressed Error Indication's packet is counted under its own reason too.
    let dp_dropped: u64 = DropReason::ALL
        .iter()
        .filter(|&&r| r != DropReason::ErrorIndicationSuppressed)
        .map(|&r| counters.drops[r as usize].load(Relaxed))
        .sum();
    let delivered: u64 = t.delivered.iter().map(|d| d.0).sum();
    let unaccounted = packets.saturating_sub(delivered + egress.dropped() + queued + dp_dropped);
    QosResult {
        io: o.io.name(),
        port,
        bottleneck,
        egress_mbps: o.egress_mbps,
        overload: o.overload,
        seconds: secs,
        tick_us: o.tick_us,
        classes: out_classes,
        gbr_delivered_ratio: gbr_del as f64 / gbr_off.max(1) as f64,
        work_conserving: sent_wire as f64 * 8.0 / (cap_bps * secs),
        dropped_by_qci,
        pushed_back,
        receiver_dropped: t.receiver_dropped,
        unaccounted,
        packets,
        cpu_s,
        wall_s,
        mpps_per_core: packets as f64 / cpu_s.max(1e-9) / 1e6,
    }
}

pub fn run(o: &QosOpts) -> Result<QosResult, String> {
    if o.egress_mbps == 0 || o.seconds <= 0.0 || o.tick_us == 0 {
        return Err("--egress-mbps, --seconds and the tick must be above 0".into());
    }
    if o.io != QosIo::Memory {
        return crate::qos_net::run(o);
    }
    let Setup {
        cp: _cp,
        mut dp,
        classes,
        mut flows,
        templates,
    } = setup(o, Ipv4Addr::new(127, 1, 0, 1), o.egress_mbps)?;
    let k = classes.len();
    // The class of a delivered G-PDU, by its inner packet's remote (source) port.
    let ports: Vec<u16> = classes.iter().map(|c| c.5).collect();
    let class_of = |p: &pepc_wire::PacketBuf| {
        let s = p.as_slice();
        let port = u16::from_be_bytes([s[GTPU_HEADER + 20], s[GTPU_HEADER + 21]]);
        ports.iter().position(|&q| q == port)
    };
    let mut t = Tally::new(k);
    let mut batch = Batch::new(BATCH_SIZE);
    let mut out = Batch::new(BATCH_SIZE);
    let tick = o.tick_us * 1000;
    let end = (o.seconds * 1e9) as u64;
    let (cpu0, wall0) = (crate::attach::thread_cpu_s(), std::time::Instant::now());
    let mut packets = 0u64;
    let mut now = tick;
    let record = |t: &mut Tally, b: &Batch, now: u64| {
        for p in &b.bufs[..b.len] {
            if p.meta.verdict != Verdict::ToS1u {
                continue;
            }
            if let Some(c) = class_of(p) {
                // Inner IP bytes (the GTP-U header is 8 more).
                t.delivered(c, p.len() - GTPU_HEADER, true);
                t.hists[c].record_n((now - p.meta.rx_ns) / 1000, 1);
            }
        }
    };
    while now <= end {
        let mut pending: Vec<usize> = Vec::new();
        for (i, f) in flows.iter_mut().enumerate() {
            while f.next_ns <= now as f64 {
                f.next_ns += f.gap_ns;
                pending.push(i);
            }
        }
        for chunk in pending.chunks(BATCH_SIZE) {
            batch.len = chunk.len();
            for (j, &i) in chunk.iter().enumerate() {
                let b = &mut batch.bufs[j];
                b.reset();
                b.fill(&templates[i]);
                b.meta.rx_ns = now;
                t.offered[flows[i].class].0 += 1;
                t.offered[flows[i].class].1 += flows[i].len as u64;
            }
            dp.downlink(&mut batch, now);
            packets += chunk.len() as u64;
            record(&mut t, &batch, now);
        }
        while dp.egress_drain(false, &mut out, now) > 0 {
            record(&mut t, &out, now);
        }
        now += tick;
    }
    let cpu_s = crate::attach::thread_cpu_s() - cpu0;
    let wall_s = wall0.elapsed().as_secs_f64();
    let secs = end as f64 / 1e9;
    Ok(result(
        o,
        ("memory".into(), Bottleneck::EgressMbps),
        &classes,
        &t,
        secs,
        dp.counters(),
        packets,
        (cpu_s, wall_s),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At 3x overload the GBR flows get their rate and the egress stays full.
    #[test]
    fn gbr_flows_keep_their_rate_at_three_times_the_capacity() {
        let r = run(&QosOpts {
            egress_mbps: 100,
            seconds: 1.0,
            ..QosOpts::default()
        })
        .unwrap();
        assert!(r.gbr_delivered_ratio > 0.999, "{r:?}");
        assert!(r.work_conserving > 0.97, "{r:?}");
        let bulk = r.classes.iter().find(|c| c.qci == 9).unwrap();
        assert!(bulk.delivered_ratio < 0.35, "{r:?}");
        // Every offered packet is delivered, dropped or still queued.
        assert_eq!(r.unaccounted, 0, "{r:?}");
        assert!(r.dropped_by_qci.get(&9).is_some_and(|&n| n > 0), "{r:?}");
    }
}
