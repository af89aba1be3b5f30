//! Driving the eNB and UE side against the MME until quiet (`pump`), a whole attach,
//! and the in-process attach benchmark.

use super::*;

/// The eNB's downlink TEID for a UE's bearer in these simulations.
pub fn enb_teid(enb_ue_id: u32, ebi: u8) -> u32 {
    0x0100_0000 | (enb_ue_id << 4) | ebi as u32
}

pub const ENB_ADDR: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// The eNB's end of a UE's E-RAB in these simulations.
fn enb_tunnel(ue: &SimUe, id: u8) -> ERabTunnel {
    ERabTunnel {
        id,
        transport: ENB_ADDR,
        teid: enb_teid(ue.enb_ue_id, id),
    }
}

/// The UE's answer to a downlink NAS message, sent up in an Uplink NAS Transport
/// (nothing when it has none).
fn uplink_nas(
    h: &mut Harness,
    assoc: AssocId,
    mme_ue_id: u32,
    ue: &SimUe,
    reply: Option<Vec<u8>>,
    (ecgi, tai): (Ecgi, Tai),
) -> Vec<(AssocId, S1apMessage)> {
    match reply {
        Some(nas_pdu) => h.send(
            assoc,
            UplinkNasTransport {
                mme_ue_id,
                enb_ue_id: ue.enb_ue_id,
                nas_pdu,
                ecgi,
                tai,
            },
        ),
        None => Vec::new(),
    }
}

/// Run the eNB+UE side against everything the MME sent, until quiet. Returns the
/// names of the S1AP messages seen (in order).
pub fn pump(
    h: &mut Harness,
    ue: &mut SimUe,
    assoc: AssocId,
    mut pending: Vec<(AssocId, S1apMessage)>,
) -> Result<Vec<String>, String> {
    let mut seen = vec![];
    let tai = Tai {
        plmn: h.mme.config().plmn,
        tac: 1,
    };
    let ecgi = Ecgi {
        plmn: h.mme.config().plmn,
        cell_id: 0x101,
    };
    while !pending.is_empty() {
        let mut next = vec![];
        for (_a, m) in pending {
            seen.push(m.name().to_string());
            match m {
                S1apMessage::DownlinkNasTransport(d) => {
                    ue.mme_ue_id = Some(d.mme_ue_id);
                    let step = ue.on_downlink(&d.nas_pdu)?;
                    next.extend(uplink_nas(
                        h,
                        assoc,
                        d.mme_ue_id,
                        ue,
                        step.reply,
                        (ecgi, tai),
                    ));
                }
                S1apMessage::InitialContextSetupRequest(r) => {
                    ue.mme_ue_id = Some(r.mme_ue_id);
                    // The KeNB must be the one the UE derives (TS 33.401 A.3) from its
                    // last uplink COUNT before it answers.
                    let expected = ue.expected_kenb();
                    let mut reply = None;
                    if let Some(nas) = r.erabs.first().and_then(|e| e.nas_pdu.clone()) {
                        reply = ue.on_downlink(&nas)?.reply;
                    }
                    if let Some(k) = expected {
                        if k.as_bytes() != &r.security_key.0 {
                            return Err("KeNB mismatch".into());
                        }
                    }
                    let erabs = r.erabs.iter().map(|e| enb_tunnel(ue, e.id)).collect();
                    next.extend(h.send(
                        assoc,
                        InitialContextSetupResponse {
                            mme_ue_id: r.mme_ue_id,
                            enb_ue_id: ue.enb_ue_id,
                            erabs,
                            failed: vec![],
                        },
                    ));
                    next.extend(uplink_nas(h, assoc, r.mme_ue_id, ue, reply, (ecgi, tai)));
                }
                S1apMessage::UeContextReleaseCommand(c) => {
                    // The eNB answers for the connection the command names (an older
                    // one of the UE's, when a new attach superseded it).
                    let (mme_ue_id, enb_ue_id) = match c.ids {
                        pepc_s1ap::UeS1apIds::Pair {
                            mme_ue_id,
                            enb_ue_id,
                        } => (mme_ue_id, enb_ue_id),
                        pepc_s1ap::UeS1apIds::MmeOnly(i) => (i, ue.enb_ue_id),
                    };
                    if h.hold_releases.contains(&mme_ue_id) {
                        h.held_releases
                            .push(S1apMessage::UeContextReleaseCommand(c));
                        continue;
                    }
                    next.extend(h.send(
                        assoc,
                        UeContextReleaseComplete {
                            mme_ue_id,
                            enb_ue_id,
                        },
                    ));
                }
                S1apMessage::ERabReleaseCommand(r) => {
                    let mut reply = None;
                    if let Some(nas) = r.nas_pdu.clone() {
                        reply = ue.on_downlink(&nas)?.reply;
                    }
                    next.extend(h.send(
                        assoc,
                        ERabReleaseResponse {
                            mme_ue_id: r.mme_ue_id,
                            enb_ue_id: ue.enb_ue_id,
                            released: r.erabs.iter().map(|e| e.id).collect(),
                            failed: vec![],
                        },
                    ));
                    next.extend(uplink_nas(h, assoc, r.mme_ue_id, ue, reply, (ecgi, tai)));
                }
                S1apMessage::ERabModifyRequest(r) => {
                    let mut reply = None;
                    if let Some(e) = r.erabs.first() {
                        reply = ue.on_downlink(&e.nas_pdu)?.reply;
                    }
                    next.extend(h.send(
                        assoc,
                        ERabModifyResponse {
                            mme_ue_id: r.mme_ue_id,
                            enb_ue_id: ue.enb_ue_id,
                            modified: r.erabs.iter().map(|e| e.id).collect(),
                            failed: vec![],
                        },
                    ));
                    next.extend(uplink_nas(h, assoc, r.mme_ue_id, ue, reply, (ecgi, tai)));
                }
                S1apMessage::ERabSetupRequest(r) => {
                    let mut reply = None;
                    if let Some(nas) = r.erabs.first().and_then(|e| e.nas_pdu.clone()) {
                        reply = ue.on_downlink(&nas)?.reply;
                    }
                    let setup = r.erabs.iter().map(|e| enb_tunnel(ue, e.id)).collect();
                    next.extend(h.send(
                        assoc,
                        ERabSetupResponse {
                            mme_ue_id: r.mme_ue_id,
                            enb_ue_id: ue.enb_ue_id,
                            setup,
                            failed: vec![],
                        },
                    ));
                    next.extend(uplink_nas(h, assoc, r.mme_ue_id, ue, reply, (ecgi, tai)));
                }
                _ => {}
            }
        }
        pending = next;
    }
    Ok(seen)
}

/// Initial UE Message carrying `nas`.
pub fn initial_ue(h: &Harness, ue: &SimUe, nas: Vec<u8>, s_tmsi: Option<u32>) -> InitialUeMessage {
    let plmn = h.mme.config().plmn;
    InitialUeMessage {
        enb_ue_id: ue.enb_ue_id,
        nas_pdu: nas,
        tai: Tai { plmn, tac: 1 },
        ecgi: Ecgi {
            plmn,
            cell_id: 0x101,
        },
        rrc_cause: 3,
        s_tmsi: s_tmsi.map(|m_tmsi| pepc_s1ap::STmsi {
            mmec: h.mme.config().mme_code,
            m_tmsi,
        }),
        gummei: None,
    }
}

/// A full attach by IMSI through S1AP; returns the S1AP message names seen.
pub fn attach(h: &mut Harness, ue: &mut SimUe, assoc: AssocId) -> Result<Vec<String>, String> {
    let nas = ue.attach_request(None, false);
    let first = h.send(assoc, initial_ue(h, ue, nas, None));
    pump(h, ue, assoc, first)
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttachBenchResult {
    pub attaches: usize,
    pub attaches_per_s: f64,
    pub completion_us_p50: f64,
    pub completion_us_p99: f64,
}

/// Full in-process attaches (all messages encoded and decoded, AKA and NAS security on
/// both sides, vectors from an in-memory HSS), one after the other.
pub fn run_inprocess_attaches(n: usize) -> AttachBenchResult {
    run_inprocess_attaches_keep(n, |_, _| {})
}

/// The same, calling `inspect` with the harness before the first attach (`false`) and
/// at the end, every UE still attached (`true`).
pub fn run_inprocess_attaches_keep(
    n: usize,
    mut inspect: impl FnMut(&Harness, bool),
) -> AttachBenchResult {
    let mut h = Harness::new(n + 16, MmeConfig::default());
    // A benchmark: the MME runs as a node's does, without a recording.
    h.stop_recording();
    let subs: Vec<Subscriber> = (0..n)
        .map(|i| subscriber(&format!("00101{:010}", i + 1)))
        .collect();
    h.hss.add_many(&subs).expect("HSS add");
    h.enb_setup(1, 1, 1);
    let mut lat = Vec::with_capacity(n);
    inspect(&h, false);
    let t0 = Instant::now();
    for i in 0..n {
        let mut ue = SimUe::new(&format!("00101{:010}", i + 1), i as u32 + 1);
        let s = Instant::now();
        attach(&mut h, &mut ue, 1).expect("attach completes");
        lat.push(s.elapsed().as_secs_f64() * 1e6);
        if i % 256 == 0 {
            h.sync();
        }
    }
    let total = t0.elapsed().as_secs_f64();
    h.sync();
    inspect(&h, true);
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let q = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    AttachBenchResult {
        attaches: n,
        attaches_per_s: n as f64 / total.max(1e-9),
        completion_us_p50: q(0.5),
        completion_us_p99: q(0.99),
    }
}
