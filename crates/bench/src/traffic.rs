//! The benchmark's traffic generator (PEPC Table 2 defaults): uplink G-PDUs and
//! downlink IPv4 packets for users drawn uniformly at random, built by rewriting a
//! template in place (what a traffic generator replaying a trace with rewritten TEIDs
//! does, §5.1).
//!
//! The users are drawn before measuring, into a sequence as long as the user table,
//! which the generator then reads in order. Drawing per packet read a random entry of
//! the user table: at 10M users an 80 MB table on 4 KB pages, so every packet's pick
//! was a TLB and cache miss of the generator's, still in flight (holding miss buffers
//! and TLB entries) when the timed pipeline started. The pipeline of a real node reads
//! packets from a ring, not from a table of users.

use pepc_slice::packets::{gpdu, ipv4_udp, retarget_downlink, retarget_uplink};
use pepc_slice::synthetic::Rng;
use pepc_wire::Batch;
use std::net::Ipv4Addr;

/// Uplink frame on the wire: outer IPv4 (20) + UDP (8) + GTP-U (8) + inner packet.
pub const OUTER_OVERHEAD: usize = 36;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub teid: u32,
    pub ip: Ipv4Addr,
}

pub struct Traffic {
    ul: Vec<u8>,
    dl: Vec<u8>,
    /// Users drawn uniformly at random (with replacement), one per packet, as many
    /// as there are users (so the cache sees every user's lines), read in order.
    picks: Vec<Target>,
    next: usize,
}

impl Traffic {
    /// `ul_frame`: uplink frame size on the wire (inner = ul_frame - 36);
    /// `dl_packet`: downlink IPv4 packet size.
    pub fn new(targets: Vec<Target>, ul_frame: usize, dl_packet: usize, seed: u64) -> Self {
        let server = Ipv4Addr::new(198, 51, 100, 1);
        let inner = ipv4_udp(
            Ipv4Addr::new(10, 0, 0, 1),
            server,
            40000,
            443,
            ul_frame.saturating_sub(OUTER_OVERHEAD).max(28),
        );
        Traffic {
            ul: gpdu(1, &inner),
            dl: ipv4_udp(
                server,
                Ipv4Addr::new(10, 0, 0, 1),
                443,
                40000,
                dl_packet.max(28),
            ),
            picks: draw(&targets, seed),
            next: 0,
        }
    }

    #[inline]
    fn pick(&mut self) -> Target {
        let t = self.picks[self.next];
        self.next += 1;
        if self.next == self.picks.len() {
            self.next = 0;
        }
        t
    }

    /// Fill a whole batch with uplink G-PDUs.
    pub fn fill_uplink(&mut self, b: &mut Batch) {
        let n = b.capacity();
        for i in 0..n {
            let t = self.pick();
            let buf = &mut b.bufs[i];
            buf.reset();
            buf.fill(&self.ul);
            retarget_uplink(buf.as_mut_slice(), t.teid, t.ip);
        }
        b.len = n;
    }

    /// The users the next `n` packets go to (in order, both directions sharing the
    /// sequence).
    #[cfg(test)]
    fn peek(&self, n: usize) -> Vec<Target> {
        (0..n)
            .map(|i| self.picks[(self.next + i) % self.picks.len()])
            .collect()
    }

    pub fn fill_downlink(&mut self, b: &mut Batch) {
        let n = b.capacity();
        for i in 0..n {
            let t = self.pick();
            let buf = &mut b.bufs[i];
            buf.reset();
            buf.fill(&self.dl);
            retarget_downlink(buf.as_mut_slice(), t.ip);
        }
        b.len = n;
    }
}

/// `targets.len()` users drawn uniformly at random from `targets`, on huge pages where
/// the kernel allows (the sequence is read in order, but is as large as the table).
fn draw(targets: &[Target], seed: u64) -> Vec<Target> {
    assert!(!targets.is_empty(), "traffic needs at least one user");
    let mut rng = Rng::new(seed);
    let mut picks = pepc_slice::mem::huge_page_vec(targets.len());
    picks.extend((0..targets.len()).map(|_| targets[rng.below(targets.len() as u64) as usize]));
    picks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users(n: u32) -> Vec<Target> {
        (0..n)
            .map(|i| Target {
                teid: 0x100 + i,
                ip: Ipv4Addr::from(0x0a00_0000 + i),
            })
            .collect()
    }

    #[test]
    fn packets_go_to_the_drawn_users_in_order_and_wrap() {
        let t = users(1000);
        let mut tr = Traffic::new(t.clone(), 128, 64, 9);
        let want = tr.peek(1000 + 64);
        assert_eq!(
            &want[..64],
            &want[1000..],
            "the sequence wraps after one pass"
        );
        let mut b = Batch::new(32);
        tr.fill_uplink(&mut b);
        for (i, buf) in b.bufs.iter().take(32).enumerate() {
            let teid = u32::from_be_bytes(buf.as_slice()[4..8].try_into().unwrap());
            assert_eq!(teid, want[i].teid);
        }
        tr.fill_downlink(&mut b);
        for (i, buf) in b.bufs.iter().take(32).enumerate() {
            let dst: [u8; 4] = buf.as_slice()[16..20].try_into().unwrap();
            assert_eq!(Ipv4Addr::from(dst), want[32 + i].ip);
        }
    }

    #[test]
    fn the_draw_is_uniform_over_the_users() {
        let t = users(100);
        let picks = draw(&t, 3);
        assert_eq!(picks.len(), 100);
        // Drawn with replacement: about 1 - 1/e of the users appear in one pass.
        let distinct: std::collections::HashSet<u32> = picks.iter().map(|p| p.teid).collect();
        assert!((50..=80).contains(&distinct.len()), "{}", distinct.len());
        let many = draw(&users(10), 5);
        let more: Vec<Target> = (0..50).flat_map(|s| draw(&users(10), s)).collect();
        assert_eq!(many.len(), 10);
        let mut count = [0u32; 10];
        for p in &more {
            count[(p.teid - 0x100) as usize] += 1;
        }
        assert!(count.iter().all(|&c| (25..=75).contains(&c)), "{count:?}");
    }
}
