//! The codes this crate uses: commands, applications, AVPs and results of RFC 6733,
//! RFC 4006 (credit control), TS 29.272 (S6a) and TS 29.212/29.214 (Gx).

/// The 3GPP vendor (IANA enterprise number).
pub const VENDOR_3GPP: u32 = 10415;

pub mod app {
    pub const COMMON: u32 = 0;
    pub const S6A: u32 = 16777251;
    pub const GX: u32 = 16777238;
    /// A relay agent advertises this one (RFC 6733 §2.4).
    pub const RELAY: u32 = 0xffff_ffff;
}

pub mod cmd {
    pub const CAPABILITIES_EXCHANGE: u32 = 257;
    /// RFC 6733 §8.3 (Gx RAR/RAA, TS 29.212 §5.6.4).
    pub const RE_AUTH: u32 = 258;
    /// RFC 4006 (Gx CCR/CCA, TS 29.212 §5.6.2).
    pub const CREDIT_CONTROL: u32 = 272;
    pub const DEVICE_WATCHDOG: u32 = 280;
    pub const DISCONNECT_PEER: u32 = 282;
    // TS 29.272 §7.2.
    pub const UPDATE_LOCATION: u32 = 316;
    pub const CANCEL_LOCATION: u32 = 317;
    pub const AUTHENTICATION_INFORMATION: u32 = 318;
    pub const INSERT_SUBSCRIBER_DATA: u32 = 319;
    pub const DELETE_SUBSCRIBER_DATA: u32 = 320;
    pub const PURGE_UE: u32 = 321;
}

/// IETF AVPs (vendor 0).
pub mod avp {
    pub const USER_NAME: u32 = 1;
    pub const FRAMED_IP_ADDRESS: u32 = 8;
    pub const CALLED_STATION_ID: u32 = 30;
    pub const RE_AUTH_REQUEST_TYPE: u32 = 285;
    pub const TERMINATION_CAUSE: u32 = 295;
    // RFC 4006 (credit control).
    pub const CC_INPUT_OCTETS: u32 = 412;
    pub const CC_OUTPUT_OCTETS: u32 = 414;
    pub const CC_REQUEST_NUMBER: u32 = 415;
    pub const CC_REQUEST_TYPE: u32 = 416;
    pub const CC_TOTAL_OCTETS: u32 = 421;
    pub const GRANTED_SERVICE_UNIT: u32 = 431;
    pub const RATING_GROUP: u32 = 432;
    pub const SUBSCRIPTION_ID: u32 = 443;
    pub const SUBSCRIPTION_ID_DATA: u32 = 444;
    pub const USED_SERVICE_UNIT: u32 = 446;
    pub const SUBSCRIPTION_ID_TYPE: u32 = 450;
    pub const HOST_IP_ADDRESS: u32 = 257;
    pub const AUTH_APPLICATION_ID: u32 = 258;
    pub const ACCT_APPLICATION_ID: u32 = 259;
    pub const VENDOR_SPECIFIC_APPLICATION_ID: u32 = 260;
    pub const SESSION_ID: u32 = 263;
    pub const ORIGIN_HOST: u32 = 264;
    pub const SUPPORTED_VENDOR_ID: u32 = 265;
    pub const VENDOR_ID: u32 = 266;
    pub const FIRMWARE_REVISION: u32 = 267;
    pub const RESULT_CODE: u32 = 268;
    pub const PRODUCT_NAME: u32 = 269;
    pub const DISCONNECT_CAUSE: u32 = 273;
    pub const AUTH_SESSION_STATE: u32 = 277;
    pub const ORIGIN_STATE_ID: u32 = 278;
    pub const FAILED_AVP: u32 = 279;
    pub const PROXY_INFO: u32 = 284;
    pub const ROUTE_RECORD: u32 = 282;
    pub const DESTINATION_REALM: u32 = 283;
    pub const ERROR_MESSAGE: u32 = 281;
    pub const ERROR_REPORTING_HOST: u32 = 294;
    pub const DESTINATION_HOST: u32 = 293;
    pub const ORIGIN_REALM: u32 = 296;
    pub const EXPERIMENTAL_RESULT: u32 = 297;
    pub const EXPERIMENTAL_RESULT_CODE: u32 = 298;
    pub const INBAND_SECURITY_ID: u32 = 299;
    /// RFC 5778: the APN in S6a.
    pub const SERVICE_SELECTION: u32 = 493;
}

/// 3GPP AVPs (vendor 10415).
pub mod avp3 {
    // Gx (TS 29.212 §5.3; Flow-Description from Rx, TS 29.214).
    pub const FLOW_DESCRIPTION: u32 = 507;
    pub const CHARGING_RULE_INSTALL: u32 = 1001;
    pub const CHARGING_RULE_REMOVE: u32 = 1002;
    pub const CHARGING_RULE_DEFINITION: u32 = 1003;
    pub const CHARGING_RULE_BASE_NAME: u32 = 1004;
    pub const CHARGING_RULE_NAME: u32 = 1005;
    pub const EVENT_TRIGGER: u32 = 1006;
    pub const PRECEDENCE: u32 = 1010;
    pub const QOS_INFORMATION: u32 = 1016;
    pub const CHARGING_RULE_REPORT: u32 = 1018;
    pub const PCC_RULE_STATUS: u32 = 1019;
    pub const BEARER_CONTROL_MODE: u32 = 1023;
    pub const NETWORK_REQUEST_SUPPORT: u32 = 1024;
    pub const GUARANTEED_BITRATE_DL: u32 = 1025;
    pub const GUARANTEED_BITRATE_UL: u32 = 1026;
    pub const IP_CAN_TYPE: u32 = 1027;
    pub const RULE_FAILURE_CODE: u32 = 1031;
    pub const APN_AGGREGATE_MAX_BITRATE_DL: u32 = 1040;
    pub const APN_AGGREGATE_MAX_BITRATE_UL: u32 = 1041;
    pub const SESSION_RELEASE_CAUSE: u32 = 1045;
    pub const DEFAULT_EPS_BEARER_QOS: u32 = 1049;
    pub const FLOW_INFORMATION: u32 = 1058;
    pub const MONITORING_KEY: u32 = 1066;
    pub const USAGE_MONITORING_INFORMATION: u32 = 1067;
    pub const USAGE_MONITORING_LEVEL: u32 = 1068;
    pub const FLOW_DIRECTION: u32 = 1080;
    pub const MAX_REQUESTED_BANDWIDTH_DL: u32 = 515;
    pub const MAX_REQUESTED_BANDWIDTH_UL: u32 = 516;
    pub const SUPPORTED_FEATURES: u32 = 628;
    pub const MSISDN: u32 = 701;
    pub const RAT_TYPE: u32 = 1032;
    pub const QOS_CLASS_IDENTIFIER: u32 = 1028;
    pub const ALLOCATION_RETENTION_PRIORITY: u32 = 1034;
    pub const PRIORITY_LEVEL: u32 = 1046;
    pub const PRE_EMPTION_CAPABILITY: u32 = 1047;
    pub const PRE_EMPTION_VULNERABILITY: u32 = 1048;
    pub const SUBSCRIPTION_DATA: u32 = 1400;
    pub const ULR_FLAGS: u32 = 1405;
    pub const ULA_FLAGS: u32 = 1406;
    pub const VISITED_PLMN_ID: u32 = 1407;
    pub const REQUESTED_EUTRAN_AUTHENTICATION_INFO: u32 = 1408;
    pub const NUMBER_OF_REQUESTED_VECTORS: u32 = 1410;
    pub const RE_SYNCHRONIZATION_INFO: u32 = 1411;
    pub const IMMEDIATE_RESPONSE_PREFERRED: u32 = 1412;
    pub const AUTHENTICATION_INFO: u32 = 1413;
    pub const E_UTRAN_VECTOR: u32 = 1414;
    pub const ITEM_NUMBER: u32 = 1419;
    pub const CANCELLATION_TYPE: u32 = 1420;
    pub const CONTEXT_IDENTIFIER: u32 = 1423;
    pub const SUBSCRIBER_STATUS: u32 = 1424;
    pub const ALL_APN_CONFIGURATIONS_INCLUDED_INDICATOR: u32 = 1428;
    pub const APN_CONFIGURATION_PROFILE: u32 = 1429;
    pub const APN_CONFIGURATION: u32 = 1430;
    pub const EPS_SUBSCRIBED_QOS_PROFILE: u32 = 1431;
    pub const AMBR: u32 = 1435;
    pub const PUR_FLAGS: u32 = 1635;
    pub const PUA_FLAGS: u32 = 1442;
    pub const IDR_FLAGS: u32 = 1490;
    pub const IDA_FLAGS: u32 = 1441;
    pub const CLR_FLAGS: u32 = 1638;
    pub const RAND: u32 = 1447;
    pub const XRES: u32 = 1448;
    pub const AUTN: u32 = 1449;
    pub const KASME: u32 = 1450;
    pub const PDN_TYPE: u32 = 1456;
}

/// Result-Code values (RFC 6733 §7.1).
pub mod result {
    pub const SUCCESS: u32 = 2001;
    pub const COMMAND_UNSUPPORTED: u32 = 3001;
    pub const UNABLE_TO_DELIVER: u32 = 3002;
    pub const APPLICATION_UNSUPPORTED: u32 = 3007;
    pub const INVALID_HDR_BITS: u32 = 3008;
    pub const INVALID_AVP_BITS: u32 = 3009;
    pub const UNKNOWN_PEER: u32 = 3010;
    pub const AVP_UNSUPPORTED: u32 = 5001;
    pub const MISSING_AVP: u32 = 5005;
    pub const NO_COMMON_APPLICATION: u32 = 5010;
    pub const UNABLE_TO_COMPLY: u32 = 5012;
    /// RFC 6733 §7.1.5: a session we do not hold (Gx RAR).
    pub const UNKNOWN_SESSION_ID: u32 = 5002;
}

/// Experimental-Result-Code values of TS 29.272 §7.4 (vendor 3GPP).
pub mod exp {
    /// TS 29.212 §5.5.3.
    pub const ERROR_INITIAL_PARAMETERS: u32 = 5140;
    pub const ERROR_USER_UNKNOWN: u32 = 5001;
    pub const ERROR_ROAMING_NOT_ALLOWED: u32 = 5004;
    pub const ERROR_UNKNOWN_EPS_SUBSCRIPTION: u32 = 5420;
    pub const ERROR_RAT_NOT_ALLOWED: u32 = 5421;
    pub const ERROR_EQUIPMENT_UNKNOWN: u32 = 5422;
    pub const AUTHENTICATION_DATA_UNAVAILABLE: u32 = 4181;
}
