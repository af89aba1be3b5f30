//! Service Request (TS 24.301 §5.6.1, TS 23.401 §5.3.4.1).

use crate::prelude::*;

impl Mme {
    pub(crate) fn service_request(
        &mut self,
        cp: &mut ControlPlane,
        id: Option<u32>,
        assoc: AssocId,
        m: InitialUeMessage,
        out: &mut Vec<Output>,
    ) {
        let now = self.now;
        self.stats.service_requests += 1;
        let sr = match NasEpsMessage::decode(&m.nas_pdu) {
            Ok(NasEpsMessage::ServiceRequest(sr)) => sr,
            _ => {
                self.stats.nas_decode_errors += 1;
                return;
            }
        };
        let Some(id) = id.filter(|i| {
            self.ue(cp, *i)
                .is_some_and(|u| u.emm == Emm_::Registered && u.sec.is_some())
        }) else {
            // Unknown UE: Service Reject #9 (UE identity cannot be derived), on a temporary context.
            self.stats.service_rejects += 1;
            let why = ProcFailure::Rejected(EmmCause::UeIdentityCannotBeDerived.into());
            self.stats
                .procedures
                .at_once(Proc::ServiceRequest, Err(why));
            let Some(tmp) = self.new_ue(cp, assoc, m.enb_ue_id, m.tai, m.ecgi) else {
                return;
            };
            let Some((mut cx, u)) = self.split(cp, tmp, out) else {
                return;
            };
            let rej = nasx::NasServiceReject::new(nasx::NasEmmCause::new(
                EmmCause::UeIdentityCannotBeDerived.into(),
            ));
            cx.send_nas(u, NasEpsMessage::new_emm(rej), false, None);
            cx.release(u, Cause::NAS_UNSPECIFIED, true);
            return;
        };
        let res = self.ue_mut(cp, id).and_then(|u| {
            let r = u.sec.as_mut()?.unprotect_service_request(&sr);
            if r.is_ok() {
                u.started = Some(now);
            }
            Some(r)
        });
        match res {
            Some(Ok(_)) => {}
            Some(Err(UnprotectError::Replay)) => {
                self.stats.nas_replays += 1;
                return;
            }
            _ => {
                self.stats.nas_bad_mac += 1;
                pepc_ratelog::peer_warn!(
                    pepc_ratelog::Kind::NasIntegrity,
                    "UE {id}: Service Request MAC failure, discarded"
                );
                return;
            }
        }
        self.attach_conn(cp, id, assoc, m.enb_ue_id, m.tai, m.ecgi);
        if let Some(s) = m.s_tmsi {
            self.resolve_pending_guti(cp, id, s.m_tmsi);
        }
        if let Some(u) = self.ue_mut(cp, id) {
            u.nas_secured = true; // the Service Request verified
            self.stats
                .procedures
                .start(&mut u.open, Proc::ServiceRequest);
        }
        self.send_ics(cp, id, None, out);
    }
}
