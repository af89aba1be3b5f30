//! Restart without re-attach (issue 11): `kill -9` of `pepc run` and a restart with the
//! same files loses no registered UE. A small eNB here (userspace SCTP over UDP, real
//! S1AP, and the MME crate's scripted UE for NAS security) attaches UEs to the node,
//! leaves some idle and some connected, and the node is killed; the restarted node
//! serves every UE's Service Request with its old security context and bearers.

use pepc_mme::sim::{subscriber, SimUe};
use pepc_s1ap::msg::*;
use pepc_s1ap::{Cause, Ecgi, EnbId, GlobalEnbId, Plmn, STmsi, SupportedTa, Tai};
use pepc_sctp::transport::{S1Transport, TransportEvent, S1AP_PPID};
use pepc_sctp::UdpSctpTransport;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const UDP_PORT: u16 = 19911;
const UES: usize = 6;
const PLMN: Plmn = Plmn([0x00, 0xf1, 0x10]);

fn imsi(i: usize) -> String {
    format!("00101{:010}", 4200 + i)
}

struct Node(Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_node(config: &Path, log: &Path, seconds: Option<u32>) -> Node {
    let mut args = vec![
        "run".to_string(),
        "--config".into(),
        config.to_str().unwrap().into(),
    ];
    if let Some(s) = seconds {
        args.extend(["--seconds".into(), s.to_string()]);
    }
    let child = Command::new(env!("CARGO_BIN_EXE_pepc"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("spawn pepc run");
    Node(child)
}

/// One eNB on one association, answering the MME as a real one would.
struct Enb {
    t: UdpSctpTransport,
    assoc: u64,
    events: Vec<TransportEvent>,
}

impl Enb {
    /// Connect and set up (retrying while the node starts).
    fn up() -> Enb {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(e) = Self::try_up() {
                return e;
            }
            assert!(
                Instant::now() < deadline,
                "the node never answered S1 Setup"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn try_up() -> Option<Enb> {
        let remote: SocketAddr = ([127, 0, 0, 1], UDP_PORT).into();
        let t = UdpSctpTransport::connect(
            ([127, 0, 0, 1], 0).into(),
            remote,
            pepc_sctp::S1AP_SCTP_PORT,
            pepc_sctp::Config::default(),
        )
        .ok()?;
        let mut e = Enb {
            t,
            assoc: 0,
            events: vec![],
        };
        let until = Instant::now() + Duration::from_secs(2);
        while e.assoc == 0 && Instant::now() < until {
            e.t.poll(Duration::from_millis(50), &mut e.events).ok()?;
            for ev in e.events.drain(..) {
                if let TransportEvent::Up { assoc, .. } = ev {
                    e.assoc = assoc;
                }
            }
        }
        if e.assoc == 0 {
            return None;
        }
        e.send(
            S1SetupRequest {
                global_enb_id: GlobalEnbId {
                    plmn: PLMN,
                    enb_id: EnbId::Macro(7),
                },
                enb_name: Some("restart-test".into()),
                supported_tas: vec![SupportedTa {
                    tac: 1,
                    plmns: vec![PLMN],
                }],
                paging_drx: Some(128),
            }
            .into(),
        );
        match e.recv(Duration::from_secs(2)).first() {
            Some(S1apMessage::S1SetupResponse(_)) => Some(e),
            _ => None,
        }
    }

    fn send(&mut self, m: S1apMessage) {
        let stream = if matches!(m, S1apMessage::S1SetupRequest(_)) {
            0
        } else {
            1
        };
        self.t
            .send(self.assoc, stream, S1AP_PPID, &m.encode().unwrap())
            .unwrap();
        self.t.flush().unwrap();
    }

    /// What the MME sent within `wait` (returns as soon as something came and the
    /// line is quiet for a moment).
    fn recv(&mut self, wait: Duration) -> Vec<S1apMessage> {
        let until = Instant::now() + wait;
        let mut got = vec![];
        while Instant::now() < until {
            self.t
                .poll(Duration::from_millis(20), &mut self.events)
                .unwrap();
            let before = got.len();
            for ev in self.events.drain(..) {
                if let TransportEvent::Data { data, .. } = ev {
                    got.push(S1apMessage::decode(&data).expect("S1AP from the MME"));
                }
            }
            if !got.is_empty() && got.len() == before {
                break;
            }
        }
        got
    }

    /// Play `ue`'s side until the MME has nothing more to say; returns what it sent.
    fn pump(&mut self, ue: &mut SimUe, first: Vec<S1apMessage>) -> Vec<String> {
        let mut seen = vec![];
        let mut pending = first;
        let loc = (
            Tai { plmn: PLMN, tac: 1 },
            Ecgi {
                plmn: PLMN,
                cell_id: 0x701,
            },
        );
        while !pending.is_empty() {
            for m in std::mem::take(&mut pending) {
                seen.push(m.name().to_string());
                match m {
                    S1apMessage::DownlinkNasTransport(d) => {
                        ue.mme_ue_id = Some(d.mme_ue_id);
                        if let Some(r) = ue.on_downlink(&d.nas_pdu).unwrap().reply {
                            self.send(
                                UplinkNasTransport {
                                    mme_ue_id: d.mme_ue_id,
                                    enb_ue_id: ue.enb_ue_id,
                                    nas_pdu: r,
                                    tai: loc.0,
                                    ecgi: loc.1,
                                }
                                .into(),
                            );
                        }
                    }
                    S1apMessage::InitialContextSetupRequest(r) => {
                        ue.mme_ue_id = Some(r.mme_ue_id);
                        let reply = r
                            .erabs
                            .first()
                            .and_then(|e| e.nas_pdu.clone())
                            .and_then(|nas| ue.on_downlink(&nas).unwrap().reply);
                        let erabs = r
                            .erabs
                            .iter()
                            .map(|e| pepc_s1ap::ERabTunnel {
                                id: e.id,
                                transport: "127.0.42.9".parse().unwrap(),
                                teid: 0x1000 + ue.enb_ue_id,
                            })
                            .collect();
                        self.send(
                            InitialContextSetupResponse {
                                mme_ue_id: r.mme_ue_id,
                                enb_ue_id: ue.enb_ue_id,
                                erabs,
                                failed: vec![],
                            }
                            .into(),
                        );
                        if let Some(b) = reply {
                            self.send(
                                UplinkNasTransport {
                                    mme_ue_id: r.mme_ue_id,
                                    enb_ue_id: ue.enb_ue_id,
                                    nas_pdu: b,
                                    tai: loc.0,
                                    ecgi: loc.1,
                                }
                                .into(),
                            );
                        }
                    }
                    S1apMessage::UeContextReleaseCommand(c) => {
                        if let pepc_s1ap::UeS1apIds::Pair {
                            mme_ue_id,
                            enb_ue_id,
                        } = c.ids
                        {
                            self.send(
                                UeContextReleaseComplete {
                                    mme_ue_id,
                                    enb_ue_id,
                                }
                                .into(),
                            );
                        }
                    }
                    _ => {}
                }
            }
            pending = self.recv(Duration::from_millis(500));
        }
        seen
    }

    fn initial(&mut self, ue: &SimUe, nas: Vec<u8>, s_tmsi: Option<u32>) -> Vec<S1apMessage> {
        self.send(
            InitialUeMessage {
                enb_ue_id: ue.enb_ue_id,
                nas_pdu: nas,
                tai: Tai { plmn: PLMN, tac: 1 },
                ecgi: Ecgi {
                    plmn: PLMN,
                    cell_id: 0x701,
                },
                rrc_cause: 3,
                s_tmsi: s_tmsi.map(|m_tmsi| STmsi { mmec: 1, m_tmsi }),
                gummei: None,
            }
            .into(),
        );
        self.recv(Duration::from_secs(3))
    }
}

fn wait_exit(n: &mut Node, within: Duration) -> std::process::ExitStatus {
    let until = Instant::now() + within;
    loop {
        if let Some(s) = n.0.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < until, "pepc run did not stop");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn kill_9_and_restart_loses_no_registered_ue() {
    let dir = std::env::temp_dir().join(format!("pepc-restart-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("hss.redb");
    {
        let hss = pepc_hss::Hss::open(&db).unwrap();
        for i in 0..UES {
            hss.add(&subscriber(&imsi(i))).unwrap();
        }
    }
    let config = dir.join("node.toml");
    std::fs::write(
        &config,
        format!(
            "[node]\nslices = 2\n[s1u]\nbind = \"127.0.42.1:2152\"\n[sgi]\nmode = \"udp\"\nsink_local = \"127.0.0.1:15212\"\nsink_peer = \"127.0.0.1:15211\"\n\
             [s1mme]\ntransport = \"udp\"\nudp_port = {UDP_PORT}\n[hss]\ndb = \"{}\"\n",
            db.display()
        ),
    )
    .unwrap();

    // First life: every UE attaches; the even ones go idle, the odd stay connected.
    let mut node = start_node(&config, &dir.join("first.log"), None);
    let mut enb = Enb::up();
    let mut ues: Vec<SimUe> = (0..UES)
        .map(|i| SimUe::new(&imsi(i), 10 + i as u32))
        .collect();
    for ue in ues.iter_mut() {
        let first = enb.initial(ue, ue.attach_request(None, false), None);
        let seen = enb.pump(ue, first);
        assert!(
            ue.received.iter().any(|r| r == "AttachAccept"),
            "attach: {seen:?} {:?}",
            ue.received
        );
    }
    for ue in ues.iter_mut().step_by(2) {
        enb.send(
            UeContextReleaseRequest {
                mme_ue_id: ue.mme_ue_id.unwrap(),
                enb_ue_id: ue.enb_ue_id,
                cause: Cause::USER_INACTIVITY,
            }
            .into(),
        );
        let r = enb.recv(Duration::from_secs(3));
        enb.pump(ue, r);
    }
    // Checkpoints are durable within ~10 ms of each procedure's end.
    std::thread::sleep(Duration::from_millis(300));
    node.0.kill().unwrap(); // SIGKILL: no shutdown, nothing flushed on the way out
    node.0.wait().unwrap();
    drop(enb);

    // Second life, same files: the eNB sets up again and every UE comes back by
    // Service Request with the security context it has.
    let mut node = start_node(&config, &dir.join("second.log"), None);
    let mut enb = Enb::up();
    for (i, ue) in ues.iter_mut().enumerate() {
        ue.enb_ue_id = 100 + i as u32;
        let sr = ue.service_request();
        let t = ue.m_tmsi;
        let first = enb.initial(ue, sr, t);
        let seen = enb.pump(ue, first);
        assert_eq!(
            seen.first().map(String::as_str),
            Some("InitialContextSetupRequest"),
            "UE {i} after the restart: {seen:?}"
        );
        assert!(
            !ue.received.iter().any(|r| r.contains("Reject")),
            "{:?}",
            ue.received
        );
    }
    // SIGTERM: a graceful stop, checkpoints committed and figures printed, and the
    // association shut down (the eNB learns at once).
    // SAFETY: a signal to our own child.
    unsafe {
        libc::kill(node.0.id() as i32, libc::SIGTERM);
    }
    let until = Instant::now() + Duration::from_secs(10);
    let mut down = false;
    while !down && Instant::now() < until {
        enb.t
            .poll(Duration::from_millis(50), &mut enb.events)
            .unwrap();
        down = enb
            .events
            .drain(..)
            .any(|e| matches!(e, TransportEvent::Down { .. }));
    }
    assert!(down, "the node shut the association down at SIGTERM");
    drop(enb);
    let status = wait_exit(&mut node, Duration::from_secs(30));
    assert!(status.success());
    let log = std::fs::read_to_string(dir.join("second.log")).unwrap();
    assert!(
        log.contains(&format!("{UES} of {UES} found at start restored, 0 failed")),
        "{log}"
    );
    assert!(log.contains("stopping (signal)"), "{log}");
    // The MME's counters beside the data path's: no attach in the second life.
    assert!(log.contains("mme slice 0: 0 attaches"), "{log}");
    assert!(log.contains("mme slice 1: 0 attaches"), "{log}");
    for ue in &ues {
        let attaches = ue.received.iter().filter(|r| *r == "AttachAccept").count();
        assert_eq!(attaches, 1, "no re-attach: {:?}", ue.received);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
