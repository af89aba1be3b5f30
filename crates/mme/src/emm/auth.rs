//! EPS authentication and key agreement (TS 24.301 §5.4.2, TS 33.401 §6.1): Authentication
//! Request/Response/Failure (with resynchronisation) and Reject; a good RES selects the
//! algorithms and sends the Security Mode Command (§5.4.3.2).

use crate::prelude::*;

impl Mme {
    pub(crate) fn start_auth(
        &mut self,
        now: Instant,
        id: u32,
        imsi: u64,
        attach: u16,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        self.adopt_subscriber(id, imsi, cp, out);
        self.ask_profile(cp, now, id, imsi, false, attach, out);
    }

    /// The Authentication Request with vector `v` from the HSS (`resynced`: after a
    /// resynchronisation, which is not done twice in one AKA).
    pub(crate) fn send_auth_request(
        &mut self,
        cp: &mut ControlPlane,
        now: Instant,
        id: u32,
        v: Box<AuthVector>,
        resynced: bool,
        out: &mut Vec<Output>,
    ) {
        let Some(u) = self.ue_mut(cp, id) else {
            return;
        };
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
        };
        // The challenge goes protected when a context is in use (re-authentication).
        let t = self.cfg.t3460;
        let ksi_store = ksi;
        self.send_nas(
            cp,
            now,
            id,
            NasEpsMessage::new_emm(req),
            false,
            Some(t),
            out,
        );
        self.ue_mut(cp, id).expect("present").next_ksi = (ksi_store + 1) % 7;
    }

    pub(crate) fn auth_response(
        &mut self,
        cp: &mut ControlPlane,
        now: Instant,
        id: u32,
        res: &[u8],
        out: &mut Vec<Output>,
    ) {
        let u = self.ue_mut(cp, id).expect("present");
        let v = match std::mem::replace(&mut u.proc, Procedure::Idle) {
            Procedure::ExpectAuthResponse { vector, .. } => vector,
            other => {
                u.proc = other;
                return;
            }
        };
        u.nas_timer = None;
        u.retx = None;
        let ok = res.len() == v.xres.len()
            && res
                .iter()
                .zip(v.xres.iter())
                .fold(0u8, |a, (x, y)| a | (x ^ y))
                == 0;
        if !ok {
            self.stats.auth_rejects += 1;
            self.send_nas(
                cp,
                now,
                id,
                NasEpsMessage::new_emm(nasx::NasAuthenticationReject::new()),
                false,
                None,
                out,
            );
            self.release(cp, id, Cause::NAS_AUTHENTICATION_FAILURE, true, out);
            return;
        }
        // Algorithm selection by our preference among what the UE supports.
        let cap = u.ue_net_cap.clone();
        let eea = self
            .cfg
            .eea_preference
            .iter()
            .copied()
            .find(|a| cap.first().is_some_and(|c| c & (0x80 >> *a as u8) != 0));
        let eia = self
            .cfg
            .eia_preference
            .iter()
            .copied()
            .filter(|a| *a != Eia::Eia0)
            .find(|a| cap.get(1).is_some_and(|c| c & (0x80 >> *a as u8) != 0));
        let (Some(eea), Some(eia)) = (eea, eia) else {
            self.attach_reject(cp, id, EmmCause::UeSecurityCapabilitiesMismatch, out);
            return;
        };
        let ksi = (u.next_ksi + 6) % 7;
        let ctx = match SecCtx::new(v.kasme.clone(), ksi, eea, eia) {
            Ok(c) => c,
            Err(e) => {
                log(
                    out,
                    LogLevel::Warn,
                    format!("UE {id}: security context: {e}"),
                );
                self.attach_reject(cp, id, EmmCause::UeSecurityCapabilitiesMismatch, out);
                return;
            }
        };
        u.proc = Procedure::ExpectSmcComplete { sec: Box::new(ctx) };
        let mut replay = cap
            .get(..2)
            .map(|c| c.to_vec())
            .unwrap_or_else(|| vec![0, 0]);
        replay.resize(2, 0);
        let smc = nasx::NasSecurityModeCommand::new(
            nasx::NasSecurityAlgorithms::new(((eea as u8) << 4) | eia as u8),
            nasx::NasKeySetIdentifier::new(ksi),
            nasx::NasUeSecurityCapability::new(replay),
        );
        let t = self.cfg.t3460;
        self.send_nas(cp, now, id, NasEpsMessage::new_emm(smc), true, Some(t), out);
    }

    pub(crate) fn auth_failure(
        &mut self,
        now: Instant,
        id: u32,
        cause: u8,
        auts: Option<Vec<u8>>,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let u = self.ue_mut(cp, id).expect("present");
        let imsi = u.imsi;
        let (rand, resynced) = match &u.proc {
            Procedure::ExpectAuthResponse { vector, resynced } => (vector.rand, *resynced),
            _ => return,
        };
        match (EmmCause::try_from(cause), auts, imsi) {
            // Synch failure: resynchronise the HSS once, then a fresh challenge.
            (Ok(EmmCause::SynchFailure), Some(auts), Some(imsi))
                if !resynced && auts.len() == 14 =>
            {
                let mut a = [0u8; 14];
                a.copy_from_slice(&auts);
                self.stats.resyncs += 1;
                // The HSS answers with a fresh vector, or refuses (Authentication
                // Reject, as when the AUTS does not verify).
                self.ask_resync(cp, now, id, imsi, rand, a, out);
            }
            _ => self.auth_reject(cp, now, id, out),
        }
    }

    pub(crate) fn auth_reject(
        &mut self,
        cp: &mut ControlPlane,
        now: Instant,
        id: u32,
        out: &mut Vec<Output>,
    ) {
        self.stats.auth_rejects += 1;
        if let Some(u) = self.ue_mut(cp, id) {
            u.proc = Procedure::Idle;
        }
        self.send_nas(
            cp,
            now,
            id,
            NasEpsMessage::new_emm(nasx::NasAuthenticationReject::new()),
            false,
            None,
            out,
        );
        self.release(cp, id, Cause::NAS_AUTHENTICATION_FAILURE, true, out);
    }
}
