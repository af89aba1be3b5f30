//! Node counters and their snapshots. Every counter has one writer (the demux thread,
//! or one slice's data thread) that updates it with a plain load + store, so readers
//! (`Node::stats`, `pepc run`) never slow the hot path with shared read-modify-writes.

use crate::io::DropCounts;
use pepc_slice::counters::{DropReason, SliceCounters};
use pepc_slice::datapath::egress::{class_qci, EgressCounters, EgressDrop, DELAY_BUCKETS};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Single-writer add.
#[inline(always)]
pub(crate) fn bump(c: &AtomicU64, n: u64) {
    if n != 0 {
        c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
    }
}

/// Counters of one slice port as the data thread sees it (written by that thread).
#[repr(align(64))]
#[derive(Debug, Default)]
pub struct PortCounters {
    /// Packets handed to the data thread (from the demux ring, or the socket).
    pub rx_packets: AtomicU64,
    /// Packets the port sent.
    pub tx_packets: AtomicU64,
    /// Packets the pipeline sent here that the port could not transmit.
    pub tx_failed: AtomicU64,
    /// Queue mode: packets this slice's socket received for another slice, handed to
    /// it, and those dropped because its ring was full.
    pub handed_off: AtomicU64,
    pub handoff_full: AtomicU64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub tx_failed: u64,
    pub handed_off: u64,
    pub handoff_full: u64,
}

impl PortCounters {
    pub fn snapshot(&self) -> PortStats {
        PortStats {
            rx_packets: self.rx_packets.load(Relaxed),
            tx_packets: self.tx_packets.load(Relaxed),
            tx_failed: self.tx_failed.load(Relaxed),
            handed_off: self.handed_off.load(Relaxed),
            handoff_full: self.handoff_full.load(Relaxed),
        }
    }
}

/// The demux thread's per-slice counters.
#[repr(align(64))]
#[derive(Debug, Default)]
pub struct DemuxSliceCounters {
    /// Packets put on the slice's uplink / downlink ring.
    pub ul: AtomicU64,
    pub dl: AtomicU64,
    /// Packets dropped because the slice's ring was full.
    pub ul_ring_full: AtomicU64,
    pub dl_ring_full: AtomicU64,
}

/// The demux thread's counters (written by it alone).
#[derive(Debug)]
pub struct DemuxCounters {
    pub rx_s1u: AtomicU64,
    pub rx_sgi: AtomicU64,
    /// Receive calls that failed (the packets, if any, are lost in the kernel).
    pub rx_errors: AtomicU64,
    /// S1-U datagrams that are not GTPv1-U (too short, wrong version, GTP').
    pub malformed_gtpu: AtomicU64,
    /// SGi packets that are not IPv4.
    pub not_ipv4: AtomicU64,
    /// SGi packets for an address no slice owns.
    pub unknown_ue_ip: AtomicU64,
    /// G-PDUs whose TEID names no slice: sent to the default slice, which answers them
    /// with an Error Indication.
    pub unknown_teid: AtomicU64,
    /// Echo and other path-management messages (to slice 0).
    pub path_management: AtomicU64,
    /// Error Indications from eNBs, copied to every slice (the eNB's TEID does not say
    /// which slice holds the tunnel).
    pub error_indications: AtomicU64,
    pub slices: Box<[DemuxSliceCounters]>,
}

impl DemuxCounters {
    pub fn new(slices: usize) -> Self {
        DemuxCounters {
            rx_s1u: AtomicU64::new(0),
            rx_sgi: AtomicU64::new(0),
            rx_errors: AtomicU64::new(0),
            malformed_gtpu: AtomicU64::new(0),
            not_ipv4: AtomicU64::new(0),
            unknown_ue_ip: AtomicU64::new(0),
            unknown_teid: AtomicU64::new(0),
            path_management: AtomicU64::new(0),
            error_indications: AtomicU64::new(0),
            slices: (0..slices).map(|_| DemuxSliceCounters::default()).collect(),
        }
    }

    pub fn snapshot(&self) -> DemuxStats {
        let slices: Vec<DemuxSliceStats> = self
            .slices
            .iter()
            .map(|c| DemuxSliceStats {
                ul: c.ul.load(Relaxed),
                dl: c.dl.load(Relaxed),
                ul_ring_full: c.ul_ring_full.load(Relaxed),
                dl_ring_full: c.dl_ring_full.load(Relaxed),
            })
            .collect();
        DemuxStats {
            rx_s1u: self.rx_s1u.load(Relaxed),
            rx_sgi: self.rx_sgi.load(Relaxed),
            rx_errors: self.rx_errors.load(Relaxed),
            malformed_gtpu: self.malformed_gtpu.load(Relaxed),
            not_ipv4: self.not_ipv4.load(Relaxed),
            unknown_ue_ip: self.unknown_ue_ip.load(Relaxed),
            unknown_teid: self.unknown_teid.load(Relaxed),
            path_management: self.path_management.load(Relaxed),
            error_indications: self.error_indications.load(Relaxed),
            ring_full: slices.iter().map(|s| s.ul_ring_full + s.dl_ring_full).sum(),
            slices,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DemuxSliceStats {
    pub ul: u64,
    pub dl: u64,
    pub ul_ring_full: u64,
    pub dl_ring_full: u64,
}

/// A snapshot of the demux thread's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DemuxStats {
    pub rx_s1u: u64,
    pub rx_sgi: u64,
    pub rx_errors: u64,
    pub malformed_gtpu: u64,
    pub not_ipv4: u64,
    pub unknown_ue_ip: u64,
    pub unknown_teid: u64,
    pub path_management: u64,
    pub error_indications: u64,
    /// Sum of the per-slice ring-full drops.
    pub ring_full: u64,
    pub slices: Vec<DemuxSliceStats>,
}

impl DemuxStats {
    /// Packets the demux dropped itself (ring full or nothing to steer to).
    pub fn dropped(&self) -> u64 {
        self.ring_full + self.malformed_gtpu + self.not_ipv4 + self.unknown_ue_ip
    }
}

/// One slice's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SliceStats {
    pub slice: usize,
    pub ul_forwarded: u64,
    pub dl_forwarded: u64,
    /// IP bytes forwarded, by direction.
    pub ul_bytes: u64,
    pub dl_bytes: u64,
    pub echo_replies: u64,
    pub error_indications: u64,
    pub end_markers: u64,
    pub buffered: u64,
    pub updates_applied: u64,
    /// Data-path drops, total and by reason (non-zero reasons only, by name).
    pub drops: u64,
    pub drops_by_reason: Vec<(&'static str, u64)>,
    /// The data thread's S1-U and SGi ports.
    pub s1u: PortStats,
    pub sgi: PortStats,
    /// This slice's part of the demux counters (None without a demux thread).
    pub demux: Option<DemuxSliceStats>,
    /// Packets that left in the batch they came with, toward SGi and toward S1-U.
    pub egress_bypassed: [u64; 2],
    /// The egress schedulers' classes that ever queued or dropped a packet.
    pub egress: Vec<EgressClassStats>,
}

/// One egress class of a slice (see `pepc_slice::datapath::egress`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressClassStats {
    /// "uplink" (toward SGi) or "downlink" (toward S1-U).
    pub direction: &'static str,
    /// 0: GBR traffic sent beyond its GBR.
    pub qci: u8,
    pub depth: u64,
    pub sent: u64,
    pub sent_bytes: u64,
    /// Packets the port pushed back into this class (its socket or TX ring was full).
    pub pushed_back: u64,
    /// By reason (`EgressDrop::name`).
    pub dropped: Vec<(&'static str, u64)>,
    /// Time queued: bucket k counts delays below 2^k µs (the last, the rest).
    pub delay: [u64; DELAY_BUCKETS],
}

impl EgressClassStats {
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().map(|d| d.1).sum()
    }

    /// The upper bound (µs) of the bucket holding quantile `q` of the delays (None:
    /// no packet queued, or beyond the last bound).
    pub fn delay_us_quantile(&self, q: f64) -> Option<u64> {
        let total: u64 = self.delay.iter().sum();
        let want = (total as f64 * q).ceil() as u64;
        let mut seen = 0;
        for (k, n) in self.delay.iter().enumerate() {
            seen += n;
            if total > 0 && seen >= want {
                return (k + 1 < DELAY_BUCKETS).then_some(1 << k);
            }
        }
        None
    }

    fn read(c: &[std::sync::Arc<EgressCounters>; 2]) -> Vec<EgressClassStats> {
        let mut v = Vec::new();
        for (d, dir) in [(0, "uplink"), (1, "downlink")] {
            for (k, cc) in c[d].classes.iter().enumerate() {
                let st = EgressClassStats {
                    direction: dir,
                    qci: class_qci(k),
                    depth: cc.depth.load(Relaxed),
                    sent: cc.sent.load(Relaxed),
                    sent_bytes: cc.sent_bytes.load(Relaxed),
                    pushed_back: cc.pushed_back.load(Relaxed),
                    dropped: EgressDrop::ALL
                        .iter()
                        .map(|&r| (r.name(), cc.dropped[r as usize].load(Relaxed)))
                        .filter(|r| r.1 > 0)
                        .collect(),
                    delay: std::array::from_fn(|i| cc.delay[i].load(Relaxed)),
                };
                if st.depth > 0 || st.sent > 0 || st.pushed_back > 0 || !st.dropped.is_empty() {
                    v.push(st);
                }
            }
        }
        v
    }
}

impl SliceStats {
    pub(crate) fn read(
        slice: usize,
        c: &SliceCounters,
        ports: &[std::sync::Arc<PortCounters>; 2],
        demux: Option<DemuxSliceStats>,
    ) -> Self {
        SliceStats {
            slice,
            ul_forwarded: c.ul_forwarded.load(Relaxed),
            dl_forwarded: c.dl_forwarded.load(Relaxed),
            ul_bytes: c.ul_bytes.load(Relaxed),
            dl_bytes: c.dl_bytes.load(Relaxed),
            echo_replies: c.echo_replies.load(Relaxed),
            error_indications: c.error_indications.load(Relaxed),
            end_markers: c.end_markers.load(Relaxed),
            buffered: c.buffered.load(Relaxed),
            updates_applied: c.updates_applied.load(Relaxed),
            drops: c.total_drops(),
            drops_by_reason: DropReason::ALL
                .iter()
                .map(|&r| (r.name(), c.drop_count(r)))
                .filter(|&(_, n)| n > 0)
                .collect(),
            s1u: ports[0].snapshot(),
            sgi: ports[1].snapshot(),
            demux,
            egress_bypassed: [0, 1].map(|d| c.egress[d].bypassed.load(Relaxed)),
            egress: EgressClassStats::read(&c.egress),
        }
    }
}

/// Which thread reads a receiving socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketOwner {
    Demux,
    Slice(usize),
}

impl fmt::Display for SocketOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SocketOwner::Demux => f.write_str("demux"),
            SocketOwner::Slice(s) => write!(f, "slice {s}"),
        }
    }
}

/// What was dropped at one of the node's sockets, by the kernel or the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketDrops {
    /// "s1u" or "sgi".
    pub port: &'static str,
    pub owner: SocketOwner,
    pub drops: DropCounts,
}

/// Everything `Node::stats` reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeStats {
    pub slices: Vec<SliceStats>,
    /// None when the node runs without a demux thread (`node.demux = "none"`).
    pub demux: Option<DemuxStats>,
    /// The drops at each socket that counts them (AF_XDP, UDP): the kernel's never
    /// reached a counter above; the ports' send failures are `tx_failed` by reason.
    pub sockets: Vec<SocketDrops>,
}

impl NodeStats {
    /// Every packet the kernel dropped at the node's sockets.
    pub fn dropped_by_kernel(&self) -> u64 {
        self.sockets.iter().map(|k| k.drops.by_kernel()).sum()
    }

    /// The kernel's drops at the node's sockets that the links do not count too (a
    /// UDP socket's buffer, a TUN device's queue).
    pub fn dropped_by_kernel_after_the_link(&self) -> u64 {
        self.sockets
            .iter()
            .map(|k| k.drops.by_kernel_after_the_link())
            .sum()
    }

    /// Packets a port dropped for `why` (a port-level reason), summed over sockets.
    pub fn dropped_by_ports(&self, why: crate::io::SocketDropReason) -> u64 {
        self.sockets.iter().map(|k| k.drops.get(why)).sum()
    }
}

impl fmt::Display for NodeStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(d) = &self.demux {
            writeln!(
                f,
                "demux: rx s1u {} sgi {}; ring-full drops {}; malformed gtpu {}; not ipv4 {}; unknown ue ip {}; unknown teid {}; path mgmt {}; error ind {}; rx errors {}",
                d.rx_s1u, d.rx_sgi, d.ring_full, d.malformed_gtpu, d.not_ipv4,
                d.unknown_ue_ip, d.unknown_teid, d.path_management, d.error_indications,
                d.rx_errors
            )?;
        }
        for s in &self.slices {
            write!(
                f,
                "slice {}: ul {} dl {} fwd; echo {} err-ind {}; updates {}; drops {}",
                s.slice,
                s.ul_forwarded,
                s.dl_forwarded,
                s.echo_replies,
                s.error_indications,
                s.updates_applied,
                s.drops
            )?;
            if !s.drops_by_reason.is_empty() {
                let r: Vec<String> = s
                    .drops_by_reason
                    .iter()
                    .map(|(n, c)| format!("{n}={c}"))
                    .collect();
                write!(f, " ({})", r.join(" "))?;
            }
            write!(
                f,
                "; tx failed s1u {} sgi {}",
                s.s1u.tx_failed, s.sgi.tx_failed
            )?;
            if let Some(d) = &s.demux {
                write!(
                    f,
                    "; from demux ul {} dl {}, ring full ul {} dl {}",
                    d.ul, d.dl, d.ul_ring_full, d.dl_ring_full
                )?;
            }
            writeln!(f)?;
        }
        for k in self.sockets.iter().filter(|k| k.drops.total() > 0) {
            let mut r: Vec<String> = k
                .drops
                .by_reason()
                .filter(|&(_, n)| n > 0)
                .map(|(why, n)| format!("{}={n}", why.as_str()))
                .collect();
            if k.drops.fill_ring_empty > 0 {
                r.push(format!(
                    "(fill ring found empty {}x)",
                    k.drops.fill_ring_empty
                ));
            }
            writeln!(
                f,
                "socket drops at {} ({}): {}",
                k.port,
                k.owner,
                r.join(" ")
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn egress_classes_that_queued_or_dropped_are_reported_with_their_delays() {
        let c: [Arc<EgressCounters>; 2] = Default::default();
        // Downlink QCI 1 (class 0): 90 packets within 1 µs, 10 at 256-511 µs.
        let k = &c[1].classes[0];
        k.sent.store(100, Relaxed);
        k.delay[0].store(90, Relaxed);
        k.delay[9].store(10, Relaxed);
        c[1].classes[21].dropped[EgressDrop::QueueFull as usize].store(7, Relaxed);
        let v = EgressClassStats::read(&c);
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].direction, v[0].qci, v[0].sent), ("downlink", 1, 100));
        assert_eq!(v[0].delay_us_quantile(0.5), Some(1));
        assert_eq!(v[0].delay_us_quantile(0.99), Some(512));
        assert_eq!((v[1].qci, v[1].dropped_total()), (9, 7));
        assert_eq!(v[1].dropped, vec![("queue_full", 7)]);
        assert_eq!(v[1].delay_us_quantile(0.5), None);
    }
}
