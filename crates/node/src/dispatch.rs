//! The demux stage (PEPC §3.3/§4.3, Figure 3's LookUpSlice): one thread owns the S1-U
//! socket and the SGi port, reads batches from both, steers every packet to its
//! slice's ring by TEID (uplink) or destination UE address (downlink), and never
//! transmits: each slice's data thread sends on its own handle of the node's sockets.
//!
//! Steering rules:
//! * G-PDU / End Marker: the slice named by the TEID ([`Demux::slice_of_teid`]); a TEID
//!   that names no slice goes to the default slice, whose data path drops it and
//!   answers with an Error Indication.
//! * Error Indication from an eNB: copied to every slice (it names the eNB's TEID,
//!   which carries no slice bits).
//! * Echo and any other GTP-U message: slice 0, whose data path answers or counts it.
//! * Not GTPv1-U: dropped here (counted).
//! * SGi: IPv4 by destination address; non-IPv4 or an address outside every slice is
//!   dropped here (counted).
//!
//! Full batches are shipped at once; a partial batch is shipped when its socket has
//! been drained (a receive returned less than a batch) or after a few rounds, so a
//! quiet slice's packets are not held behind a busy one's.

use crate::demux::Demux;
use crate::io::{wait_any_readable, PacketIo};
use crate::ring::Feeder;
use crate::stats::DemuxCounters;
use pepc_wire::{gtpu, Batch, BATCH_SIZE};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Rounds a partial batch may wait for company before it is shipped anyway.
const MAX_STAGE_ROUNDS: u64 = 4;

/// Where an S1-U datagram goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum S1uRoute {
    Slice(usize),
    /// TEID names no slice: to the default slice for an Error Indication.
    UnknownTeid,
    /// Echo and other path management.
    PathManagement,
    /// Error Indication from a peer: to every slice.
    AllSlices,
    Malformed,
}

/// Classify a raw S1-U datagram.
#[inline]
pub fn route_s1u(d: &Demux, p: &[u8]) -> S1uRoute {
    // GTPv1 (version 1) with PT = 1; shorter than the mandatory header is not GTP-U.
    if p.len() < gtpu::HEADER_LEN || p[0] >> 5 != 1 || p[0] & gtpu::FLAG_PT == 0 {
        return S1uRoute::Malformed;
    }
    match p[1] {
        gtpu::G_PDU | gtpu::END_MARKER => {
            let teid = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
            match d.slice_of_teid(teid) {
                Some(s) => S1uRoute::Slice(s),
                None => S1uRoute::UnknownTeid,
            }
        }
        gtpu::ERROR_INDICATION => S1uRoute::AllSlices,
        _ => S1uRoute::PathManagement,
    }
}

/// Plain-integer mirror of the counters, published once per round.
#[derive(Default)]
struct Tally {
    rx_s1u: u64,
    rx_sgi: u64,
    rx_errors: u64,
    malformed_gtpu: u64,
    not_ipv4: u64,
    unknown_ue_ip: u64,
    unknown_teid: u64,
    path_management: u64,
    error_indications: u64,
    /// Per slice: ul, dl, ul_ring_full, dl_ring_full.
    slices: Vec<[u64; 4]>,
}

/// The demux thread's state; [`DemuxStage::run_once`] is one round (no thread inside,
/// so tests can drive it directly).
pub struct DemuxStage {
    s1u: Box<dyn PacketIo>,
    sgi: Box<dyn PacketIo>,
    demux: Demux,
    ul: Vec<Feeder>,
    dl: Vec<Feeder>,
    rx: Batch,
    round: u64,
    default_slice: usize,
    tally: Tally,
    dirty: bool,
    counters: Arc<DemuxCounters>,
}

/// [`DemuxStage::new`] was given rings for another number of slices than the demux has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("demux: {slices} slices but {uplink} uplink and {downlink} downlink rings")]
pub struct RingsMismatch {
    pub slices: usize,
    pub uplink: usize,
    pub downlink: usize,
}

impl DemuxStage {
    /// `ul[s]`/`dl[s]`: slice `s`'s rings; both must have `demux.slices()` entries.
    pub fn new(
        demux: Demux,
        s1u: Box<dyn PacketIo>,
        sgi: Box<dyn PacketIo>,
        ul: Vec<Feeder>,
        dl: Vec<Feeder>,
    ) -> Result<Self, RingsMismatch> {
        let n = demux.slices();
        if ul.len() != n || dl.len() != n {
            return Err(RingsMismatch {
                slices: n,
                uplink: ul.len(),
                downlink: dl.len(),
            });
        }
        Ok(DemuxStage {
            s1u,
            sgi,
            ul,
            dl,
            rx: Batch::new(BATCH_SIZE),
            round: 0,
            default_slice: 0,
            tally: Tally {
                slices: vec![[0; 4]; n],
                ..Tally::default()
            },
            dirty: false,
            counters: Arc::new(DemuxCounters::new(n)),
            demux,
        })
    }

    pub fn counters(&self) -> Arc<DemuxCounters> {
        self.counters.clone()
    }

    /// Packets staged but not yet shipped to a slice.
    pub fn staged(&self) -> usize {
        self.ul.iter().chain(&self.dl).map(Feeder::staged).sum()
    }

    /// Descriptors to sleep on when idle.
    pub fn poll_fds(&self) -> Vec<RawFd> {
        [self.s1u.poll_fd(), self.sgi.poll_fd()]
            .into_iter()
            .flatten()
            .collect()
    }

    /// One round: a batch from S1-U, a batch from SGi, steer, ship. Returns how many
    /// packets were received.
    pub fn run_once(&mut self) -> usize {
        self.round += 1;
        let cap = self.rx.capacity();
        let n_ul = match self.s1u.recv_batch(&mut self.rx) {
            Ok(n) => n,
            Err(_) => {
                self.tally.rx_errors += 1;
                0
            }
        };
        if n_ul > 0 {
            self.steer_uplink(n_ul);
        }
        let n_dl = match self.sgi.recv_batch(&mut self.rx) {
            Ok(n) => n,
            Err(_) => {
                self.tally.rx_errors += 1;
                0
            }
        };
        if n_dl > 0 {
            self.steer_downlink(n_dl);
        }
        self.ship_partials(n_ul < cap, n_dl < cap);
        if n_ul + n_dl > 0 || self.dirty {
            self.publish();
        }
        n_ul + n_dl
    }

    fn steer_uplink(&mut self, n: usize) {
        self.dirty = true;
        self.tally.rx_s1u += n as u64;
        let round = self.round;
        for i in 0..n {
            let s = match route_s1u(&self.demux, self.rx.bufs[i].as_slice()) {
                S1uRoute::Slice(s) => s,
                S1uRoute::UnknownTeid => {
                    self.tally.unknown_teid += 1;
                    self.default_slice
                }
                S1uRoute::PathManagement => {
                    self.tally.path_management += 1;
                    0
                }
                S1uRoute::Malformed => {
                    self.tally.malformed_gtpu += 1;
                    continue;
                }
                S1uRoute::AllSlices => {
                    self.tally.error_indications += 1;
                    for (s, f) in self.ul.iter_mut().enumerate() {
                        let k = if f.stage_copy(&self.rx.bufs[i], round) {
                            0
                        } else {
                            2
                        };
                        self.tally.slices[s][k] += 1;
                    }
                    continue;
                }
            };
            let k = if self.ul[s].stage(&mut self.rx.bufs[i], round) {
                0
            } else {
                2
            };
            self.tally.slices[s][k] += 1;
        }
    }

    fn steer_downlink(&mut self, n: usize) {
        self.dirty = true;
        self.tally.rx_sgi += n as u64;
        let round = self.round;
        for i in 0..n {
            let p = self.rx.bufs[i].as_slice();
            if p.len() < 20 || p[0] >> 4 != 4 {
                self.tally.not_ipv4 += 1;
                continue;
            }
            let dst = u32::from_be_bytes([p[16], p[17], p[18], p[19]]);
            let Some(s) = self.demux.slice_of_ue_ip(dst) else {
                self.tally.unknown_ue_ip += 1;
                continue;
            };
            let k = if self.dl[s].stage(&mut self.rx.bufs[i], round) {
                1
            } else {
                3
            };
            self.tally.slices[s][k] += 1;
        }
    }

    fn ship_partials(&mut self, ul_drained: bool, dl_drained: bool) {
        let round = self.round;
        for (rings, drained) in [(&mut self.ul, ul_drained), (&mut self.dl, dl_drained)] {
            for f in rings.iter_mut() {
                if f.staged() > 0
                    && (drained || round.wrapping_sub(f.staged_round()) >= MAX_STAGE_ROUNDS)
                {
                    f.flush_partial();
                }
            }
        }
    }

    fn publish(&mut self) {
        self.dirty = false;
        let t = &self.tally;
        let c = &*self.counters;
        let set = |a: &AtomicU64, v: u64| a.store(v, Ordering::Relaxed);
        set(&c.rx_s1u, t.rx_s1u);
        set(&c.rx_sgi, t.rx_sgi);
        set(&c.rx_errors, t.rx_errors);
        set(&c.malformed_gtpu, t.malformed_gtpu);
        set(&c.not_ipv4, t.not_ipv4);
        set(&c.unknown_ue_ip, t.unknown_ue_ip);
        set(&c.unknown_teid, t.unknown_teid);
        set(&c.path_management, t.path_management);
        set(&c.error_indications, t.error_indications);
        for (sc, v) in c.slices.iter().zip(&t.slices) {
            set(&sc.ul, v[0]);
            set(&sc.dl, v[1]);
            set(&sc.ul_ring_full, v[2]);
            set(&sc.dl_ring_full, v[3]);
        }
    }
}

/// Run the demux until `stop` is set or every slice has been told to stop (so a node
/// whose slices are joined one by one also ends its demux).
pub fn demux_loop(
    mut stage: DemuxStage,
    stop: Arc<AtomicBool>,
    slice_stops: Vec<Arc<AtomicBool>>,
) -> DemuxStage {
    let fds = stage.poll_fds();
    let mut idle = 0u32;
    let stopped = |s: &Arc<AtomicBool>| s.load(Ordering::Relaxed);
    let slices_stopped = || !slice_stops.is_empty() && slice_stops.iter().all(stopped);
    while !stopped(&stop) && !slices_stopped() {
        if stage.run_once() > 0 {
            idle = 0;
            continue;
        }
        idle += 1;
        // Spin briefly, then sleep on the sockets so an idle node costs no core. With
        // packets staged (every batch in flight) only nap: a slice will free one soon.
        if idle > 64 {
            if stage.staged() > 0 || fds.is_empty() {
                std::thread::sleep(Duration::from_micros(50));
            } else {
                let _ = wait_any_readable(&fds, Duration::from_millis(1));
            }
        }
    }
    stage
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemGenerator;
    use crate::ring::{batch_ring, Drain};
    use pepc_slice::ids::IdLayout;
    use pepc_slice::packets::{gpdu, ipv4_udp};
    use pepc_wire::PacketBuf;
    use std::net::Ipv4Addr;

    fn layout(n: usize) -> IdLayout {
        IdLayout::new(n, Ipv4Addr::new(10, 0, 0, 0), 8).unwrap()
    }

    /// A generator replaying `pkts` once.
    fn replay(pkts: Vec<Vec<u8>>) -> Box<dyn PacketIo> {
        let n = pkts.len() as u64;
        Box::new(MemGenerator::new(
            Box::new(move |b: &mut PacketBuf, seq: u64| {
                assert!(b.fill(&pkts[seq as usize]));
            }),
            Some(n),
        ))
    }

    fn stage(
        n: usize,
        depth: usize,
        s1u: Box<dyn PacketIo>,
        sgi: Box<dyn PacketIo>,
    ) -> (DemuxStage, Vec<Drain>, Vec<Drain>) {
        let (mut ul, mut dl, mut uld, mut dld) = (vec![], vec![], vec![], vec![]);
        for _ in 0..n {
            let (f, d) = batch_ring(depth);
            ul.push(f);
            uld.push(d);
            let (f, d) = batch_ring(depth);
            dl.push(f);
            dld.push(d);
        }
        let st = DemuxStage::new(Demux::new(layout(n), n, vec![]), s1u, sgi, ul, dl).unwrap();
        (st, uld, dld)
    }

    fn drain_all(d: &mut Drain) -> Vec<Vec<u8>> {
        let mut b = Batch::default();
        let mut out = vec![];
        while d.recv_into(&mut b) > 0 {
            out.extend(b.packets().iter().map(|p| p.as_slice().to_vec()));
        }
        out
    }

    #[test]
    fn steers_each_packet_to_its_slice() {
        let l = layout(3);
        let inner = |s: u32| ipv4_udp(l.ue_ip(s, 5), Ipv4Addr::new(8, 8, 8, 8), 1, 2, 10);
        let g = |s: u32| gpdu(l.teid(s, 7, 1), &inner(s));
        let mut echo = [0u8; 16];
        let ne = gtpu::echo_request(3, &mut echo).unwrap();
        let mut ei = [0u8; 64];
        let nei = gtpu::error_indication(0x42, Ipv4Addr::LOCALHOST, 2152, &mut ei).unwrap();
        let unknown = gpdu(0x8000_1234, &inner(0));
        let s1u = vec![
            g(0),
            g(1),
            g(2),
            g(2),
            g(3 /* no slice 3 */),
            unknown.clone(),
            echo[..ne].to_vec(),
            ei[..nei].to_vec(),
            vec![0x30, 0xff, 0], // too short
            vec![0x50; 20],      // GTP version 2
        ];
        let down = |s: u32| ipv4_udp(Ipv4Addr::new(8, 8, 8, 8), l.ue_ip(s, 9), 2, 1, 10);
        let mut v6 = vec![0u8; 40];
        v6[0] = 0x60;
        // A second PDN connection's address (PDN pool 1) steers like the first.
        let pdn1 = ipv4_udp(
            Ipv4Addr::new(8, 8, 8, 8),
            l.pdn_ip(1, 2, 9).expect("layout has a second PDN pool"),
            2,
            1,
            10,
        );
        let sgi = vec![
            down(1),
            down(0),
            pdn1.clone(),
            down(1),
            ipv4_udp(
                Ipv4Addr::new(8, 8, 8, 8),
                Ipv4Addr::new(192, 0, 2, 1),
                2,
                1,
                10,
            ),
            v6,
        ];
        let (mut st, mut ul, mut dl) = stage(3, 4, replay(s1u), replay(sgi));
        assert_eq!(st.run_once(), 16);
        assert_eq!(st.staged(), 0, "partial batches are shipped once drained");
        let u: Vec<_> = ul.iter_mut().map(drain_all).collect();
        let d: Vec<_> = dl.iter_mut().map(drain_all).collect();
        let ei_pkt = ei[..nei].to_vec();
        assert_eq!(
            u[0],
            vec![g(0), g(3), unknown, echo[..ne].to_vec(), ei_pkt.clone()]
        );
        assert_eq!(u[1], vec![g(1), ei_pkt.clone()]);
        assert_eq!(u[2], vec![g(2), g(2), ei_pkt]);
        assert_eq!(d[0], vec![down(0)]);
        assert_eq!(d[1], vec![down(1), down(1)]);
        assert_eq!(d[2], vec![pdn1]);
        let c = st.counters().snapshot();
        assert_eq!((c.rx_s1u, c.rx_sgi), (10, 6));
        assert_eq!(c.unknown_teid, 2);
        assert_eq!(c.path_management, 1);
        assert_eq!(c.error_indications, 1);
        assert_eq!(c.malformed_gtpu, 2);
        assert_eq!((c.not_ipv4, c.unknown_ue_ip), (1, 1));
        assert_eq!(c.ring_full, 0);
        let per: Vec<_> = c.slices.iter().map(|s| (s.ul, s.dl)).collect();
        assert_eq!(per, vec![(5, 1), (2, 2), (3, 1)]);
    }

    #[test]
    fn full_ring_drops_are_counted_per_slice_and_direction() {
        let l = layout(2);
        let g = gpdu(l.teid(1, 3, 0), &[0x45; 20]);
        let gen_ul: Box<dyn PacketIo> = Box::new(MemGenerator::new(
            Box::new(move |b: &mut PacketBuf, _| assert!(b.fill(&g))),
            Some(1000),
        ));
        let d = ipv4_udp(Ipv4Addr::new(8, 8, 8, 8), l.ue_ip(0, 1), 2, 1, 10);
        let gen_dl: Box<dyn PacketIo> = Box::new(MemGenerator::new(
            Box::new(move |b: &mut PacketBuf, _| assert!(b.fill(&d))),
            Some(100),
        ));
        // Depth 1: one batch in flight plus the staging batch = 64 packets per ring.
        let (mut st, mut ul, mut dl) = stage(2, 1, gen_ul, gen_dl);
        while st.run_once() > 0 {}
        let c = st.counters().snapshot();
        assert_eq!(c.slices[1].ul, 64);
        assert_eq!(c.slices[1].ul_ring_full, 1000 - 64);
        assert_eq!(c.slices[0].dl, 64);
        assert_eq!(c.slices[0].dl_ring_full, 100 - 64);
        assert_eq!(c.ring_full, 936 + 36);
        assert_eq!((c.slices[0].ul, c.slices[1].dl), (0, 0));
        // Once the slice drains, the held batch follows and the ring takes more.
        assert_eq!(drain_all(&mut ul[1]).len(), 32);
        assert_eq!(drain_all(&mut dl[0]).len(), 32);
        assert_eq!(st.staged(), 64);
        assert_eq!(st.run_once(), 0);
        assert_eq!(st.staged(), 0);
        assert_eq!(drain_all(&mut ul[1]).len(), 32);
        assert_eq!(drain_all(&mut dl[0]).len(), 32);
    }
}
