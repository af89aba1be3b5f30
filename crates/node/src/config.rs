//! Node configuration (`pepc run --config FILE.toml`). Every key has a default, so an
//! empty file (or none) runs a node on loopback; errors name the key and what is wrong.
//!
//! The keys, their defaults and what each means: `crates/pepc/pepc.toml` (the
//! one source; `pepc config default` prints it, docs/configuration.md is made
//! from it).

use crate::io::afxdp::{XdpMode, XskConfig, ZeroCopy};
use pepc_slice::datapath::egress::{EgressConfig, EgressConfigError};
use pepc_slice::ids::LayoutError;
use serde::Deserialize;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;

/// What is wrong with a node configuration. Every message names the file or the key
/// (`config key `node.slices`: ...`), as operators and the tests read them.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("config {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Not TOML, an unknown key or a value of the wrong type (toml names the line).
    #[error("config: {0}")]
    Toml(#[from] toml::de::Error),
    /// A key's value is out of its range or not one of its choices.
    #[error("config key `{key}`: {reason}")]
    Invalid { key: String, reason: String },
    /// The UE pool (`node.ue_pool`, `node.slices`) or the PDN pools do not make a layout.
    #[error("config key `{key}`: {source}")]
    Layout {
        key: &'static str,
        #[source]
        source: LayoutError,
    },
}

/// `ConfigError::Invalid` for key `$key` (a format string: `"{sec}.queue"`), the reason
/// formatted from the rest.
macro_rules! invalid {
    ($key:literal, $($reason:tt)+) => {
        $crate::config::ConfigError::Invalid {
            key: format!($key),
            reason: format!($($reason)+),
        }
    };
}
pub(crate) use invalid;

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct NodeConfig {
    pub node: NodeSection,
    pub s1u: S1uSection,
    pub sgi: SgiSection,
    pub qos: QosSection,
    pub synthetic: SyntheticSection,
}

/// `[qos]`: the egress schedulers' classes (shared by both directions).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QosSection {
    pub queue_packets: usize,
    pub pool_packets: usize,
    pub weights: Vec<(u8, u32)>,
    pub operator_qcis: Vec<(u8, u8)>,
}

impl Default for QosSection {
    fn default() -> Self {
        let d = EgressConfig::default();
        QosSection {
            queue_packets: d.queue_packets,
            pool_packets: d.pool_packets,
            weights: d.weights,
            operator_qcis: d.operator_qcis,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NodeSection {
    pub slices: usize,
    pub ue_pool: String,
    pub pdn_pools: Vec<String>,
    pub max_users: usize,
    pub prewarm_users: usize,
    pub pin: bool,
    pub demux: String,
    pub ring_batches: usize,
}

impl Default for NodeSection {
    fn default() -> Self {
        NodeSection {
            slices: 1,
            ue_pool: "10.0.0.0/10".into(),
            pdn_pools: vec![],
            max_users: 1_000_000,
            prewarm_users: 0,
            pin: true,
            demux: "auto".into(),
            ring_batches: 64,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct S1uSection {
    pub bind: String,
    pub io: String,
    pub interface: String,
    pub queue: u32,
    pub xdp_mode: String,
    pub zero_copy: String,
    pub ring_size: u32,
    pub gro: bool,
    pub egress_mbps: u64,
}

impl Default for S1uSection {
    fn default() -> Self {
        S1uSection {
            bind: "127.0.0.1:2152".into(),
            io: "udp".into(),
            interface: String::new(),
            queue: 0,
            xdp_mode: "auto".into(),
            zero_copy: "auto".into(),
            ring_size: DEFAULT_RING_SIZE,
            gro: true,
            egress_mbps: 0,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SgiSection {
    pub mode: String,
    pub tun_name: String,
    pub sink_local: String,
    pub sink_peer: String,
    pub io: String,
    pub interface: String,
    pub queue: u32,
    pub xdp_mode: String,
    pub zero_copy: String,
    pub next_hop: String,
    pub ring_size: u32,
    pub tun_queue_len: u32,
    pub gro: bool,
    pub egress_mbps: u64,
}

impl Default for SgiSection {
    fn default() -> Self {
        SgiSection {
            mode: "auto".into(),
            tun_name: "pepc%d".into(),
            sink_local: "127.0.0.1:5202".into(),
            sink_peer: "127.0.0.1:5201".into(),
            io: "kernel".into(),
            interface: String::new(),
            queue: 0,
            xdp_mode: "auto".into(),
            zero_copy: "auto".into(),
            next_hop: String::new(),
            ring_size: DEFAULT_RING_SIZE,
            tun_queue_len: crate::io::tun::DEFAULT_QUEUE_LEN,
            gro: true,
            egress_mbps: 0,
        }
    }
}

/// An AF_XDP port's validated settings (`[s1u]`/`[sgi]` with `io = "afxdp"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdpPort {
    pub interface: String,
    pub queue: u32,
    pub xdp_mode: XdpMode,
    pub zero_copy: ZeroCopy,
    /// SGi: the PDN-side router (None: the interface's routes).
    pub next_hop: Option<Ipv4Addr>,
    /// Entries per ring; the socket has twice as many frames.
    pub ring_size: u32,
}

impl XdpPort {
    /// The socket's rings and frames.
    pub fn xsk(&self) -> XskConfig {
        XskConfig {
            frames: 2 * self.ring_size,
            ring_size: self.ring_size,
        }
    }
}

const DEFAULT_RING_SIZE: u32 = 4096;

fn xdp_port(
    sec: &str,
    interface: &str,
    queue: u32,
    (xdp_mode, zero_copy): (&str, &str),
    ring_size: u32,
) -> Result<XdpPort, ConfigError> {
    if !ring_size.is_power_of_two() || !(64..=32768).contains(&ring_size) {
        return Err(invalid!(
            "{sec}.ring_size",
            "must be a power of two in 64..=32768, got {ring_size}"
        ));
    }
    if interface.is_empty() {
        return Err(invalid!(
            "{sec}.interface",
            "io = \"afxdp\" needs the interface to bind to"
        ));
    }
    let xdp_mode = match xdp_mode {
        "auto" => XdpMode::Auto,
        "drv" => XdpMode::Drv,
        "skb" => XdpMode::Skb,
        m => {
            return Err(invalid!(
                "{sec}.xdp_mode",
                "{m:?} is not one of auto, drv, skb"
            ))
        }
    };
    let zero_copy = match zero_copy {
        "auto" => ZeroCopy::Auto,
        "on" => ZeroCopy::On,
        "off" => ZeroCopy::Off,
        m => {
            return Err(invalid!(
                "{sec}.zero_copy",
                "{m:?} is not one of auto, on, off"
            ))
        }
    };
    Ok(XdpPort {
        interface: interface.to_string(),
        queue,
        xdp_mode,
        zero_copy,
        next_hop: None,
        ring_size,
    })
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct SyntheticSection {
    pub users: u32,
    pub rate: u64,
}

/// The validated form.
#[derive(Debug, Clone)]
pub struct Validated {
    pub slices: usize,
    pub ue_pool: (Ipv4Addr, u8),
    /// Pools of PDN indexes 1.. (empty: the layout's defaults after `ue_pool`).
    pub pdn_pools: Vec<Ipv4Addr>,
    pub max_users: usize,
    /// Per slice, faulted in at start (see `node.prewarm_users`).
    pub prewarm_users: usize,
    pub pin: bool,
    /// Resolved from `node.demux` (never "auto").
    pub demux: DemuxMode,
    pub ring_batches: usize,
    pub s1u_bind: SocketAddrV4,
    /// `[s1u] gro` and `[sgi] gro` (the UDP sockets' receive).
    pub s1u_gro: bool,
    pub sgi_gro: bool,
    pub sgi_mode: SgiMode,
    pub tun_name: String,
    /// The TUN device's queue (`[sgi] tun_queue_len`).
    pub tun_queue_len: u32,
    pub sink_local: SocketAddrV4,
    pub sink_peer: SocketAddrV4,
    /// `[s1u] io = "afxdp"`.
    pub s1u_xdp: Option<XdpPort>,
    /// `[sgi] io = "afxdp"`.
    pub sgi_xdp: Option<XdpPort>,
    pub synthetic_users: u32,
    pub synthetic_rate: u64,
    /// The egress schedulers: toward SGi (uplink), toward S1-U (downlink).
    pub egress: [EgressConfig; 2],
}

/// How packets reach the slices' data threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DemuxMode {
    /// A demux thread owns the ports and feeds each slice over rings.
    Thread,
    /// The (single) slice's data thread owns the ports: no extra hop.
    None,
    /// AF_XDP: each slice's data thread receives and sends on its own queue of each
    /// port and hands other slices' packets on (see [`crate::queues`]).
    Queues,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SgiMode {
    Auto,
    Tun,
    Udp,
}

fn addr(key: &str, v: &str) -> Result<SocketAddrV4, ConfigError> {
    v.parse().map_err(|_| {
        invalid!(
            "{key}",
            "{v:?} is not an IPv4 socket address like 127.0.0.1:2152"
        )
    })
}

impl NodeConfig {
    /// Parse TOML text; errors carry the line and the offending key.
    pub fn parse(text: &str) -> Result<NodeConfig, ConfigError> {
        Ok(toml::from_str(text)?)
    }

    pub fn load(path: &std::path::Path) -> Result<NodeConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text)
    }

    pub fn validate(&self) -> Result<Validated, ConfigError> {
        let n = &self.node;
        if n.slices == 0 || n.slices > 64 {
            return Err(invalid!("node.slices", "must be 1..=64, got {}", n.slices));
        }
        let (ip, len) = n
            .ue_pool
            .split_once('/')
            .and_then(|(a, l)| Some((a.parse::<Ipv4Addr>().ok()?, l.parse::<u8>().ok()?)))
            .ok_or_else(|| {
                invalid!(
                    "node.ue_pool",
                    "{:?} is not a prefix like 10.0.0.0/8",
                    n.ue_pool
                )
            })?;
        let layout = pepc_slice::ids::IdLayout::new(n.slices, ip, len).map_err(|source| {
            ConfigError::Layout {
                key: "node.ue_pool",
                source,
            }
        })?;
        let mut pdn_pools = Vec::with_capacity(n.pdn_pools.len());
        for p in &n.pdn_pools {
            let (a, l) = p
                .split_once('/')
                .and_then(|(a, l)| Some((a.parse::<Ipv4Addr>().ok()?, l.parse::<u8>().ok()?)))
                .ok_or_else(|| {
                    invalid!("node.pdn_pools", "{p:?} is not a prefix like 10.64.0.0/10")
                })?;
            if l != len {
                return Err(invalid!(
                    "node.pdn_pools",
                    "{p} must have the prefix length of node.ue_pool (/{len})"
                ));
            }
            pdn_pools.push(a);
        }
        layout
            .with_pdn_pools(&pdn_pools)
            .map_err(|source| ConfigError::Layout {
                key: "node.pdn_pools",
                source,
            })?;
        if n.max_users == 0 {
            return Err(invalid!("node.max_users", "must be > 0"));
        }
        if n.prewarm_users > n.max_users {
            return Err(invalid!(
                "node.prewarm_users",
                "{} is more than node.max_users ({})",
                n.prewarm_users,
                n.max_users
            ));
        }
        if !(16..=65536).contains(&self.sgi.tun_queue_len) {
            return Err(invalid!(
                "sgi.tun_queue_len",
                "must be in 16..=65536, got {}",
                self.sgi.tun_queue_len
            ));
        }
        let sgi_mode = match self.sgi.mode.as_str() {
            "auto" => SgiMode::Auto,
            "tun" => SgiMode::Tun,
            "udp" => SgiMode::Udp,
            m => return Err(invalid!("sgi.mode", "{m:?} is not one of auto, tun, udp")),
        };
        let demux = match (n.demux.as_str(), n.slices) {
            ("auto", 1) | ("none", 1) => DemuxMode::None,
            // Settled below, once the ports' I/O is known.
            ("auto", _) => DemuxMode::Queues,
            ("thread", _) => DemuxMode::Thread,
            ("queues", _) => DemuxMode::Queues,
            ("none", k) => {
                return Err(invalid!(
                    "node.demux",
                    "\"none\" needs slices = 1 (got {k}); use \"thread\" or \"auto\""
                ))
            }
            (m, _) => {
                return Err(invalid!(
                    "node.demux",
                    "{m:?} is not one of auto, thread, none, queues"
                ))
            }
        };
        if n.ring_batches == 0 || n.ring_batches > 1 << 16 {
            return Err(invalid!(
                "node.ring_batches",
                "must be 1..=65536, got {}",
                n.ring_batches
            ));
        }
        let s1u_bind = addr("s1u.bind", &self.s1u.bind)?;
        let s1 = &self.s1u;
        let s1u_xdp = match s1.io.as_str() {
            "udp" => None,
            "afxdp" => {
                if s1u_bind.ip().is_unspecified() || s1u_bind.port() == 0 {
                    return Err(invalid!(
                        "s1u.bind",
                        "io = \"afxdp\" needs a concrete address and port (got {s1u_bind})"
                    ));
                }
                Some(xdp_port(
                    "s1u",
                    &s1.interface,
                    s1.queue,
                    (&s1.xdp_mode, &s1.zero_copy),
                    s1.ring_size,
                )?)
            }
            m => return Err(invalid!("s1u.io", "{m:?} is not one of udp, afxdp")),
        };
        let g = &self.sgi;
        let sgi_xdp = match g.io.as_str() {
            "kernel" => None,
            "afxdp" => {
                let mut p = xdp_port(
                    "sgi",
                    &g.interface,
                    g.queue,
                    (&g.xdp_mode, &g.zero_copy),
                    g.ring_size,
                )?;
                if !g.next_hop.is_empty() {
                    p.next_hop = Some(g.next_hop.parse().map_err(|_| {
                        invalid!("sgi.next_hop", "{:?} is not an IPv4 address", g.next_hop)
                    })?);
                }
                Some(p)
            }
            m => return Err(invalid!("sgi.io", "{m:?} is not one of kernel, afxdp")),
        };
        // Several slices on kernel sockets: a socket (TUN queue) each, which the kernel
        // steers by slice, so no thread carries every packet; AF_XDP takes the demux
        // thread unless asked for queues (those need queues of the NIC set up for us).
        let demux = match demux {
            DemuxMode::Queues if n.demux == "auto" && (s1u_xdp.is_some() || sgi_xdp.is_some()) => {
                DemuxMode::Thread
            }
            d => d,
        };
        Ok(Validated {
            slices: n.slices,
            ue_pool: (ip, len),
            pdn_pools,
            max_users: n.max_users,
            prewarm_users: n.prewarm_users,
            pin: n.pin,
            demux,
            ring_batches: n.ring_batches,
            s1u_bind,
            s1u_gro: self.s1u.gro,
            sgi_gro: self.sgi.gro,
            sgi_mode,
            tun_name: self.sgi.tun_name.clone(),
            tun_queue_len: self.sgi.tun_queue_len,
            sink_local: addr("sgi.sink_local", &self.sgi.sink_local)?,
            sink_peer: addr("sgi.sink_peer", &self.sgi.sink_peer)?,
            s1u_xdp,
            sgi_xdp,
            synthetic_users: self.synthetic.users,
            synthetic_rate: self.synthetic.rate,
            egress: self.egress()?,
        })
    }

    /// `[sgi] egress_mbps`, `[s1u] egress_mbps` and `[qos]`, checked.
    fn egress(&self) -> Result<[EgressConfig; 2], ConfigError> {
        let q = &self.qos;
        let base = EgressConfig {
            rate_mbps: 0,
            queue_packets: q.queue_packets,
            pool_packets: q.pool_packets,
            weights: q.weights.clone(),
            operator_qcis: q.operator_qcis.clone(),
        };
        base.check().map_err(|e| {
            let key = match e {
                EgressConfigError::NotWeighted(_) | EgressConfigError::ZeroWeight(_) => "weights",
                EgressConfigError::NotOperator(_) | EgressConfigError::NotStandard(_) => {
                    "operator_qcis"
                }
                EgressConfigError::NoQueue => "queue_packets",
            };
            invalid!("qos.{key}", "{e}")
        })?;
        if q.pool_packets < q.queue_packets {
            return Err(invalid!(
                "qos.pool_packets",
                "{} is less than queue_packets ({})",
                q.pool_packets,
                q.queue_packets
            ));
        }
        Ok(
            [self.sgi.egress_mbps, self.s1u.egress_mbps].map(|rate_mbps| EgressConfig {
                rate_mbps,
                ..base.clone()
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn egress_keys_reach_the_schedulers_and_errors_name_the_key() {
        let v = NodeConfig::parse(
            "[s1u]\negress_mbps = 100\n[sgi]\negress_mbps = 40\n[qos]\nqueue_packets = 64\nweights = [[7, 3], [9, 1]]\noperator_qcis = [[130, 5]]\n",
        )
        .unwrap()
        .validate()
        .unwrap();
        assert_eq!(v.egress[0].rate_mbps, 40);
        assert_eq!(v.egress[1].rate_mbps, 100);
        assert_eq!(v.egress[1].queue_packets, 64);
        assert_eq!(v.egress[1].weights, vec![(7, 3), (9, 1)]);
        assert_eq!(v.egress[0].operator_qcis, vec![(130, 5)]);
        for (text, key) in [
            ("[qos]\nweights = [[1, 2]]\n", "qos.weights"),
            ("[qos]\noperator_qcis = [[20, 9]]\n", "qos.operator_qcis"),
            ("[qos]\nqueue_packets = 0\n", "qos.queue_packets"),
            ("[qos]\npool_packets = 10\n", "qos.pool_packets"),
        ] {
            let e = NodeConfig::parse(text)
                .unwrap()
                .validate()
                .unwrap_err()
                .to_string();
            assert!(e.contains(key), "{text}: {e}");
        }
    }

    #[test]
    fn afxdp_ports_are_validated_and_errors_name_the_key() {
        let v = NodeConfig::parse("").unwrap().validate().unwrap();
        assert_eq!((v.s1u_xdp, v.sgi_xdp), (None, None));
        let v = NodeConfig::parse(
            "[s1u]\nbind = \"10.1.0.1:2152\"\nio = \"afxdp\"\ninterface = \"eth1\"\nqueue = 2\nxdp_mode = \"skb\"\n[sgi]\nio = \"afxdp\"\ninterface = \"eth2\"\nnext_hop = \"10.2.0.254\"\nzero_copy = \"off\"\nring_size = 16384\n",
        )
        .unwrap()
        .validate()
        .unwrap();
        let s = v.s1u_xdp.unwrap();
        assert_eq!(
            (s.interface.as_str(), s.queue, s.xdp_mode),
            ("eth1", 2, XdpMode::Skb)
        );
        assert_eq!(s.xsk().ring_size, 4096, "the default");
        let g = v.sgi_xdp.unwrap();
        assert_eq!(g.next_hop, Some(Ipv4Addr::new(10, 2, 0, 254)));
        assert_eq!(g.zero_copy, ZeroCopy::Off);
        assert_eq!((g.xsk().ring_size, g.xsk().frames), (16384, 32768));
        for (text, key) in [
            ("[s1u]\nio = \"dpdk\"\n", "s1u.io"),
            ("[s1u]\nio = \"afxdp\"\n", "s1u.interface"),
            (
                "[s1u]\nbind = \"0.0.0.0:2152\"\nio = \"afxdp\"\ninterface = \"e\"\n",
                "s1u.bind",
            ),
            (
                "[sgi]\nio = \"afxdp\"\ninterface = \"e\"\nxdp_mode = \"hw\"\n",
                "sgi.xdp_mode",
            ),
            (
                "[sgi]\nio = \"afxdp\"\ninterface = \"e\"\nnext_hop = \"x\"\n",
                "sgi.next_hop",
            ),
            (
                "[s1u]\nbind = \"10.1.0.1:2152\"\nio = \"afxdp\"\ninterface = \"e\"\nring_size = 1000\n",
                "s1u.ring_size",
            ),
            (
                "[sgi]\nio = \"afxdp\"\ninterface = \"e\"\nring_size = 65536\n",
                "sgi.ring_size",
            ),
        ] {
            let e = NodeConfig::parse(text).unwrap().validate().unwrap_err().to_string();
            assert!(e.contains(key), "{text}: {e}");
        }
    }

    #[test]
    fn the_tun_queue_length_is_validated() {
        let v = NodeConfig::parse("").unwrap().validate().unwrap();
        assert_eq!(v.tun_queue_len, 4096, "the default");
        let v = NodeConfig::parse("[sgi]\ntun_queue_len = 500\n")
            .unwrap()
            .validate()
            .unwrap();
        assert_eq!(v.tun_queue_len, 500);
        for bad in [0, 15, 65537] {
            let e = NodeConfig::parse(&format!("[sgi]\ntun_queue_len = {bad}\n"))
                .unwrap()
                .validate()
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("sgi.tun_queue_len") && e.contains(&bad.to_string()),
                "{e}"
            );
        }
    }

    #[test]
    fn pdn_pools_default_private_and_errors_name_the_key() {
        let v = NodeConfig::parse("").unwrap().validate().unwrap();
        let l = pepc_slice::ids::IdLayout::new(1, v.ue_pool.0, v.ue_pool.1).unwrap();
        for p in &l.pdn_pools[..l.pdn_count as usize] {
            assert!(p.is_private(), "default PDN pool {p} must be private");
        }
        let v = NodeConfig::parse("[node]\npdn_pools = [\"172.16.0.0/10\"]\n")
            .unwrap()
            .validate();
        assert!(v.unwrap_err().to_string().contains("node.pdn_pools"));
        let v = NodeConfig::parse("[node]\nue_pool = \"10.0.0.0/12\"\npdn_pools = [\"172.16.0.0/12\", \"192.168.0.0/12\"]\n")
            .unwrap()
            .validate();
        let e = v.unwrap_err().to_string();
        assert!(
            e.contains("node.pdn_pools") && e.contains("host bits"),
            "{e}"
        );
        let v = NodeConfig::parse(
            "[node]\nue_pool = \"10.0.0.0/12\"\npdn_pools = [\"172.16.0.0/12\"]\n",
        )
        .unwrap()
        .validate()
        .unwrap();
        assert_eq!(v.pdn_pools, vec![std::net::Ipv4Addr::new(172, 16, 0, 0)]);
    }

    #[test]
    fn prewarm_users_is_bounded_by_max_users() {
        let v = NodeConfig::parse("[node]\nmax_users = 1000\nprewarm_users = 1000\n")
            .unwrap()
            .validate()
            .unwrap();
        assert_eq!(v.prewarm_users, 1000);
        let e = NodeConfig::parse("[node]\nmax_users = 1000\nprewarm_users = 1001\n")
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("node.prewarm_users") && e.contains("1001"),
            "{e}"
        );
    }

    #[test]
    fn empty_config_is_valid_defaults() {
        let v = NodeConfig::parse("").unwrap().validate().unwrap();
        assert_eq!(v.slices, 1);
        assert_eq!(v.s1u_bind, "127.0.0.1:2152".parse().unwrap());
        assert_eq!(v.sgi_mode, SgiMode::Auto);
        assert_eq!(v.demux, DemuxMode::None);
        assert_eq!(v.ring_batches, 64);
        assert!(v.s1u_gro && v.sgi_gro);
    }

    #[test]
    fn udp_gro_can_be_turned_off_per_port() {
        let v = |t: &str| NodeConfig::parse(t).unwrap().validate().unwrap();
        let s = v("[s1u]\ngro = false\n");
        assert!(!s.s1u_gro && s.sgi_gro);
        let g = v("[sgi]\ngro = false\n");
        assert!(g.s1u_gro && !g.sgi_gro);
        assert!(NodeConfig::parse("[s1u]\ngro = \"no\"\n").is_err());
    }

    #[test]
    fn demux_mode_follows_slices_and_choice() {
        let v = |t: &str| NodeConfig::parse(t).unwrap().validate();
        // Several slices on kernel sockets: a socket each; on AF_XDP: the demux thread.
        assert_eq!(v("[node]\nslices = 3\n").unwrap().demux, DemuxMode::Queues);
        let x = v("[node]\nslices = 2\n[s1u]\nbind = \"10.0.0.1:2152\"\nio = \"afxdp\"\ninterface = \"eth0\"\n")
            .unwrap();
        assert_eq!(x.demux, DemuxMode::Thread);
        assert_eq!(
            v("[node]\ndemux = \"thread\"\n").unwrap().demux,
            DemuxMode::Thread
        );
        let e = v("[node]\nslices = 2\ndemux = \"none\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("node.demux") && e.contains("slices = 1"), "{e}");
        // Kernel sockets take queue mode too (a socket or TUN queue per slice).
        assert_eq!(
            v("[node]\nslices = 2\ndemux = \"queues\"\n").unwrap().demux,
            DemuxMode::Queues
        );
        let q = v("[node]\nslices = 2\ndemux = \"queues\"\n[s1u]\nbind = \"10.0.0.1:2152\"\nio = \"afxdp\"\ninterface = \"eth0\"\n[sgi]\nio = \"afxdp\"\ninterface = \"eth1\"\n")
            .unwrap();
        assert_eq!(q.demux, DemuxMode::Queues);
        let e = v("[node]\ndemux = \"maybe\"\n").unwrap_err().to_string();
        assert!(e.contains("node.demux"), "{e}");
        let e = v("[node]\nring_batches = 0\n").unwrap_err().to_string();
        assert!(e.contains("node.ring_batches"), "{e}");
    }

    #[test]
    fn errors_name_the_key() {
        let e = NodeConfig::parse("[node]\nslicez = 2\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("slicez"), "{e}");
        let e = NodeConfig::parse("[s1u]\nbind = \"nope\"\n")
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("s1u.bind"), "{e}");
        let e = NodeConfig::parse("[node]\nue_pool = \"10.0.0.1/8\"\n")
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("node.ue_pool") && e.contains("host bits"), "{e}");
        let e = NodeConfig::parse("[node]\nslices = \"two\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("slices"), "{e}");
        let e = NodeConfig::parse("[sgi]\nmode = \"tap\"\n")
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("sgi.mode"), "{e}");
    }
}
