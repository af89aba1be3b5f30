//! Building a slice: its two halves, the rings between them, and core pinning.

use crate::control::{ControlConfig, ControlPlane};
use crate::counters::SliceCounters;
use crate::datapath::{DataPlane, DataPlaneConfig};
use crate::ids::{IdLayout, IotPool};
use crate::spsc;
use std::net::Ipv4Addr;
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct SliceConfig {
    pub slice: u32,
    pub layout: IdLayout,
    pub iot: Option<IotPool>,
    /// Capacity of the UE and bearer tables (virtual: pages are committed when used).
    pub ue_slots: usize,
    pub bearer_slots: usize,
    pub s1u_addr: Ipv4Addr,
    /// Control → data ring size (updates).
    pub update_ring: usize,
    /// Data → control ring size (promotion requests).
    pub request_ring: usize,
    pub error_indication_rate: u32,
    pub max_updates_per_sync: usize,
    /// Packet buffers held for UEs awaiting promotion or paging (at most 65,535).
    pub pending_pool: usize,
    pub default_rule_set: u16,
    /// Egress schedulers: toward SGi (uplink), toward S1-U (downlink).
    pub egress: [crate::datapath::egress::EgressConfig; 2],
    /// Cores to pin the control and data threads to (None: leave to the OS).
    pub control_core: Option<usize>,
    pub data_core: Option<usize>,
}

impl SliceConfig {
    /// A single-slice configuration sized for `users` UEs.
    pub fn for_users(users: usize) -> Self {
        let layout = IdLayout::new(1, Ipv4Addr::new(10, 0, 0, 0), 8).expect("valid default layout");
        SliceConfig {
            slice: 0,
            ue_slots: (users + 1024).min(layout.max_ue_slots()),
            // Twice the UE slots: one reserved for each UE's first default bearer, as
            // many again for the rest (see `ControlPlane::new`).
            bearer_slots: ((users + 1024) * 2).min(layout.max_bearer_slots()),
            layout,
            iot: None,
            s1u_addr: Ipv4Addr::LOCALHOST,
            update_ring: 1 << 16,
            request_ring: 1 << 12,
            error_indication_rate: 1000,
            max_updates_per_sync: 4096,
            pending_pool: crate::datapath::PENDING_POOL,
            default_rule_set: 0,
            egress: Default::default(),
            control_core: None,
            data_core: None,
        }
    }
}

/// Create both halves of a slice without signaling (synthetic events, benchmarks).
pub fn build(cfg: &SliceConfig) -> (ControlPlane, DataPlane) {
    build_with_signaling(cfg)
}

/// Create both halves of a slice, connected by their rings and sharing the counters;
/// `S` is the signaling part of its UEs' entries (the MME's UE).
pub fn build_with_signaling<S>(cfg: &SliceConfig) -> (ControlPlane<S>, DataPlane) {
    let counters = Arc::new(SliceCounters::new(cfg.bearer_slots, cfg.ue_slots));
    let (up_tx, up_rx) = spsc::channel(cfg.update_ring);
    let (rq_tx, rq_rx) = spsc::channel(cfg.request_ring);
    let cp = ControlPlane::new(
        ControlConfig {
            slice: cfg.slice,
            layout: cfg.layout,
            iot: cfg.iot,
            ue_slots: cfg.ue_slots,
            bearer_slots: cfg.bearer_slots,
            default_rule_set: cfg.default_rule_set,
        },
        up_tx,
        rq_rx,
        counters.clone(),
    );
    let dp = DataPlane::new(
        DataPlaneConfig {
            slice: cfg.slice,
            layout: cfg.layout,
            iot: cfg.iot,
            s1u_addr: cfg.s1u_addr,
            error_indication_rate: cfg.error_indication_rate,
            max_updates_per_sync: cfg.max_updates_per_sync,
            pending_pool: cfg.pending_pool,
            egress: cfg.egress.clone(),
        },
        cfg.bearer_slots,
        cfg.ue_slots,
        counters,
        up_rx,
        rq_tx,
    );
    (cp, dp)
}

/// Pin the calling thread to `core`. Returns false if the OS refused (e.g. the core
/// does not exist), in which case the thread keeps running unpinned.
pub fn pin_current_thread(core: usize) -> bool {
    pin_current_thread_to(std::iter::once(core))
}

/// Pin the calling thread to the set `cores` (e.g. every core but a control
/// thread's, so that helpers never preempt it). False, and unpinned, if the OS
/// refused or the set is empty.
pub fn pin_current_thread_to(cores: impl IntoIterator<Item = usize>) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: cpu_set_t is plain data; sched_setaffinity reads it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            let mut any = false;
            for core in cores {
                if core >= libc::CPU_SETSIZE as usize {
                    return false;
                }
                libc::CPU_SET(core, &mut set);
                any = true;
            }
            any && libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cores;
        false
    }
}

/// Cores available to this process.
pub fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
