//! Inbound packets: verification, control chunks, and DATA reception with
//! reassembly and in-order delivery per stream (RFC 9260 §6.5, §6.6, §6.9).

use super::*;

impl Association {
    /// Processes one received SCTP packet (already stripped of UDP). Invalid packets
    /// (bad CRC, wrong ports, wrong verification tag) are dropped silently.
    pub fn handle_packet(&mut self, now: Instant, bytes: &[u8]) {
        let Ok(pkt) = SctpPacket::new_checked(bytes) else {
            return;
        };
        if pkt.verify_checksum().is_err() {
            return;
        }
        self.handle_verified(now, &pkt);
    }

    /// [`Association::handle_packet`] for a packet whose CRC was already checked.
    pub(crate) fn handle_verified(&mut self, now: Instant, pkt: &SctpPacket<&[u8]>) {
        if pkt.dst_port() != self.local_port || pkt.src_port() != self.peer_port {
            return;
        }
        let bytes: &[u8] = pkt.as_bytes();
        let vtag = pkt.verification_tag();
        let mut chunks = wire::chunk_iter(&bytes[COMMON_HEADER_LEN..]);
        let Some(Ok(first)) = chunks.clone().next() else {
            return;
        };
        // Verification tag rules (RFC 9260 §8.5, §8.5.1).
        let ok = match first.chunk_type {
            chunk_type::INIT => false, // endpoint's business
            chunk_type::ABORT | chunk_type::SHUTDOWN_COMPLETE => {
                let t = first.flags & 1 != 0;
                (!t && vtag == self.local_vtag)
                    || (t && self.peer_vtag != 0 && vtag == self.peer_vtag)
            }
            _ => vtag == self.local_vtag,
        };
        if !ok {
            return;
        }
        let mut had_data = false;
        for raw in chunks.by_ref() {
            let Ok(raw) = raw else { break };
            let chunk = match raw.parse() {
                Ok(c) => c,
                Err(_) => break,
            };
            match chunk {
                Chunk::Data(d) => {
                    had_data = true;
                    self.on_data(now, &d);
                }
                Chunk::Sack(s) => self.on_sack(now, &s),
                Chunk::InitAck(c) => self.on_init_ack(now, &c),
                Chunk::CookieAck => {
                    if self.state == State::CookieEchoed {
                        self.t1 = None;
                        self.establish(now);
                    }
                }
                Chunk::CookieEcho { .. } => {
                    // The endpoint validated the cookie; an established association just
                    // repeats its COOKIE ACK (ours may have been lost).
                    if matches!(
                        self.state,
                        State::Established | State::ShutdownPending | State::ShutdownReceived
                    ) {
                        self.pending.cookie_ack = true;
                    }
                }
                Chunk::Heartbeat { info } => {
                    if self.state != State::CookieWait && self.pending.heartbeat_acks.len() < 8 {
                        self.pending.heartbeat_acks.push(info.to_vec());
                    }
                }
                Chunk::HeartbeatAck { info } => self.on_heartbeat_ack(now, info),
                Chunk::Abort { .. } => {
                    self.pending.abort = None;
                    self.close(CloseReason::AbortedByPeer);
                    return;
                }
                Chunk::Shutdown { cum_tsn_ack } => self.on_shutdown(now, cum_tsn_ack),
                Chunk::ShutdownAck => {
                    if matches!(self.state, State::ShutdownSent | State::ShutdownAckSent) {
                        self.pending.shutdown_complete = true;
                        self.close(CloseReason::Shutdown);
                        return;
                    }
                }
                Chunk::ShutdownComplete { .. } => {
                    if self.state == State::ShutdownAckSent {
                        self.close(CloseReason::Shutdown);
                        return;
                    }
                }
                Chunk::Error { causes } => {
                    let stale = wire::ParamIter::new(causes)
                        .flatten()
                        .any(|p| p.param_type == cause::STALE_COOKIE);
                    if stale && self.state == State::CookieEchoed {
                        // Start over with a fresh INIT (RFC 9260 §5.2.6).
                        self.state = State::CookieWait;
                        self.pending.init = true;
                        self.pending.cookie_echo = false;
                        self.t1 = Some(now + self.rto);
                    }
                }
                Chunk::Init(_) => {}
                Chunk::Unknown(raw) => {
                    let action = raw.chunk_type >> 6;
                    if action & 1 == 1 {
                        let mut v = Vec::with_capacity(4 + raw.value.len() + 4);
                        v.push(raw.chunk_type);
                        v.push(raw.flags);
                        v.extend_from_slice(&((raw.value.len() + 4) as u16).to_be_bytes());
                        v.extend_from_slice(raw.value);
                        if self.pending.errors.len() < 512 {
                            wire::emit_param(
                                &mut self.pending.errors,
                                cause::UNRECOGNIZED_CHUNK_TYPE,
                                &v,
                            );
                        }
                    }
                    if action & 2 == 0 {
                        break;
                    }
                }
            }
            if self.state == State::Closed {
                return;
            }
        }
        if had_data {
            self.sack_needed = true;
            self.pkts_since_sack += 1;
            if self.pkts_since_sack >= 2 || self.state != State::Established {
                self.sack_now = true;
            }
            if self.state == State::ShutdownSent {
                // RFC 9260 §9.2: ack at once and repeat SHUTDOWN.
                self.pending.shutdown = true;
                self.t2 = Some(now + self.rto);
            }
            if !self.sack_now && self.sack_timer.is_none() {
                self.sack_timer = Some(now + self.config.sack_delay);
            }
        }
    }

    pub(super) fn on_init_ack(&mut self, now: Instant, c: &InitChunk<'_>) {
        if self.state != State::CookieWait {
            return;
        }
        if c.initiate_tag == 0 || c.out_streams == 0 || c.in_streams == 0 {
            let mut causes = Vec::new();
            wire::emit_param(&mut causes, cause::INVALID_MANDATORY_PARAMETER, &[]);
            self.state = State::CookieEchoed; // so the ABORT is sent (peer tag is known)
            self.peer_vtag = c.initiate_tag;
            self.abort_with(
                CloseReason::ProtocolViolation("INIT ACK with zero tag or streams"),
                causes,
            );
            return;
        }
        let Some(cookie) = c.state_cookie() else {
            self.peer_vtag = c.initiate_tag;
            self.state = State::CookieEchoed;
            let mut causes = Vec::new();
            wire::emit_param(
                &mut causes,
                cause::MISSING_MANDATORY_PARAMETER,
                &[0, 0, 0, 1, 0, 7, 0, 0],
            );
            self.abort_with(
                CloseReason::ProtocolViolation("INIT ACK without state cookie"),
                causes,
            );
            return;
        };
        let out = self.config.out_streams.min(c.in_streams);
        let inn = self.config.in_streams.min(c.out_streams);
        self.set_peer_params(c.initiate_tag, c.initial_tsn, c.a_rwnd, out, inn);
        self.cookie = cookie.to_vec();
        self.state = State::CookieEchoed;
        self.pending.init = false;
        self.pending.cookie_echo = true;
        self.t1_count = 0;
        self.t1 = Some(now + self.rto);
    }

    pub(super) fn on_heartbeat_ack(&mut self, now: Instant, info: &[u8]) {
        if info.len() < HB_INFO_LEN {
            return;
        }
        let mut n = [0u8; 8];
        n.copy_from_slice(&info[4..12]);
        let nonce = u64::from_be_bytes(n);
        if let Some((want, sent)) = self.hb_outstanding {
            if want == nonce {
                self.hb_outstanding = None;
                self.counters.heartbeat_acks += 1;
                self.error_count = 0;
                self.update_rtt(now.saturating_duration_since(sent));
                if matches!(
                    self.state,
                    State::Established | State::ShutdownPending | State::ShutdownReceived
                ) {
                    self.hb_timer = Some(now + self.config.heartbeat_interval + self.rto);
                }
            }
        }
    }

    pub(super) fn on_shutdown(&mut self, now: Instant, cum_tsn_ack: u32) {
        match self.state {
            State::Established | State::ShutdownPending | State::ShutdownReceived => {
                self.apply_cum_ack(now, cum_tsn_ack, None);
                self.state = State::ShutdownReceived;
                self.check_shutdown(now);
            }
            State::ShutdownSent => {
                // Both sides shut down at once (RFC 9260 §9.2).
                self.state = State::ShutdownAckSent;
                self.pending.shutdown = false;
                self.pending.shutdown_ack = true;
                self.t2 = Some(now + self.rto);
            }
            State::ShutdownAckSent => self.pending.shutdown_ack = true,
            _ => {}
        }
    }

    pub(super) fn on_data(&mut self, now: Instant, d: &DataChunk<'_>) {
        let _ = now;
        match self.state {
            State::Established | State::ShutdownPending | State::ShutdownSent => {}
            _ => return,
        }
        if d.payload.is_empty() {
            let mut causes = Vec::new();
            wire::emit_param(&mut causes, cause::NO_USER_DATA, &d.tsn.to_be_bytes());
            self.abort_with(
                CloseReason::ProtocolViolation("DATA chunk without user data"),
                causes,
            );
            return;
        }
        self.counters.data_chunks_rx += 1;
        let tsn = unwrap_tsn(self.cum_recv, d.tsn);
        if tsn <= self.cum_recv || self.rx_above.contains(&tsn) {
            self.counters.dup_tsns_rx += 1;
            if self.rx_dups.len() < MAX_DUPS {
                self.rx_dups.push(d.tsn);
            }
            self.sack_now = true;
            return;
        }
        if tsn - self.cum_recv > 65535 {
            return; // cannot be described by a gap block; the peer will retransmit
        }
        // Drop beyond our window, but always accept the next in-order TSN so we make
        // progress and can drain what is buffered.
        let buffered = self.frag_bytes + self.wait_bytes;
        if tsn != self.cum_recv + 1 && buffered + d.payload.len() > self.config.rwnd as usize {
            return;
        }
        if tsn == self.cum_recv + 1 {
            self.cum_recv += 1;
            while self.rx_above.first() == Some(&(self.cum_recv + 1)) {
                self.rx_above.pop_first();
                self.cum_recv += 1;
            }
        } else {
            self.rx_above.insert(tsn);
            self.sack_now = true; // gap: report it at once (RFC 9260 §6.7)
        }
        if d.immediate() {
            self.sack_now = true;
        }
        if d.stream >= self.num_in {
            let mut v = [0u8; 4];
            v[0..2].copy_from_slice(&d.stream.to_be_bytes());
            if self.pending.errors.len() < 512 {
                wire::emit_param(
                    &mut self.pending.errors,
                    cause::INVALID_STREAM_IDENTIFIER,
                    &v,
                );
            }
            self.sack_now = true;
            return;
        }
        if d.beginning() && d.ending() {
            self.deliver(d.stream, d.ssn, d.ppid, d.unordered(), d.payload.to_vec());
        } else {
            self.frag_bytes += d.payload.len();
            self.frags.insert(
                tsn,
                Frag {
                    stream: d.stream,
                    ssn: d.ssn,
                    ppid: d.ppid,
                    flags: d.flags,
                    data: d.payload.to_vec(),
                },
            );
            self.try_reassemble(tsn);
        }
    }

    pub(super) fn try_reassemble(&mut self, tsn: u64) {
        let mut first = tsn;
        loop {
            let Some(f) = self.frags.get(&first) else {
                return;
            };
            if f.flags & data_flags::B != 0 {
                break;
            }
            if first != tsn && f.flags & data_flags::E != 0 {
                return;
            }
            first -= 1;
        }
        let mut last = tsn;
        loop {
            let Some(f) = self.frags.get(&last) else {
                return;
            };
            if f.flags & data_flags::E != 0 {
                break;
            }
            if last != tsn && f.flags & data_flags::B != 0 {
                return;
            }
            last += 1;
        }
        let Some(head) = self.frags.remove(&first) else {
            return;
        };
        let (stream, ssn, ppid, flags) = (head.stream, head.ssn, head.ppid, head.flags);
        let total: usize = head.data.len()
            + self
                .frags
                .range(first + 1..=last)
                .map(|(_, f)| f.data.len())
                .sum::<usize>();
        let mut data = head.data;
        data.reserve(total - data.len());
        for t in first + 1..=last {
            if let Some(f) = self.frags.remove(&t) {
                data.extend_from_slice(&f.data);
            }
        }
        self.frag_bytes -= total;
        self.deliver(stream, ssn, ppid, flags & data_flags::U != 0, data);
    }

    pub(super) fn deliver(
        &mut self,
        stream: u16,
        ssn: u16,
        ppid: u32,
        unordered: bool,
        data: Vec<u8>,
    ) {
        if unordered {
            self.counters.delivered += 1;
            self.events.push_back(Event::Data { stream, ppid, data });
            return;
        }
        let expected = self.in_ssn[stream as usize];
        if ssn == expected {
            self.counters.delivered += 1;
            self.events.push_back(Event::Data { stream, ppid, data });
            let mut next = expected.wrapping_add(1);
            while let Some((ppid, data)) = self.ordered_wait.remove(&(stream, next)) {
                self.wait_bytes -= data.len();
                self.counters.delivered += 1;
                self.events.push_back(Event::Data { stream, ppid, data });
                next = next.wrapping_add(1);
            }
            self.in_ssn[stream as usize] = next;
        } else if ssn.wrapping_sub(expected) < 0x8000 {
            self.wait_bytes += data.len();
            if let Some((_, old)) = self.ordered_wait.insert((stream, ssn), (ppid, data)) {
                self.wait_bytes -= old.len();
            }
        }
    }
}
