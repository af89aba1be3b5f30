//! What the MME's modules share: its own types and helpers, and the codec, S1AP, security
//! and slice types the procedures take.

pub(crate) use crate::cause::{EmmCause, EsmCause, HssFailureCause};
pub(crate) use crate::config::MmeConfig;
pub(crate) use crate::esm::{free_ebi, release_unlisted};
pub(crate) use crate::mme::{
    gbr_of, log_cp, sec_caps, warn_cp, AssocId, ConnKey, Cx, Emm_, Enb, HoState, Mme, MmeError,
    Output, Parked, Proc, ProcFailure, Procedure, Resume, TimerKind, Ue, CHECKPOINT_DL_LEASE,
};
pub(crate) use crate::nasx::{
    self, Direction, Identity, NasEmmMessage as Emm, NasEpsMessage, NasEsmMessage as Esm, SecCtx,
    UnprotectError,
};
pub(crate) use crate::pcrf::PcefRule;
pub(crate) use crate::ControlPlane;
pub(crate) use pepc_s1ap::msg::*;
pub(crate) use pepc_s1ap::{
    Cause, Ecgi, GlobalEnbId, Key256 as S1Key, SecurityContext, Tai, UeS1apIds,
    UeSecurityCapabilities,
};
pub(crate) use pepc_security::{AuthVector, Eia, Key256};
pub(crate) use pepc_slice::context::{Arp, Guti};
pub(crate) use pepc_slice::control::{
    AttachParams, BearerParams, ControlEvent, CtrlError, PdnParams,
};
pub(crate) use std::collections::{HashMap, VecDeque};
pub(crate) use std::time::Instant;
