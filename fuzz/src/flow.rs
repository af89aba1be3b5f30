//! Whole MME flows as a stream of records, recorded from a scripted eNB + UE
//! (`pepc_testkit`) and replayed into a fresh node by the `mme_flow` target.
//!
//! A stream is records `kind, assoc, len (u16 BE), payload`. Parsing is total (any
//! octets are a stream: unknown kinds fold onto known ones, a short last record is
//! cut), so byte-level mutations still make streams.

use pepc_testkit::{self as sim, Harness, SimUe};
use pepc_mme::{Input, MmeConfig};
use pepc_s1ap::msg::*;
use pepc_s1ap::peek::{peek, procedure, PduKind};
use pepc_s1ap::{Cause, ERabAdmitted, ERabTunnel, Ecgi, EnbId, GlobalEnbId, SupportedTa, Tai};
use std::net::Ipv4Addr;
use std::time::Duration;

/// One input of the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rec {
    /// An S1AP PDU from the eNB of association `assoc` (stream 1).
    S1ap { assoc: u8, bytes: Vec<u8> },
    /// The association came up.
    EnbUp { assoc: u8 },
    /// The association went down.
    EnbDown { assoc: u8 },
    /// The clock moves on `secs` seconds; timers run.
    Advance { secs: u8 },
    /// An IPv4 packet arrives on SGi for a UE (paging when it is idle).
    Downlink { packet: Vec<u8> },
}

const S1AP: u8 = 0;
const ENB_UP: u8 = 1;
const ENB_DOWN: u8 = 2;
const ADVANCE: u8 = 3;
const DOWNLINK: u8 = 4;
const KINDS: u8 = 5;

/// At most this many eNB associations (a mutated `assoc` folds onto them).
pub const ASSOCS: u8 = 3;

/// The subscribers every replayed node has (the recorded flows use them).
pub const IMSIS: [&str; 3] = ["001010000000001", "001010000000002", "001010000000003"];

pub fn parse(mut data: &[u8]) -> Vec<Rec> {
    let mut v = Vec::new();
    while let [kind, assoc, hi, lo, tail @ ..] = data {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        let (body, next) = tail.split_at(len);
        data = next;
        let assoc = 1 + assoc % ASSOCS;
        v.push(match kind % KINDS {
            S1AP => Rec::S1ap {
                assoc,
                bytes: body.to_vec(),
            },
            ENB_UP => Rec::EnbUp { assoc },
            ENB_DOWN => Rec::EnbDown { assoc },
            ADVANCE => Rec::Advance {
                secs: body.first().copied().unwrap_or(1),
            },
            _ => Rec::Downlink {
                packet: body.to_vec(),
            },
        });
    }
    v
}

pub fn serialize(recs: &[Rec]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in recs {
        let (kind, assoc, body): (u8, u8, &[u8]) = match r {
            Rec::S1ap { assoc, bytes } => (S1AP, *assoc, bytes),
            Rec::EnbUp { assoc } => (ENB_UP, *assoc, &[]),
            Rec::EnbDown { assoc } => (ENB_DOWN, *assoc, &[]),
            Rec::Advance { secs } => (ADVANCE, 1, std::slice::from_ref(secs)),
            Rec::Downlink { packet } => (DOWNLINK, 1, packet),
        };
        let len = body.len().min(usize::from(u16::MAX));
        out.push(kind);
        out.push((assoc + ASSOCS - 1) % ASSOCS);
        out.extend_from_slice(&(len as u16).to_be_bytes());
        out.extend_from_slice(&body[..len]);
    }
    out
}

/// Whether a record is an Initial UE Message (the only way a UE context starts).
pub fn is_initial_ue(r: &Rec) -> bool {
    match r {
        Rec::S1ap { bytes, .. } => peek(bytes).is_ok_and(|p| {
            p.kind == PduKind::Initiating && p.procedure == procedure::INITIAL_UE_MESSAGE
        }),
        _ => false,
    }
}

/// A node as the replay and the recorder build it.
pub fn node() -> Harness {
    let h = Harness::new(16, MmeConfig::default());
    for imsi in IMSIS {
        h.hss.add(&sim::subscriber(imsi)).expect("HSS add");
    }
    h
}

/// What a replay ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Outcome {
    pub records: usize,
    pub initial_ue_messages: usize,
    /// UE contexts in the MME and in the slice's control plane at the end.
    pub mme_ues: usize,
    pub slice_ues: usize,
    /// Most UE contexts seen at once.
    pub max_ues: usize,
}

/// Feed one record to the node.
pub fn apply(h: &mut Harness, r: &Rec) {
    match r {
        Rec::S1ap { assoc, bytes } => {
            h.input(Input::S1ap {
                assoc: u64::from(*assoc),
                stream: 1,
                bytes: bytes.clone(),
            });
        }
        Rec::EnbUp { assoc } => {
            h.input(Input::EnbUp {
                assoc: u64::from(*assoc),
                out_streams: 4,
            });
        }
        Rec::EnbDown { assoc } => {
            h.input(Input::EnbDown {
                assoc: u64::from(*assoc),
            });
        }
        Rec::Advance { secs } => {
            h.advance(Duration::from_secs(u64::from(*secs)));
        }
        Rec::Downlink { packet } => {
            h.sync();
            let mut b = pepc_wire::Batch::default();
            if b.bufs[0].fill(packet) {
                b.len = 1;
                h.dp.downlink(&mut b, 1);
            }
            let mut ev = Vec::new();
            h.cp.poll_requests(&mut ev);
            for e in ev {
                h.input(Input::Control(e));
            }
        }
    }
}

/// Replay a stream into a fresh node, checking after every record that the UE
/// contexts stay bounded: no more than the Initial UE Messages fed so far, in the
/// MME and in the slice. Ends with an hour of timers.
pub fn replay(recs: &[Rec]) -> Outcome {
    let mut h = node();
    let mut o = Outcome {
        records: recs.len(),
        ..Outcome::default()
    };
    let check = |h: &mut Harness, o: &mut Outcome| {
        let (mme, slice) = (h.ue_count(), h.cp.ue_count());
        assert!(
            mme <= o.initial_ue_messages && slice <= o.initial_ue_messages,
            "{mme} MME / {slice} slice UE contexts after {} Initial UE Messages",
            o.initial_ue_messages
        );
        o.max_ues = o.max_ues.max(mme).max(slice);
        (o.mme_ues, o.slice_ues) = (mme, slice);
    };
    for r in recs {
        if is_initial_ue(r) {
            o.initial_ue_messages += 1;
        }
        apply(&mut h, r);
        check(&mut h, &mut o);
    }
    for _ in 0..60 {
        h.advance(Duration::from_secs(60));
    }
    check(&mut h, &mut o);
    o
}

// ------------------------------------------------------------------ recording

const SERVER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);

/// A harness whose eNB side writes down every input it gives the node.
pub struct Recorder {
    pub h: Harness,
    pub recs: Vec<Rec>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    pub fn new() -> Recorder {
        Recorder {
            h: node(),
            recs: Vec::new(),
        }
    }

    fn tai(&self) -> Tai {
        Tai {
            plmn: self.h.mme.config().plmn,
            tac: 1,
        }
    }

    fn ecgi(&self, cell_id: u32) -> Ecgi {
        Ecgi {
            plmn: self.h.mme.config().plmn,
            cell_id,
        }
    }

    pub fn record(&mut self, r: Rec) -> Vec<(u64, S1apMessage)> {
        let out = match &r {
            Rec::S1ap { assoc, bytes } => self.h.input(Input::S1ap {
                assoc: u64::from(*assoc),
                stream: 1,
                bytes: bytes.clone(),
            }),
            other => {
                apply(&mut self.h, other);
                Vec::new()
            }
        };
        self.recs.push(r);
        out
    }

    pub fn send(&mut self, assoc: u8, m: impl Into<S1apMessage>) -> Vec<(u64, S1apMessage)> {
        let bytes = m.into().encode().expect("recorded message encodes");
        self.record(Rec::S1ap { assoc, bytes })
    }

    pub fn enb_setup(&mut self, assoc: u8, gid: u32) {
        self.record(Rec::EnbUp { assoc });
        let plmn = self.h.mme.config().plmn;
        let r = self.send(
            assoc,
            S1SetupRequest {
                global_enb_id: GlobalEnbId {
                    plmn,
                    enb_id: EnbId::Macro(gid),
                },
                enb_name: Some(format!("enb{gid}")),
                supported_tas: vec![SupportedTa {
                    tac: 1,
                    plmns: vec![plmn],
                }],
                paging_drx: Some(128),
            },
        );
        assert!(
            matches!(r.as_slice(), [(_, S1apMessage::S1SetupResponse(_))]),
            "S1 Setup: {r:?}"
        );
    }

    /// The eNB + UE side of `sim::pump`, recording what it sends, until quiet.
    pub fn pump(&mut self, ue: &mut SimUe, assoc: u8, mut pending: Vec<(u64, S1apMessage)>) {
        let (tai, ecgi) = (self.tai(), self.ecgi(0x101));
        let ul = |mme_ue_id, enb_ue_id, nas_pdu| UplinkNasTransport {
            mme_ue_id,
            enb_ue_id,
            nas_pdu,
            ecgi,
            tai,
        };
        while !pending.is_empty() {
            let mut next = vec![];
            for (_, m) in pending {
                match m {
                    S1apMessage::DownlinkNasTransport(d) => {
                        ue.mme_ue_id = Some(d.mme_ue_id);
                        let step = ue.on_downlink(&d.nas_pdu).expect("UE accepts");
                        if let Some(r) = step.reply {
                            next.extend(self.send(assoc, ul(d.mme_ue_id, ue.enb_ue_id, r)));
                        }
                    }
                    S1apMessage::InitialContextSetupRequest(r) => {
                        ue.mme_ue_id = Some(r.mme_ue_id);
                        let mut reply = None;
                        if let Some(nas) = r.erabs.first().and_then(|e| e.nas_pdu.clone()) {
                            reply = ue.on_downlink(&nas).expect("UE accepts").reply;
                        }
                        let erabs = r
                            .erabs
                            .iter()
                            .map(|e| ERabTunnel {
                                id: e.id,
                                transport: sim::ENB_ADDR,
                                teid: sim::enb_teid(ue.enb_ue_id, e.id),
                            })
                            .collect();
                        next.extend(self.send(
                            assoc,
                            InitialContextSetupResponse {
                                mme_ue_id: r.mme_ue_id,
                                enb_ue_id: ue.enb_ue_id,
                                erabs,
                                failed: vec![],
                            },
                        ));
                        if let Some(b) = reply {
                            next.extend(self.send(assoc, ul(r.mme_ue_id, ue.enb_ue_id, b)));
                        }
                    }
                    S1apMessage::UeContextReleaseCommand(c) => {
                        let (mme_ue_id, enb_ue_id) = match c.ids {
                            pepc_s1ap::UeS1apIds::Pair {
                                mme_ue_id,
                                enb_ue_id,
                            } => (mme_ue_id, enb_ue_id),
                            pepc_s1ap::UeS1apIds::MmeOnly(i) => (i, ue.enb_ue_id),
                        };
                        next.extend(self.send(
                            assoc,
                            UeContextReleaseComplete {
                                mme_ue_id,
                                enb_ue_id,
                            },
                        ));
                    }
                    _ => {}
                }
            }
            pending = next;
        }
    }

    pub fn attach(&mut self, ue: &mut SimUe, assoc: u8) {
        let nas = ue.attach_request(None, false);
        let first = self.send(assoc, sim::initial_ue(&self.h, ue, nas, None));
        self.pump(ue, assoc, first);
        assert!(ue.m_tmsi.is_some(), "attach completed");
    }

    pub fn release(&mut self, ue: &mut SimUe, assoc: u8) {
        let r = self.send(
            assoc,
            UeContextReleaseRequest {
                mme_ue_id: ue.mme_ue_id.expect("connected"),
                enb_ue_id: ue.enb_ue_id,
                cause: Cause::USER_INACTIVITY,
            },
        );
        self.pump(ue, assoc, r);
    }

    pub fn initial(&mut self, ue: &mut SimUe, assoc: u8, nas: Vec<u8>) {
        let first = self.send(assoc, sim::initial_ue(&self.h, ue, nas, ue.m_tmsi));
        self.pump(ue, assoc, first);
    }

    pub fn uplink(&mut self, ue: &mut SimUe, assoc: u8, nas: Vec<u8>) {
        let (tai, ecgi) = (self.tai(), self.ecgi(0x101));
        let r = self.send(
            assoc,
            UplinkNasTransport {
                mme_ue_id: ue.mme_ue_id.expect("connected"),
                enb_ue_id: ue.enb_ue_id,
                nas_pdu: nas,
                ecgi,
                tai,
            },
        );
        self.pump(ue, assoc, r);
    }

    /// Downlink data for the UE: pages it when idle.
    pub fn downlink(&mut self, ue: &SimUe) {
        let ip = ue.ue_ip.expect("UE address");
        let packet = pepc_slice::packets::ipv4_udp(SERVER, ip, 53, 4000, 64);
        self.record(Rec::Downlink { packet });
    }

    /// X2 handover: the target eNB on `to` asks for the path switch.
    pub fn path_switch(&mut self, ue: &mut SimUe, to: u8, enb_ue_id: u32) {
        let (tai, ecgi) = (self.tai(), self.ecgi(0x202));
        let r = self.send(
            to,
            PathSwitchRequest {
                enb_ue_id,
                erabs: vec![ERabTunnel {
                    id: 5,
                    transport: Ipv4Addr::new(127, 0, 0, 3),
                    teid: 0x77,
                }],
                source_mme_ue_id: ue.mme_ue_id.expect("connected"),
                ecgi,
                tai,
                ue_security_capabilities: pepc_s1ap::UeSecurityCapabilities {
                    eea: 0xc000,
                    eia: 0xc000,
                },
            },
        );
        assert!(
            matches!(
                r.as_slice(),
                [(_, S1apMessage::PathSwitchRequestAcknowledge(_))]
            ),
            "path switch: {r:?}"
        );
        ue.enb_ue_id = enb_ue_id;
    }

    /// S1 handover from `from` to the eNB `gid` on `to`.
    pub fn s1_handover(&mut self, ue: &mut SimUe, from: u8, to: u8, gid: u32, enb_ue_id: u32) {
        let (tai, ecgi) = (self.tai(), self.ecgi(0x303));
        let id = ue.mme_ue_id.expect("connected");
        let container = vec![0x40, 0x80, 0x00];
        let r = self.send(
            from,
            HandoverRequired {
                mme_ue_id: id,
                enb_ue_id: ue.enb_ue_id,
                handover_type: 0,
                cause: Cause::HANDOVER_DESIRABLE_FOR_RADIO_REASON,
                target: pepc_s1ap::TargetId::Enb {
                    global_enb_id: GlobalEnbId {
                        plmn: tai.plmn,
                        enb_id: EnbId::Macro(gid),
                    },
                    tai,
                },
                container: container.clone(),
            },
        );
        assert!(
            matches!(r.as_slice(), [(_, S1apMessage::HandoverRequest(_))]),
            "handover required: {r:?}"
        );
        self.send(
            to,
            HandoverRequestAcknowledge {
                mme_ue_id: id,
                enb_ue_id,
                admitted: vec![ERabAdmitted {
                    id: 5,
                    transport: Ipv4Addr::new(127, 0, 0, 4),
                    teid: 0x99,
                    dl_forwarding: None,
                    ul_forwarding: None,
                }],
                failed: vec![],
                container,
            },
        );
        self.send(
            to,
            HandoverNotify {
                mme_ue_id: id,
                enb_ue_id,
                ecgi,
                tai,
            },
        );
        self.send(
            from,
            UeContextReleaseComplete {
                mme_ue_id: id,
                enb_ue_id: ue.enb_ue_id,
            },
        );
        ue.enb_ue_id = enb_ue_id;
    }
}

/// The recorded flows, by name: every seed of `mme_flow`.
pub fn recorded_flows() -> Vec<(&'static str, Vec<Rec>)> {
    let mut flows = Vec::new();

    let mut r = Recorder::new();
    r.enb_setup(1, 1);
    let mut ue = SimUe::new(IMSIS[0], 10);
    r.attach(&mut ue, 1);
    flows.push(("attach", r.recs.clone()));

    // Idle, paged by downlink data, Service Request.
    r.release(&mut ue, 1);
    r.downlink(&ue);
    ue.enb_ue_id = 11;
    let sr = ue.service_request();
    r.initial(&mut ue, 1, sr);
    flows.push(("attach_idle_paging_service_request", r.recs.clone()));

    // Periodic TAU from idle, then TAU with the active flag.
    r.release(&mut ue, 1);
    ue.enb_ue_id = 12;
    let tau = ue.tau_request(false);
    r.initial(&mut ue, 1, tau);
    ue.enb_ue_id = 13;
    let tau = ue.tau_request(true);
    r.initial(&mut ue, 1, tau);
    flows.push(("attach_idle_sr_tau", r.recs.clone()));

    // X2 handover to eNB 2, S1 handover back to eNB 1, detach there.
    r.enb_setup(2, 2);
    r.path_switch(&mut ue, 2, 50);
    r.s1_handover(&mut ue, 2, 1, 1, 60);
    let d = ue.detach_request(false);
    r.uplink(&mut ue, 1, d);
    flows.push(("attach_sr_tau_handovers_detach", r.recs.clone()));

    // A second UE attaches and switches off; a third attaches and its eNB is lost.
    let mut ue2 = SimUe::new(IMSIS[1], 20);
    r.attach(&mut ue2, 1);
    let d = ue2.detach_request(true);
    r.uplink(&mut ue2, 1, d);
    let mut ue3 = SimUe::new(IMSIS[2], 30);
    r.attach(&mut ue3, 2);
    r.record(Rec::EnbDown { assoc: 2 });
    r.record(Rec::Advance { secs: 30 });
    flows.push(("three_ues_everything", r.recs.clone()));

    // Attach then detach alone: a short stream.
    let mut r = Recorder::new();
    r.enb_setup(1, 1);
    let mut ue = SimUe::new(IMSIS[1], 40);
    r.attach(&mut ue, 1);
    let d = ue.detach_request(false);
    r.uplink(&mut ue, 1, d);
    flows.push(("attach_detach", r.recs.clone()));

    // Two UEs attaching interleaved on one eNB.
    let mut r = Recorder::new();
    r.enb_setup(1, 1);
    let (mut a, mut b) = (SimUe::new(IMSIS[0], 1), SimUe::new(IMSIS[2], 2));
    let na = a.attach_request(None, false);
    let nb = b.attach_request(None, false);
    let fa = r.send(1, sim::initial_ue(&r.h, &a, na, None));
    let fb = r.send(1, sim::initial_ue(&r.h, &b, nb, None));
    r.pump(&mut a, 1, fa);
    r.pump(&mut b, 1, fb);
    flows.push(("two_attaches_interleaved", r.recs.clone()));

    flows
}
