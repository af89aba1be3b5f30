//! The benchmark's traffic generator (PEPC Table 2 defaults): uplink G-PDUs and
//! downlink IPv4 packets for users drawn uniformly at random, built by rewriting a
//! template in place (what a traffic generator replaying a trace with rewritten TEIDs
//! does, §5.1).

use pepc_slice::packets::{gpdu, ipv4_udp, retarget_downlink, retarget_uplink};
use pepc_slice::synthetic::Rng;
use pepc_wire::Batch;
use std::net::Ipv4Addr;

/// Uplink frame on the wire: outer IPv4 (20) + UDP (8) + GTP-U (8) + inner packet.
pub const OUTER_OVERHEAD: usize = 36;

#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub teid: u32,
    pub ip: Ipv4Addr,
}

pub struct Traffic {
    ul: Vec<u8>,
    dl: Vec<u8>,
    pub targets: Vec<Target>,
    rng: Rng,
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
            targets,
            rng: Rng::new(seed),
        }
    }

    #[inline]
    fn pick(&mut self) -> Target {
        let i = self.rng.below(self.targets.len() as u64) as usize;
        self.targets[i]
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
