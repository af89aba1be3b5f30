//! The scripted UE: its USIM (Milenage), NAS security, and the requests and answers
//! a UE sends (attach, service request, TAU, detach, ESM).

use super::*;

/// What the simulated UE did with a downlink NAS message.
#[derive(Debug)]
pub struct UeStep {
    pub got: String,
    pub reply: Option<Vec<u8>>,
}

/// A UE: USIM + NAS (EMM/ESM) with security. Keys stay inside.
pub struct SimUe {
    pub imsi: String,
    mil: Milenage,
    pub sqn_max: u64,
    pub sec: Option<UeSecCtx>,
    kasme: Option<Key256>,
    pub enb_ue_id: u32,
    pub mme_ue_id: Option<u32>,
    pub m_tmsi: Option<u32>,
    pub ue_ip: Option<Ipv4Addr>,
    pub net_cap: Vec<u8>,
    pub pti: u8,
    pub received: Vec<String>,
    /// Corrupt the next RES (to test the network's check).
    pub corrupt_k: bool,
    /// Default bearers of the UE's PDN connections with their addresses.
    pub pdns: Vec<(u8, Ipv4Addr)>,
    /// Dedicated bearers (EBI, linked EBI, TFT value).
    pub dedicated: Vec<(u8, u8, Vec<u8>)>,
    /// PTI of the last ESM message the network sent.
    pub last_pti: u8,
    /// RAND of the last Authentication Request (the key-leak test derives CK/IK).
    pub last_rand: Option<[u8; 16]>,
}

impl SimUe {
    pub fn new(imsi: &str, enb_ue_id: u32) -> SimUe {
        let k = Key128::from_hex(TEST_K).expect("valid");
        let opc = Key128::from_hex(TEST_OPC).expect("valid");
        SimUe {
            imsi: imsi.into(),
            mil: Milenage::new_with_opc(&k, *opc.as_bytes()),
            sqn_max: 0,
            sec: None,
            kasme: None,
            enb_ue_id,
            mme_ue_id: None,
            m_tmsi: None,
            ue_ip: None,
            // EEA0-2, EIA0-2
            net_cap: vec![0xe0, 0xe0],
            pti: 1,
            received: vec![],
            corrupt_k: false,
            pdns: vec![],
            dedicated: vec![],
            last_pti: 0,
            last_rand: None,
        }
    }

    /// A protected ESM message with a fresh PTI (2..=254).
    fn esm_request<T: Into<Esm>>(&mut self, m: T) -> Vec<u8> {
        self.pti = if self.pti >= 254 { 2 } else { self.pti + 1 };
        let msg = NasEpsMessage::new_esm(m, 0, self.pti);
        self.protect(&msg)
    }

    /// Standalone PDN Connectivity Request (TS 24.301 §6.5.1), IPv4.
    pub fn pdn_connectivity_request(&mut self, apn: Option<&str>) -> Vec<u8> {
        let mut p = nasx::NasPdnConnectivityRequest::new(
            nasx::NasRequestType::new(1),
            nasx::NasPdnType::new(1),
        );
        p.access_point_name = apn.map(|a| nasx::NasAccessPointName::new(nasx::apn_value(a)));
        self.esm_request(p)
    }

    /// PDN Disconnect Request for the PDN connection of default bearer `linked`.
    pub fn pdn_disconnect_request(&mut self, linked: u8) -> Vec<u8> {
        self.esm_request(nasx::NasPdnDisconnectRequest::new(
            nasx::NasLinkedEpsBearerIdentity::new(linked),
        ))
    }

    /// Bearer Resource Allocation Request: `qos` is the EPS QoS value, `tfa` the traffic
    /// flow aggregate value.
    pub fn bearer_resource_allocation_request(
        &mut self,
        linked: u8,
        qos: Vec<u8>,
        tfa: Vec<u8>,
    ) -> Vec<u8> {
        self.esm_request(nasx::NasBearerResourceAllocationRequest::new(
            nasx::NasLinkedEpsBearerIdentity::new(linked),
            nasx::NasTrafficFlowAggregateDescription::new(tfa),
            nasx::NasEpsQualityOfService::new(qos),
        ))
    }

    /// Bearer Resource Modification Request for bearer `ebi` with aggregate `tfa`.
    pub fn bearer_resource_modification_request(&mut self, ebi: u8, tfa: Vec<u8>) -> Vec<u8> {
        self.esm_request(nasx::NasBearerResourceModificationRequest::new(
            nasx::NasLinkedEpsBearerIdentity::new(ebi),
            nasx::NasTrafficFlowAggregateDescription::new(tfa),
        ))
    }

    /// A UE whose USIM has another K (MAC failure at the UE).
    pub fn with_wrong_key(mut self) -> SimUe {
        let k = Key128::from_hex("00112233445566778899aabbccddeeff").expect("valid");
        let opc = Key128::from_hex(TEST_OPC).expect("valid");
        self.mil = Milenage::new_with_opc(&k, *opc.as_bytes());
        self
    }

    fn pdn_request(&self, esm_info: bool) -> NasEpsMessage {
        let mut p = nasx::NasPdnConnectivityRequest::new(
            nasx::NasRequestType::new(1),
            nasx::NasPdnType::new(1),
        );
        if esm_info {
            p.esm_information_transfer_flag = Some(nasx::NasEsmInformationTransferFlag::new(1));
        }
        NasEpsMessage::new_esm(p, 0, self.pti)
    }

    /// Attach Request by IMSI (or by `guti` when given), plain.
    pub fn attach_request(&self, guti: Option<u32>, esm_info: bool) -> Vec<u8> {
        let id = match guti {
            Some(t) => nasx::guti_value([0x00, 0xf1, 0x10], 7, 9, t),
            None => nasx::imsi_value(&self.imsi),
        };
        let r = nasx::NasAttachRequest::new(
            nasx::NasEpsAttachType::new(1),
            nasx::NasKeySetIdentifier::new(7),
            nasx::NasEpsMobileIdentity::new(id),
            nasx::NasUeNetworkCapability::new(self.net_cap.clone()),
            nasx::NasEsmMessageContainer::from_esm_message(&self.pdn_request(esm_info))
                .expect("ESM"),
        );
        NasEpsMessage::new_emm(r).encode().expect("encodes")
    }

    /// Attach Request by the GUTI `m_tmsi` from this MME, integrity protected (not
    /// ciphered) with the UE's current EPS security context and its KSI, as a UE that
    /// kept its context after detach sends it (TS 24.301 §4.4.5, §5.5.1.2.2).
    pub fn attach_request_protected(&mut self, m_tmsi: u32) -> Vec<u8> {
        let ksi = self.sec.as_ref().expect("security context").ksi;
        let r = nasx::NasAttachRequest::new(
            nasx::NasEpsAttachType::new(1),
            nasx::NasKeySetIdentifier::new(ksi),
            nasx::NasEpsMobileIdentity::new(nasx::guti_value([0x00, 0xf1, 0x10], 1, 1, m_tmsi)),
            nasx::NasUeNetworkCapability::new(self.net_cap.clone()),
            nasx::NasEsmMessageContainer::from_esm_message(&self.pdn_request(false)).expect("ESM"),
        );
        self.integrity_only(&NasEpsMessage::new_emm(r))
    }

    /// Integrity protected, not ciphered (an initial NAS message with a GUTI).
    fn integrity_only(&mut self, m: &NasEpsMessage) -> Vec<u8> {
        let b = self
            .sec
            .as_mut()
            .expect("security context")
            .ctx
            .protect(
                m,
                nasx::NasEpsSecurityHeaderType::IntegrityProtected,
                Direction::Uplink,
            )
            .expect("protects");
        self.up_count();
        b
    }

    pub fn protect(&mut self, m: &NasEpsMessage) -> Vec<u8> {
        let b = self
            .sec
            .as_mut()
            .expect("security context")
            .protect(m, false, Direction::Uplink)
            .expect("protects");
        self.up_count();
        b
    }

    pub fn service_request(&mut self) -> Vec<u8> {
        let s = self.sec.as_mut().expect("security context");
        let sr = s.ctx.protect_service_request(s.ksi).expect("SR");
        self.up_count();
        NasEpsMessage::ServiceRequest(sr).encode().expect("encodes")
    }

    pub fn tau_request(&mut self, active: bool) -> Vec<u8> {
        let t = self.m_tmsi.expect("registered");
        let r = nasx::NasTrackingAreaUpdateRequest::new(
            nasx::NasEpsUpdateType::new(if active { 0x08 } else { 0 }),
            nasx::NasKeySetIdentifier::new(self.sec.as_ref().map(|s| s.ksi).unwrap_or(7)),
            nasx::NasEpsMobileIdentity::new(nasx::guti_value([0x00, 0xf1, 0x10], 1, 1, t)),
        );
        // TAU Request is integrity protected, not ciphered (TS 24.301 §4.4.5).
        self.integrity_only(&NasEpsMessage::new_emm(r))
    }

    pub fn detach_request(&mut self, switch_off: bool) -> Vec<u8> {
        let t = self.m_tmsi.expect("registered");
        let r = nasx::NasDetachRequestUeOriginating::new(
            nasx::NasDetachType::new(if switch_off { 0x09 } else { 0x01 }),
            nasx::NasKeySetIdentifier::new(self.sec.as_ref().map(|s| s.ksi).unwrap_or(7)),
            nasx::NasEpsMobileIdentity::new(nasx::guti_value([0x00, 0xf1, 0x10], 1, 1, t)),
        );
        self.protect(&NasEpsMessage::new_emm(r))
    }

    /// KeNB the eNB should have been given: KDF(KASME, last uplink COUNT).
    pub fn expected_kenb(&self) -> Option<Key256> {
        let s = self.sec.as_ref()?;
        Some(pepc_security::kenb(&s.kasme, s.last_ul_count))
    }

    fn up_count(&mut self) {
        if let Some(s) = self.sec.as_mut() {
            s.last_ul_count = s
                .ctx
                .nas_count(Direction::Uplink)
                .map(|c| c.get().wrapping_sub(1))
                .unwrap_or(0);
        }
    }

    /// Process a downlink NAS PDU and produce the UE's answer.
    pub fn on_downlink(&mut self, bytes: &[u8]) -> Result<UeStep, String> {
        let sht = bytes.first().map(|b| b >> 4).unwrap_or(0);
        let msg = if sht == 0 {
            NasEpsMessage::decode(bytes).map_err(|e| e.to_string())?
        } else if sht == 3 {
            // Security Mode Command: build the new context from its algorithms, then verify.
            let inner = nasx::unverified_inner(bytes)
                .or_else(|| match NasEpsMessage::decode(bytes).ok()? {
                    NasEpsMessage::SecurityProtected(_, i) => Some(*i),
                    _ => None,
                })
                .ok_or("SMC undecodable")?;
            let NasEpsMessage::Emm(_, Emm::SecurityModeCommand(c)) = &inner else {
                return Err("SHT 3 without SMC".into());
            };
            let algs = c.selected_nas_security_algorithms.value;
            let eea = pepc_security::Eea::try_from((algs >> 4) & 7).map_err(|e| e.to_string())?;
            let eia = pepc_security::Eia::try_from(algs & 7).map_err(|e| e.to_string())?;
            let kasme = self.kasme.clone().ok_or("SMC before AKA")?;
            let mut ctx = UeSecCtx::new(kasme, c.nas_key_set_identifier.value & 7, eea, eia)
                .map_err(|e| e.to_string())?;
            let m = ctx
                .unprotect(bytes, Direction::Downlink)
                .map_err(|e| format!("SMC MAC: {e:?}"))?;
            self.sec = Some(ctx);
            m
        } else {
            let s = self
                .sec
                .as_mut()
                .ok_or("protected message without context")?;
            s.unprotect(bytes, Direction::Downlink)
                .map_err(|e| format!("DL unprotect: {e:?}"))?
        };
        let (got, reply) = match msg {
            NasEpsMessage::Emm(_, e) => self.on_emm(e)?,
            NasEpsMessage::Esm(h, e) => {
                self.on_esm(h.eps_bearer_identity, h.procedure_transaction_identity, e)?
            }
            other => (format!("{other:?}"), None),
        };
        self.received.push(got.clone());
        Ok(UeStep { got, reply })
    }

    fn on_emm(&mut self, e: Emm) -> Result<(String, Option<Vec<u8>>), String> {
        Ok(match e {
            Emm::IdentityRequest(_) => {
                let r = nasx::NasIdentityResponse::new(nasx::NasMobileIdentity::new(
                    nasx::imsi_value(&self.imsi),
                ));
                (
                    "IdentityRequest".into(),
                    Some(
                        NasEpsMessage::new_emm(r)
                            .encode()
                            .map_err(|e| e.to_string())?,
                    ),
                )
            }
            Emm::AuthenticationRequest(a) => {
                let mut rand = [0u8; 16];
                rand.copy_from_slice(&a.authentication_parameter_rand.value);
                let mut autn = [0u8; 16];
                autn.copy_from_slice(&a.authentication_parameter_autn.value);
                self.last_rand = Some(rand);
                let reply = match pepc_security::usim_check(&self.mil, rand, autn, self.sqn_max) {
                    Ok(ok) => {
                        self.sqn_max = ok.sqn;
                        let sqn_ak: [u8; 6] = autn[..6].try_into().expect("6");
                        self.kasme = Some(pepc_security::kasme(
                            &ok.ck,
                            &ok.ik,
                            [0x00, 0xf1, 0x10],
                            sqn_ak,
                        ));
                        let mut res = ok.res.to_vec();
                        if self.corrupt_k {
                            res[0] ^= 1;
                        }
                        NasEpsMessage::new_emm(nasx::NasAuthenticationResponse::new(
                            nasx::NasAuthenticationResponseParameter::new(res),
                        ))
                    }
                    Err(pepc_security::UsimError::SynchFailure { auts }) => {
                        let mut f = nasx::NasAuthenticationFailure::new(nasx::NasEmmCause::new(
                            EmmCause::SynchFailure.into(),
                        ));
                        f.authentication_failure_parameter =
                            Some(nasx::NasAuthenticationFailureParameter::new(auts.to_vec()));
                        NasEpsMessage::new_emm(f)
                    }
                    Err(_) => NasEpsMessage::new_emm(nasx::NasAuthenticationFailure::new(
                        nasx::NasEmmCause::new(EmmCause::MacFailure.into()),
                    )),
                };
                (
                    "AuthenticationRequest".into(),
                    Some(reply.encode().map_err(|e| e.to_string())?),
                )
            }
            Emm::SecurityModeCommand(_) => {
                let m = NasEpsMessage::new_emm(nasx::NasSecurityModeComplete::new());
                let s = self.sec.as_mut().ok_or("no ctx")?;
                let b = s
                    .protect(&m, true, Direction::Uplink)
                    .map_err(|e| e.to_string())?;
                self.up_count();
                ("SecurityModeCommand".into(), Some(b))
            }
            Emm::AttachAccept(a) => {
                if let Some(g) = a.guti.as_ref() {
                    if let nasx::Identity::Guti(_, _, _, t) = nasx::parse_identity(&g.value) {
                        self.m_tmsi = Some(t);
                    }
                }
                if let Ok(NasEpsMessage::Esm(h, Esm::ActivateDefaultEpsBearerContextRequest(r))) =
                    a.esm_message_container.decode_as_esm_message()
                {
                    self.ue_ip = r.pdn_address.ipv4().map(Ipv4Addr::from);
                    self.pdns.clear();
                    self.dedicated.clear();
                    if let Some(ip) = self.ue_ip {
                        self.pdns.push((h.eps_bearer_identity, ip));
                    }
                    let acc = NasEpsMessage::new_esm(
                        nasx::NasActivateDefaultEpsBearerContextAccept::new(),
                        h.eps_bearer_identity,
                        0,
                    );
                    let c = nasx::NasEsmMessageContainer::from_esm_message(&acc)
                        .map_err(|e| e.to_string())?;
                    let m = NasEpsMessage::new_emm(nasx::NasAttachComplete::new(c));
                    let b = self.protect(&m);
                    ("AttachAccept".into(), Some(b))
                } else {
                    return Err("Attach Accept without default bearer".into());
                }
            }
            Emm::DetachRequestUeTerminated(_) => {
                let b = self.protect(&NasEpsMessage::new_emm(nasx::NasDetachAccept::new()));
                ("DetachRequest".into(), Some(b))
            }
            Emm::GutiReallocationCommand(g) => {
                if let nasx::Identity::Guti(_, _, _, t) = nasx::parse_identity(&g.guti.value) {
                    self.m_tmsi = Some(t);
                }
                let b = self.protect(&NasEpsMessage::new_emm(
                    nasx::NasGutiReallocationComplete::new(),
                ));
                ("GutiReallocationCommand".into(), Some(b))
            }
            Emm::AttachReject(r) => (format!("AttachReject#{}", r.emm_cause.value), None),
            Emm::ServiceReject(r) => (format!("ServiceReject#{}", r.emm_cause.value), None),
            Emm::TrackingAreaUpdateReject(r) => (format!("TauReject#{}", r.emm_cause.value), None),
            other => (format!("{:?}", other.message_type()), None),
        })
    }

    fn on_esm(&mut self, ebi: u8, pti: u8, e: Esm) -> Result<(String, Option<Vec<u8>>), String> {
        self.last_pti = pti;
        Ok(match e {
            Esm::ActivateDefaultEpsBearerContextRequest(r) => {
                // Standalone PDN connectivity (the attach one rides in Attach Accept).
                let ip = r
                    .pdn_address
                    .ipv4()
                    .map(Ipv4Addr::from)
                    .ok_or("default bearer without an IPv4 address")?;
                self.pdns.retain(|(e, _)| *e != ebi);
                self.pdns.push((ebi, ip));
                let b = self.protect(&NasEpsMessage::new_esm(
                    nasx::NasActivateDefaultEpsBearerContextAccept::new(),
                    ebi,
                    pti,
                ));
                ("ActivateDefaultEpsBearerContextRequest".into(), Some(b))
            }
            Esm::PdnConnectivityReject(r) => {
                (format!("PdnConnectivityReject#{}", r.esm_cause.value), None)
            }
            Esm::PdnDisconnectReject(r) => {
                (format!("PdnDisconnectReject#{}", r.esm_cause.value), None)
            }
            Esm::BearerResourceAllocationReject(r) => (
                format!("BearerResourceAllocationReject#{}", r.esm_cause.value),
                None,
            ),
            Esm::BearerResourceModificationReject(r) => (
                format!("BearerResourceModificationReject#{}", r.esm_cause.value),
                None,
            ),
            Esm::EsmInformationRequest(_) => {
                let mut r = nasx::NasEsmInformationResponse::new();
                r.access_point_name = Some(nasx::NasAccessPointName::new(nasx::apn_value("ims")));
                let b = self.protect(&NasEpsMessage::new_esm(r, 0, self.pti));
                ("EsmInformationRequest".into(), Some(b))
            }
            Esm::ActivateDedicatedEpsBearerContextRequest(r) => {
                self.dedicated.retain(|(e, _, _)| *e != ebi);
                self.dedicated.push((
                    ebi,
                    r.linked_eps_bearer_identity.bearer_identity(),
                    r.tft.value.to_vec(),
                ));
                let b = self.protect(&NasEpsMessage::new_esm(
                    nasx::NasActivateDedicatedEpsBearerContextAccept::new(),
                    ebi,
                    pti,
                ));
                ("ActivateDedicatedEpsBearerContextRequest".into(), Some(b))
            }
            Esm::ModifyEpsBearerContextRequest(r) => {
                if let (Some(t), Some(d)) = (
                    r.tft.as_ref(),
                    self.dedicated.iter_mut().find(|(e, _, _)| *e == ebi),
                ) {
                    d.2 = t.value.to_vec();
                }
                let b = self.protect(&NasEpsMessage::new_esm(
                    nasx::NasModifyEpsBearerContextAccept::new(),
                    ebi,
                    pti,
                ));
                ("ModifyEpsBearerContextRequest".into(), Some(b))
            }
            Esm::DeactivateEpsBearerContextRequest(_) => {
                // A default bearer takes its PDN connection and linked bearers with it.
                if self.pdns.iter().any(|(e, _)| *e == ebi) {
                    self.pdns.retain(|(e, _)| *e != ebi);
                    self.dedicated.retain(|(_, l, _)| *l != ebi);
                }
                self.dedicated.retain(|(e, _, _)| *e != ebi);
                let b = self.protect(&NasEpsMessage::new_esm(
                    nasx::NasDeactivateEpsBearerContextAccept::new(),
                    ebi,
                    pti,
                ));
                ("DeactivateEpsBearerContextRequest".into(), Some(b))
            }
            other => (format!("{:?}", other.message_type()), None),
        })
    }
}
