//! A real Diameter agent between us and the test HSS: freeDiameterd (Debian's
//! `freediameter`) as a relay. Our CER/CEA and DWR/DWA with it, and S6a requests
//! routed by Destination-Realm through it to the HSS and back; a realm it cannot
//! route to comes back as DIAMETER_UNABLE_TO_DELIVER.

mod common;

use common::{free_port, temp_dir, TestHss};
use pepc_diameter::base;
use pepc_diameter::driver::{DriverConfig, S6aDriver};
use pepc_diameter::s6a::S6aConfig;
use pepc_seams::hss::HssData;
use pepc_seams::{HssAnswer, HssFailure, HssRef, HssRequest};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PLMN: [u8; 3] = [0x00, 0xf1, 0x10];

struct Fd(Child);
impl Drop for Fd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// freeDiameterd relaying realm "test" to the server (`server`.test, the HSS or
/// PCRF) on `server_port` and back to our `client` identity, listening on `port`;
/// its TLS credentials (mandatory in its configuration even when every peer is
/// No_TLS) are a throwaway self-signed pair.
fn start_fd(
    dir: &Path,
    port: u16,
    server: &str,
    server_port: u16,
    client: &str,
) -> Result<Fd, String> {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let st = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=relay.fd.test", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("openssl not runnable: {e}"))?;
    if !st.success() {
        return Err("openssl could not make a certificate".into());
    }
    let conf = dir.join("fd.conf");
    std::fs::write(
        &conf,
        format!(
            r#"Identity = "relay.fd.test";
Realm = "fd.test";
Port = {port};
SecPort = {sec};
No_SCTP;
No_IPv6;
ListenOn = "127.0.0.1";
TcTimer = 1;
TLS_Cred = "{cert}", "{key}";
TLS_CA = "{cert}";
ConnectPeer = "{server}.test" {{ ConnectTo = "127.0.0.1"; Port = {server_port}; No_TLS; }};
ConnectPeer = "{client}" {{ ConnectTo = "127.0.0.1"; Port = {unused}; No_TLS; }};
"#,
            sec = free_port(),
            unused = free_port(),
            cert = cert.display(),
            key = key.display(),
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("fd.out")).unwrap();
    let child = Command::new("freeDiameterd")
        .arg("-c")
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("freeDiameterd not runnable: {e}"))?;
    Ok(Fd(child))
}

fn answers(d: &mut S6aDriver, n: usize) -> Vec<HssAnswer> {
    let t0 = Instant::now();
    let mut got = vec![];
    while got.len() < n {
        assert!(t0.elapsed() < Duration::from_secs(10), "{got:?}");
        std::thread::sleep(Duration::from_millis(10));
        d.poll(&mut got);
    }
    got.sort_by_key(|a| a.r.seq);
    got
}

fn have_fd() -> bool {
    let ok = Command::new("freeDiameterd")
        .arg("--version")
        .output()
        .is_ok();
    if !ok {
        eprintln!("SKIP: freeDiameterd not installed (scripts/test.sh installs freediameter)");
    }
    ok
}

#[test]
fn s6a_through_a_freediameter_relay_by_realm() {
    need_pycrate!();
    if !have_fd() {
        return;
    }
    let dir = temp_dir("freediameter");
    let hss = TestHss::start(&dir.0, "hss", free_port(), "normal", "");
    let fd_port = free_port();
    let fd = match start_fd(&dir.0, fd_port, "hss", hss.port, "mme.pepc.test") {
        Ok(fd) => fd,
        Err(why) => {
            eprintln!("SKIP: {why}");
            return;
        }
    };
    // freeDiameterd connects to the HSS on its own (its CER logged by the HSS).
    hss.wait_log("the relay's CER", |v| v["cmd"] == 257);
    let mut b = base::Config::new("mme.pepc.test", "pepc.test");
    b.watchdog = Duration::from_millis(300);
    b.request_timeout = Duration::from_secs(3);
    let mut cfg = DriverConfig {
        peers: vec![format!("127.0.0.1:{fd_port}")],
        base: b,
        app: S6aConfig {
            destination_realm: "test".into(),
            destination_host: None,
            visited_plmn: PLMN,
        },
        connect_timeout: Duration::from_millis(500),
    };
    let mut d = S6aDriver::start(cfg.clone()).unwrap();
    let t0 = Instant::now();
    while !d.is_up() {
        let out = std::fs::read_to_string(dir.0.join("fd.out")).unwrap_or_default();
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "CER/CEA with freeDiameterd failed: {out}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = |seq| HssRef { mme_ue_id: 3, seq };
    let imsi = 1010000000001;
    d.submit(HssRequest::Vector {
        r: r(1),
        imsi,
        plmn: PLMN,
    });
    d.submit(HssRequest::Profile { r: r(2), imsi });
    d.submit(HssRequest::Vector {
        r: r(3),
        imsi: 999990000000001,
        plmn: PLMN,
    });
    let got = answers(&mut d, 3);
    assert!(matches!(got[0].result, Ok(HssData::Vector(_))), "{got:?}");
    assert!(
        matches!(&got[1].result, Ok(HssData::Profile(p)) if p.apn == "internet"),
        "{got:?}"
    );
    assert_eq!(
        got[2].result.as_ref().err(),
        Some(&HssFailure::UnknownSubscriber)
    );
    // The HSS saw our requests (our Session-Id) arrive through the relay.
    let relayed: Vec<_> = hss
        .log()
        .into_iter()
        .filter(|v| v["event"] == "request" && v["cmd"] == 318)
        .collect();
    assert_eq!(relayed.len(), 2);
    assert!(relayed
        .iter()
        .all(|v| v["session"].as_str().unwrap().starts_with("mme.pepc.test;")));
    // Watchdogs with freeDiameterd: several Tw and still up.
    std::thread::sleep(Duration::from_millis(1200));
    assert!(d.is_up());
    assert!(d.stats().watchdogs_sent >= 3, "{:?}", d.stats());
    drop(d);

    // A realm the relay has no route to.
    cfg.app.destination_realm = "nowhere".into();
    let mut d = S6aDriver::start(cfg).unwrap();
    let t0 = Instant::now();
    while !d.is_up() {
        assert!(t0.elapsed() < Duration::from_secs(15));
        std::thread::sleep(Duration::from_millis(20));
    }
    d.submit(HssRequest::Vector {
        r: r(4),
        imsi,
        plmn: PLMN,
    });
    let got = answers(&mut d, 1);
    assert!(
        matches!(&got[0].result, Err(HssFailure::Unavailable(w)) if w.contains("3002")),
        "{got:?}"
    );
    drop(d);
    drop(fd);
}

/// Gx through the relay both ways: our CCR-I/CCR-T routed by realm to the test PCRF,
/// and its RAR routed back to us by Destination-Host.
#[test]
fn gx_through_a_freediameter_relay_with_a_rar_back() {
    use pepc_diameter::driver::GxDriver;
    use pepc_diameter::gx::{GxConfig, GxEvent};
    use pepc_seams::pcrf::{PcrfRequest, PolicySession, SessionQos};
    need_pycrate!();
    if !have_fd() {
        return;
    }
    let dir = temp_dir("freediameter-gx");
    let mut pcrf = TestHss::start_pcrf(&dir.0, "pcrf", free_port(), "normal");
    let fd_port = free_port();
    let _fd = match start_fd(&dir.0, fd_port, "pcrf", pcrf.port, "pgw.pepc.test") {
        Ok(fd) => fd,
        Err(why) => {
            eprintln!("SKIP: {why}");
            return;
        }
    };
    pcrf.wait_log("the relay's CER", |v| v["cmd"] == 257);
    let mut b = base::Config::new("pgw.pepc.test", "pepc.test");
    b.applications = vec![pepc_diameter::dict::app::GX];
    b.request_timeout = Duration::from_secs(3);
    let mut d = GxDriver::start(DriverConfig {
        peers: vec![format!("127.0.0.1:{fd_port}")],
        base: b,
        app: GxConfig {
            destination_realm: "test".into(),
            ..GxConfig::default()
        },
        connect_timeout: Duration::from_millis(500),
    })
    .unwrap();
    let t0 = Instant::now();
    while !d.is_up() {
        let out = std::fs::read_to_string(dir.0.join("fd.out")).unwrap_or_default();
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "CER/CEA with freeDiameterd failed: {out}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let session = PolicySession {
        imsi: 1010000000001,
        apn: "internet".into(),
        ebi: 5,
        ue_ip: "10.45.0.2".parse().unwrap(),
    };
    d.submit(PcrfRequest::Establish {
        r: HssRef {
            mme_ue_id: 3,
            seq: 1,
        },
        session: session.clone(),
        subscribed: SessionQos {
            qci: 9,
            arp_priority: 8,
            ambr_ul: 1000,
            ambr_dl: 2000,
        },
    });
    let t0 = Instant::now();
    let a = loop {
        let mut a = vec![];
        d.poll(&mut a);
        if let Some(a) = a.pop() {
            break a;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no CCA-I");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(a.result.unwrap().install[0].name, "video");
    pcrf.command("rar-install 001010000000001 voice 4002");
    let t0 = Instant::now();
    loop {
        let mut e = vec![];
        d.poll_events(&mut e);
        if e.iter().any(|e| {
            matches!(e, GxEvent::PolicyUpdate { decision, .. } if decision.install[0].name == "voice")
        }) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no RAR through the relay"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Our RAA went back through the relay to the PCRF.
    pcrf.wait_log("the RAA", |v| {
        v["event"] == "answer" && v["cmd"] == 258 && v["result"] == 2001
    });
    d.submit(PcrfRequest::Terminate {
        session,
        usage: vec![],
    });
    pcrf.wait_log("the CCR-T", |v| v["cc_type"] == 3);
}
