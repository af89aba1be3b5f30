//! The scenario's signaling events (attach, detach, idle, service request, TAU,
//! handover, paging answers) on randomly chosen UEs.

use super::*;

/// Random UEs tried first by [`Emulator::pick_ue`].
const PICK_PROBES: usize = 16;
/// UEs looked at in a row after the probes, at most.
const PICK_SCAN: usize = 1024;

impl Emulator {
    /// One signalling event of the mix.
    pub(super) fn event(&mut self) {
        let m = self.scen.mix.clone();
        let w = [
            m.attach,
            m.add_default_bearer,
            m.dedicated_bearer,
            m.idle_to_connected,
            m.connected_to_idle,
            m.x2_handover,
            m.s1_handover,
            m.tau,
            m.paging,
        ];
        let total: f64 = w.iter().sum();
        if total <= 0.0 {
            return;
        }
        let mut x = self.rng.unit() * total;
        let mut k = 0;
        for (i, v) in w.iter().enumerate() {
            if x < *v {
                k = i;
                break;
            }
            x -= v;
        }
        let now = self.now_ns();
        let nenb = self.enbs.len();
        // Stateless IoT devices keep out of the signalling mix.
        let idle = |u: &Ue| !u.is_iot() && u.is_registered() && !u.is_connected() && !u.busy();
        let conn = |u: &Ue| !u.is_iot() && u.is_registered() && u.is_connected() && !u.busy();
        let done = match k {
            0 => match self.pick_ue(|u| !u.is_iot() && !u.is_registered() && !u.busy()) {
                Some(u) => {
                    self.ue_input(u, UeInput::Attach, now);
                    true
                }
                // Detach (switch-off) then attach again once released. Not a UE the
                // EPC holds paged downlink for: its Delete Session would discard the
                // buffered packets, a drop by design the report would count as lost.
                None => match self.pick_ue_where(|e, u| idle(&e.ues[u]) && e.awaiting_dl[u] == 0) {
                    Some(u) => {
                        self.ue_input(u, UeInput::Detach { switch_off: true }, now);
                        self.reattach[u] = true;
                        true
                    }
                    None => false,
                },
            },
            1 => match self.pick_ue(conn) {
                Some(u) => {
                    let extra = self.ues[u].pdns().get(1).map(|p| p.0);
                    match extra {
                        Some(ebi) => {
                            if !self.closing.iter().any(|c| c.0 == u) {
                                self.closing
                                    .push((u, Quiet::Pdn(ebi), Instant::now() + QUIESCE));
                            }
                        }
                        None => {
                            let apn = self.scen.extra_apn.clone();
                            self.ue_input(u, UeInput::PdnConnect { apn }, now)
                        }
                    }
                    true
                }
                None => false,
            },
            2 => match self.pick_ue(|u| conn(u) && !u.pdns().is_empty()) {
                Some(u) => {
                    let ue = &self.ues[u];
                    let input = match ue.dedicated().first() {
                        Some(&(ebi, _)) => UeInput::BearerResourceRelease { ebi },
                        None => {
                            let pdns = ue.pdns();
                            let linked_ebi = pdns[self.rng.below(pdns.len())].0;
                            UeInput::BearerResourceAllocation { linked_ebi }
                        }
                    };
                    self.ue_input(u, input, now);
                    true
                }
                None => false,
            },
            3 => match self.pick_ue(idle) {
                Some(u) => {
                    self.ue_input(u, UeInput::ServiceRequest, now);
                    true
                }
                None => false,
            },
            // User inactivity: the UE's traffic stops, the release follows after a
            // quiet time (so no packet is in flight when the S1 connection goes).
            4 => match self.pick_ue(conn) {
                Some(u) if !self.closing.iter().any(|c| c.0 == u) => {
                    self.closing
                        .push((u, Quiet::Release, Instant::now() + QUIESCE));
                    true
                }
                _ => false,
            },
            5 if nenb > 1 => match self.pick_ue(conn) {
                Some(u) => {
                    let src = self.serving[u];
                    let dst = (src + 1) % nenb;
                    if self.enb_assoc[dst].is_none() {
                        return self.metrics.skipped += 1;
                    }
                    match self.enbs[src].x2_take(u as UeId) {
                        Some(ctx) => {
                            self.ues[u].begin_external(Procedure::X2Handover, now);
                            self.serving[u] = dst;
                            let mut eo = Vec::new();
                            self.enbs[dst].handle(EnbInput::X2HandoverIn(ctx), &mut eo);
                            self.enb_outputs(dst, &mut eo);
                            true
                        }
                        None => false,
                    }
                }
                None => false,
            },
            6 if nenb > 1 => match self.pick_ue(conn) {
                Some(u) => {
                    let src = self.serving[u];
                    let dst = (src + 1) % nenb;
                    match self.enbs[src].mme_ue_id(u as UeId) {
                        Some(mme) if self.enb_assoc[dst].is_some() => {
                            self.ues[u].begin_external(Procedure::S1Handover, now);
                            self.s1ho_target.insert(u as UeId, dst);
                            let t = self.enbs[dst].config().clone();
                            let mut eo = Vec::new();
                            self.enbs[dst].handle(
                                EnbInput::ExpectHandover {
                                    ue: u as UeId,
                                    mme_ue_id: mme,
                                },
                                &mut eo,
                            );
                            self.enbs[src].handle(
                                EnbInput::StartS1Handover {
                                    ue: u as UeId,
                                    target: t.global_enb_id,
                                    target_tai: t.tai(),
                                },
                                &mut eo,
                            );
                            self.enb_outputs(src, &mut eo);
                            true
                        }
                        _ => false,
                    }
                }
                None => false,
            },
            7 => match self.pick_ue(|u| !u.is_iot() && u.is_registered() && !u.busy()) {
                Some(u) => {
                    // Idle UEs: periodic, or normal with the active flag (uplink data
                    // pending: the MME sets the bearers up); connected UEs: normal.
                    let idle = !self.ues[u].is_connected();
                    let periodic = idle && self.rng.unit() < 0.5;
                    let active = idle && !periodic;
                    self.ue_input(u, UeInput::Tau { periodic, active }, now);
                    true
                }
                None => false,
            },
            // A UE still waiting for downlink it was paged for is not sent more (the
            // EPC's per-UE buffer is bounded, and that is not what this event tests).
            8 => match self.pick_ue_where(|e, u| {
                idle(&e.ues[u]) && !e.ues[u].pdns().is_empty() && e.awaiting_dl[u] == 0
            }) {
                Some(u) => {
                    self.downlink_to_idle(u);
                    true
                }
                None => false,
            },
            // Handovers need two eNBs.
            _ => false,
        };
        if !done {
            self.metrics.skipped += 1;
        }
    }

    /// Like `pick_ue`, for a filter that needs emulator state beyond the UE itself.
    pub(super) fn pick_ue_where(&mut self, f: impl Fn(&Emulator, usize) -> bool) -> Option<usize> {
        let n = self.ues.len();
        if n == 0 {
            return None;
        }
        for _ in 0..PICK_PROBES {
            let u = self.rng.below(n);
            if f(self, u) {
                return Some(u);
            }
        }
        let start = self.rng.below(n);
        (0..n.min(PICK_SCAN))
            .map(|i| (start + i) % n)
            .find(|&u| f(self, u))
    }

    /// A UE that `f` accepts, at random: a few random probes, then a bounded run of
    /// UEs from a random start. An event finds no UE (skipped, counted) only when few
    /// UEs qualify. The run was the whole UE table: with 50,000 UEs of which none
    /// qualified (an attach event with every UE registered, a release when none is
    /// idle), each event cost a pass over every UE (~1 ms), 4,000 events a second
    /// took more than the emulator's core, and the S1 answers waited behind them.
    pub(super) fn pick_ue(&mut self, f: impl Fn(&Ue) -> bool) -> Option<usize> {
        let n = self.ues.len();
        if n == 0 {
            return None;
        }
        for _ in 0..PICK_PROBES {
            let u = self.rng.below(n);
            if f(&self.ues[u]) {
                return Some(u);
            }
        }
        let start = self.rng.below(n);
        (0..n.min(PICK_SCAN))
            .map(|i| (start + i) % n)
            .find(|&u| f(&self.ues[u]))
    }

    /// Pages that came while the UE was busy: answered once it is idle and free (a
    /// UE that got connected meanwhile has its bearers already).
    pub(super) fn answer_pages(&mut self) {
        let now = self.now_ns();
        let mut i = 0;
        while i < self.paged.len() {
            let u = self.paged[i];
            if self.ues[u].busy() {
                i += 1;
                continue;
            }
            self.paged.swap_remove(i);
            if self.ues[u].is_registered() && !self.ues[u].is_connected() {
                self.ue_input(u, UeInput::Paged, now);
            }
        }
    }
}
