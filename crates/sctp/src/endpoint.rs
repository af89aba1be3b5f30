//! Sans-IO SCTP endpoint: routes packets to associations keyed by peer transport
//! address + SCTP ports (verification tags are checked by the association), answers
//! INIT statelessly with an HMAC-signed state cookie, and creates the association on a
//! valid COOKIE ECHO (RFC 9260 §5.1).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::assoc::{
    random_nonzero_u32, random_u64, Association, CloseReason, Config, CookieData, State,
    COOKIE_BODY_LEN,
};
use crate::wire::{
    self, cause, chunk_type, param_type, Chunk, InitChunk, PacketBuilder, SctpPacket,
    COMMON_HEADER_LEN,
};

/// Identifies an association inside one endpoint.
pub type AssocHandle = u64;

const MAC_LEN: usize = 16;
const COOKIE_LEN: usize = COOKIE_BODY_LEN + MAC_LEN;

type Key = (SocketAddr, u16, u16); // (peer address, peer SCTP port, local SCTP port)

/// An SCTP endpoint holding many associations.
pub struct Endpoint {
    config: Arc<Config>,
    listen_port: Option<u16>,
    secret: [u8; 32],
    epoch: Instant,
    next_handle: AssocHandle,
    assocs: HashMap<AssocHandle, (SocketAddr, Association)>,
    by_key: HashMap<Key, AssocHandle>,
    transmits: VecDeque<(SocketAddr, Vec<u8>)>,
    new_assocs: VecDeque<AssocHandle>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The cookie secret stays out of Debug output.
        f.debug_struct("Endpoint")
            .field("listen_port", &self.listen_port)
            .field("associations", &self.assocs.len())
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// `listen_port`: accept INITs to this SCTP port (server role); `None` for a
    /// client-only endpoint. `secret` keys the cookie HMAC.
    pub fn new(
        now: Instant,
        config: Arc<Config>,
        listen_port: Option<u16>,
        secret: [u8; 32],
    ) -> Self {
        Endpoint {
            config,
            listen_port,
            secret,
            epoch: now,
            next_handle: 1,
            assocs: HashMap::new(),
            by_key: HashMap::new(),
            transmits: VecDeque::new(),
            new_assocs: VecDeque::new(),
        }
    }

    /// A random secret for [`Endpoint::new`].
    pub fn random_secret() -> [u8; 32] {
        let mut s = [0u8; 32];
        for c in s.chunks_mut(8) {
            c.copy_from_slice(&random_u64().to_ne_bytes());
        }
        s
    }

    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// Starts a client association to `peer` (SCTP port `peer_port`) from `local_port`.
    /// An existing association with the same addresses is returned unchanged.
    pub fn connect(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        local_port: u16,
        peer_port: u16,
    ) -> AssocHandle {
        let key = (peer, peer_port, local_port);
        if let Some(&h) = self.by_key.get(&key) {
            return h;
        }
        let a = Association::connect(now, self.config.clone(), local_port, peer_port);
        self.insert(key, a)
    }

    fn insert(&mut self, key: Key, a: Association) -> AssocHandle {
        let h = self.next_handle;
        self.next_handle += 1;
        self.assocs.insert(h, (key.0, a));
        self.by_key.insert(key, h);
        h
    }

    pub fn association(&mut self, h: AssocHandle) -> Option<&mut Association> {
        self.assocs.get_mut(&h).map(|(_, a)| a)
    }

    pub fn peer_addr(&self, h: AssocHandle) -> Option<SocketAddr> {
        self.assocs.get(&h).map(|(p, _)| *p)
    }

    /// Handles of all associations.
    pub fn handles(&self) -> impl Iterator<Item = AssocHandle> + '_ {
        self.assocs.keys().copied()
    }

    pub fn len(&self) -> usize {
        self.assocs.len()
    }
    pub fn is_empty(&self) -> bool {
        self.assocs.is_empty()
    }

    /// Forgets an association (normally once it is closed and drained).
    pub fn remove(&mut self, h: AssocHandle) -> Option<Association> {
        let (peer, a) = self.assocs.remove(&h)?;
        let key = (peer, a.peer_port(), a.local_port());
        if self.by_key.get(&key) == Some(&h) {
            self.by_key.remove(&key);
        }
        Some(a)
    }

    /// Associations created by incoming COOKIE ECHOs, or closed because their peer
    /// restarted, since the last call: the driver should poll their events.
    pub fn poll_touched(&mut self) -> Option<AssocHandle> {
        self.new_assocs.pop_front()
    }

    /// Stateless replies (INIT ACK, OOTB ABORT / SHUTDOWN COMPLETE, stale cookie ERROR).
    pub fn poll_transmit(&mut self) -> Option<(SocketAddr, Vec<u8>)> {
        self.transmits.pop_front()
    }

    /// Earliest timer over all associations.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.assocs
            .values()
            .filter_map(|(_, a)| a.poll_timeout())
            .min()
    }

    /// Runs expired timers of every association.
    pub fn handle_timeout(&mut self, now: Instant) {
        for (_, a) in self.assocs.values_mut() {
            if a.poll_timeout().is_some_and(|t| t <= now) {
                a.handle_timeout(now);
            }
        }
    }

    /// Processes one SCTP packet from `from` (the UDP source address). Returns the
    /// association that handled it, if any. Garbage is dropped.
    pub fn handle_packet(
        &mut self,
        now: Instant,
        from: SocketAddr,
        bytes: &[u8],
    ) -> Option<AssocHandle> {
        let pkt = SctpPacket::new_checked(bytes).ok()?;
        pkt.verify_checksum().ok()?;
        let first = wire::chunk_iter(&bytes[COMMON_HEADER_LEN..]).next()?.ok()?;
        let key = (from, pkt.src_port(), pkt.dst_port());
        let existing = self.by_key.get(&key).copied();
        match first.chunk_type {
            chunk_type::INIT => {
                let Ok(Chunk::Init(init)) = first.parse() else {
                    return None;
                };
                if pkt.verification_tag() != 0 {
                    return None;
                }
                let existing = existing.and_then(|h| {
                    self.assocs.get(&h).map(|(_, a)| {
                        (a.state(), a.local_vtag(), a.local_init_tsn(), a.peer_vtag())
                    })
                });
                if existing.is_none() && self.listen_port != Some(pkt.dst_port()) {
                    return None;
                }
                self.answer_init(now, from, &pkt, &init, existing);
                None
            }
            chunk_type::COOKIE_ECHO => {
                let cookie = self.check_cookie(now, from, &pkt, first.value)?;
                match existing {
                    Some(h) => self.cookie_for_existing(now, h, &pkt, &cookie),
                    None => {
                        if self.listen_port != Some(pkt.dst_port())
                            || pkt.verification_tag() != cookie.local_vtag
                        {
                            return None;
                        }
                        let mut a = Association::from_cookie(now, self.config.clone(), &cookie);
                        a.handle_verified(now, &pkt);
                        let h = self.insert(key, a);
                        self.new_assocs.push_back(h);
                        Some(h)
                    }
                }
            }
            _ => match existing {
                Some(h) => {
                    let (_, a) = self.assocs.get_mut(&h)?;
                    a.handle_verified(now, &pkt);
                    Some(h)
                }
                None => {
                    self.out_of_the_blue(from, &pkt, first.chunk_type);
                    None
                }
            },
        }
    }

    /// COOKIE ECHO for an association we already have (RFC 9260 §5.2.4).
    fn cookie_for_existing(
        &mut self,
        now: Instant,
        h: AssocHandle,
        pkt: &SctpPacket<&[u8]>,
        c: &CookieData,
    ) -> Option<AssocHandle> {
        let (peer, a) = self.assocs.get_mut(&h)?;
        let peer = *peer;
        let (lt, pt) = (a.local_vtag(), a.peer_vtag());
        if c.local_vtag == lt {
            // Case B (collision while we were connecting) or D (duplicate echo).
            if pkt.verification_tag() != lt {
                return None;
            }
            a.accept_cookie(now, c);
            a.handle_verified(now, pkt);
            return Some(h);
        }
        if c.tie_local == lt && c.tie_peer == pt && c.peer_vtag != pt && lt != 0 {
            // Case A: the peer restarted. Report the old association closed and
            // start a fresh one (a new handle) from the cookie.
            if pkt.verification_tag() != c.local_vtag {
                return None;
            }
            a.close(CloseReason::PeerRestarted);
            self.new_assocs.push_back(h);
            let key = (peer, a.peer_port(), a.local_port());
            let mut na = Association::from_cookie(now, self.config.clone(), c);
            na.restarted_from(a);
            na.handle_verified(now, pkt);
            self.by_key.remove(&key);
            let nh = self.insert(key, na);
            self.new_assocs.push_back(nh);
            return Some(nh);
        }
        None // case C or unknown: silently discard
    }

    fn answer_init(
        &mut self,
        now: Instant,
        from: SocketAddr,
        pkt: &SctpPacket<&[u8]>,
        init: &InitChunk<'_>,
        existing: Option<(State, u32, u32, u32)>,
    ) {
        if init.initiate_tag == 0 || init.out_streams == 0 || init.in_streams == 0 {
            let mut causes = Vec::new();
            wire::emit_param(&mut causes, cause::INVALID_MANDATORY_PARAMETER, &[]);
            let mut out = Vec::with_capacity(32);
            let mut b =
                PacketBuilder::new(&mut out, pkt.dst_port(), pkt.src_port(), init.initiate_tag);
            b.push(&Chunk::Abort {
                t: false,
                causes: &causes,
            });
            b.finish();
            self.transmits.push_back((from, out));
            return;
        }
        let (local_vtag, local_tsn, tie_local, tie_peer) = match existing {
            None => (random_nonzero_u32(), random_u64() as u32, 0, 0),
            Some((state, lt, ltsn, pt)) => match state {
                // Collision: answer with the tag and TSN of our own INIT (§5.2.1).
                State::CookieWait | State::CookieEchoed => (lt, ltsn, 0, 0),
                State::Closed => (random_nonzero_u32(), random_u64() as u32, 0, 0),
                // Possible restart (§5.2.2): new tag, tie tags name the old ones.
                _ => (random_nonzero_u32(), random_u64() as u32, lt, pt),
            },
        };
        let cd = CookieData {
            created_ms: now.saturating_duration_since(self.epoch).as_millis() as u64,
            local_vtag,
            peer_vtag: init.initiate_tag,
            local_init_tsn: local_tsn,
            peer_init_tsn: init.initial_tsn,
            peer_rwnd: init.a_rwnd,
            out_streams: self.config.out_streams.min(init.in_streams),
            in_streams: self.config.in_streams.min(init.out_streams),
            local_port: pkt.dst_port(),
            peer_port: pkt.src_port(),
            tie_local,
            tie_peer,
        };
        let body = cd.encode();
        let mac = self.mac(&body, from);
        let mut cookie = [0u8; COOKIE_LEN];
        cookie[..COOKIE_BODY_LEN].copy_from_slice(&body);
        cookie[COOKIE_BODY_LEN..].copy_from_slice(&mac);
        let mut params = Vec::with_capacity(COOKIE_LEN + 4);
        wire::emit_param(&mut params, param_type::STATE_COOKIE, &cookie);
        let mut out = Vec::with_capacity(128);
        let mut b = PacketBuilder::new(&mut out, pkt.dst_port(), pkt.src_port(), init.initiate_tag);
        b.push(&Chunk::InitAck(InitChunk {
            initiate_tag: local_vtag,
            a_rwnd: self.config.rwnd,
            out_streams: self.config.out_streams,
            in_streams: self.config.in_streams,
            initial_tsn: local_tsn,
            params: &params,
        }));
        b.finish();
        self.transmits.push_back((from, out));
    }

    fn mac(&self, body: &[u8], from: SocketAddr) -> [u8; MAC_LEN] {
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.secret)
            .expect("HMAC accepts any key length");
        m.update(body);
        // Bind the cookie to the transport address it was issued to.
        match from.ip() {
            std::net::IpAddr::V4(ip) => m.update(&ip.octets()),
            std::net::IpAddr::V6(ip) => m.update(&ip.octets()),
        }
        m.update(&from.port().to_be_bytes());
        let full = m.finalize().into_bytes();
        let mut out = [0u8; MAC_LEN];
        out.copy_from_slice(&full[..MAC_LEN]);
        out
    }

    /// Verifies a cookie's MAC, ports and lifetime. A stale cookie earns an ERROR.
    fn check_cookie(
        &mut self,
        now: Instant,
        from: SocketAddr,
        pkt: &SctpPacket<&[u8]>,
        cookie: &[u8],
    ) -> Option<CookieData> {
        if cookie.len() != COOKIE_LEN {
            return None;
        }
        let (body, mac) = cookie.split_at(COOKIE_BODY_LEN);
        let want = self.mac(body, from);
        // Constant-time compare: the MAC guards association creation.
        let diff = want.iter().zip(mac).fold(0u8, |d, (a, b)| d | (a ^ b));
        if diff != 0 {
            return None;
        }
        let cd = CookieData::decode(body)?;
        if cd.local_port != pkt.dst_port() || cd.peer_port != pkt.src_port() {
            return None;
        }
        let age_ms = (now.saturating_duration_since(self.epoch).as_millis() as u64)
            .saturating_sub(cd.created_ms);
        if age_ms > self.config.cookie_lifetime.as_millis() as u64 {
            let staleness_us = (age_ms - self.config.cookie_lifetime.as_millis() as u64)
                .saturating_mul(1000)
                .min(u32::MAX as u64) as u32;
            let mut causes = Vec::new();
            wire::emit_param(
                &mut causes,
                cause::STALE_COOKIE,
                &staleness_us.to_be_bytes(),
            );
            let mut out = Vec::with_capacity(32);
            let mut b = PacketBuilder::new(&mut out, pkt.dst_port(), pkt.src_port(), cd.peer_vtag);
            b.push(&Chunk::Error { causes: &causes });
            b.finish();
            self.transmits.push_back((from, out));
            return None;
        }
        Some(cd)
    }

    /// Out-of-the-blue packet handling (RFC 9260 §8.4).
    fn out_of_the_blue(&mut self, from: SocketAddr, pkt: &SctpPacket<&[u8]>, first: u8) {
        let reply = match first {
            chunk_type::ABORT | chunk_type::SHUTDOWN_COMPLETE | chunk_type::COOKIE_ACK => return,
            chunk_type::SHUTDOWN_ACK => Chunk::ShutdownComplete { t: true },
            _ => {
                // Rule 8 of §8.4, but never answer a packet that contains an ABORT.
                let has_abort = wire::chunk_iter(pkt.chunk_bytes())
                    .flatten()
                    .any(|c| c.chunk_type == chunk_type::ABORT);
                if has_abort {
                    return;
                }
                Chunk::Abort {
                    t: true,
                    causes: &[],
                }
            }
        };
        let mut out = Vec::with_capacity(16);
        let mut b = PacketBuilder::new(
            &mut out,
            pkt.dst_port(),
            pkt.src_port(),
            pkt.verification_tag(),
        );
        b.push(&reply);
        b.finish();
        self.transmits.push_back((from, out));
    }
}
