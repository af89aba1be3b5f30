//! `pepc bench dataplane`: one control core applying synthetic signaling while one or
//! more data cores forward generated traffic (PEPC §5-§7 methodology).
//!
//! `mpps_per_core` counts only time spent in the data path's pipeline (what a data core
//! does per batch received from a NIC); building the synthetic packets is excluded the
//! way the paper's separate traffic-generator machine is, and reported as
//! `mpps_wall_per_core` (generation included) for transparency. Latency is the time a
//! packet spends in the pipeline: each packet is charged its batch's processing time.

use crate::designs::locked::{self, Ctrl, Mode};
use crate::hist::Histogram;
use crate::traffic::{Target, Traffic};
use pepc_ratelog::errln;
use pepc_slice::control::{AttachParams, BearerParams};
use pepc_slice::ids::IotPool;
use pepc_slice::slice::{build, pin_current_thread, SliceConfig};
use pepc_slice::synthetic::{Rng, Synthetic, SyntheticConfig};
use pepc_wire::{Batch, BATCH_SIZE};
use serde::Serialize;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Design {
    /// Ours: published control records, data-thread-owned primary table, no locks.
    Default,
    /// Ours with control updates applied before every packet (batches of one).
    Unbatched,
    /// Ours with every user kept in the primary table (no two-level eviction).
    OneTable,
    RwLock,
    DatapathWriter,
    GiantLock,
}

impl Design {
    pub fn parse(s: &str) -> Result<Design, String> {
        Ok(match s {
            "default" | "pepc" => Design::Default,
            "unbatched" => Design::Unbatched,
            "one-table" => Design::OneTable,
            "rwlock" => Design::RwLock,
            "datapath-writer" => Design::DatapathWriter,
            "giant-lock" => Design::GiantLock,
            _ => {
                return Err(format!(
                    "unknown design {s:?} (default, unbatched, one-table, rwlock, datapath-writer, giant-lock)"
                ))
            }
        })
    }
}

#[derive(Debug, Clone)]
pub struct DataplaneOpts {
    pub design: Design,
    pub users: u32,
    /// Control events per second on the control core.
    pub signaling: u64,
    pub seconds: f64,
    pub data_cores: usize,
    /// Uplink batches per downlink batch: UL:DL = 1:dl_per_ul.
    pub dl_per_ul: u32,
    pub ul_frame: usize,
    pub dl_packet: usize,
    /// Share of users that are stateless-IoT devices (0..=1).
    pub iot_share: f64,
    /// Share of users (not IoT) with a dedicated bearer (QCI 1) that carries all their
    /// uplink: each packet reads the bearer's line, then its owner's (downlink stays
    /// on the default bearer).
    pub dedicated_share: f64,
    /// Share of users that are always active; the rest churn through the primary table
    /// (Fig. 14). 1.0 = everyone active (no churn).
    pub always_on: f64,
    /// Share of all users promoted and evicted per second (Fig. 14 churn).
    pub churn_per_s: f64,
    /// Share of signaling events that are handovers (rest: attach/detach).
    pub handover_share: f64,
    pub pin: bool,
    pub seed: u64,
    /// Read every slice counter a `/metrics` scrape reads and render them as
    /// Prometheus text every this many ms from a thread of its own (0: none).
    pub scrape_ms: u64,
    /// Seconds to wait, idle, between the setup and the first measured window: to
    /// see whether the rate depends on the time since setup. On a VM it did for a
    /// 10M-user slice, while the guest's huge pages stayed in place (seen in
    /// session 16).
    pub settle_s: f64,
}

impl Default for DataplaneOpts {
    fn default() -> Self {
        DataplaneOpts {
            design: Design::Default,
            users: 1_000_000,
            signaling: 100_000,
            seconds: 5.0,
            data_cores: 1,
            dl_per_ul: 3,
            ul_frame: 128,
            dl_packet: 64,
            iot_share: 0.0,
            dedicated_share: 0.0,
            always_on: 1.0,
            churn_per_s: 0.0,
            handover_share: 0.5,
            pin: true,
            seed: 42,
            scrape_ms: 0,
            settle_s: 0.0,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DataplaneResult {
    pub design: Design,
    pub users: u32,
    pub signaling_per_s: u64,
    pub signaling_achieved_per_s: f64,
    pub data_cores: usize,
    pub mpps_per_core: f64,
    pub mpps_wall_per_core: f64,
    pub latency_ns_p50: u64,
    pub latency_ns_p99: u64,
    pub drops: u64,
    pub drops_by_reason: std::collections::BTreeMap<String, u64>,
    pub packets: u64,
    pub seconds: f64,
    pub iot_share: f64,
    pub dedicated_share: f64,
    pub always_on: f64,
    pub churn_per_s: f64,
    pub ul_dl: String,
    pub cores_available: usize,
    /// Scrapes of the counters during the run (`scrape_ms`), and their CPU.
    pub scrape_ms: u64,
    pub scrapes: u64,
    pub scrape_us_mean: f64,
}

/// What a `/metrics` scrape does with a slice's data-path counters (the node's
/// `NodeMetrics` reads these atomics and renders text; it takes no lock the data
/// thread takes): read them all, render them. Returns (scrapes, CPU ns spent).
fn scrape_loop(
    c: &pepc_slice::counters::SliceCounters,
    stop: &AtomicBool,
    every: Duration,
) -> (u64, u64) {
    use std::fmt::Write;
    use std::sync::atomic::Ordering::Relaxed;
    let (mut n, mut cpu) = (0u64, 0u64);
    let mut text = String::with_capacity(16 << 10);
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(every);
        let t0 = crate::attach::thread_cpu_s();
        text.clear();
        for (name, v) in [
            ("ul_forwarded", &c.ul_forwarded),
            ("dl_forwarded", &c.dl_forwarded),
            ("ul_bytes", &c.ul_bytes),
            ("dl_bytes", &c.dl_bytes),
            ("buffered", &c.buffered),
            ("drained", &c.drained),
            ("echo_replies", &c.echo_replies),
            ("error_indications", &c.error_indications),
            ("end_markers", &c.end_markers),
            ("updates_applied", &c.updates_applied),
        ] {
            let _ = writeln!(text, "pepc_{name}_total{{slice=\"0\"}} {}", v.load(Relaxed));
        }
        for r in pepc_slice::counters::DropReason::ALL {
            let _ = writeln!(
                text,
                "pepc_drops_total{{slice=\"0\",reason=\"{}\"}} {}",
                r.name(),
                c.drop_count(r)
            );
        }
        std::hint::black_box(&text);
        cpu += ((crate::attach::thread_cpu_s() - t0) * 1e9) as u64;
        n += 1;
    }
    (n, cpu)
}

pub(crate) struct DataStats {
    scrapes: u64,
    scrape_cpu_ns: u64,
    reasons: Vec<(&'static str, u64)>,
    pub(crate) packets: u64,
    /// Time in the pipeline (what `mpps_per_core` divides by), and in the whole loop.
    pub(crate) busy_ns: u64,
    pub(crate) wall_ns: u64,
    pub(crate) hist: Histogram,
    drops: u64,
}

/// Run one benchmark configuration.
pub fn run(o: &DataplaneOpts) -> Result<DataplaneResult, String> {
    if o.users == 0 {
        return Err("--users must be > 0".into());
    }
    let cores = pepc_slice::slice::available_cores();
    let k = o.data_cores.max(1);
    let mut events_done = 0u64;
    let mut stats = Vec::new();
    // Each data core is its own slice with its own control thread, as in PEPC (slices
    // scale out); users and signaling are split evenly.
    let users_per = (o.users as usize).div_ceil(k) as u32;
    let sig_per = o.signaling / k as u64;
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(Barrier::new(2 * k));
    let events = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for s in 0..k {
        let mut o2 = o.clone();
        o2.users = users_per;
        o2.signaling = sig_per;
        o2.seed = o.seed + s as u64;
        let (ctrl_core, data_core) = if o.pin {
            (Some(0), Some((1 + s) % cores.max(1)))
        } else {
            (None, None)
        };
        let (stop, ready, events) = (stop.clone(), ready.clone(), events.clone());
        handles.push(std::thread::spawn(move || match o2.design {
            Design::Default | Design::Unbatched | Design::OneTable => {
                run_pepc(&o2, ctrl_core, data_core, stop, ready, events)
            }
            Design::RwLock | Design::DatapathWriter | Design::GiantLock => {
                run_locked(&o2, ctrl_core, data_core, stop, ready, events)
            }
        }));
    }
    // Setup happens inside each slice before its barrier; the timed window starts when
    // the control threads are released.
    while !ready_started(&events) {
        if handles.iter().any(|h| h.is_finished()) {
            break; // a setup failed: join reports it below
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(o.seconds));
    stop.store(true, Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    for h in handles {
        let st = h
            .join()
            .map_err(|_| "benchmark thread panicked".to_string())??;
        stats.push(st);
    }
    events_done += events.load(Ordering::Relaxed) & !START_BIT;
    let mut hist = Histogram::default();
    let (mut packets, mut drops, mut mpps, mut mpps_wall) = (0, 0, 0.0, 0.0);
    let mut drops_by_reason = std::collections::BTreeMap::new();
    for st in &stats {
        for (r, n) in &st.reasons {
            *drops_by_reason.entry(r.to_string()).or_insert(0) += n;
        }
        hist.merge(&st.hist);
        packets += st.packets;
        drops += st.drops;
        mpps += st.packets as f64 / st.busy_ns.max(1) as f64 * 1e3;
        mpps_wall += st.packets as f64 / st.wall_ns.max(1) as f64 * 1e3;
    }
    Ok(DataplaneResult {
        design: o.design,
        users: o.users,
        signaling_per_s: o.signaling,
        signaling_achieved_per_s: events_done as f64 / elapsed,
        data_cores: k,
        mpps_per_core: mpps / k as f64,
        mpps_wall_per_core: mpps_wall / k as f64,
        latency_ns_p50: hist.quantile(0.5),
        latency_ns_p99: hist.quantile(0.99),
        drops,
        drops_by_reason,
        packets,
        seconds: elapsed,
        iot_share: o.iot_share,
        dedicated_share: o.dedicated_share,
        always_on: o.always_on,
        churn_per_s: o.churn_per_s,
        ul_dl: format!("1:{}", o.dl_per_ul),
        cores_available: cores,
        scrape_ms: o.scrape_ms,
        scrapes: stats.iter().map(|s| s.scrapes).sum(),
        scrape_us_mean: {
            let n: u64 = stats.iter().map(|s| s.scrapes).sum();
            let ns: u64 = stats.iter().map(|s| s.scrape_cpu_ns).sum();
            ns as f64 / 1e3 / n.max(1) as f64
        },
    })
}

/// Set in `events` by each slice once set up (the timed window waits for it).
pub(crate) const START_BIT: u64 = 1 << 62;

fn ready_started(events: &AtomicU64) -> bool {
    events.load(Ordering::Relaxed) & START_BIT != 0
}

/// The data core's loop, shared by all designs: UL:DL batches, timing only the
/// pipeline call.
fn data_loop(
    o: &DataplaneOpts,
    traffic: &mut Traffic,
    stop: &AtomicBool,
    mut process: impl FnMut(&mut Batch, bool) -> u64,
) -> DataStats {
    let batch_size = if o.design == Design::Unbatched {
        1
    } else {
        BATCH_SIZE
    };
    let mut b = Batch::new(batch_size);
    let mut st = DataStats {
        scrapes: 0,
        scrape_cpu_ns: 0,
        reasons: Vec::new(),
        packets: 0,
        busy_ns: 0,
        wall_ns: 0,
        hist: Histogram::default(),
        drops: 0,
    };
    let wall = Instant::now();
    let mut round = 0u32;
    while !stop.load(Ordering::Relaxed) {
        let uplink = round.is_multiple_of(o.dl_per_ul + 1);
        round = round.wrapping_add(1);
        if uplink {
            traffic.fill_uplink(&mut b);
        } else {
            traffic.fill_downlink(&mut b);
        }
        let n = b.len as u64;
        let t = Instant::now();
        st.drops += process(&mut b, uplink);
        let dt = t.elapsed().as_nanos() as u64;
        st.busy_ns += dt;
        st.packets += n;
        st.hist.record_n(dt, n);
    }
    st.wall_ns = wall.elapsed().as_nanos() as u64;
    st
}

fn run_pepc(
    o: &DataplaneOpts,
    ctrl_core: Option<usize>,
    data_core: Option<usize>,
    stop: Arc<AtomicBool>,
    ready: Arc<Barrier>,
    events: Arc<AtomicU64>,
) -> Result<DataStats, String> {
    let mut rig = PepcRig::new(o)?;
    std::thread::sleep(Duration::from_secs_f64(o.settle_s.max(0.0)));
    let st = rig.window(o, ctrl_core, data_core, &stop, Some(&ready), &events)?;
    Ok(rig.finish(st))
}

/// Let the data plane apply what the control plane published until at most `keep`
/// updates are in flight (setup runs both on one thread).
fn drain(
    cp: &mut pepc_slice::control::ControlPlane,
    dp: &mut pepc_slice::datapath::DataPlane,
    keep: usize,
) {
    while cp.in_flight() > keep {
        cp.flush();
        dp.sync(0);
    }
}

/// One slice of our design, set up (every user attached) once and then measured in
/// as many windows as asked: `run` takes one, `paired` alternates two rigs of
/// different sizes in one process. The control thread and its signaling live only
/// while a window runs; its clock carries on from the last window, so the events
/// keep their rate across windows.
pub(crate) struct PepcRig {
    cp: Option<pepc_slice::control::ControlPlane>,
    dp: pepc_slice::datapath::DataPlane,
    syn: Option<Synthetic>,
    traffic: Traffic,
    churners: Vec<u32>,
    churn_rate: u64,
    /// Churn's state between windows: its random stream, the users promoted so far,
    /// and those promoted lately (evicted again after 64 more).
    churn: Option<(Rng, u64, Vec<u32>)>,
    /// The control thread's clock at the end of the last window.
    ctrl_ns: u64,
    /// The data thread's clock (the pipeline's `now`) at the end of the last window.
    data_ns: u64,
}

impl PepcRig {
    /// Attach every user (on this thread, letting the data plane drain the ring).
    pub(crate) fn new(o: &DataplaneOpts) -> Result<PepcRig, String> {
        let iot_users = (o.users as f64 * o.iot_share) as u32;
        let normal_users = o.users - iot_users;
        let mut syn_cfg = SyntheticConfig::new(normal_users, o.signaling);
        syn_cfg.handover_share = o.handover_share;
        syn_cfg.seed = o.seed;
        let mut cfg = SliceConfig::for_users(o.users as usize + syn_cfg.churn_users as usize);
        if iot_users > 0 {
            cfg.iot = Some(
                IotPool::new(0xC000_0000, Ipv4Addr::new(100, 64, 0, 0), iot_users)
                    .map_err(|e| e.to_string())?,
            );
        }
        let (mut cp, mut dp) = build(&cfg);
        let mut syn = Synthetic::new(syn_cfg);
        let t_setup = Instant::now();
        syn.setup(&mut cp, |cp| drain(cp, &mut dp, 0))
            .map_err(|e| e.to_string())?;
        let mut targets: Vec<Target> = syn
            .steady
            .iter()
            .map(|a| Target {
                teid: a.teid_ul,
                ip: a.ue_ip,
            })
            .collect();
        let dedicated = (syn.steady.len() as f64 * o.dedicated_share.clamp(0.0, 1.0)) as usize;
        for (t, a) in targets.iter_mut().zip(&syn.steady).take(dedicated) {
            t.teid = cp
                .add_bearer(a.ue_slot, BearerParams::new(6, 1))
                .map_err(|e| e.to_string())?;
            drain(&mut cp, &mut dp, 8192);
        }
        for i in 0..iot_users {
            let mut p = AttachParams::new(9_000_000_000_000 + i as u64);
            p.class = pepc_slice::context::DeviceClass::StatelessIot;
            p.enb_addr = Ipv4Addr::new(127, 1, 0, 1);
            p.enb_teid = 0x100 + i;
            let a = cp.attach(&p).map_err(|e| e.to_string())?;
            targets.push(Target {
                teid: a.teid_ul,
                ip: a.ue_ip,
            });
            drain(&mut cp, &mut dp, 8192);
        }
        drain(&mut cp, &mut dp, 0);
        // Fig. 14: only the always-on share starts in the primary table; the rest are
        // evicted and churn in and out at the configured rate.
        let always = ((normal_users as f64) * o.always_on.clamp(0.0, 1.0)) as usize;
        let churners: Vec<u32> = syn.steady[always..].iter().map(|a| a.ue_slot).collect();
        if o.design != Design::OneTable {
            for &s in &churners {
                let _ = cp.evict(s);
                drain(&mut cp, &mut dp, 8192);
            }
            drain(&mut cp, &mut dp, 0);
        }
        // Traffic goes to the users currently in the primary table; with churn the
        // active set rotates (promote some, evict others) at `churn_per_s`.
        let active_targets = if o.design == Design::OneTable || churners.is_empty() {
            targets.clone()
        } else {
            targets[..always.max(1)].to_vec()
        };
        errln!(
            "setup: {} users ({} IoT) in {:.1}s",
            o.users,
            iot_users,
            t_setup.elapsed().as_secs_f64()
        );
        Ok(PepcRig {
            cp: Some(cp),
            dp,
            syn: Some(syn),
            traffic: Traffic::new(active_targets, o.ul_frame, o.dl_packet, o.seed ^ 0xabc),
            churn_rate: (o.churn_per_s * o.users as f64) as u64,
            churners,
            churn: Some((Rng::new(7), 0, Vec::new())),
            ctrl_ns: 0,
            data_ns: 0,
        })
    }

    /// Run signaling and traffic until `stop`: the control thread (on `ctrl_core`)
    /// applies the synthetic events, this thread (moved to `data_core`) forwards.
    /// With `ready`, both wait on it first (every slice of a run starts together).
    pub(crate) fn window(
        &mut self,
        o: &DataplaneOpts,
        ctrl_core: Option<usize>,
        data_core: Option<usize>,
        stop: &Arc<AtomicBool>,
        ready: Option<&Arc<Barrier>>,
        events: &Arc<AtomicU64>,
    ) -> Result<DataStats, String> {
        let (Some(mut cp), Some(mut syn), Some((mut rng, mut churned, mut in_primary))) =
            (self.cp.take(), self.syn.take(), self.churn.take())
        else {
            return Err("a window of this rig failed earlier".into());
        };
        let scraper = (o.scrape_ms > 0).then(|| {
            let (c, stop, every) = (
                cp.counters().clone(),
                stop.clone(),
                Duration::from_millis(o.scrape_ms),
            );
            std::thread::spawn(move || scrape_loop(&c, &stop, every))
        });
        let (churners, churn_rate, ctrl_ns) =
            (self.churners.clone(), self.churn_rate, self.ctrl_ns);
        let stop_c = stop.clone();
        let ready_c = ready.cloned();
        let events_c = events.clone();
        let control = std::thread::spawn(move || {
            if let Some(c) = ctrl_core {
                pin_current_thread(c);
            }
            if let Some(r) = ready_c {
                r.wait();
            }
            events_c.fetch_or(START_BIT, Ordering::Relaxed);
            let t0 = Instant::now();
            let mut now = ctrl_ns;
            let mut evs = Vec::new();
            while !stop_c.load(Ordering::Relaxed) {
                now = ctrl_ns + t0.elapsed().as_nanos() as u64 + 1;
                let n = syn.run_due(&mut cp, now);
                if n > 0 {
                    events_c.fetch_add(n as u64, Ordering::Relaxed);
                }
                // Churn: promote a random evicted user and evict one promoted earlier.
                if churn_rate > 0 && !churners.is_empty() {
                    let due = now as u128 * churn_rate as u128 / 1_000_000_000;
                    while (churned as u128) < due {
                        let s = churners[rng.below(churners.len() as u64) as usize];
                        let _ = cp.promote(s);
                        in_primary.push(s);
                        if in_primary.len() > 64 {
                            let e =
                                in_primary.swap_remove(rng.below(in_primary.len() as u64) as usize);
                            let _ = cp.evict(e);
                        }
                        churned += 1;
                    }
                }
                cp.flush();
                evs.clear();
                cp.poll_requests(&mut evs);
                if n == 0 {
                    std::hint::spin_loop();
                }
            }
            (cp, syn, (rng, churned, in_primary), now)
        });
        if let Some(c) = data_core {
            pin_current_thread(c);
        }
        if let Some(r) = ready {
            r.wait();
        }
        let t0 = Instant::now();
        let (dp, data_ns) = (&mut self.dp, self.data_ns);
        let mut st = data_loop(o, &mut self.traffic, stop, |b, uplink| {
            let now = data_ns + t0.elapsed().as_nanos() as u64;
            if uplink {
                dp.uplink(b, now);
            } else {
                dp.downlink(b, now);
            }
            dp.generated.clear();
            0
        });
        self.data_ns = data_ns + t0.elapsed().as_nanos() as u64;
        let (cp, syn, churn, now) = control.join().map_err(|_| "control thread panicked")?;
        (self.cp, self.syn, self.churn, self.ctrl_ns) = (Some(cp), Some(syn), Some(churn), now);
        if let Some(s) = scraper {
            (st.scrapes, st.scrape_cpu_ns) = s.join().map_err(|_| "scraper panicked")?;
        }
        Ok(st)
    }

    /// Packets the data path dropped so far, every window included.
    pub(crate) fn drops(&self) -> u64 {
        self.dp.counters().total_drops()
    }

    /// The data path's drop counters, added to a window's figures.
    pub(crate) fn finish(&self, mut st: DataStats) -> DataStats {
        st.drops = self.dp.counters().total_drops();
        for r in pepc_slice::counters::DropReason::ALL {
            let n = self.dp.counters().drop_count(r);
            if n > 0 {
                st.reasons.push((r.name(), n));
            }
        }
        st
    }
}

fn run_locked(
    o: &DataplaneOpts,
    ctrl_core: Option<usize>,
    data_core: Option<usize>,
    stop: Arc<AtomicBool>,
    ready: Arc<Barrier>,
    events: Arc<AtomicU64>,
) -> Result<DataStats, String> {
    let mode = match o.design {
        Design::RwLock => Mode::RwLock,
        Design::DatapathWriter => Mode::DatapathWriter,
        _ => Mode::GiantLock,
    };
    let (mut lc, mut ld) = locked::new(mode);
    let mut rng = Rng::new(o.seed);
    let mk = |i: u32, rng: &mut Rng| Ctrl {
        teid_ul: 0x10 + i,
        ip: u32::from(Ipv4Addr::new(10, 0, 0, 0)) + 1 + i,
        enb_teid: (rng.next_u64() as u32) | 1,
        enb_addr: u32::from(Ipv4Addr::new(127, 1, 0, 1)) + rng.below(64) as u32,
        qci: 9,
        ambr: 0,
    };
    let churn_users = (o.users / 10).clamp(1, 100_000);
    let mut targets = Vec::with_capacity(o.users as usize);
    for i in 0..o.users {
        let c = mk(i, &mut rng);
        targets.push(Target {
            teid: c.teid_ul,
            ip: Ipv4Addr::from(c.ip),
        });
        lc.attach(c);
        if i % 4096 == 0 {
            ld.sync();
        }
    }
    ld.sync();
    let mut traffic = Traffic::new(targets, o.ul_frame, o.dl_packet, o.seed ^ 0xabc);
    let rate = o.signaling;
    let handover_share = o.handover_share;
    let users = o.users;
    let stop_c = stop.clone();
    let ready_c = ready.clone();
    let events_c = events.clone();
    let control = std::thread::spawn(move || {
        if let Some(c) = ctrl_core {
            pin_current_thread(c);
        }
        ready_c.wait();
        events_c.fetch_or(START_BIT, Ordering::Relaxed);
        let t0 = Instant::now();
        let mut done = 0u64;
        let mut churn_on: Vec<u32> = Vec::new();
        let mut attach_next = true;
        while !stop_c.load(Ordering::Relaxed) {
            if rate == 0 {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            let due = t0.elapsed().as_nanos() * rate as u128 / 1_000_000_000;
            let mut n = 0;
            while (done as u128) < due && n < 10_000 {
                let ho = (rng.next_u64() as f64 / u64::MAX as f64) < handover_share;
                if ho {
                    let i = rng.below(users as u64) as u32;
                    lc.handover(
                        0x10 + i,
                        u32::from(Ipv4Addr::new(127, 1, 0, 1)) + rng.below(64) as u32,
                        rng.next_u64() as u32 | 1,
                    );
                } else if attach_next || churn_on.is_empty() {
                    let i = users + rng.below(churn_users as u64) as u32;
                    if !churn_on.contains(&i) {
                        lc.attach(mk(i, &mut rng));
                        churn_on.push(i);
                    }
                    attach_next = false;
                } else {
                    let j = rng.below(churn_on.len() as u64) as usize;
                    let i = churn_on.swap_remove(j);
                    lc.detach(0x10 + i, u32::from(Ipv4Addr::new(10, 0, 0, 0)) + 1 + i);
                    attach_next = true;
                }
                done += 1;
                n += 1;
            }
            events_c.fetch_add(n, Ordering::Relaxed);
            if n == 0 {
                std::hint::spin_loop();
            }
        }
    });
    if let Some(c) = data_core {
        pin_current_thread(c);
    }
    ready.wait();
    let mut st = data_loop(o, &mut traffic, &stop, |b, uplink| {
        if uplink {
            ld.uplink(b);
        } else {
            ld.downlink(b);
        }
        0
    });
    control.join().map_err(|_| "control thread panicked")?;
    st.drops = ld.drops;
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Uplink on dedicated bearers' own TEIDs goes through: nothing is dropped (an
    /// unknown TEID or a bearer without its owner would be).
    #[test]
    fn uplink_on_dedicated_bearers_forwards() {
        let r = run(&DataplaneOpts {
            users: 2_000,
            dedicated_share: 0.5,
            signaling: 0,
            seconds: 0.2,
            pin: false,
            ..Default::default()
        })
        .unwrap();
        assert!(r.packets > 0, "{r:?}");
        assert_eq!(r.drops, 0, "{:?}", r.drops_by_reason);
        assert_eq!(r.dedicated_share, 0.5);
    }
}
