//! A small eNB for end-to-end tests: userspace SCTP over UDP, real S1AP, and the MME
//! crate's scripted UE (`SimUe`) for NAS and its security.

use crate::SimUe;
use pepc_s1ap::msg::*;
use pepc_s1ap::{Ecgi, EnbId, GlobalEnbId, Plmn, STmsi, SupportedTa, Tai};
use pepc_sctp::transport::{S1Transport, TransportEvent, S1AP_PPID};
use pepc_sctp::UdpSctpTransport;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

pub const PLMN: Plmn = Plmn([0x00, 0xf1, 0x10]);

/// One eNB on one association, answering the MME as a real one would.
pub struct Enb {
    pub t: UdpSctpTransport,
    pub assoc: u64,
    pub events: Vec<TransportEvent>,
    /// Its S1-U address in the tunnels it gives (GTP-U comes there, port 2152).
    pub s1u: std::net::Ipv4Addr,
}

/// The eNB's downlink TEID of a UE's bearer in these tests.
pub fn enb_teid(enb_ue_id: u32, ebi: u8) -> u32 {
    0x2000_0000 | (enb_ue_id << 4) | u32::from(ebi)
}

impl Enb {
    /// Connect to the MME at `remote` (UDP encapsulation) and set up, retrying while
    /// the node starts.
    pub fn up(remote: SocketAddr) -> Enb {
        Self::up_from(remote, ([127, 0, 0, 1], 0).into())
    }

    /// [`Enb::up`] from local UDP address `local` (port 0: any).
    pub fn up_from(remote: SocketAddr, local: SocketAddr) -> Enb {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(e) = Self::try_up(remote, local) {
                return e;
            }
            assert!(
                Instant::now() < deadline,
                "the node never answered S1 Setup"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn try_up(remote: SocketAddr, local: SocketAddr) -> Option<Enb> {
        let t = UdpSctpTransport::connect(
            local,
            remote,
            pepc_sctp::S1AP_SCTP_PORT,
            pepc_sctp::Config::default(),
        )
        .ok()?;
        let mut e = Enb {
            t,
            assoc: 0,
            events: vec![],
            s1u: "127.0.42.9".parse().unwrap(),
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

    pub fn send(&mut self, m: S1apMessage) {
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
    pub fn recv(&mut self, wait: Duration) -> Vec<S1apMessage> {
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
    pub fn pump(&mut self, ue: &mut SimUe, first: Vec<S1apMessage>) -> Vec<String> {
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
                                transport: self.s1u,
                                teid: if e.id == 5 {
                                    0x1000 + ue.enb_ue_id
                                } else {
                                    enb_teid(ue.enb_ue_id, e.id)
                                },
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
                    // E-RAB management (dedicated bearers): the UE answers the NAS,
                    // the eNB the S1AP.
                    S1apMessage::ERabSetupRequest(r) => {
                        let nas = r.erabs.first().and_then(|e| e.nas_pdu.clone());
                        let reply = nas.and_then(|n| ue.on_downlink(&n).unwrap().reply);
                        let setup = r
                            .erabs
                            .iter()
                            .map(|e| pepc_s1ap::ERabTunnel {
                                id: e.id,
                                transport: self.s1u,
                                teid: enb_teid(ue.enb_ue_id, e.id),
                            })
                            .collect();
                        self.send(
                            ERabSetupResponse {
                                mme_ue_id: r.mme_ue_id,
                                enb_ue_id: ue.enb_ue_id,
                                setup,
                                failed: vec![],
                            }
                            .into(),
                        );
                        self.nas_reply(r.mme_ue_id, ue, reply, loc);
                    }
                    S1apMessage::ERabModifyRequest(r) => {
                        let reply = r
                            .erabs
                            .first()
                            .and_then(|e| ue.on_downlink(&e.nas_pdu).unwrap().reply);
                        self.send(
                            ERabModifyResponse {
                                mme_ue_id: r.mme_ue_id,
                                enb_ue_id: ue.enb_ue_id,
                                modified: r.erabs.iter().map(|e| e.id).collect(),
                                failed: vec![],
                            }
                            .into(),
                        );
                        self.nas_reply(r.mme_ue_id, ue, reply, loc);
                    }
                    S1apMessage::ERabReleaseCommand(r) => {
                        let nas = r.nas_pdu.clone();
                        let reply = nas.and_then(|n| ue.on_downlink(&n).unwrap().reply);
                        self.send(
                            ERabReleaseResponse {
                                mme_ue_id: r.mme_ue_id,
                                enb_ue_id: ue.enb_ue_id,
                                released: r.erabs.iter().map(|e| e.id).collect(),
                                failed: vec![],
                            }
                            .into(),
                        );
                        self.nas_reply(r.mme_ue_id, ue, reply, loc);
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

    /// The UE's NAS answer, if any, in an Uplink NAS Transport.
    fn nas_reply(&mut self, mme_ue_id: u32, ue: &SimUe, reply: Option<Vec<u8>>, loc: (Tai, Ecgi)) {
        if let Some(nas_pdu) = reply {
            self.send(
                UplinkNasTransport {
                    mme_ue_id,
                    enb_ue_id: ue.enb_ue_id,
                    nas_pdu,
                    tai: loc.0,
                    ecgi: loc.1,
                }
                .into(),
            );
        }
    }

    pub fn initial(&mut self, ue: &SimUe, nas: Vec<u8>, s_tmsi: Option<u32>) -> Vec<S1apMessage> {
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
