//! Sans-IO association tests: a client `Association` and a server `Endpoint` wired
//! back-to-back through in-memory queues, driven by a fake clock.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pepc_sctp::wire::{self, chunk_type, SctpPacket};
use pepc_sctp::{AssocHandle, Association, CloseReason, Config, Endpoint, Event, State};

const CPORT: u16 = 40000;
const SPORT: u16 = 36412;

type Filter = Box<dyn FnMut(&[u8]) -> bool>;

struct Net {
    now: Instant,
    client: Association,
    server: Endpoint,
    sh: Option<AssocHandle>,
    caddr: SocketAddr,
    cev: Vec<Event>,
    sev: Vec<Event>,
    /// Return false to drop a packet.
    c2s_filter: Filter,
    s2c_filter: Filter,
    c2s_count: usize,
    s2c_count: usize,
}

fn has_chunk(p: &[u8], t: u8) -> bool {
    SctpPacket::new_checked(p)
        .map(|p| p.chunks().flatten().any(|c| c.chunk_type == t))
        .unwrap_or(false)
}

impl Net {
    fn new(ccfg: Config, scfg: Config) -> Net {
        let now = Instant::now();
        let client = Association::connect_with(now, Arc::new(ccfg), CPORT, SPORT, 0x1111, 100);
        let server = Endpoint::new(now, Arc::new(scfg), Some(SPORT), [7; 32]);
        Net {
            now,
            client,
            server,
            sh: None,
            caddr: "127.0.0.1:5000".parse().unwrap(),
            cev: Vec::new(),
            sev: Vec::new(),
            c2s_filter: Box::new(|_| true),
            s2c_filter: Box::new(|_| true),
            c2s_count: 0,
            s2c_count: 0,
        }
    }

    fn connected(ccfg: Config, scfg: Config) -> Net {
        let mut n = Net::new(ccfg, scfg);
        n.pump();
        assert!(matches!(n.cev.as_slice(), [Event::Connected { .. }]));
        assert!(matches!(n.sev.as_slice(), [Event::Connected { .. }]));
        n.cev.clear();
        n.sev.clear();
        n
    }

    fn srv(&mut self) -> &mut Association {
        let h = self.sh.expect("server association");
        self.server.association(h).unwrap()
    }

    /// Exchanges packets until both sides are quiet (no timers run).
    fn pump(&mut self) {
        for _ in 0..100_000 {
            let mut moved = false;
            while let Some(p) = self.client.poll_transmit(self.now) {
                moved = true;
                self.c2s_count += 1;
                if (self.c2s_filter)(&p) {
                    if let Some(h) = self.server.handle_packet(self.now, self.caddr, &p) {
                        self.sh = Some(h);
                    }
                }
            }
            while let Some((to, p)) = self.server.poll_transmit() {
                assert_eq!(to, self.caddr);
                moved = true;
                self.s2c_count += 1;
                if (self.s2c_filter)(&p) {
                    self.client.handle_packet(self.now, &p);
                }
            }
            if let Some(h) = self.sh {
                if let Some(a) = self.server.association(h) {
                    while let Some(p) = a.poll_transmit(self.now) {
                        moved = true;
                        self.s2c_count += 1;
                        if (self.s2c_filter)(&p) {
                            self.client.handle_packet(self.now, &p);
                        }
                    }
                    while let Some(e) = a.poll_event() {
                        self.sev.push(e);
                    }
                }
            }
            while let Some(e) = self.client.poll_event() {
                self.cev.push(e);
            }
            if !moved {
                return;
            }
        }
        panic!("packet storm: pump did not settle");
    }

    fn next_timeout(&mut self) -> Option<Instant> {
        let s = self.server.poll_timeout();
        [self.client.poll_timeout(), s].into_iter().flatten().min()
    }

    /// Advances the fake clock by `d`, firing timers in order.
    fn advance(&mut self, d: Duration) {
        let target = self.now + d;
        self.pump();
        while let Some(t) = self.next_timeout() {
            if t > target {
                break;
            }
            self.now = self.now.max(t);
            self.client.handle_timeout(self.now);
            self.server.handle_timeout(self.now);
            self.pump();
        }
        self.now = target;
        self.pump();
    }

    fn data(ev: &[Event]) -> Vec<(u16, u32, Vec<u8>)> {
        ev.iter()
            .filter_map(|e| match e {
                Event::Data { stream, ppid, data } => Some((*stream, *ppid, data.clone())),
                _ => None,
            })
            .collect()
    }
}

fn msg(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j * 7) as u8).collect()
}

#[test]
fn handshake_negotiates_streams() {
    let scfg = Config {
        out_streams: 10,
        in_streams: 5,
        ..Config::default()
    };
    let mut n = Net::new(Config::default(), scfg);
    n.pump();
    assert_eq!(
        n.cev,
        vec![Event::Connected {
            out_streams: 5,
            in_streams: 10
        }]
    );
    assert_eq!(
        n.sev,
        vec![Event::Connected {
            out_streams: 10,
            in_streams: 5
        }]
    );
    assert_eq!(n.client.state(), State::Established);
    assert_eq!(n.srv().state(), State::Established);
    assert_eq!(n.srv().peer_vtag(), 0x1111);
    assert_eq!(n.client.peer_vtag(), n.srv().local_vtag());
    // Stream beyond the negotiated 5 is refused.
    assert!(n.client.send(5, 18, b"x", false).is_err());
    assert!(n.client.send(4, 18, b"x", false).is_ok());
}

#[test]
fn ordered_delivery_on_several_streams_ppid_preserved() {
    let mut n = Net::connected(Config::default(), Config::default());
    let mut expect: Vec<Vec<(u32, Vec<u8>)>> = vec![Vec::new(); 4];
    for i in 0..400 {
        let s = (i % 4) as u16;
        let ppid = if i % 7 == 0 { 46 } else { 18 };
        let m = msg(i, 20 + i % 300);
        n.client.send(s, ppid, &m, false).unwrap();
        expect[s as usize].push((ppid, m));
        if i % 50 == 49 {
            n.pump();
        }
    }
    n.advance(Duration::from_secs(1));
    let got = Net::data(&n.sev);
    assert_eq!(got.len(), 400);
    for s in 0..4u16 {
        let g: Vec<(u32, Vec<u8>)> = got
            .iter()
            .filter(|(st, _, _)| *st == s)
            .map(|(_, p, d)| (*p, d.clone()))
            .collect();
        assert_eq!(g, expect[s as usize], "stream {s}");
    }
    // Replies from the server with PPID 18.
    let h = n.sh.unwrap();
    for i in 0..10 {
        n.server
            .association(h)
            .unwrap()
            .send(1, 18, &msg(i, 50), false)
            .unwrap();
    }
    n.advance(Duration::from_millis(500));
    let got = Net::data(&n.cev);
    assert_eq!(got.len(), 10);
    assert!(got.iter().all(|(s, p, _)| *s == 1 && *p == 18));
    // Bundling: 400 small messages did not need 400 packets.
    assert!(n.c2s_count < 200, "c2s packets {}", n.c2s_count);
}

#[test]
fn large_message_fragmentation_and_reassembly() {
    let mut n = Net::connected(Config::default(), Config::default());
    let big = msg(3, 50_000);
    n.client.send(2, 18, &big, false).unwrap();
    n.client.send(2, 18, b"after", false).unwrap();
    let big_u = msg(9, 7_000);
    n.client.send(3, 18, &big_u, true).unwrap();
    // Every packet fits in the PMTU.
    n.c2s_filter = Box::new(|p| {
        assert!(p.len() <= 1200, "packet of {} bytes", p.len());
        true
    });
    n.advance(Duration::from_secs(2));
    let got = Net::data(&n.sev);
    assert_eq!(got.len(), 3);
    let on2: Vec<_> = got.iter().filter(|g| g.0 == 2).collect();
    assert_eq!(on2[0].2, big);
    assert_eq!(on2[1].2, b"after");
    assert!(got.iter().any(|g| g.0 == 3 && g.2 == big_u));
}

#[test]
fn packet_loss_is_repaired_by_retransmission() {
    let mut n = Net::connected(Config::default(), Config::default());
    let mut k = 0;
    n.c2s_filter = Box::new(move |p| {
        if has_chunk(p, chunk_type::DATA) {
            k += 1;
            return k % 10 != 0; // lose every tenth data packet
        }
        true
    });
    let mut s2c_k = 0;
    n.s2c_filter = Box::new(move |_| {
        s2c_k += 1;
        s2c_k % 7 != 0 // lose some SACKs too
    });
    let msgs: Vec<Vec<u8>> = (0..200).map(|i| msg(i, 100 + (i * 37) % 3000)).collect();
    for (i, m) in msgs.iter().enumerate() {
        n.client.send((i % 2) as u16, 18, m, false).unwrap();
    }
    n.advance(Duration::from_secs(120));
    let got = Net::data(&n.sev);
    assert_eq!(got.len(), msgs.len());
    for s in 0..2u16 {
        let g: Vec<_> = got
            .iter()
            .filter(|x| x.0 == s)
            .map(|x| x.2.clone())
            .collect();
        let e: Vec<_> = msgs
            .iter()
            .enumerate()
            .filter(|(i, _)| (*i % 2) as u16 == s)
            .map(|(_, m)| m.clone())
            .collect();
        assert_eq!(g, e);
    }
    assert_eq!(n.client.state(), State::Established);
    assert_eq!(n.client.buffered_amount(), 0);
    // Repair took retransmissions: more data packets than the lossless minimum.
    assert!(n.c2s_count > 200, "c2s {}", n.c2s_count);
}

#[test]
fn init_and_cookie_are_retransmitted() {
    let mut n = Net::new(Config::default(), Config::default());
    let mut dropped_init = false;
    let mut dropped_echo = false;
    n.c2s_filter = Box::new(move |p| {
        if has_chunk(p, chunk_type::INIT) && !dropped_init {
            dropped_init = true;
            return false;
        }
        if has_chunk(p, chunk_type::COOKIE_ECHO) && !dropped_echo {
            dropped_echo = true;
            return false;
        }
        true
    });
    n.pump();
    assert!(n.cev.is_empty());
    n.advance(Duration::from_millis(999));
    assert!(n.cev.is_empty());
    n.advance(Duration::from_secs(5));
    assert!(matches!(n.cev.as_slice(), [Event::Connected { .. }]));
    assert!(matches!(n.sev.as_slice(), [Event::Connected { .. }]));
}

#[test]
fn init_gives_up_after_max_retransmits() {
    let cfg = Config {
        max_init_retransmits: 3,
        ..Config::default()
    };
    let mut n = Net::new(cfg, Config::default());
    n.c2s_filter = Box::new(|_| false);
    n.advance(Duration::from_secs(100));
    assert_eq!(
        n.cev,
        vec![Event::Closed {
            reason: CloseReason::InitFailed
        }]
    );
}

#[test]
fn dead_peer_is_detected_by_heartbeats() {
    let cfg = Config {
        heartbeat_interval: Duration::from_secs(2),
        path_max_retrans: 3,
        ..Config::default()
    };
    let mut n = Net::connected(cfg.clone(), cfg);
    // Idle association keeps alive on heartbeats.
    n.advance(Duration::from_secs(30));
    assert!(n.cev.is_empty() && n.sev.is_empty());
    assert!(n.c2s_count > 8, "heartbeats sent: {}", n.c2s_count);
    let c = n.client.counters();
    assert!(c.heartbeats_sent > 8, "{c:?}");
    // Each answered, but perhaps the last one still on its way.
    assert!(c.heartbeats_sent - c.heartbeat_acks <= 1, "{c:?}");
    // Now the server vanishes.
    n.s2c_filter = Box::new(|_| false);
    n.c2s_filter = Box::new(|_| false);
    n.advance(Duration::from_secs(120));
    assert_eq!(
        n.cev,
        vec![Event::Closed {
            reason: CloseReason::HeartbeatFailure
        }]
    );
}

#[test]
fn dead_peer_is_detected_by_t3_rtx() {
    let cfg = Config {
        assoc_max_retrans: 4,
        ..Config::default()
    };
    let mut n = Net::connected(cfg.clone(), cfg);
    n.c2s_filter = Box::new(|_| false);
    n.client.send(0, 18, b"lost", false).unwrap();
    n.advance(Duration::from_secs(200));
    assert_eq!(
        n.cev,
        vec![Event::Closed {
            reason: CloseReason::RetransmitLimit
        }]
    );
}

#[test]
fn graceful_shutdown_delivers_queued_data_first() {
    let mut n = Net::connected(Config::default(), Config::default());
    for i in 0..20 {
        n.client.send(0, 18, &msg(i, 3000), false).unwrap();
    }
    n.client.shutdown(n.now);
    assert!(n.client.send(0, 18, b"late", false).is_err());
    n.advance(Duration::from_secs(3));
    assert_eq!(Net::data(&n.sev).len(), 20);
    assert_eq!(
        n.cev,
        vec![Event::Closed {
            reason: CloseReason::Shutdown
        }]
    );
    assert!(n.sev.contains(&Event::Closed {
        reason: CloseReason::Shutdown
    }));
    assert!(n.client.is_drained());
    assert!(n.srv().is_drained());
}

#[test]
fn server_initiated_shutdown() {
    let mut n = Net::connected(Config::default(), Config::default());
    let now = n.now;
    n.srv().shutdown(now);
    n.advance(Duration::from_secs(1));
    assert_eq!(
        n.cev,
        vec![Event::Closed {
            reason: CloseReason::Shutdown
        }]
    );
    assert_eq!(
        n.sev,
        vec![Event::Closed {
            reason: CloseReason::Shutdown
        }]
    );
}

#[test]
fn abort_closes_both_sides() {
    let mut n = Net::connected(Config::default(), Config::default());
    n.client.abort();
    n.pump();
    assert_eq!(
        n.cev,
        vec![Event::Closed {
            reason: CloseReason::AbortedLocally
        }]
    );
    assert_eq!(
        n.sev,
        vec![Event::Closed {
            reason: CloseReason::AbortedByPeer
        }]
    );
}

fn retag(p: &[u8], vtag: u32) -> Vec<u8> {
    let mut v = p.to_vec();
    let mut pk = SctpPacket::new_unchecked(&mut v[..]);
    pk.set_verification_tag(vtag);
    pk.fill_checksum();
    v
}

#[test]
fn wrong_vtag_and_bad_crc_are_dropped() {
    let mut n = Net::connected(Config::default(), Config::default());
    n.client.send(0, 18, b"one", false).unwrap();
    let p = n.client.poll_transmit(n.now).unwrap();
    let good_tag = SctpPacket::new_checked(&p[..]).unwrap().verification_tag();
    // Wrong vtag.
    let bad = retag(&p, good_tag ^ 1);
    n.server.handle_packet(n.now, n.caddr, &bad);
    // Bad CRC.
    let mut bad2 = p.clone();
    let l = bad2.len();
    bad2[l - 1] ^= 0xff;
    n.server.handle_packet(n.now, n.caddr, &bad2);
    n.pump();
    assert!(Net::data(&n.sev).is_empty());
    // An ABORT with a wrong tag does not kill the association.
    let mut ab = Vec::new();
    let mut b = wire::PacketBuilder::new(&mut ab, CPORT, SPORT, good_tag ^ 5);
    b.push(&wire::Chunk::Abort {
        t: false,
        causes: &[],
    });
    b.finish();
    n.server.handle_packet(n.now, n.caddr, &ab);
    assert_eq!(n.srv().state(), State::Established);
    // The genuine packet still goes through.
    n.server.handle_packet(n.now, n.caddr, &p);
    n.pump();
    assert_eq!(Net::data(&n.sev), vec![(0, 18, b"one".to_vec())]);
}

#[test]
fn forged_cookie_is_rejected() {
    let mut n = Net::new(Config::default(), Config::default());
    let mut echo = None;
    n.c2s_filter = Box::new(|_| true);
    // Run the handshake by hand to capture the COOKIE ECHO.
    let init = n.client.poll_transmit(n.now).unwrap();
    n.server.handle_packet(n.now, n.caddr, &init);
    let (_, init_ack) = n.server.poll_transmit().unwrap();
    n.client.handle_packet(n.now, &init_ack);
    let p = n.client.poll_transmit(n.now).unwrap();
    assert!(has_chunk(&p, chunk_type::COOKIE_ECHO));
    // Flip a byte of the cookie body (after chunk header) and fix the CRC.
    let mut forged = p.clone();
    forged[12 + 4 + 10] ^= 1;
    SctpPacket::new_unchecked(&mut forged[..]).fill_checksum();
    assert!(n.server.handle_packet(n.now, n.caddr, &forged).is_none());
    assert!(n.server.is_empty());
    // From another address the genuine cookie is rejected too.
    let other: SocketAddr = "127.0.0.1:5001".parse().unwrap();
    assert!(n.server.handle_packet(n.now, other, &p).is_none());
    // Stale cookie: too late -> ERROR, no association.
    let late = n.now + Duration::from_secs(61);
    assert!(n.server.handle_packet(late, n.caddr, &p).is_none());
    let (_, err) = n.server.poll_transmit().unwrap();
    assert!(has_chunk(&err, chunk_type::ERROR));
    // In time: accepted.
    echo.replace(p.clone());
    assert!(n.server.handle_packet(n.now, n.caddr, &p).is_some());
    assert_eq!(n.server.len(), 1);
}

#[test]
fn delayed_sack_and_every_second_packet() {
    let mut n = Net::connected(Config::default(), Config::default());
    let mut sacks = 0usize;
    n.client.send(0, 18, b"a", false).unwrap();
    n.pump();
    // One packet: no SACK yet.
    let now = n.now;
    assert!(n.srv().poll_transmit(now).is_none());
    assert!(n.srv().poll_timeout().unwrap() <= now + Duration::from_millis(200));
    n.now += Duration::from_millis(200);
    let now = n.now;
    n.srv().handle_timeout(now);
    let s = n.srv().poll_transmit(now).unwrap();
    assert!(has_chunk(&s, chunk_type::SACK));
    sacks += 1;
    n.client.handle_packet(now, &s);
    // Two packets: SACK at once.
    n.client.send(0, 18, b"b", false).unwrap();
    let p1 = n.client.poll_transmit(now).unwrap();
    n.client.send(0, 18, b"c", false).unwrap();
    let p2 = n.client.poll_transmit(now).unwrap();
    n.server.handle_packet(now, n.caddr, &p1);
    assert!(n.srv().poll_transmit(now).is_none());
    n.server.handle_packet(now, n.caddr, &p2);
    let s = n.srv().poll_transmit(now).unwrap();
    assert!(has_chunk(&s, chunk_type::SACK));
    sacks += 1;
    assert_eq!(sacks, 2);
    // A reply carries the SACK (bundling) instead of a separate packet.
    n.client.handle_packet(now, &s);
    n.client.send(0, 18, b"d", false).unwrap();
    let p3 = n.client.poll_transmit(now).unwrap();
    n.server.handle_packet(now, n.caddr, &p3);
    n.srv().send(0, 18, b"reply", false).unwrap();
    let r = n.srv().poll_transmit(now).unwrap();
    assert!(has_chunk(&r, chunk_type::SACK) && has_chunk(&r, chunk_type::DATA));
}

#[test]
fn peer_restart_replaces_association() {
    let mut n = Net::connected(Config::default(), Config::default());
    let old = n.sh.unwrap();
    // The client "reboots": a new association from the same address and ports.
    n.client =
        Association::connect_with(n.now, Arc::new(Config::default()), CPORT, SPORT, 0x2222, 5);
    n.pump();
    assert!(matches!(n.cev.as_slice(), [Event::Connected { .. }]));
    assert_ne!(n.sh.unwrap(), old);
    assert_eq!(
        n.server.association(old).unwrap().poll_event(),
        Some(Event::Closed {
            reason: CloseReason::PeerRestarted
        })
    );
    let new = n.sh.unwrap();
    assert_eq!(
        n.server.association(new).unwrap().counters().peer_restarts,
        1
    );
    assert_eq!(
        n.server.association(old).unwrap().counters().peer_restarts,
        0
    );
    n.client.send(0, 18, b"after restart", false).unwrap();
    n.advance(Duration::from_millis(300));
    assert_eq!(Net::data(&n.sev), vec![(0, 18, b"after restart".to_vec())]);
}

#[test]
fn init_collision() {
    // Both sides connect at once; each is also an endpoint that answers INITs.
    let now = Instant::now();
    let cfg = Arc::new(Config::default());
    let a_addr: SocketAddr = "127.0.0.1:1000".parse().unwrap();
    let b_addr: SocketAddr = "127.0.0.1:2000".parse().unwrap();
    let mut a = Endpoint::new(now, cfg.clone(), Some(36412), [1; 32]);
    let mut b = Endpoint::new(now, cfg, Some(36412), [2; 32]);
    let ha = a.connect(now, b_addr, 36412, 36412);
    let hb = b.connect(now, a_addr, 36412, 36412);
    let mut events_a = Vec::new();
    let mut events_b = Vec::new();
    for _ in 0..50 {
        let mut to_b = Vec::new();
        let mut to_a = Vec::new();
        while let Some((_, p)) = a.poll_transmit() {
            to_b.push(p);
        }
        while let Some((_, p)) = b.poll_transmit() {
            to_a.push(p);
        }
        while let Some(p) = a.association(ha).unwrap().poll_transmit(now) {
            to_b.push(p);
        }
        while let Some(p) = b.association(hb).unwrap().poll_transmit(now) {
            to_a.push(p);
        }
        for p in to_b {
            b.handle_packet(now, a_addr, &p);
        }
        for p in to_a {
            a.handle_packet(now, b_addr, &p);
        }
        while let Some(e) = a.association(ha).unwrap().poll_event() {
            events_a.push(e);
        }
        while let Some(e) = b.association(hb).unwrap().poll_event() {
            events_b.push(e);
        }
    }
    assert!(
        matches!(events_a.as_slice(), [Event::Connected { .. }]),
        "{events_a:?}"
    );
    assert!(
        matches!(events_b.as_slice(), [Event::Connected { .. }]),
        "{events_b:?}"
    );
    assert_eq!(a.len(), 1);
    assert_eq!(b.len(), 1);
    let (at, bt) = {
        let x = a.association(ha).unwrap();
        (x.local_vtag(), x.peer_vtag())
    };
    let y = b.association(hb).unwrap();
    assert_eq!((y.peer_vtag(), y.local_vtag()), (at, bt));
    y.send(0, 18, b"hi", false).unwrap();
    let p = y.poll_transmit(now).unwrap();
    a.handle_packet(now, b_addr, &p);
    assert_eq!(
        a.association(ha).unwrap().poll_event(),
        Some(Event::Data {
            stream: 0,
            ppid: 18,
            data: b"hi".to_vec()
        })
    );
}

#[test]
fn garbage_never_panics() {
    let mut n = Net::connected(Config::default(), Config::default());
    n.client.send(0, 18, &msg(1, 3000), false).unwrap();
    let mut valid = Vec::new();
    while let Some(p) = n.client.poll_transmit(n.now) {
        valid.push(p);
    }
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let tag = n.srv().local_vtag();
    for i in 0..20_000 {
        let mut p = if i % 2 == 0 {
            valid[i % valid.len()].clone()
        } else {
            let len = (rnd() % 200) as usize;
            let mut v: Vec<u8> = (0..len).map(|_| rnd() as u8).collect();
            if v.len() >= 12 {
                v[0..2].copy_from_slice(&CPORT.to_be_bytes());
                v[2..4].copy_from_slice(&SPORT.to_be_bytes());
                v[4..8].copy_from_slice(&tag.to_be_bytes());
            }
            v
        };
        // Mutate a few bytes after the header, keep the CRC valid so parsing runs.
        for _ in 0..(rnd() % 4) {
            if p.len() > 12 {
                let at = 12 + (rnd() as usize % (p.len() - 12));
                p[at] = rnd() as u8;
            }
        }
        if p.len() >= 12 {
            SctpPacket::new_unchecked(&mut p[..]).fill_checksum();
        }
        n.server.handle_packet(n.now, n.caddr, &p);
        n.client.handle_packet(n.now, &p);
        while n.server.poll_transmit().is_some() {}
        let now = n.now;
        if let Some(a) = n.sh.and_then(|h| n.server.association(h)) {
            while a.poll_transmit(now).is_some() {}
            while a.poll_event().is_some() {}
            a.handle_timeout(now);
        }
        while n.client.poll_transmit(now).is_some() {}
        while n.client.poll_event().is_some() {}
        n.now += Duration::from_millis(1);
    }
}
