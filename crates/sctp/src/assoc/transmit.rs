//! Outbound: cumulative and gap acks from SACKs, fast retransmit, congestion control
//! (RFC 9260 §6.2, §7), and bundling SACK and DATA chunks into packets.

use super::*;

impl Association {
    /// Processes a cumulative ack (from SACK or SHUTDOWN). Returns acked bytes.
    pub(super) fn apply_cum_ack(
        &mut self,
        now: Instant,
        cum: u32,
        rwnd: Option<u32>,
    ) -> (usize, bool) {
        let cum = unwrap_tsn(self.tx_cum, cum);
        if cum < self.tx_cum || cum >= self.next_tsn {
            return (0, false); // stale, or acks what we never sent
        }
        let mut acked = 0;
        let advanced = cum > self.tx_cum;
        while let Some(c) = self.inflight.front() {
            if c.tsn > cum {
                break;
            }
            let Some(c) = self.inflight.pop_front() else {
                break;
            };
            if c.in_flight {
                self.flight_size -= c.data.len();
            }
            if !c.gap_acked {
                acked += c.data.len();
            }
            if c.marked {
                self.marked -= 1;
            }
            self.queued_bytes -= c.data.len();
            if let Some((t, sent)) = self.rtt_probe {
                if t == c.tsn {
                    self.rtt_probe = None;
                    if c.tx_count == 1 {
                        self.update_rtt(now.saturating_duration_since(sent));
                    }
                }
            }
        }
        self.tx_cum = cum;
        if let Some(w) = rwnd {
            self.peer_rwnd = w.saturating_sub(self.flight_size as u32);
        }
        (acked, advanced)
    }

    pub(super) fn on_sack(&mut self, now: Instant, s: &SackChunk<'_>) {
        match self.state {
            State::Established
            | State::ShutdownPending
            | State::ShutdownSent
            | State::ShutdownReceived => {}
            _ => return,
        }
        let cum_before = self.tx_cum;
        let probe_cum = unwrap_tsn(self.tx_cum, s.cum_tsn_ack);
        if probe_cum < self.tx_cum {
            return; // out-of-order old SACK
        }
        let flight_before = self.flight_size;
        let (mut acked, advanced) = self.apply_cum_ack(now, s.cum_tsn_ack, None);
        if self.tx_cum != probe_cum {
            return; // acked something never sent
        }
        let _ = cum_before;
        // Gap blocks: mark covered chunks, un-mark reneged ones, count miss indications.
        let cum = self.tx_cum;
        let mut blocks: Vec<(u64, u64)> = Vec::with_capacity(s.num_gap_blocks());
        for (a, b) in s.gap_blocks() {
            if a <= b && a > 0 {
                blocks.push((cum + a as u64, cum + b as u64));
            }
        }
        let mut highest_newly_acked = 0u64;
        if !blocks.is_empty() || self.inflight.iter().any(|c| c.gap_acked) {
            for c in self.inflight.iter_mut() {
                let in_gap = blocks.iter().any(|&(a, b)| c.tsn >= a && c.tsn <= b);
                if in_gap && !c.gap_acked {
                    c.gap_acked = true;
                    acked += c.data.len();
                    highest_newly_acked = highest_newly_acked.max(c.tsn);
                    if c.in_flight {
                        c.in_flight = false;
                        self.flight_size -= c.data.len();
                    }
                    if c.marked {
                        c.marked = false;
                        self.marked -= 1;
                    }
                } else if !in_gap && c.gap_acked {
                    c.gap_acked = false; // reneged: T3 will resend it
                }
            }
        }
        // Fast retransmit (RFC 9260 §7.2.4).
        if highest_newly_acked > 0 {
            let mut enter_recovery = false;
            for c in self.inflight.iter_mut() {
                if c.tsn >= highest_newly_acked {
                    break;
                }
                if !c.gap_acked && !c.marked && c.tx_count > 0 {
                    c.misses = c.misses.saturating_add(1);
                    if c.misses == 3 {
                        self.counters.fast_retransmits += 1;
                        c.marked = true;
                        self.marked += 1;
                        if c.in_flight {
                            c.in_flight = false;
                            self.flight_size -= c.data.len();
                        }
                        enter_recovery = true;
                    }
                }
            }
            if enter_recovery && self.fast_recovery_exit.is_none() {
                let pmtu = self.config.pmtu;
                self.ssthresh = (self.cwnd / 2).max(4 * pmtu);
                self.cwnd = self.ssthresh;
                self.partial_bytes_acked = 0;
                self.fast_recovery_exit = Some(self.next_tsn - 1);
            }
        }
        if let Some(exit) = self.fast_recovery_exit {
            if self.tx_cum >= exit {
                self.fast_recovery_exit = None;
            }
        }
        self.peer_rwnd = s.a_rwnd.saturating_sub(self.flight_size as u32);
        if advanced {
            self.error_count = 0;
            if self.fast_recovery_exit.is_none() {
                let pmtu = self.config.pmtu;
                if self.cwnd <= self.ssthresh {
                    if flight_before >= self.cwnd {
                        self.cwnd += acked.min(pmtu);
                    }
                } else {
                    self.partial_bytes_acked += acked;
                    if self.partial_bytes_acked >= self.cwnd && flight_before >= self.cwnd {
                        self.partial_bytes_acked -= self.cwnd;
                        self.cwnd += pmtu;
                    }
                }
            }
        }
        if self.inflight.is_empty() {
            self.t3 = None;
            self.partial_bytes_acked = 0;
        } else if advanced {
            self.t3 = Some(now + self.rto);
        }
        self.check_shutdown(now);
    }

    /// Next SCTP packet to send (to be carried in one UDP datagram), if any.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        let mut v = Vec::new();
        if self.poll_transmit_into(now, &mut v) {
            Some(v)
        } else {
            None
        }
    }

    /// Like [`Association::poll_transmit`] but appends the packet to `out` (so the
    /// caller can reuse one buffer). Returns false when there is nothing to send.
    pub fn poll_transmit_into(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        let start = out.len();
        let (lp, pp) = (self.local_port, self.peer_port);
        if let Some(causes) = self.pending.abort.take() {
            let mut b = PacketBuilder::new(out, lp, pp, self.peer_vtag);
            b.push(&Chunk::Abort {
                t: false,
                causes: &causes,
            });
            b.finish();
            return true;
        }
        if self.pending.shutdown_complete {
            self.pending.shutdown_complete = false;
            let mut b = PacketBuilder::new(out, lp, pp, self.peer_vtag);
            b.push(&Chunk::ShutdownComplete { t: false });
            b.finish();
            return true;
        }
        if self.state == State::Closed {
            return false;
        }
        if self.pending.init {
            self.pending.init = false;
            let mut params = Vec::new();
            // Supported Address Types: IPv4 (our UDP path is IPv4/IPv6 agnostic).
            wire::emit_param(&mut params, param_type::SUPPORTED_ADDRESS_TYPES, &[0, 5]);
            let mut b = PacketBuilder::new(out, lp, pp, 0);
            b.push(&Chunk::Init(InitChunk {
                initiate_tag: self.local_vtag,
                a_rwnd: self.config.rwnd,
                out_streams: self.config.out_streams,
                in_streams: self.config.in_streams,
                initial_tsn: self.local_init_tsn,
                params: &params,
            }));
            b.finish();
            return true;
        }
        let pmtu = self.config.pmtu;
        let mut b = PacketBuilder::new(out, lp, pp, self.peer_vtag);
        if self.pending.cookie_echo {
            self.pending.cookie_echo = false;
            b.push(&Chunk::CookieEcho {
                cookie: &self.cookie,
            });
        }
        if self.pending.cookie_ack {
            self.pending.cookie_ack = false;
            b.push(&Chunk::CookieAck);
        }
        if self.pending.shutdown_ack {
            self.pending.shutdown_ack = false;
            b.push(&Chunk::ShutdownAck);
        }
        while let Some(info) = self.pending.heartbeat_acks.pop() {
            if b.len() + 4 + info.len() + 3 > pmtu && !b.is_empty() {
                self.pending.heartbeat_acks.push(info);
                break;
            }
            b.push(&Chunk::HeartbeatAck { info: &info });
        }
        if self.pending.heartbeat {
            self.pending.heartbeat = false;
            let nonce = random_u64();
            let mut info = [0u8; HB_INFO_LEN];
            info[0..2].copy_from_slice(&param_type::HEARTBEAT_INFO.to_be_bytes());
            info[2..4].copy_from_slice(&(HB_INFO_LEN as u16).to_be_bytes());
            info[4..12].copy_from_slice(&nonce.to_be_bytes());
            b.push(&Chunk::Heartbeat { info: &info });
            self.hb_outstanding = Some((nonce, now));
            self.counters.heartbeats_sent += 1;
        }
        if !self.pending.errors.is_empty() && b.len() + 4 + self.pending.errors.len() <= pmtu {
            let causes = std::mem::take(&mut self.pending.errors);
            b.push(&Chunk::Error { causes: &causes });
        }
        let can_data = matches!(
            self.state,
            State::Established | State::ShutdownPending | State::ShutdownReceived
        );
        let data_ready = can_data && (self.marked > 0 || self.can_send_new());
        if self.sack_needed && (self.sack_now || data_ready || !b.is_empty()) {
            self.emit_sack(&mut b);
        }
        if self.pending.shutdown {
            self.pending.shutdown = false;
            b.push(&Chunk::Shutdown {
                cum_tsn_ack: self.cum_recv as u32,
            });
        }
        if can_data {
            self.emit_data(now, &mut b);
        }
        if b.is_empty() {
            out.truncate(start);
            return false;
        }
        b.finish();
        true
    }

    pub(super) fn can_send_new(&self) -> bool {
        match self.queue.front() {
            None => false,
            Some(c) => {
                self.flight_size == 0
                    || (self.flight_size < self.cwnd && self.peer_rwnd as usize >= c.data.len())
            }
        }
    }

    pub(super) fn emit_sack(&mut self, b: &mut PacketBuilder<'_>) {
        let mut gaps = Vec::new();
        let mut run: Option<(u64, u64)> = None;
        let room = self.config.pmtu.saturating_sub(b.len() + 16 + 4 * MAX_DUPS) / 4;
        let max_blocks = MAX_GAP_BLOCKS.min(room.max(1));
        let mut nblocks = 0;
        for &t in self.rx_above.iter() {
            let off = t - self.cum_recv;
            if off > 0xffff {
                break;
            }
            match run {
                Some((s, e)) if e + 1 == off => run = Some((s, off)),
                Some((s, e)) => {
                    wire::emit_gap_block(&mut gaps, s as u16, e as u16);
                    nblocks += 1;
                    run = Some((off, off));
                    if nblocks == max_blocks {
                        run = None;
                        break;
                    }
                }
                None => run = Some((off, off)),
            }
        }
        if let Some((s, e)) = run {
            wire::emit_gap_block(&mut gaps, s as u16, e as u16);
        }
        let mut dups = Vec::with_capacity(self.rx_dups.len() * 4);
        for d in self.rx_dups.drain(..) {
            dups.extend_from_slice(&d.to_be_bytes());
        }
        let buffered = (self.frag_bytes + self.wait_bytes) as u32;
        b.push(&Chunk::Sack(SackChunk {
            cum_tsn_ack: self.cum_recv as u32,
            a_rwnd: self.config.rwnd.saturating_sub(buffered),
            gap_blocks: &gaps,
            dup_tsns: &dups,
        }));
        self.sack_needed = false;
        self.sack_now = false;
        self.sack_timer = None;
        self.pkts_since_sack = 0;
    }

    pub(super) fn emit_data(&mut self, now: Instant, b: &mut PacketBuilder<'_>) {
        let pmtu = self.config.pmtu;
        let mut sent_any = false;
        // Retransmissions first, lowest TSN first; they obey cwnd like new data except
        // that one packet may always go (flight_size == 0 after T3 expiry).
        if self.marked > 0 {
            for c in self.inflight.iter_mut() {
                if !c.marked {
                    continue;
                }
                let need = DATA_HEADER_LEN + c.data.len().next_multiple_of(4);
                if b.len() + need > pmtu {
                    break;
                }
                if self.flight_size >= self.cwnd && self.flight_size > 0 && sent_any {
                    break;
                }
                push_data(b, c);
                self.counters.retransmissions += 1;
                self.counters.data_chunks_tx += 1;
                c.marked = false;
                c.misses = 0;
                c.tx_count += 1;
                c.in_flight = true;
                self.flight_size += c.data.len();
                self.marked -= 1;
                sent_any = true;
                if self.rtt_probe.is_some_and(|(t, _)| t == c.tsn) {
                    self.rtt_probe = None; // Karn: no RTT from retransmitted chunks
                }
            }
        }
        while let Some(c) = self.queue.front() {
            let need = DATA_HEADER_LEN + c.data.len().next_multiple_of(4);
            if b.len() + need > pmtu {
                break;
            }
            if self.flight_size > 0
                && (self.flight_size >= self.cwnd || (self.peer_rwnd as usize) < c.data.len())
            {
                break;
            }
            let Some(mut c) = self.queue.pop_front() else {
                break;
            };
            push_data(b, &c);
            self.counters.data_chunks_tx += 1;
            c.tx_count = 1;
            c.in_flight = true;
            self.flight_size += c.data.len();
            self.peer_rwnd = self.peer_rwnd.saturating_sub(c.data.len() as u32);
            if self.rtt_probe.is_none() {
                self.rtt_probe = Some((c.tsn, now));
            }
            self.inflight.push_back(c);
            sent_any = true;
        }
        if sent_any {
            if self.t3.is_none() {
                self.t3 = Some(now + self.rto);
            }
            // Data is flowing: T3 watches the path, so postpone heartbeats.
            if self.hb_outstanding.is_none() && self.hb_timer.is_some() {
                self.hb_timer = Some(now + self.config.heartbeat_interval + self.rto);
            }
        }
    }
}

fn push_data(b: &mut PacketBuilder<'_>, c: &OutChunk) {
    b.push(&Chunk::Data(DataChunk {
        flags: c.flags,
        tsn: c.tsn as u32,
        stream: c.stream,
        ssn: c.ssn,
        ppid: c.ppid,
        payload: &c.data,
    }));
}
