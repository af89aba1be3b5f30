//! eNB/UE emulator speaking S1AP/NAS over SCTP and GTP-U.

pub mod enb;
pub mod ue;
