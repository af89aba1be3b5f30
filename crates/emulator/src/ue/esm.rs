//! The UE's ESM side (TS 24.301 §6): default and dedicated bearer activation,
//! PDN connectivity, and the bearer resource requests the scenarios send.

use super::*;

impl Ue {
    pub(super) fn activate_default(
        &mut self,
        ebi: u8,
        req: &ActivateDefaultBearerRequest,
        out: &mut Vec<UeOutput>,
    ) {
        self.bearers.retain(|(e, _)| *e != ebi);
        self.bearers.push((ebi, true));
        out.push(UeOutput::BearerUp { ebi, default: true });
        if let Some(a) = pdn_ipv4(&req.pdn_address) {
            self.pdns.retain(|p| p.0 != ebi);
            self.pdns.push((ebi, a));
            if self.addr.is_none() {
                self.addr = Some(a);
            }
            out.push(UeOutput::Address { ebi, addr: a });
        }
    }

    /// Whether a network answer with `pti` belongs to our pending ESM procedure `p`.
    pub(super) fn esm_answer(&self, p: Procedure, pti: u8) -> bool {
        matches!(self.pending, Some((q, _)) if q == p) && pti == self.esm_pti
    }

    pub(super) fn esm(&mut self, m: EsmMessage, out: &mut Vec<UeOutput>) {
        let prot = sht::INTEGRITY_CIPHERED;
        let reply = |ebi: u8, pti: u8, body: EsmBody| -> NasMessage {
            EsmMessage { ebi, pti, body }.into()
        };
        match m.body {
            EsmBody::EsmInformationRequest => {
                let r = reply(
                    0,
                    m.pti,
                    EsmBody::EsmInformationResponse {
                        apn: self.cfg.apn.clone(),
                        pco: None,
                    },
                );
                self.send(r, prot, rrc_cause::MO_SIGNALLING, out);
            }
            EsmBody::ActivateDefaultBearerRequest(req) => {
                // Standalone PDN connectivity (the attach one rides in Attach Accept):
                // TS 24.301 6.4.1.3, the PTI is the one of our PDN Connectivity Request.
                // TS 24.301 7.3.1: a PTI we have not assigned is refused with #81.
                let cause = if !self.esm_answer(Procedure::PdnConnect, m.pti) {
                    Some(esm_cause::INVALID_PTI)
                } else if !(1..=15).contains(&m.ebi) || self.bearers.iter().any(|b| b.0 == m.ebi) {
                    Some(esm_cause::INVALID_EBI)
                } else {
                    None
                };
                if let Some(esm_cause) = cause {
                    let r = reply(
                        m.ebi,
                        m.pti,
                        EsmBody::ActivateDefaultBearerReject { esm_cause },
                    );
                    return self.send(r, prot, rrc_cause::MO_SIGNALLING, out);
                }
                self.activate_default(m.ebi, &req, out);
                let r = reply(m.ebi, m.pti, EsmBody::ActivateDefaultBearerAccept);
                self.send(r, prot, rrc_cause::MO_SIGNALLING, out);
                self.done(Procedure::PdnConnect, out);
            }
            EsmBody::PdnConnectivityReject { esm_cause } => {
                if self.esm_answer(Procedure::PdnConnect, m.pti) {
                    self.fail(Failure::Esm(esm_cause), out)
                }
            }
            EsmBody::PdnDisconnectReject { esm_cause } => {
                if self.esm_answer(Procedure::PdnDisconnect, m.pti) {
                    self.fail(Failure::Esm(esm_cause), out)
                }
            }
            EsmBody::ActivateDedicatedBearerRequest(req) => {
                // TS 24.301 6.4.2.3: the linked bearer must be one of our default
                // bearers, the new EBI unused; else reject with #43.
                // PTI 0: network-initiated; any other must be our request's (7.3.1, #81).
                if m.pti != 0 && !self.esm_answer(Procedure::DedicatedBearer, m.pti) {
                    let r = reply(
                        m.ebi,
                        m.pti,
                        EsmBody::ActivateDedicatedBearerReject {
                            esm_cause: esm_cause::INVALID_PTI,
                        },
                    );
                    return self.send(r, prot, rrc_cause::MO_SIGNALLING, out);
                }
                let linked_ok = self.pdns.iter().any(|p| p.0 == req.linked_ebi);
                if !linked_ok
                    || !(1..=15).contains(&m.ebi)
                    || self.bearers.iter().any(|b| b.0 == m.ebi)
                {
                    let r = reply(
                        m.ebi,
                        m.pti,
                        EsmBody::ActivateDedicatedBearerReject {
                            esm_cause: esm_cause::INVALID_EBI,
                        },
                    );
                    self.send(r, prot, rrc_cause::MO_SIGNALLING, out);
                    if self.esm_answer(Procedure::DedicatedBearer, m.pti) {
                        self.fail(
                            Failure::Protocol("dedicated bearer for an unknown PDN".into()),
                            out,
                        );
                    }
                    return;
                }
                self.bearers.push((m.ebi, false));
                self.linked.push((m.ebi, req.linked_ebi));
                out.push(UeOutput::BearerUp {
                    ebi: m.ebi,
                    default: false,
                });
                let r = reply(m.ebi, m.pti, EsmBody::ActivateDedicatedBearerAccept);
                self.send(r, prot, rrc_cause::MO_SIGNALLING, out);
                // PTI 0: network-initiated; else it answers our allocation request.
                if m.pti == 0 || self.esm_answer(Procedure::DedicatedBearer, m.pti) {
                    self.done(Procedure::DedicatedBearer, out);
                }
            }
            EsmBody::ModifyBearerRequest(_) => {
                let r = reply(m.ebi, m.pti, EsmBody::ModifyBearerAccept);
                self.send(r, prot, rrc_cause::MO_SIGNALLING, out);
                self.done(Procedure::BearerModify, out);
            }
            EsmBody::DeactivateBearerRequest { .. } => {
                self.drop_bearer(m.ebi, out);
                let r = reply(m.ebi, m.pti, EsmBody::DeactivateBearerAccept);
                self.send(r, prot, rrc_cause::MO_SIGNALLING, out);
                if m.pti == 0 || self.esm_answer(Procedure::PdnDisconnect, m.pti) {
                    self.done(Procedure::PdnDisconnect, out);
                }
                if m.pti == 0 || self.esm_answer(Procedure::BearerDeactivate, m.pti) {
                    self.done(Procedure::BearerDeactivate, out);
                }
            }
            EsmBody::EsmStatus { esm_cause } => self.fail(Failure::Esm(esm_cause), out),
            other => self.fail(
                Failure::Protocol(format!("unexpected downlink ESM {other:?}")),
                out,
            ),
        }
    }
}

/// The flow a UE asks bearer resources for: UDP to the server's port 5002, both
/// directions (the emulator's traffic uses 5001, so it stays on the default bearer).
pub const DEDICATED_FLOW_PORT: u16 = 5002;

/// Traffic flow aggregate (TS 24.008 10.5.6.12, as TS 24.301 6.5.3.2 asks): "create
/// new TFT" with one bidirectional packet filter, id 1: protocol UDP, remote port
/// [`DEDICATED_FLOW_PORT`].
pub(super) fn flow_aggregate() -> Vec<u8> {
    let p = DEDICATED_FLOW_PORT.to_be_bytes();
    let filter = [0x30, 17, 0x40, p[0], p[1]];
    let mut v = vec![0x20 | 1, 0x30 | 1, 0x10, filter.len() as u8];
    v.extend_from_slice(&filter);
    v
}

/// Bearer Resource Allocation Request (TS 24.301 8.3.8), plain: EBI 0, our PTI, the
/// linked default bearer, the flow and the QoS it needs (QCI 1, 64 kbps GBR both ways).
pub fn bearer_resource_allocation_request(pti: u8, linked_ebi: u8) -> Vec<u8> {
    let tfa = flow_aggregate();
    let qos = EpsQos {
        qci: 1,
        gbr: Some((64, 64, 64, 64)),
    }
    .to_bytes();
    let mut v = vec![0x02, pti, 0xd4, linked_ebi & 0x0f, tfa.len() as u8];
    v.extend_from_slice(&tfa);
    v.push(qos.len() as u8);
    v.extend_from_slice(&qos);
    v
}

/// Bearer Resource Modification Request (TS 24.301 8.3.10) releasing dedicated bearer
/// `ebi`: TFT operation "delete existing TFT" with no filters and ESM cause #36
/// (TS 24.301 6.5.4.2).
pub fn bearer_resource_release_request(pti: u8, ebi: u8) -> Vec<u8> {
    vec![
        0x02,
        pti,
        0xd6,
        ebi & 0x0f,
        1,
        0x40,
        0x58,
        esm_cause::REGULAR_DEACTIVATION,
    ]
}
