//! Driver bounds: with no EPC listening, `run` gives up after the timeout with a
//! Setup error instead of hanging.

use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

use pepc_emulator::{run, EmuError, EmulatorConfig, Scenario};

#[test]
fn no_epc_is_a_bounded_setup_error() {
    // A bound UDP port nobody answers on plays the silent MME.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let cfg = EmulatorConfig {
        mme_udp_port: silent.local_addr().unwrap().port(),
        gtpu_addr: "127.0.0.1:0".parse::<SocketAddrV4>().unwrap(),
        pdn_addr: "127.0.0.1:0".parse::<SocketAddr>().unwrap(),
        enbs: 2,
        ..Default::default()
    };
    let scen = Scenario {
        ues: 3,
        timeout_s: 0.3,
        ..Default::default()
    };
    let t = Instant::now();
    let r = run(cfg, scen);
    assert!(matches!(r, Err(EmuError::Setup(_))), "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(3));
}
