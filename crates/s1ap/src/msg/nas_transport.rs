//! NAS transport (TS 36.413 §8.6): Initial UE Message, Uplink/Downlink NAS Transport and
//! NAS Non Delivery Indication.

use super::*;

// ------------------------------------------------------------------ NAS transport

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitialUeMessage {
    pub enb_ue_id: u32,
    pub nas_pdu: Vec<u8>,
    pub tai: Tai,
    pub ecgi: Ecgi,
    /// RRC establishment cause index (0 emergency, 1 highPriorityAccess, 2 mt-Access,
    /// 3 mo-Signalling, 4 mo-Data, 5 delay-TolerantAccess, 6 mo-VoiceCall, ...).
    pub rrc_cause: u8,
    pub s_tmsi: Option<STmsi>,
    pub gummei: Option<Gummei>,
}
message!(
    InitialUeMessage,
    Initiating,
    proc_code::INITIAL_UE_MESSAGE,
    "InitialUEMessage",
    fast_decode
);
impl InitialUeMessage {
    /// The hand-written decoder (see `fast`); `None` where it defers.
    fn decode_fast(bytes: &[u8]) -> Option<Self> {
        crate::fast::initial_ue_message(bytes)
    }
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let mut ies: Ies = vec![
            build_s1ap_ie!(InitialUEMessage, eNB_UE_S1AP_ID(self.enb_ue_id))?,
            build_s1ap_ie!(
                InitialUEMessage,
                NAS_PDU(raw::NASPDU::from(self.nas_pdu.clone()))
            )?,
            build_s1ap_ie!(InitialUEMessage, TAI(self.tai.to_raw()))?,
            build_s1ap_ie!(InitialUEMessage, EUTRAN_CGI(self.ecgi.to_raw()?))?,
            build_s1ap_ie!(
                InitialUEMessage,
                RRC_Establishment_Cause(rrc_cause_raw(self.rrc_cause)?)
            )?,
        ];
        if let Some(s) = self.s_tmsi {
            ies.push(build_s1ap_ie!(InitialUEMessage, S_TMSI(s.to_raw()))?);
        }
        if let Some(g) = self.gummei {
            ies.push(build_s1ap_ie!(InitialUEMessage, GUMMEI_ID(g.to_raw()))?);
        }
        pdu!(InitialUEMessage, ies)
    }
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, InitialUEMessage,
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            req nas_pdu: Vec<u8> = NAS_PDU(n) => n.0.to_vec(),
            req tai: Tai = TAI(t) => Tai::from_raw(&t),
            req ecgi: Ecgi = EUTRAN_CGI(e) => Ecgi::from_raw(&e),
            req rrc_cause: u8 = RRC_Establishment_Cause(c) => enums::rrc_establishment_cause_to(c),
            opt s_tmsi: STmsi = S_TMSI(s) => STmsi::from_raw(&s),
            opt gummei: Gummei = GUMMEI_ID(g) => Gummei::from_raw(&g),
        );
        Ok(InitialUeMessage {
            enb_ue_id,
            nas_pdu,
            tai,
            ecgi,
            rrc_cause,
            s_tmsi,
            gummei,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UplinkNasTransport {
    pub mme_ue_id: u32,
    pub enb_ue_id: u32,
    pub nas_pdu: Vec<u8>,
    pub ecgi: Ecgi,
    pub tai: Tai,
}
message!(
    UplinkNasTransport,
    Initiating,
    proc_code::UPLINK_NAS_TRANSPORT,
    "UplinkNASTransport",
    fast_decode
);
impl UplinkNasTransport {
    /// The hand-written decoder (see `fast`); `None` where it defers.
    fn decode_fast(bytes: &[u8]) -> Option<Self> {
        crate::fast::uplink_nas_transport(bytes)
    }
    pub fn to_pdu(&self) -> R<S1apPdu> {
        pdu!(
            UplinkNASTransport,
            vec![
                build_s1ap_ie!(UplinkNASTransport, MME_UE_S1AP_ID(self.mme_ue_id))?,
                build_s1ap_ie!(UplinkNASTransport, eNB_UE_S1AP_ID(self.enb_ue_id))?,
                build_s1ap_ie!(
                    UplinkNASTransport,
                    NAS_PDU(raw::NASPDU::from(self.nas_pdu.clone()))
                )?,
                build_s1ap_ie!(UplinkNASTransport, EUTRAN_CGI(self.ecgi.to_raw()?))?,
                build_s1ap_ie!(UplinkNASTransport, TAI(self.tai.to_raw()))?,
            ]
        )
    }
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, UplinkNASTransport,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            req nas_pdu: Vec<u8> = NAS_PDU(n) => n.0.to_vec(),
            req ecgi: Ecgi = EUTRAN_CGI(e) => Ecgi::from_raw(&e),
            req tai: Tai = TAI(t) => Tai::from_raw(&t),
        );
        Ok(UplinkNasTransport {
            mme_ue_id,
            enb_ue_id,
            nas_pdu,
            ecgi,
            tai,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownlinkNasTransport {
    pub mme_ue_id: u32,
    pub enb_ue_id: u32,
    pub nas_pdu: Vec<u8>,
}
message!(
    DownlinkNasTransport,
    Initiating,
    proc_code::DOWNLINK_NAS_TRANSPORT,
    "DownlinkNASTransport",
    fast
);
impl DownlinkNasTransport {
    /// The hand-written encoder (see `fast`); `None` where it defers to `to_pdu`.
    fn encode_fast(&self) -> Option<Vec<u8>> {
        crate::fast::downlink_nas_transport(self.mme_ue_id, self.enb_ue_id, &self.nas_pdu)
    }

    pub fn to_pdu(&self) -> R<S1apPdu> {
        pdu!(
            DownlinkNASTransport,
            vec![
                build_s1ap_ie!(DownlinkNASTransport, MME_UE_S1AP_ID(self.mme_ue_id))?,
                build_s1ap_ie!(DownlinkNASTransport, eNB_UE_S1AP_ID(self.enb_ue_id))?,
                build_s1ap_ie!(
                    DownlinkNASTransport,
                    NAS_PDU(raw::NASPDU::from(self.nas_pdu.clone()))
                )?,
            ]
        )
    }
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, DownlinkNASTransport,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            req nas_pdu: Vec<u8> = NAS_PDU(n) => n.0.to_vec(),
        );
        Ok(DownlinkNasTransport {
            mme_ue_id,
            enb_ue_id,
            nas_pdu,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NasNonDeliveryIndication {
    pub mme_ue_id: u32,
    pub enb_ue_id: u32,
    pub nas_pdu: Vec<u8>,
    pub cause: Cause,
}
message!(
    NasNonDeliveryIndication,
    Initiating,
    proc_code::NAS_NON_DELIVERY_INDICATION,
    "NASNonDeliveryIndication"
);
impl NasNonDeliveryIndication {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        pdu!(
            NASNonDeliveryIndication,
            vec![
                build_s1ap_ie!(NASNonDeliveryIndication, MME_UE_S1AP_ID(self.mme_ue_id))?,
                build_s1ap_ie!(NASNonDeliveryIndication, eNB_UE_S1AP_ID(self.enb_ue_id))?,
                build_s1ap_ie!(
                    NASNonDeliveryIndication,
                    NAS_PDU(raw::NASPDU::from(self.nas_pdu.clone()))
                )?,
                build_s1ap_ie!(NASNonDeliveryIndication, Cause(self.cause.to_raw()?))?,
            ]
        )
    }
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, NASNonDeliveryIndication,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            req nas_pdu: Vec<u8> = NAS_PDU(n) => n.0.to_vec(),
            req cause: Cause = Cause(c) => Cause::from_raw(&c)?,
        );
        Ok(NasNonDeliveryIndication {
            mme_ue_id,
            enb_ue_id,
            nas_pdu,
            cause,
        })
    }
}
