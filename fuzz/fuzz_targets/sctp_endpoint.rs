//! The userspace SCTP endpoint (the S1-MME server side) fed datagrams as from a peer.
//!
//! Each input starts from an established association between a client `Association`
//! and the server `Endpoint`, then runs records `op, len (u16 BE), octets`:
//! - chunks: the octets are the chunks of a packet the harness addresses to the
//!   association (ports, the server's verification tag or 0, a valid CRC32c) so the
//!   fuzzer works on chunk handling, not on checksums;
//! - raw: the octets as the whole datagram (its CRC fixed or not);
//! - the same packets to the client association, legitimate sends, clock advances.
//!
//! The server is driven as `UdpSctpTransport` drives it (transmit, events, removal of
//! drained associations); the two sides exchange what they send until quiet, which
//! must happen within a bound (no packet storm).
#![no_main]

use libfuzzer_sys::fuzz_target;
use pepc_sctp::wire::SctpPacket;
use pepc_sctp::{AssocHandle, Association, Config, Endpoint, Event};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

const CPORT: u16 = 40000;
const SPORT: u16 = 36412;

struct Net {
    now: Instant,
    client: Association,
    server: Endpoint,
    caddr: SocketAddr,
    handles: HashSet<AssocHandle>,
}

impl Net {
    /// Exchange packets until both sides are quiet. Returns false on a storm.
    fn pump(&mut self) -> bool {
        for _ in 0..2_000 {
            let mut moved = false;
            while let Some(p) = self.client.poll_transmit(self.now) {
                moved = true;
                if let Some(h) = self.server.handle_packet(self.now, self.caddr, &p) {
                    self.handles.insert(h);
                }
            }
            while let Some((to, p)) = self.server.poll_transmit() {
                moved = true;
                if to == self.caddr {
                    self.client.handle_packet(self.now, &p);
                }
            }
            while let Some(h) = self.server.poll_touched() {
                self.handles.insert(h);
            }
            let handles: Vec<_> = self.handles.iter().copied().collect();
            for h in handles {
                let peer = self.server.peer_addr(h);
                let mut drained = false;
                if let Some(a) = self.server.association(h) {
                    while let Some(p) = a.poll_transmit(self.now) {
                        moved = true;
                        if peer == Some(self.caddr) {
                            self.client.handle_packet(self.now, &p);
                        }
                    }
                    while let Some(e) = a.poll_event() {
                        if let Event::Data { ppid, .. } = e {
                            let _ = ppid;
                        }
                    }
                    drained = a.is_drained();
                } else {
                    self.handles.remove(&h);
                }
                if drained {
                    self.server.remove(h);
                    self.handles.remove(&h);
                }
            }
            while self.client.poll_event().is_some() {}
            if !moved {
                return true;
            }
        }
        false
    }

    fn advance(&mut self, d: Duration) {
        let target = self.now + d;
        for _ in 0..64 {
            let next = [self.client.poll_timeout(), self.server.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t <= target => {
                    self.now = self.now.max(t);
                    self.client.handle_timeout(self.now);
                    self.server.handle_timeout(self.now);
                    assert!(self.pump(), "packet storm after timers");
                }
                _ => break,
            }
        }
        self.now = target;
    }

    fn server_vtag(&mut self) -> u32 {
        let h = self.handles.iter().next().copied();
        h.and_then(|h| self.server.association(h).map(|a| a.local_vtag()))
            .unwrap_or(0)
    }
}

/// A packet with the given header and `chunks`, with a valid checksum.
fn packet(src: u16, dst: u16, vtag: u32, chunks: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(12 + chunks.len());
    p.extend_from_slice(&src.to_be_bytes());
    p.extend_from_slice(&dst.to_be_bytes());
    p.extend_from_slice(&vtag.to_be_bytes());
    p.extend_from_slice(&[0; 4]);
    p.extend_from_slice(chunks);
    SctpPacket::new_unchecked(&mut p[..]).fill_checksum();
    p
}

fuzz_target!(|data: &[u8]| {
    let now = Instant::now();
    let mut n = Net {
        now,
        client: Association::connect_with(
            now,
            Arc::new(Config::default()),
            CPORT,
            SPORT,
            0x1111,
            100,
        ),
        server: Endpoint::new(now, Arc::new(Config::default()), Some(SPORT), [7; 32]),
        caddr: "127.0.0.1:5000".parse().expect("address"),
        handles: HashSet::new(),
    };
    assert!(n.pump(), "handshake settles");
    let other: SocketAddr = "127.0.0.1:5001".parse().expect("address");

    let mut rest = data;
    while let [op, hi, lo, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        let (body, next) = tail.split_at(len);
        rest = next;
        // High bits: the sender's address, a zero tag (as an INIT carries), etc.
        let from = if op & 0x80 != 0 { other } else { n.caddr };
        match op & 0x07 {
            0 => {
                let tag = if op & 0x40 != 0 { 0 } else { n.server_vtag() };
                let p = packet(CPORT, SPORT, tag, body);
                if let Some(h) = n.server.handle_packet(n.now, from, &p) {
                    n.handles.insert(h);
                }
            }
            1 => {
                let mut p = body.to_vec();
                if op & 0x40 != 0 && p.len() >= 12 {
                    SctpPacket::new_unchecked(&mut p[..]).fill_checksum();
                }
                if let Some(h) = n.server.handle_packet(n.now, from, &p) {
                    n.handles.insert(h);
                }
            }
            2 => {
                // As from the server to the client: the client parses peer chunks too.
                let tag = if op & 0x40 != 0 {
                    0
                } else {
                    n.client.local_vtag()
                };
                let p = packet(SPORT, CPORT, tag, body);
                n.client.handle_packet(n.now, &p);
            }
            3 => {
                let stream = u16::from(op >> 4 & 3);
                let _ = n.client.send(stream, 18, body, op & 0x40 != 0);
            }
            4 => {
                let ms = u64::from(body.first().copied().unwrap_or(1)) * 20;
                n.advance(Duration::from_millis(ms));
            }
            5 => n.client.shutdown(n.now),
            6 => n.client.abort(),
            _ => {}
        }
        assert!(n.pump(), "packet storm");
        // Every live association came from an INIT; the endpoint must not grow
        // associations faster than records.
        assert!(
            n.server.len() <= 1 + data.len() / 3,
            "unbounded associations"
        );
    }
    n.advance(Duration::from_secs(120));
});
