//! A running node: its slices' threads and their ports, built from a [`Validated`]
//! configuration.

use crate::config::{SgiMode, Validated};
use crate::demux::Demux;
use crate::io::{open_sgi, PacketIo, SgiConfig, UdpPort, UdpSinkPort};
use crate::runtime::{spawn_slice, ControlDriver, SliceThreads, SyntheticDriver};
use pepc_slice::ids::IdLayout;
use pepc_slice::slice::{available_cores, build, SliceConfig};
use pepc_slice::synthetic::{Synthetic, SyntheticConfig};
use std::net::{Ipv4Addr, SocketAddrV4};

pub struct Node {
    pub demux: Demux,
    pub slices: Vec<SliceThreads>,
    pub s1u_addr: SocketAddrV4,
    pub sgi_desc: String,
    pub sgi_local: Option<SocketAddrV4>,
}

impl Node {
    /// Start the node. With one slice its data thread owns the S1-U and SGi ports;
    /// more slices per process need the demux thread (not yet: rejected here).
    pub fn start(
        v: &Validated,
        make_driver: &mut dyn FnMut(usize) -> Option<Box<dyn ControlDriver>>,
    ) -> Result<Node, String> {
        if v.slices != 1 {
            return Err("config key `node.slices`: this build runs one slice per process (the multi-slice packet demux thread is not implemented yet)".into());
        }
        let layout = IdLayout::new(v.slices, v.ue_pool.0, v.ue_pool.1)?;
        let s1u = UdpPort::bind(v.s1u_bind).map_err(|e| format!("s1u.bind {}: {e}", v.s1u_bind))?;
        let s1u_addr = s1u.local_addr();
        let host_bits = 32 - v.ue_pool.1 as u32;
        let tun_addr = Ipv4Addr::from(u32::from(v.ue_pool.0) + (1u32 << host_bits) - 2);
        let (sgi, sgi_desc, sgi_local): (Box<dyn PacketIo>, String, Option<SocketAddrV4>) =
            match v.sgi_mode {
                SgiMode::Udp => {
                    let p = UdpSinkPort::bind(v.sink_local, v.sink_peer)
                        .map_err(|e| format!("sgi.sink_local {}: {e}", v.sink_local))?;
                    let local = Some(p.local_addr());
                    (
                        Box::new(p),
                        format!("UDP sink {} -> {}", v.sink_local, v.sink_peer),
                        local,
                    )
                }
                mode => {
                    let cfg = SgiConfig {
                        use_tun: true,
                        tun_name: v.tun_name.clone(),
                        tun_addr,
                        tun_prefix_len: v.ue_pool.1,
                        sink_local: v.sink_local,
                        sink_peer: v.sink_peer,
                    };
                    let p = open_sgi(&cfg).map_err(|e| format!("sgi: {e}"))?;
                    if mode == SgiMode::Tun && p.backend() != crate::io::SgiBackend::Tun {
                        return Err(format!("config key `sgi.mode` = \"tun\": {}", p.describe()));
                    }
                    let desc = p.describe();
                    let local = match &p {
                        crate::io::SgiPort::UdpSink { port, .. } => Some(port.local_addr()),
                        _ => None,
                    };
                    (Box::new(p), desc, local)
                }
            };
        let cores = available_cores();
        let mut cfg = SliceConfig::for_users(v.max_users);
        cfg.layout = layout;
        cfg.s1u_addr = *s1u_addr.ip();
        let (mut cp, dp) = build(&cfg);
        let driver: Box<dyn ControlDriver> = match make_driver(0) {
            Some(d) => d,
            None => {
                let mut syn =
                    Synthetic::new(SyntheticConfig::new(v.synthetic_users, v.synthetic_rate));
                // Updates beyond the ring wait in the control plane's backlog and are
                // flushed by the control thread once the data thread runs.
                syn.setup(&mut cp, |_| {}).map_err(|e| e.to_string())?;
                Box::new(SyntheticDriver::new(syn))
            }
        };
        let (cc, dc) = if v.pin && cores >= 2 {
            (Some(0), Some(1))
        } else {
            (None, None)
        };
        let t =
            spawn_slice(cp, dp, Box::new(s1u), sgi, driver, cc, dc).map_err(|e| e.to_string())?;
        Ok(Node {
            demux: Demux::new(layout, 1, Vec::new()),
            slices: vec![t],
            s1u_addr,
            sgi_desc,
            sgi_local,
        })
    }
}
