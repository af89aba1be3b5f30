#![allow(dead_code)] // generated tables: not every direction is used
//! Index <-> value tables for the ENUMERATED types of the bindings, which expose no
//! conversion from the ASN.1 index (generated from oxirush-s1ap 0.3.0's s1ap.rs).

use oxirush_s1ap::s1ap as raw;

pub(crate) fn cause_radio_network_from(v: u8) -> Option<raw::CauseRadioNetwork> {
    Some(match v {
        0 => raw::CauseRadioNetwork::unspecified,
        1 => raw::CauseRadioNetwork::tx2relocoverall_expiry,
        2 => raw::CauseRadioNetwork::successful_handover,
        3 => raw::CauseRadioNetwork::release_due_to_eutran_generated_reason,
        4 => raw::CauseRadioNetwork::handover_cancelled,
        5 => raw::CauseRadioNetwork::partial_handover,
        6 => raw::CauseRadioNetwork::ho_failure_in_target_EPC_eNB_or_target_system,
        7 => raw::CauseRadioNetwork::ho_target_not_allowed,
        8 => raw::CauseRadioNetwork::tS1relocoverall_expiry,
        9 => raw::CauseRadioNetwork::tS1relocprep_expiry,
        10 => raw::CauseRadioNetwork::cell_not_available,
        11 => raw::CauseRadioNetwork::unknown_targetID,
        12 => raw::CauseRadioNetwork::no_radio_resources_available_in_target_cell,
        13 => raw::CauseRadioNetwork::unknown_mme_ue_s1ap_id,
        14 => raw::CauseRadioNetwork::unknown_enb_ue_s1ap_id,
        15 => raw::CauseRadioNetwork::unknown_pair_ue_s1ap_id,
        16 => raw::CauseRadioNetwork::handover_desirable_for_radio_reason,
        17 => raw::CauseRadioNetwork::time_critical_handover,
        18 => raw::CauseRadioNetwork::resource_optimisation_handover,
        19 => raw::CauseRadioNetwork::reduce_load_in_serving_cell,
        20 => raw::CauseRadioNetwork::user_inactivity,
        21 => raw::CauseRadioNetwork::radio_connection_with_ue_lost,
        22 => raw::CauseRadioNetwork::load_balancing_tau_required,
        23 => raw::CauseRadioNetwork::cs_fallback_triggered,
        24 => raw::CauseRadioNetwork::ue_not_available_for_ps_service,
        25 => raw::CauseRadioNetwork::radio_resources_not_available,
        26 => raw::CauseRadioNetwork::failure_in_radio_interface_procedure,
        27 => raw::CauseRadioNetwork::invalid_qos_combination,
        28 => raw::CauseRadioNetwork::interrat_redirection,
        29 => raw::CauseRadioNetwork::interaction_with_other_procedure,
        30 => raw::CauseRadioNetwork::unknown_E_RAB_ID,
        31 => raw::CauseRadioNetwork::multiple_E_RAB_ID_instances,
        32 => {
            raw::CauseRadioNetwork::encryption_and_or_integrity_protection_algorithms_not_supported
        }
        33 => raw::CauseRadioNetwork::s1_intra_system_handover_triggered,
        34 => raw::CauseRadioNetwork::s1_inter_system_handover_triggered,
        35 => raw::CauseRadioNetwork::x2_handover_triggered,
        36 => raw::CauseRadioNetwork::redirection_towards_1xRTT,
        37 => raw::CauseRadioNetwork::not_supported_QCI_value,
        38 => raw::CauseRadioNetwork::invalid_CSG_Id,
        39 => raw::CauseRadioNetwork::release_due_to_pre_emption,
        40 => raw::CauseRadioNetwork::n26_interface_not_available,
        41 => raw::CauseRadioNetwork::insufficient_ue_capabilities,
        42 => raw::CauseRadioNetwork::maximum_bearer_pre_emption_rate_exceeded,
        43 => raw::CauseRadioNetwork::up_integrity_protection_not_possible,
        44 => raw::CauseRadioNetwork::release_due_to_discontinuous_coverage,
        _ => return None,
    })
}
pub(crate) fn cause_radio_network_to(v: raw::CauseRadioNetwork) -> u8 {
    v as u8
}

pub(crate) fn cause_transport_from(v: u8) -> Option<raw::CauseTransport> {
    Some(match v {
        0 => raw::CauseTransport::transport_resource_unavailable,
        1 => raw::CauseTransport::unspecified,
        _ => return None,
    })
}
pub(crate) fn cause_transport_to(v: raw::CauseTransport) -> u8 {
    v as u8
}

pub(crate) fn cause_nas_from(v: u8) -> Option<raw::CauseNas> {
    Some(match v {
        0 => raw::CauseNas::normal_release,
        1 => raw::CauseNas::authentication_failure,
        2 => raw::CauseNas::detach,
        3 => raw::CauseNas::unspecified,
        4 => raw::CauseNas::csg_subscription_expiry,
        5 => raw::CauseNas::uE_not_in_PLMN_serving_area,
        6 => raw::CauseNas::iab_not_authorized,
        _ => return None,
    })
}
pub(crate) fn cause_nas_to(v: raw::CauseNas) -> u8 {
    v as u8
}

pub(crate) fn cause_protocol_from(v: u8) -> Option<raw::CauseProtocol> {
    Some(match v {
        0 => raw::CauseProtocol::transfer_syntax_error,
        1 => raw::CauseProtocol::abstract_syntax_error_reject,
        2 => raw::CauseProtocol::abstract_syntax_error_ignore_and_notify,
        3 => raw::CauseProtocol::message_not_compatible_with_receiver_state,
        4 => raw::CauseProtocol::semantic_error,
        5 => raw::CauseProtocol::abstract_syntax_error_falsely_constructed_message,
        6 => raw::CauseProtocol::unspecified,
        _ => return None,
    })
}
pub(crate) fn cause_protocol_to(v: raw::CauseProtocol) -> u8 {
    v as u8
}

pub(crate) fn cause_misc_from(v: u8) -> Option<raw::CauseMisc> {
    Some(match v {
        0 => raw::CauseMisc::control_processing_overload,
        1 => raw::CauseMisc::not_enough_user_plane_processing_resources,
        2 => raw::CauseMisc::hardware_failure,
        3 => raw::CauseMisc::om_intervention,
        4 => raw::CauseMisc::unspecified,
        5 => raw::CauseMisc::unknown_PLMN,
        _ => return None,
    })
}
pub(crate) fn cause_misc_to(v: raw::CauseMisc) -> u8 {
    v as u8
}

pub(crate) fn rrc_establishment_cause_from(v: u8) -> Option<raw::RRCEstablishmentCause> {
    Some(match v {
        0 => raw::RRCEstablishmentCause::emergency,
        1 => raw::RRCEstablishmentCause::highPriorityAccess,
        2 => raw::RRCEstablishmentCause::mt_Access,
        3 => raw::RRCEstablishmentCause::mo_Signalling,
        4 => raw::RRCEstablishmentCause::mo_Data,
        5 => raw::RRCEstablishmentCause::delay_TolerantAccess,
        6 => raw::RRCEstablishmentCause::mo_VoiceCall,
        7 => raw::RRCEstablishmentCause::mo_ExceptionData,
        _ => return None,
    })
}
pub(crate) fn rrc_establishment_cause_to(v: raw::RRCEstablishmentCause) -> u8 {
    v as u8
}

pub(crate) fn pagingdrx_from(v: u8) -> Option<raw::PagingDRX> {
    Some(match v {
        0 => raw::PagingDRX::v32,
        1 => raw::PagingDRX::v64,
        2 => raw::PagingDRX::v128,
        3 => raw::PagingDRX::v256,
        _ => return None,
    })
}
pub(crate) fn pagingdrx_to(v: raw::PagingDRX) -> u8 {
    v as u8
}

pub(crate) fn time_to_wait_from(v: u8) -> Option<raw::TimeToWait> {
    Some(match v {
        0 => raw::TimeToWait::v1s,
        1 => raw::TimeToWait::v2s,
        2 => raw::TimeToWait::v5s,
        3 => raw::TimeToWait::v10s,
        4 => raw::TimeToWait::v20s,
        5 => raw::TimeToWait::v60s,
        _ => return None,
    })
}
pub(crate) fn time_to_wait_to(v: raw::TimeToWait) -> u8 {
    v as u8
}

pub(crate) fn handover_type_from(v: u8) -> Option<raw::HandoverType> {
    Some(match v {
        0 => raw::HandoverType::intralte,
        1 => raw::HandoverType::ltetoutran,
        2 => raw::HandoverType::ltetogeran,
        3 => raw::HandoverType::utrantolte,
        4 => raw::HandoverType::gerantolte,
        5 => raw::HandoverType::eps_to_5gs,
        6 => raw::HandoverType::fivegs_to_eps,
        _ => return None,
    })
}
pub(crate) fn handover_type_to(v: raw::HandoverType) -> u8 {
    v as u8
}

pub(crate) fn cn_domain_from(v: u8) -> Option<raw::CNDomain> {
    Some(match v {
        0 => raw::CNDomain::ps,
        1 => raw::CNDomain::cs,
        _ => return None,
    })
}
pub(crate) fn cn_domain_to(v: raw::CNDomain) -> u8 {
    v as u8
}

pub(crate) fn pre_emption_capability_from(v: u8) -> Option<raw::PreEmptionCapability> {
    Some(match v {
        0 => raw::PreEmptionCapability::shall_not_trigger_pre_emption,
        1 => raw::PreEmptionCapability::may_trigger_pre_emption,
        _ => return None,
    })
}
pub(crate) fn pre_emption_capability_to(v: raw::PreEmptionCapability) -> u8 {
    v as u8
}

pub(crate) fn pre_emption_vulnerability_from(v: u8) -> Option<raw::PreEmptionVulnerability> {
    Some(match v {
        0 => raw::PreEmptionVulnerability::not_pre_emptable,
        1 => raw::PreEmptionVulnerability::pre_emptable,
        _ => return None,
    })
}
pub(crate) fn pre_emption_vulnerability_to(v: raw::PreEmptionVulnerability) -> u8 {
    v as u8
}
