//! The node's plan: every thread it runs (name, job, core), every ring between two
//! of them, and every port with the thread that owns it. Built from the validated
//! configuration before anything starts, by a pure function (the number of cores is
//! an argument, not a read), so a test checks it for every layout; the starters take
//! their thread names and cores from it, and `pepc run` prints it.

use crate::config::{DemuxMode, SgiMode, Validated};
use std::fmt;

/// What a thread does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Job {
    /// Owns the S1-U and SGi ports and steers packets to the slices.
    Demux,
    /// Slice `n`'s control thread: its MME (or synthetic events) and control plane.
    Control(usize),
    /// Slice `n`'s data thread: GTP-U, policy, charging, QoS.
    Data(usize),
    /// The S1AP endpoint: the S1-MME transport and the eNB associations.
    S1apEndpoint,
    /// The Diameter S6a client (an external HSS).
    S6a,
    /// The Diameter Gx client (an external PCRF).
    Gx,
    /// Loads the embedded HSS's profiles into memory beside serving (then ends).
    HssPreload,
    /// Group-commits UE checkpoints to the state store.
    Checkpointer,
    /// Writes usage records.
    Cdr,
    /// The Prometheus endpoint.
    Metrics,
    /// The management API.
    Api,
}

impl Job {
    /// The thread's name as `top -H` and the logs show it (at most 15 bytes: Linux).
    pub fn thread_name(self) -> String {
        match self {
            Job::Demux => "pepc-demux".into(),
            Job::Control(s) => format!("pepc-ctl-{s}"),
            Job::Data(s) => format!("pepc-data-{s}"),
            Job::S1apEndpoint => "pepc-s1ap".into(),
            Job::S6a => "pepc-s6a".into(),
            Job::Gx => "pepc-gx".into(),
            Job::HssPreload => "pepc-hss-load".into(),
            Job::Checkpointer => "pepc-checkpoint".into(),
            Job::Cdr => "pepc-cdr".into(),
            Job::Metrics => "pepc-metrics".into(),
            Job::Api => "pepc-api".into(),
        }
    }

    fn what(self) -> &'static str {
        match self {
            Job::Demux => "steers S1-U and SGi packets to the slices",
            Job::Control(_) => "MME (S1AP, NAS, HSS/PCRF) and control plane",
            Job::Data(_) => "GTP-U, policy, charging, QoS",
            Job::S1apEndpoint => "S1-MME transport, eNB associations, overload control",
            Job::S6a => "Diameter S6a client",
            Job::Gx => "Diameter Gx client",
            Job::HssPreload => "HSS profiles into memory (ends when done)",
            Job::Checkpointer => "UE checkpoints, group commit",
            Job::Cdr => "usage records",
            Job::Metrics => "Prometheus endpoint",
            Job::Api => "management API",
        }
    }
}

/// Whether a thread named `comm` is of `family` (e.g. "pepc-data" for every slice's
/// data thread "pepc-data-N"): what tools that read /proc per thread match on.
pub fn of_family(comm: &str, family: &str) -> bool {
    comm.strip_prefix(family).is_some_and(|rest| {
        rest.is_empty()
            || rest
                .strip_prefix('-')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// A thread of the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    pub job: Job,
    pub name: String,
    /// The core it is pinned to (None: the kernel places it).
    pub core: Option<usize>,
}

/// A single-producer ring (or queue) from one thread to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ring {
    pub from: String,
    pub to: String,
    pub carries: &'static str,
    /// Its capacity in `unit`s (every queue between two threads is bounded).
    pub capacity: usize,
    pub unit: &'static str,
    /// How many such rings (a mesh between the data threads counts each pair).
    pub count: usize,
}

/// A port of the node and the thread(s) that own it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    /// The configuration key that sets it.
    pub key: &'static str,
    pub addr: String,
    pub owner: String,
}

/// What the node runs beside its slices (the signaling and management parts).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Services {
    /// S1-MME's listening address (None: the MME is disabled).
    pub s1mme: Option<String>,
    /// Slots of each ring between the endpoint thread and a slice.
    pub s1ap_ring: usize,
    pub s6a: bool,
    pub gx: bool,
    pub hss_preload: bool,
    pub checkpoints: bool,
    pub cdr: bool,
    pub metrics: Option<String>,
    pub api: Option<String>,
}

/// Slots of a slice's control→data update ring and data→control request ring
/// ([`pepc_slice::slice::SliceConfig`]'s defaults, which the node keeps).
fn slice_rings() -> (usize, usize) {
    let c = pepc_slice::slice::SliceConfig::for_users(1);
    (c.update_ring, c.request_ring)
}

/// The node's plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub threads: Vec<Thread>,
    pub rings: Vec<Ring>,
    pub ports: Vec<Port>,
    /// Whether the threads that run all the time are pinned (`node.pin`, and a core
    /// for each of them).
    pub pinned: bool,
}

impl Plan {
    /// The plan of a node with configuration `v` on a machine of `cores` cores,
    /// serving `services`.
    pub fn new(v: &Validated, cores: usize, services: &Services) -> Plan {
        let n = v.slices;
        let demux = v.demux == DemuxMode::Thread;
        // Pinned: the demux (it sees every packet) first, then control and data per
        // slice; the other threads are the kernel's to place.
        let pinned_threads = 2 * n + usize::from(demux);
        let pinned = v.pin && cores >= pinned_threads;
        let first = usize::from(demux);
        let core = |k: usize| pinned.then_some(k);
        let mut threads = Vec::new();
        let mut push = |job: Job, core: Option<usize>| {
            threads.push(Thread {
                job,
                name: job.thread_name(),
                core,
            })
        };
        if demux {
            push(Job::Demux, core(0));
        }
        for s in 0..n {
            push(Job::Control(s), core(first + 2 * s));
            push(Job::Data(s), core(first + 2 * s + 1));
        }
        let endpoint_thread = services.s1mme.is_some() && n > 1;
        if endpoint_thread {
            push(Job::S1apEndpoint, None);
        }
        for (on, job) in [
            (services.s6a, Job::S6a),
            (services.gx, Job::Gx),
            (services.hss_preload, Job::HssPreload),
            (services.checkpoints, Job::Checkpointer),
            (services.cdr, Job::Cdr),
            (services.metrics.is_some(), Job::Metrics),
            (services.api.is_some(), Job::Api),
        ] {
            if on {
                push(job, None);
            }
        }

        let name = Job::thread_name;
        let mut rings = Vec::new();
        let (updates, requests) = slice_rings();
        let ring = |from: Job, to: Job, carries, capacity, unit| Ring {
            from: name(from),
            to: name(to),
            carries,
            capacity,
            unit,
            count: 1,
        };
        for s in 0..n {
            let (c, d) = (Job::Control(s), Job::Data(s));
            rings.push(ring(c, d, "control-plane updates", updates, "updates"));
            rings.push(ring(d, c, "requests (paging, usage)", requests, "requests"));
            if demux {
                let b = v.ring_batches;
                rings.push(ring(Job::Demux, d, "S1-U uplink", b, "batches"));
                rings.push(ring(Job::Demux, d, "SGi downlink", b, "batches"));
            }
            if endpoint_thread {
                let e = Job::S1apEndpoint;
                rings.push(ring(
                    e,
                    c,
                    "S1AP for its UEs",
                    services.s1ap_ring,
                    "messages",
                ));
                rings.push(ring(c, e, "S1AP answers", services.s1ap_ring, "messages"));
            }
        }
        if v.demux == DemuxMode::Queues && n > 1 {
            for carries in [
                "S1-U packets of another slice's UEs",
                "SGi packets of another slice's UEs",
            ] {
                rings.push(Ring {
                    from: "pepc-data-*".into(),
                    to: "pepc-data-*".into(),
                    carries,
                    capacity: v.ring_batches,
                    unit: "batches",
                    count: n * (n - 1),
                });
            }
        }
        if services.checkpoints {
            rings.push(Ring {
                from: "pepc-ctl-*".into(),
                to: name(Job::Checkpointer),
                carries: "UE checkpoints (beyond it, each UE's latest waits in its slice)",
                capacity: pepc_store::QUEUE,
                unit: "records, shared",
                count: n,
            });
        }
        if services.cdr {
            rings.push(Ring {
                from: "pepc-ctl-*".into(),
                to: name(Job::Cdr),
                carries: "usage records (beyond it, dropped and counted)",
                capacity: crate::charging::QUEUE,
                unit: "records, shared",
                count: n,
            });
        }

        let data_owner = match v.demux {
            DemuxMode::Thread => name(Job::Demux),
            DemuxMode::None => name(Job::Data(0)),
            DemuxMode::Queues => "pepc-data-* (a queue each)".into(),
        };
        let mut ports = vec![Port {
            key: "s1u.bind",
            addr: v.s1u_bind.to_string(),
            owner: data_owner.clone(),
        }];
        ports.push(Port {
            key: "sgi.mode",
            addr: match v.sgi_mode {
                SgiMode::Udp => format!("UDP {} -> {}", v.sink_local, v.sink_peer),
                SgiMode::Tun => format!("TUN {}", v.tun_name),
                SgiMode::Auto => format!(
                    "TUN {} if it can be had, else UDP {} -> {}",
                    v.tun_name, v.sink_local, v.sink_peer
                ),
            },
            owner: data_owner,
        });
        if let Some(a) = &services.s1mme {
            ports.push(Port {
                key: "s1mme",
                addr: a.clone(),
                owner: if endpoint_thread {
                    name(Job::S1apEndpoint)
                } else {
                    name(Job::Control(0))
                },
            });
        }
        for (key, addr, job) in [
            ("metrics.listen", &services.metrics, Job::Metrics),
            ("api.listen", &services.api, Job::Api),
        ] {
            if let Some(a) = addr {
                ports.push(Port {
                    key,
                    addr: a.clone(),
                    owner: name(job),
                });
            }
        }
        Plan {
            threads,
            rings,
            ports,
            pinned,
        }
    }

    /// The plan of a node without signaling or management (the data path and
    /// synthetic slices) on this machine's cores.
    pub fn node_only(v: &Validated) -> Plan {
        Plan::new(
            v,
            pepc_slice::slice::available_cores(),
            &Services::default(),
        )
    }

    /// The thread that does `job`, if the plan has one.
    pub fn thread(&self, job: Job) -> Option<&Thread> {
        self.threads.iter().find(|t| t.job == job)
    }

    /// The core `job`'s thread is pinned to.
    pub fn core(&self, job: Job) -> Option<usize> {
        self.thread(job).and_then(|t| t.core)
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "threads ({}):", self.threads.len())?;
        for t in &self.threads {
            let core = t.core.map_or_else(|| "-".to_string(), |c| c.to_string());
            writeln!(f, "  {:<16} core {:<3} {}", t.name, core, t.job.what())?;
        }
        writeln!(
            f,
            "rings ({}):",
            self.rings.iter().map(|r| r.count).sum::<usize>()
        )?;
        for r in &self.rings {
            let size = format!("{} {}", r.capacity, r.unit);
            let count = if r.count > 1 {
                format!(" (x{})", r.count)
            } else {
                String::new()
            };
            writeln!(
                f,
                "  {:<16} -> {:<16} {}, {size}{count}",
                r.from, r.to, r.carries
            )?;
        }
        writeln!(f, "ports ({}):", self.ports.len())?;
        for p in &self.ports {
            writeln!(f, "  {:<15} {} (owner {})", p.key, p.addr, p.owner)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::NodeConfig;

    fn validated(node: &str) -> Validated {
        let text = format!(
            "[node]\n{node}\n[s1u]\nbind = \"127.0.0.1:2152\"\n[sgi]\nmode = \"udp\"\nsink_local = \"127.0.0.1:5001\"\nsink_peer = \"127.0.0.1:5002\"\n"
        );
        NodeConfig::parse(&text).unwrap().validate().unwrap()
    }

    fn full() -> Services {
        Services {
            s1mme: Some("127.0.0.1:36412".into()),
            s1ap_ring: 16 * 1024,
            s6a: true,
            gx: false,
            hss_preload: true,
            checkpoints: true,
            cdr: false,
            metrics: Some("127.0.0.1:9090".into()),
            api: Some("127.0.0.1:8080".into()),
        }
    }

    #[test]
    fn thread_families_match_by_slice_number_only() {
        assert!(of_family("pepc-data-0", "pepc-data"));
        assert!(of_family("pepc-data-12", "pepc-data"));
        assert!(of_family("pepc-demux", "pepc-demux"));
        assert!(!of_family("pepc-data-", "pepc-data"));
        assert!(!of_family("pepc-data-x", "pepc-data"));
        assert!(!of_family("pepc-ctl-0", "pepc-data"));
        assert!(of_family(&Job::Control(3).thread_name(), "pepc-ctl"));
    }

    #[test]
    fn one_slice_runs_its_endpoint_inline_and_owns_the_ports() {
        let p = Plan::new(&validated("slices = 1\npin = true"), 8, &full());
        let names: Vec<&str> = p.threads.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "pepc-ctl-0",
                "pepc-data-0",
                "pepc-s6a",
                "pepc-hss-load",
                "pepc-checkpoint",
                "pepc-metrics",
                "pepc-api"
            ]
        );
        assert!(p.pinned);
        assert_eq!(p.core(Job::Control(0)), Some(0));
        assert_eq!(p.core(Job::Data(0)), Some(1));
        assert!(p.thread(Job::S1apEndpoint).is_none());
        let owner = |k: &str| p.ports.iter().find(|x| x.key == k).unwrap().owner.clone();
        assert_eq!(owner("s1mme"), "pepc-ctl-0");
        assert_eq!(owner("s1u.bind"), "pepc-data-0");
        // Control <-> data, both ways, and the checkpoints.
        assert_eq!(p.rings.len(), 3);
        assert!(p.threads.iter().all(|t| t.name.len() <= 15));
    }

    #[test]
    fn n_slices_get_a_demux_an_endpoint_and_a_ring_pair_each() {
        let p = Plan::new(
            &validated("slices = 3\npin = true\ndemux = \"thread\""),
            8,
            &full(),
        );
        assert_eq!(p.core(Job::Demux), Some(0));
        assert_eq!(p.core(Job::Control(2)), Some(5));
        assert_eq!(p.core(Job::Data(2)), Some(6));
        assert_eq!(p.core(Job::S1apEndpoint), None);
        assert!(p.thread(Job::S1apEndpoint).is_some());
        let between =
            |a: &str, b: &str| p.rings.iter().filter(|r| r.from == a && r.to == b).count();
        for s in 0..3 {
            let (c, d) = (format!("pepc-ctl-{s}"), format!("pepc-data-{s}"));
            assert_eq!(between("pepc-demux", &d), 2, "uplink and downlink");
            assert_eq!(between("pepc-s1ap", &c), 1);
            assert_eq!(between(&c, "pepc-s1ap"), 1);
            assert_eq!(between(&c, &d), 1);
            assert_eq!(between(&d, &c), 1);
        }
        let owner = |k: &str| p.ports.iter().find(|x| x.key == k).unwrap().owner.clone();
        assert_eq!(owner("s1mme"), "pepc-s1ap");
        assert_eq!(owner("s1u.bind"), "pepc-demux");
    }

    #[test]
    fn too_few_cores_leave_every_thread_to_the_kernel() {
        let p = Plan::new(
            &validated("slices = 2\npin = true\ndemux = \"thread\""),
            4,
            &full(),
        );
        assert!(!p.pinned, "5 threads to pin, 4 cores");
        assert!(p.threads.iter().all(|t| t.core.is_none()));
        let p = Plan::new(
            &validated("slices = 2\npin = false\ndemux = \"thread\""),
            64,
            &full(),
        );
        assert!(!p.pinned);
    }

    #[test]
    fn without_the_mme_there_is_no_s1mme_port_and_no_endpoint() {
        let p = Plan::new(
            &validated("slices = 2\ndemux = \"thread\""),
            8,
            &Services::default(),
        );
        assert!(p.ports.iter().all(|x| x.key != "s1mme"));
        assert!(p.thread(Job::S1apEndpoint).is_none());
        assert_eq!(p.threads.len(), 5);
        let text = p.to_string();
        assert!(text.contains("threads (5):"), "{text}");
        assert!(text.contains("pepc-demux"), "{text}");
    }
}
