//! A node for an end-to-end test on its own loopback addresses (127.0.n.1 the node,
//! 127.0.n.2 the eNBs) and the emulator pointed at it.

use pepc::demo::emulator_subscribers;
use pepc::epc::{open_hss, Epc, EpcConfig};
use pepc_emulator::config::SubscriberKeys;
use pepc_emulator::EmulatorConfig;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

/// Two slices, in-memory HSS with the emulator's first `subscribers`, metrics and API
/// off unless `extra` has them (a taken port refuses the start); `extra` TOML
/// sections after those.
pub fn node(n: u8, subscribers: u32, extra: &str) -> Epc {
    node_with_s1u(n, subscribers, "", extra)
}

/// [`node`] with more `[s1u]` keys (`s1u`: lines of that table).
pub fn node_with_s1u(n: u8, subscribers: u32, s1u: &str, extra: &str) -> Epc {
    let mut extra = extra.to_string();
    for s in ["[metrics]", "[api]"] {
        if !extra.contains(s) {
            extra += &format!("{s}\nlisten = \"\"\n");
        }
    }
    let cfg = EpcConfig::parse(&format!(
        "[node]\nmax_users = 1024\nslices = 2\n\
         [s1u]\nbind = \"127.0.{n}.1:2152\"\n{s1u}\n\
         [sgi]\nmode = \"udp\"\nsink_local = \"127.0.{n}.1:5202\"\nsink_peer = \"127.0.{n}.2:5201\"\n\
         [s1mme]\ntransport = \"udp\"\nbind = \"127.0.{n}.1\"\n\
         [hss]\ndb = \":memory:\"\n{extra}"
    ))
    .expect("node config");
    let hss = open_hss(&cfg.hss).expect("HSS");
    if subscribers > 0 {
        hss.add_many(&emulator_subscribers(&SubscriberKeys::default(), subscribers).unwrap())
            .expect("provision");
    }
    Epc::start(&cfg, hss).expect("node start")
}

/// The emulator's configuration for [`node`] `n`.
pub fn emulator(n: u8, enbs: u32) -> EmulatorConfig {
    let node_ip = Ipv4Addr::new(127, 0, n, 1);
    let enb_ip = Ipv4Addr::new(127, 0, n, 2);
    EmulatorConfig {
        mme_ip: node_ip.into(),
        local_ip: enb_ip.into(),
        gtpu_addr: SocketAddrV4::new(enb_ip, 2152),
        pdn_addr: SocketAddr::from((enb_ip, 5201)),
        sgi_peer: Some(SocketAddr::from((node_ip, 5202))),
        enbs,
        ..EmulatorConfig::default()
    }
}

/// `ues` UEs of `ecfg` attach, without traffic, and stay attached: the run's report.
#[allow(dead_code)] // not every test binary that has `common` uses it
pub fn attach_and_stay(ecfg: EmulatorConfig, ues: u32) -> pepc_emulator::Report {
    let scen = pepc_emulator::Scenario {
        ues,
        traffic: pepc_emulator::config::Traffic {
            profile: pepc_emulator::config::TrafficProfile::None,
            rate_pps: 0.0,
        },
        detach_at_end: false,
        ..pepc_emulator::Scenario::default()
    };
    pepc_emulator::run(ecfg, scen).unwrap()
}
