//! The paper's synthetic control events (§5.1, second experiment set): attaches and S1
//! handovers applied by the control thread, uniformly over users, at a set rate, with
//! no signaling on the wire. Steady users carry the traffic and are handed over; a
//! separate churn population is attached and detached so the user count stays put.

use crate::control::{AttachParams, Attached, ControlPlane, CtrlError};
use std::net::Ipv4Addr;

/// A small, fast PRNG (xorshift64*): the benchmark must not depend on a crate's RNG
/// stream changing under it.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in 0..n (n > 0).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() >> 32) * n) >> 32
    }
}

#[derive(Debug, Clone)]
pub struct SyntheticConfig {
    /// Users attached at start, carrying traffic.
    pub users: u32,
    /// Extra users attached/detached by attach events.
    pub churn_users: u32,
    /// Control events per second (0 = none).
    pub rate_per_s: u64,
    /// Share of events that are S1 handovers (the rest alternate attach/detach).
    pub handover_share: f64,
    /// eNBs the users are spread over (addresses 127.1.0.x by default).
    pub enbs: u32,
    pub enb_base: Ipv4Addr,
    /// First IMSI (steady users), churn users follow.
    pub imsi_base: u64,
    pub seed: u64,
}

impl SyntheticConfig {
    pub fn new(users: u32, rate_per_s: u64) -> Self {
        SyntheticConfig {
            users,
            churn_users: (users / 10).clamp(1, 100_000),
            rate_per_s,
            handover_share: 0.5,
            enbs: 64,
            enb_base: Ipv4Addr::new(127, 1, 0, 1),
            imsi_base: 1_010_000_000_000,
            seed: 0x5eed,
        }
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct EventCounts {
    pub attaches: u64,
    pub detaches: u64,
    pub handovers: u64,
    pub failures: u64,
}

impl EventCounts {
    pub fn total(&self) -> u64 {
        self.attaches + self.detaches + self.handovers
    }
}

pub struct Synthetic {
    cfg: SyntheticConfig,
    pub steady: Vec<Attached>,
    churn: Vec<Option<u32>>,
    churn_attached: Vec<u32>,
    churn_free: Vec<u32>,
    rng: Rng,
    start_ns: u64,
    done: u64,
    attach_next: bool,
    pub counts: EventCounts,
}

impl Synthetic {
    pub fn new(cfg: SyntheticConfig) -> Self {
        let churn = cfg.churn_users;
        Synthetic {
            steady: Vec::with_capacity(cfg.users as usize),
            churn: vec![None; churn as usize],
            churn_attached: Vec::new(),
            churn_free: (0..churn).rev().collect(),
            rng: Rng::new(cfg.seed),
            start_ns: 0,
            done: 0,
            attach_next: true,
            counts: EventCounts::default(),
            cfg,
        }
    }

    fn enb(&mut self) -> (Ipv4Addr, u32) {
        let e = self.rng.below(self.cfg.enbs.max(1) as u64) as u32;
        let teid = (self.rng.next_u64() as u32) | 1;
        (Ipv4Addr::from(u32::from(self.cfg.enb_base) + e), teid)
    }

    fn params(&mut self, imsi: u64) -> AttachParams {
        let (addr, teid) = self.enb();
        let mut p = AttachParams::new(imsi);
        p.enb_addr = addr;
        p.enb_teid = teid;
        // A real subscription's UE-AMBR, so the benchmark runs the AMBR token buckets
        // on every packet (high enough that the benchmark's per-UE rates never hit it).
        p.ambr_ul = 1_000_000_000;
        p.ambr_dl = 1_000_000_000;
        p
    }

    /// Attach the steady users (ECM-CONNECTED, with eNB tunnels). `flush` is called
    /// whenever the update ring fills, so the caller can let the data thread drain it.
    pub fn setup<S>(
        &mut self,
        cp: &mut ControlPlane<S>,
        mut flush: impl FnMut(&mut ControlPlane<S>),
    ) -> Result<(), CtrlError> {
        for i in 0..self.cfg.users as u64 {
            let p = self.params(self.cfg.imsi_base + i);
            let a = cp.attach(&p)?;
            self.steady.push(a);
            if cp.in_flight() > 8192 {
                flush(cp);
            }
        }
        flush(cp);
        Ok(())
    }

    /// Run the events due by `now_ns` (events are spaced evenly at the configured rate
    /// from the first call). Returns how many ran.
    pub fn run_due<S>(&mut self, cp: &mut ControlPlane<S>, now_ns: u64) -> usize {
        if self.cfg.rate_per_s == 0 {
            return 0;
        }
        if self.start_ns == 0 {
            self.start_ns = now_ns;
        }
        let due = (now_ns - self.start_ns) as u128 * self.cfg.rate_per_s as u128 / 1_000_000_000;
        let mut ran = 0;
        while (self.done as u128) < due && ran < 10_000 {
            self.one_event(cp);
            self.done += 1;
            ran += 1;
        }
        ran
    }

    /// One event, chosen as configured.
    pub fn one_event<S>(&mut self, cp: &mut ControlPlane<S>) {
        let handover = (self.rng.next_u64() as f64 / u64::MAX as f64) < self.cfg.handover_share;
        if handover && !self.steady.is_empty() {
            let i = self.rng.below(self.steady.len() as u64) as usize;
            let ue = self.steady[i].ue_slot;
            let (addr, teid) = self.enb();
            match cp.set_enb_tunnel(ue, crate::context::FIRST_EBI, addr, teid) {
                Ok(()) => self.counts.handovers += 1,
                Err(_) => self.counts.failures += 1,
            }
            return;
        }
        if (self.attach_next && !self.churn_free.is_empty()) || self.churn_attached.is_empty() {
            let Some(k) = self.churn_free.pop() else {
                return;
            };
            let p = self.params(self.cfg.imsi_base + self.cfg.users as u64 + k as u64);
            match cp.attach(&p) {
                Ok(a) => {
                    self.churn[k as usize] = Some(a.ue_slot);
                    self.churn_attached.push(k);
                    self.counts.attaches += 1;
                }
                Err(_) => {
                    self.churn_free.push(k);
                    self.counts.failures += 1;
                }
            }
        } else {
            let j = self.rng.below(self.churn_attached.len() as u64) as usize;
            let k = self.churn_attached.swap_remove(j);
            if let Some(slot) = self.churn[k as usize].take() {
                match cp.detach(slot) {
                    Ok(()) => self.counts.detaches += 1,
                    Err(_) => self.counts.failures += 1,
                }
            }
            self.churn_free.push(k);
        }
        self.attach_next = !self.attach_next;
    }
}
