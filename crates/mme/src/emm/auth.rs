//! EPS authentication and key agreement (TS 24.301 §5.4.2, TS 33.401 §6.1): Authentication
//! Request/Response/Failure (with resynchronisation) and Reject; a good RES selects the
//! algorithms and sends the Security Mode Command (§5.4.3.2).

use crate::prelude::*;

impl Mme {
    /// The attach of subscriber `imsi` (`claim`: learned by identification) goes on
    /// with AKA: an authentication vector first (S6a AIR). Update Location (ULR) waits
    /// until the UE is authenticated and security mode is done (TS 23.401 §5.3.2.1:
    /// steps 5a before step 8), so an Attach Request anyone can send in a subscriber's
    /// name never moves the subscriber's registration to this MME.
    // The MME and the slice (`cp`) travel apart until handlers take one context (STYLE.md §4).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start_auth(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        imsi: u64,
        attach: u16,
        claim: bool,
        out: &mut Vec<Output>,
    ) {
        self.adopt_subscriber(cp, id, imsi, claim, out);
        self.ask_vector(cp, id, imsi, attach, Resume::Attach, out);
    }

    /// The UE's Authentication Failure (§5.4.2.6): a synch failure resynchronises
    /// the HSS once (then a fresh challenge); anything else is an Authentication
    /// Reject.
    pub(crate) fn auth_failure(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        f: &nasx::NasAuthenticationFailure,
        out: &mut Vec<Output>,
    ) {
        let Some((mut cx, u)) = self.split(cp, id, out) else {
            return;
        };
        match auth_failure(&mut cx, u, f) {
            Failure::Ignored => {}
            Failure::Resync {
                imsi,
                rand_auts,
                then,
            } => {
                // The HSS answers with a fresh vector, or refuses (Authentication
                // Reject, as when the AUTS does not verify).
                self.ask_resync(cp, id, imsi, rand_auts, then, out);
            }
            Failure::Rejected { abort_reauth } => {
                if abort_reauth {
                    let why = ProcFailure::AuthenticationRejected;
                    self.abort_reauth(cp, id, why, out);
                }
            }
        }
    }

    /// Authentication Reject; an attach ends with it, a re-authentication of a
    /// registered UE only loses its connection ([`Mme::abort_reauth`]).
    pub(crate) fn auth_reject(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        then: Resume,
        out: &mut Vec<Output>,
    ) {
        let Some((mut cx, u)) = self.split(cp, id, out) else {
            // No context: counted, nothing to send.
            self.stats.auth_rejects += 1;
            if then != Resume::Attach {
                self.abort_reauth(cp, id, ProcFailure::AuthenticationRejected, out);
            }
            return;
        };
        if auth_reject(&mut cx, u, then) {
            self.abort_reauth(cp, id, ProcFailure::AuthenticationRejected, out);
        }
    }

    /// AKA could not be done (HSS failure, no answer): an attach is rejected with
    /// `cause`, a re-authentication aborted.
    pub(crate) fn aka_failed(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        then: Resume,
        cause: EmmCause,
        out: &mut Vec<Output>,
    ) {
        match then {
            Resume::Attach => {
                if let Some((mut cx, u)) = self.split(cp, id, out) {
                    crate::emm::attach::attach_reject(&mut cx, u, cause);
                }
            }
            Resume::Tau { .. } | Resume::Detach => {
                let why = ProcFailure::Rejected(cause.into());
                self.abort_reauth(cp, id, why, out)
            }
        }
    }

    /// A re-authentication the gate asked for failed: whoever sent the unverified
    /// message loses the S1 connection, and the UE's context stays as it was
    /// (registered, its security context and session untouched).
    pub(crate) fn abort_reauth(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        why: ProcFailure,
        out: &mut Vec<Output>,
    ) {
        self.stats.nas_reauth_failures += 1;
        self.proc_end(cp, id, Proc::Authentication, Err(why));
        if let Some(u) = self.ue_mut(cp, id) {
            u.stop_nas_timer();
            u.proc = Procedure::Idle;
        }
        self.release_connection(cp, id, Cause::NAS_UNSPECIFIED, out);
    }

    /// Authenticate UE `id` again before the message the gate held (`then`) changes
    /// anything: a fresh vector, then AKA and security mode (TS 24.301 §4.4.4.3).
    pub(crate) fn reauthenticate(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        then: Resume,
        out: &mut Vec<Output>,
    ) {
        self.stats.nas_reauthentications += 1;
        self.proc_start(cp, id, Proc::Authentication);
        let Some(imsi) = self.ue(cp, id).and_then(|u| u.imsi) else {
            return;
        };
        self.ask_vector(cp, id, imsi, 0, then, out);
    }
}

/// The Authentication Request with vector `v` (`resynced`: after a resynchronisation,
/// which is not done twice in one AKA; `then`: what follows AKA and security mode).
pub(crate) fn send_auth_request(
    cx: &mut Cx<'_>,
    u: &mut Ue,
    v: Box<AuthVector>,
    resynced: bool,
    then: Resume,
) {
    let ksi = u.next_ksi % 7;
    u.next_ksi = (ksi + 1) % 7;
    let req = nasx::NasAuthenticationRequest::new(
        nasx::NasKeySetIdentifier::new(ksi),
        nasx::NasAuthenticationParameterRand::new(v.rand.to_vec()),
        nasx::NasAuthenticationParameterAutn::new(v.autn.to_vec()),
    );
    u.proc = Procedure::ExpectAuthResponse {
        vector: v,
        resynced,
        then,
    };
    // The challenge goes protected when a context is in use (re-authentication).
    let t = cx.cfg.t3460;
    cx.send_nas(u, NasEpsMessage::new_emm(req), false, Some(t));
}

/// The UE's RES (§5.4.2.4): a good one selects the algorithms and starts security
/// mode control (§5.4.3.2); a wrong one ends with an Authentication Reject.
pub(crate) fn auth_response(cx: &mut Cx<'_>, u: &mut Ue, res: &[u8]) {
    let id = u.id;
    let (v, then) = match std::mem::replace(&mut u.proc, Procedure::Idle) {
        Procedure::ExpectAuthResponse { vector, then, .. } => (vector, then),
        other => {
            u.proc = other;
            return;
        }
    };
    u.stop_nas_timer();
    let ok = res.len() == v.xres.len()
        && res
            .iter()
            .zip(v.xres.iter())
            .fold(0u8, |a, (x, y)| a | (x ^ y))
            == 0;
    if !ok {
        cx.stats.auth_rejects += 1;
        let rej = NasEpsMessage::new_emm(nasx::NasAuthenticationReject::new());
        cx.send_nas(u, rej, false, None);
        cx.release(u, Cause::NAS_AUTHENTICATION_FAILURE, true);
        return;
    }
    // Algorithm selection by our preference among what the UE supports.
    let cap = [u.ue_net_cap.first().copied(), u.ue_net_cap.get(1).copied()];
    let eea = cx
        .cfg
        .eea_preference
        .iter()
        .copied()
        .find(|a| cap[0].is_some_and(|c| c & (0x80 >> *a as u8) != 0));
    let eia = cx
        .cfg
        .eia_preference
        .iter()
        .copied()
        .filter(|a| *a != Eia::Eia0)
        .find(|a| cap[1].is_some_and(|c| c & (0x80 >> *a as u8) != 0));
    let (Some(eea), Some(eia)) = (eea, eia) else {
        crate::emm::attach::attach_reject(cx, u, EmmCause::UeSecurityCapabilitiesMismatch);
        return;
    };
    let ksi = (u.next_ksi + 6) % 7;
    let ctx = match SecCtx::new(v.kasme.clone(), ksi, eea, eia) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("UE {id}: security context: {e}");
            crate::emm::attach::attach_reject(cx, u, EmmCause::UeSecurityCapabilitiesMismatch);
            return;
        }
    };
    u.proc = Procedure::ExpectSmcComplete {
        sec: Box::new(ctx),
        then,
    };
    // The UE's security capabilities replayed: the first two octets (EEA, EIA) of
    // its UE network capability (none if it is shorter).
    let replay = match cap {
        [Some(e), Some(i)] => vec![e, i],
        _ => vec![0, 0],
    };
    let smc = nasx::NasSecurityModeCommand::new(
        nasx::NasSecurityAlgorithms::new(((eea as u8) << 4) | eia as u8),
        nasx::NasKeySetIdentifier::new(ksi),
        nasx::NasUeSecurityCapability::new(replay),
    );
    let t = cx.cfg.t3460;
    cx.send_nas(u, NasEpsMessage::new_emm(smc), true, Some(t));
}

/// Authentication Reject to `u`. An attach ends with it (its release commanded);
/// `true`: a re-authentication of a registered UE, which only loses its connection
/// ([`Mme::abort_reauth`], with the slice).
pub(crate) fn auth_reject(cx: &mut Cx<'_>, u: &mut Ue, then: Resume) -> bool {
    cx.stats.auth_rejects += 1;
    u.proc = Procedure::Idle;
    let rej = NasEpsMessage::new_emm(nasx::NasAuthenticationReject::new());
    cx.send_nas(u, rej, false, None);
    match then {
        Resume::Attach => {
            cx.release(u, Cause::NAS_AUTHENTICATION_FAILURE, true);
            false
        }
        Resume::Tau { .. } | Resume::Detach => true,
    }
}

/// What an Authentication Failure leads to beyond the UE's context.
pub(crate) enum Failure {
    /// Not awaited.
    Ignored,
    /// A synch failure: resynchronise subscriber `imsi` with (RAND, AUTS).
    Resync {
        imsi: u64,
        rand_auts: ([u8; 16], [u8; 14]),
        then: Resume,
    },
    /// Authentication Reject sent; `abort_reauth`: a re-authentication of a
    /// registered UE, whose connection goes ([`Mme::abort_reauth`]).
    Rejected { abort_reauth: bool },
}

/// The Authentication Failure `f` on `u`'s context (§5.4.2.6).
pub(crate) fn auth_failure(
    cx: &mut Cx<'_>,
    u: &mut Ue,
    f: &nasx::NasAuthenticationFailure,
) -> Failure {
    let (rand, resynced, then) = match &u.proc {
        Procedure::ExpectAuthResponse {
            vector,
            resynced,
            then,
        } => (vector.rand, *resynced, *then),
        _ => return Failure::Ignored,
    };
    u.stop_nas_timer();
    let auts = f
        .authentication_failure_parameter
        .as_ref()
        .map(|p| &p.value[..]);
    match (EmmCause::try_from(f.emm_cause.value), auts, u.imsi) {
        // Synch failure: resynchronise the HSS once, then a fresh challenge.
        (Ok(EmmCause::SynchFailure), Some(auts), Some(imsi)) if !resynced && auts.len() == 14 => {
            let mut a = [0u8; 14];
            a.copy_from_slice(auts);
            cx.stats.resyncs += 1;
            Failure::Resync {
                imsi,
                rand_auts: (rand, a),
                then,
            }
        }
        _ => Failure::Rejected {
            abort_reauth: auth_reject(cx, u, then),
        },
    }
}
