//! Per-queue receive (`node.demux = "queues"`): each slice's data thread owns a socket
//! of its own for S1-U and for SGi (an AF_XDP socket on a queue of its own; on kernel
//! sockets, a UDP socket of a reuseport group or a TUN queue), and both receives and
//! sends there. No demux thread sees the packets.
//!
//! The device spreads packets over its queues by its own rule (RSS hashes addresses
//! and ports; a flow-director rule can match the TEID's or the UE address's slice
//! bits; on kernel sockets our steering programs, [`crate::io::steer`], follow the
//! slices), which need not follow our slices. So a data thread steers what it receives
//! with the demux's tables: its own slice's packets go through its pipeline; another
//! slice's are handed to that slice over a ring (one per ordered pair of slices and
//! direction, single producer and consumer, batches swapped as in [`crate::ring`]).
//! Where the device steers by slice, nothing is handed on.
//!
//! Steering follows [`crate::dispatch`]'s rules, with one difference: what no slice
//! owns (not GTP-U, not IPv4, an unknown TEID or address) stays with the slice that
//! received it, whose data path drops or answers it and counts why. Error Indications
//! from an eNB are copied to every slice; Echo goes to slice 0.
//!
//! A handed-on packet waits for its slice's next receive call. A busy data thread
//! polls without pause; an idle one sleeps on its own sockets and its [`Doorbell`],
//! which the slice handing it packets rings (an eventfd write, only while it sleeps),
//! so a handed-on packet does not wait out the sleep.

use crate::demux::Demux;
use crate::dispatch::{route_s1u, S1uRoute};
use crate::io::PacketIo;
use crate::ring::{batch_ring, Drain, Feeder};
use crate::stats::{bump, PortCounters};
use pepc_wire::{Batch, Verdict, BATCH_SIZE};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Wakes a sleeping data thread when another slice hands it packets: an eventfd in
/// the set it sleeps on. Written only while the thread sleeps, at most once per sleep.
#[derive(Debug)]
pub struct Doorbell {
    fd: OwnedFd,
    /// The thread is about to sleep or sleeps (set before it looks at its rings a last
    /// time, so a hand-off either is seen there or finds this set).
    sleeping: AtomicBool,
    /// Rung since the thread last drained the eventfd (so one write per sleep).
    rung: AtomicBool,
    /// How many times it was rung (tests, and to show the mechanism works).
    rings: AtomicU64,
}

impl Doorbell {
    pub fn new() -> io::Result<Doorbell> {
        // SAFETY: plain eventfd(2); the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("a slice's doorbell (eventfd): {e}"),
            ));
        }
        Ok(Doorbell {
            // SAFETY: a fresh descriptor we own.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            sleeping: AtomicBool::new(false),
            rung: AtomicBool::new(false),
            rings: Default::default(),
        })
    }

    /// One doorbell per slice.
    pub fn for_slices(n: usize) -> io::Result<Vec<Arc<Doorbell>>> {
        (0..n).map(|_| Doorbell::new().map(Arc::new)).collect()
    }

    /// Called after handing packets on: wake the thread if it sleeps.
    #[inline]
    fn ring(&self) {
        // Pairs with the fence in `going_idle`: either the sleeper sees our batch in
        // its ring, or we see it sleeping.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) && !self.rung.swap(true, Ordering::AcqRel) {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64, as eventfd wants.
            unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
            self.rings.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn going_idle(&self) {
        self.sleeping.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    fn woke(&self) {
        self.sleeping.store(false, Ordering::Relaxed);
        if self.rung.load(Ordering::Acquire) {
            let mut v: u64 = 0;
            // SAFETY: reads 8 bytes into a live u64; non-blocking.
            let r = unsafe { libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
            // Until the ringer's write has landed (read fails), stay rung: the next
            // sleep then wakes at once and drains it here.
            if r == 8 {
                self.rung.store(false, Ordering::Release);
            }
        }
    }

    /// Times rung.
    pub fn rings(&self) -> u64 {
        self.rings.load(Ordering::Relaxed)
    }
}

/// Which port of the slice a [`QueuePort`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// GTP-U from eNBs: steered by TEID.
    S1u,
    /// IP toward UEs: steered by destination address.
    Sgi,
}

/// One slice's port in queue mode: its own socket, the rings to every other slice's
/// port of the same side, and the rings from them.
pub struct QueuePort {
    io: Box<dyn PacketIo>,
    side: Side,
    me: usize,
    demux: Demux,
    /// `to[s]`: to slice `s` (None for this slice).
    to: Vec<Option<Feeder>>,
    from: Vec<Drain>,
    /// What the socket gave, before steering.
    rx: Batch,
    /// Alternates the socket and the rings from peers, so neither starves the other.
    peers_first: bool,
    /// The next peer ring to look at.
    turn: usize,
    round: u64,
    counters: Arc<PortCounters>,
    /// Every slice's doorbell (indexed by slice; ours at `me`).
    bells: Vec<Arc<Doorbell>>,
}

/// Rings between the same side's ports of `slices` slices, `depth` batches each: for
/// every slice, the feeders to the others (indexed by slice) and the drains from them.
pub fn mesh(slices: usize, depth: usize) -> Vec<(Vec<Option<Feeder>>, Vec<Drain>)> {
    let mut out: Vec<(Vec<Option<Feeder>>, Vec<Drain>)> = (0..slices)
        .map(|_| ((0..slices).map(|_| None).collect(), Vec::new()))
        .collect();
    for from in 0..slices {
        for to in 0..slices {
            if from != to {
                let (f, d) = batch_ring(depth);
                out[from].0[to] = Some(f);
                out[to].1.push(d);
            }
        }
    }
    out
}

impl QueuePort {
    /// `rings`: this slice's part of [`mesh`]; `bells`: every slice's doorbell
    /// ([`Doorbell::for_slices`], shared by both sides' ports).
    pub fn new(
        io: Box<dyn PacketIo>,
        side: Side,
        me: usize,
        demux: Demux,
        rings: (Vec<Option<Feeder>>, Vec<Drain>),
        counters: Arc<PortCounters>,
        bells: Vec<Arc<Doorbell>>,
    ) -> Self {
        QueuePort {
            io,
            side,
            me,
            demux,
            to: rings.0,
            from: rings.1,
            rx: Batch::new(BATCH_SIZE),
            peers_first: false,
            turn: 0,
            round: 0,
            counters,
            bells,
        }
    }

    /// Which slice a received packet belongs to (`self.me` for what no slice owns).
    #[inline]
    fn owner(&self, p: &[u8]) -> Owner {
        match self.side {
            Side::S1u => match route_s1u(&self.demux, p) {
                S1uRoute::Slice(s) => Owner::One(s),
                S1uRoute::PathManagement => Owner::One(0),
                S1uRoute::AllSlices => Owner::All,
                S1uRoute::UnknownTeid | S1uRoute::Malformed => Owner::One(self.me),
            },
            Side::Sgi => {
                if p.len() < 20 || p[0] >> 4 != 4 {
                    return Owner::One(self.me);
                }
                let dst = u32::from_be_bytes([p[16], p[17], p[18], p[19]]);
                Owner::One(self.demux.slice_of_ue_ip(dst).unwrap_or(self.me))
            }
        }
    }

    /// Receive from the socket into `batch`: ours stay, the rest go to their slices.
    fn recv_socket(&mut self, batch: &mut Batch) -> io::Result<usize> {
        let n = self.io.recv_batch(&mut self.rx)?;
        if n == 0 {
            // What a full ring left staged goes once the peer has returned batches.
            self.flush();
            batch.len = 0;
            return Ok(0);
        }
        self.round += 1;
        let round = self.round;
        let (mut mine, mut handed, mut full) = (0usize, 0u64, 0u64);
        for i in 0..n {
            let owner = self.owner(self.rx.bufs[i].as_slice());
            let s = match owner {
                Owner::All => {
                    for f in self.to.iter_mut().flatten() {
                        if f.stage_copy(&self.rx.bufs[i], round) {
                            handed += 1;
                        } else {
                            full += 1;
                        }
                    }
                    self.me
                }
                Owner::One(s) => s,
            };
            match self.to.get_mut(s).and_then(Option::as_mut) {
                Some(f) => {
                    if f.stage(&mut self.rx.bufs[i], round) {
                        handed += 1;
                    } else {
                        full += 1;
                    }
                }
                None => {
                    std::mem::swap(&mut batch.bufs[mine], &mut self.rx.bufs[i]);
                    mine += 1;
                }
            }
        }
        self.flush();
        batch.len = mine;
        bump(&self.counters.handed_off, handed);
        bump(&self.counters.handoff_full, full);
        Ok(mine)
    }

    /// Ship what is staged for peers (partial batches while their rings keep up): their
    /// data threads batch on their side.
    fn flush(&mut self) {
        for (s, f) in self.to.iter_mut().enumerate() {
            let Some(f) = f else { continue };
            if f.staged() > 0 {
                f.flush_partial();
            }
            if f.shipped_waiting() {
                if let Some(b) = self.bells.get(s) {
                    b.ring();
                }
            }
        }
    }

    /// A batch a peer handed on, if one waits.
    fn recv_peers(&mut self, batch: &mut Batch) -> usize {
        for _ in 0..self.from.len() {
            let k = self.turn % self.from.len();
            self.turn = self.turn.wrapping_add(1);
            let n = self.from[k].recv_into(batch);
            if n > 0 {
                return n;
            }
        }
        batch.len = 0;
        0
    }
}

enum Owner {
    One(usize),
    /// An eNB's Error Indication: every slice may hold the tunnel it names.
    All,
}

impl PacketIo for QueuePort {
    fn recv_batch(&mut self, batch: &mut Batch) -> io::Result<usize> {
        // Every other call looks at the peers' rings first.
        self.peers_first = !self.peers_first && !self.from.is_empty();
        let n = if self.peers_first {
            match self.recv_peers(batch) {
                0 => self.recv_socket(batch)?,
                n => n,
            }
        } else {
            match self.recv_socket(batch)? {
                0 => self.recv_peers(batch),
                n => n,
            }
        };
        bump(&self.counters.rx_packets, n as u64);
        Ok(n)
    }

    fn send_batch(&mut self, batch: &Batch, select: Verdict) -> io::Result<usize> {
        crate::ring::send_counted(&mut *self.io, &self.counters, batch, select)
    }

    fn poll_fd(&self) -> Option<RawFd> {
        self.io.poll_fd()
    }

    fn wake_fd(&self) -> Option<RawFd> {
        self.bells.get(self.me).map(|b| b.fd.as_raw_fd())
    }

    fn going_idle(&self) -> bool {
        if let Some(b) = self.bells.get(self.me) {
            b.going_idle();
        }
        self.from.iter().all(Drain::is_empty)
    }

    fn woke(&self) {
        if let Some(b) = self.bells.get(self.me) {
            b.woke();
        }
    }

    fn socket_drops(&self) -> Option<crate::io::SocketDropsProbe> {
        self.io.socket_drops()
    }

    fn idle_polls(&self) -> u32 {
        self.io.idle_polls()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pepc_slice::ids::IdLayout;
    use pepc_slice::packets::{gpdu, ipv4_udp};
    use std::collections::VecDeque;
    use std::net::Ipv4Addr;

    /// A socket stand-in: hands out queued packets, keeps what is sent.
    struct Fake {
        rx: VecDeque<Vec<u8>>,
    }

    impl PacketIo for Fake {
        fn recv_batch(&mut self, batch: &mut Batch) -> io::Result<usize> {
            batch.len = 0;
            while batch.len < batch.capacity() {
                let Some(p) = self.rx.pop_front() else { break };
                batch.bufs[batch.len].reset();
                batch.bufs[batch.len].fill(&p);
                batch.len += 1;
            }
            Ok(batch.len)
        }
        fn send_batch(&mut self, _: &Batch, _: Verdict) -> io::Result<usize> {
            Ok(0)
        }
    }

    fn ports(side: Side, packets: Vec<Vec<u8>>) -> (QueuePort, QueuePort, IdLayout) {
        let layout = IdLayout::new(2, Ipv4Addr::new(10, 0, 0, 0), 10).unwrap();
        let demux = Demux::new(layout, 2, Vec::new());
        let mut mesh = mesh(2, 4).into_iter();
        let bells = Doorbell::for_slices(2).unwrap();
        let mut port = |k: usize, rx| {
            QueuePort::new(
                Box::new(Fake { rx }),
                side,
                k,
                demux.clone(),
                mesh.next().unwrap(),
                Arc::default(),
                bells.clone(),
            )
        };
        let p0 = port(0, packets.into());
        let p1 = port(1, VecDeque::new());
        (p0, p1, layout)
    }

    fn contents(b: &Batch) -> Vec<Vec<u8>> {
        b.packets().iter().map(|p| p.as_slice().to_vec()).collect()
    }

    #[test]
    fn s1u_packets_go_to_the_slice_their_teid_names() {
        let layout = IdLayout::new(2, Ipv4Addr::new(10, 0, 0, 0), 10).unwrap();
        let inner = ipv4_udp(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(8, 8, 8, 8),
            1,
            2,
            40,
        );
        let mine = gpdu(layout.teid(0, 5, 1), &inner);
        let theirs = gpdu(layout.teid(1, 5, 1), &inner);
        let error_ind = vec![0x30, pepc_wire::gtpu::ERROR_INDICATION, 0, 0, 0, 0, 0, 0];
        let echo = vec![
            0x32,
            pepc_wire::gtpu::ECHO_REQUEST,
            0,
            4,
            0,
            0,
            0,
            0,
            0,
            1,
            0,
            0,
        ];
        let junk = vec![0x00, 0xff, 1];
        let (mut p0, mut p1, _) = ports(
            Side::S1u,
            vec![
                mine.clone(),
                theirs.clone(),
                error_ind.clone(),
                echo.clone(),
                junk.clone(),
            ],
        );
        let mut b = Batch::default();
        // Slice 0 keeps its G-PDU, the Echo (slice 0's), the Error Indication (every
        // slice's) and what is not GTP-U (its data path counts it).
        assert_eq!(p0.recv_batch(&mut b).unwrap(), 4);
        assert_eq!(contents(&b), vec![mine, error_ind.clone(), echo, junk]);
        // Slice 1 gets the other G-PDU and a copy of the Error Indication.
        assert_eq!(p1.recv_batch(&mut b).unwrap(), 2);
        assert_eq!(contents(&b), vec![theirs, error_ind]);
        let (c0, c1) = (p0.counters.snapshot(), p1.counters.snapshot());
        assert_eq!((c0.handed_off, c0.handoff_full, c0.rx_packets), (2, 0, 4));
        assert_eq!((c1.handed_off, c1.rx_packets), (0, 2));
        // Nothing more anywhere.
        assert_eq!(p0.recv_batch(&mut b).unwrap(), 0);
        assert_eq!(p1.recv_batch(&mut b).unwrap(), 0);
    }

    #[test]
    fn sgi_packets_go_to_the_slice_owning_the_address_and_a_full_ring_is_counted() {
        let layout = IdLayout::new(2, Ipv4Addr::new(10, 0, 0, 0), 10).unwrap();
        let to = |s: u32| ipv4_udp(Ipv4Addr::new(8, 8, 8, 8), layout.ue_ip(s, 9), 2, 1, 40);
        let unknown = ipv4_udp(
            Ipv4Addr::new(8, 8, 8, 8),
            Ipv4Addr::new(192, 0, 2, 1),
            2,
            1,
            40,
        );
        // 4 batches of 32 in flight plus the one staging: 160 fit; 200 do not.
        let mut pkts = vec![unknown.clone()];
        pkts.extend((0..200).map(|_| to(1)));
        let (mut p0, mut p1, _) = ports(Side::Sgi, pkts);
        let mut b = Batch::default();
        let mut kept = 0;
        for _ in 0..7 {
            kept += p0.recv_batch(&mut b).unwrap();
        }
        assert_eq!(
            kept, 1,
            "the unknown address stays with the slice that got it"
        );
        let c0 = p0.counters.snapshot();
        assert_eq!(c0.handed_off + c0.handoff_full, 200);
        assert!(c0.handoff_full > 0 && c0.handed_off >= 4 * 32, "{c0:?}");
        let mut got = 0;
        for _ in 0..2 {
            while p1.recv_batch(&mut b).unwrap() > 0 {
                assert!(b.packets().iter().all(|p| p.as_slice() == to(1)));
                got += b.len as u64;
            }
            // The batch still staged at slice 0 goes with its next receive, even
            // with nothing new on its socket.
            assert_eq!(p0.recv_batch(&mut b).unwrap(), 0);
        }
        assert_eq!(got, c0.handed_off);
    }

    /// A sleeping slice is woken by the slice that hands it packets (its doorbell's
    /// descriptor becomes readable), once per sleep; an awake one is not rung, and one
    /// with a batch waiting does not go to sleep.
    #[test]
    fn a_hand_off_rings_the_sleeping_slices_doorbell() {
        let layout = IdLayout::new(2, Ipv4Addr::new(10, 0, 0, 0), 10).unwrap();
        let to1 = ipv4_udp(Ipv4Addr::new(8, 8, 8, 8), layout.ue_ip(1, 9), 2, 1, 40);
        let (mut p0, p1, _) = ports(Side::Sgi, vec![to1.clone(); 3]);
        let bell = p1.bells[1].clone();
        let wake = p1.wake_fd().unwrap();
        let readable = || crate::io::wait_readable(wake, std::time::Duration::ZERO).unwrap();
        assert!(p1.going_idle(), "nothing waits: slice 1 may sleep");
        assert!(!readable());
        let mut b = Batch::default();
        assert_eq!(p0.recv_batch(&mut b).unwrap(), 0, "all three are slice 1's");
        assert!(readable(), "the hand-off woke slice 1");
        assert_eq!(bell.rings(), 1);
        p1.woke();
        assert!(!readable(), "woken, the doorbell is quiet again");
        // Awake (and with a batch waiting): no ring, and no sleep.
        let (mut p0, mut p1, _) = ports(Side::Sgi, vec![to1.clone(); 2]);
        let bell = p1.bells[1].clone();
        assert_eq!(p0.recv_batch(&mut b).unwrap(), 0);
        assert_eq!(bell.rings(), 0, "slice 1 was awake");
        assert!(!p1.going_idle(), "a batch waits for slice 1");
        p1.woke();
        assert_eq!(p1.recv_batch(&mut b).unwrap(), 2);
    }
}
