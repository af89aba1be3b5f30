//! Tracking area updating (TS 24.301 §5.5.3, TS 23.401 §5.3.3).

use crate::prelude::*;

impl Mme {
    pub(crate) fn tau(
        &mut self,
        now: Instant,
        id: u32,
        t: nasx::NasTrackingAreaUpdateRequest,
        verified: bool,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let registered = self
            .ue(cp, id)
            .is_some_and(|u| u.emm == Emm_::Registered && u.sec.is_some());
        if !verified || !registered {
            // Unknown or unverifiable: the UE must attach again (#9 / #10).
            let cause = if registered {
                EmmCause::ImplicitlyDetached
            } else {
                EmmCause::UeIdentityCannotBeDerived
            };
            let rej = nasx::NasTrackingAreaUpdateReject::new(nasx::NasEmmCause::new(cause.into()));
            if let Some(u) = self.ue_mut(cp, id) {
                if !registered {
                    u.sec = None;
                }
            }
            self.send_nas(cp, now, id, NasEpsMessage::new_emm(rej), false, None, out);
            if registered {
                self.release_connection(id, Cause::NAS_UNSPECIFIED, cp, out);
            } else {
                self.release(cp, id, Cause::NAS_UNSPECIFIED, true, out);
            }
            return;
        }
        self.stats.tau += 1;
        let active = t.eps_update_type.value & 0x08 != 0;
        let u = self.ue(cp, id).expect("present");
        let plmn = self.cfg.plmn.0;
        let mut acc = nasx::NasTrackingAreaUpdateAccept::new(nasx::NasEpsUpdateResult::new(0));
        acc.t3412_value = Some(nasx::NasT3412Value::new(nasx::gprs_timer(
            self.cfg.t3412.as_secs(),
        )));
        acc.tai_list = Some(nasx::NasTrackingAreaIdentityList::new(
            nasx::tai_list_value(plmn, &self.cfg.served_tacs),
        ));
        acc.eps_bearer_context_status = Some(nasx::NasEpsBearerContextStatus::new(bearer_status(
            cp, u.slot,
        )));
        self.send_nas(cp, now, id, NasEpsMessage::new_emm(acc), false, None, out);
        if active {
            self.send_ics(id, None, cp, out);
        } else {
            self.release_connection(id, Cause::NAS_NORMAL_RELEASE, cp, out);
        }
    }
}

pub(crate) fn bearer_status(cp: &ControlPlane, slot: Option<u32>) -> Vec<u8> {
    let mut bits = 0u16;
    if let Some(u) = slot.and_then(|s| cp.ue(s)) {
        for b in &u.bearers {
            bits |= 1 << b.ebi;
        }
    }
    vec![(bits & 0xff) as u8, (bits >> 8) as u8]
}
