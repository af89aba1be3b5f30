//! The embedded HSS behind the S6a seam (`pepc-seams`): the MME's S6a-shaped requests
//! (Update Location's profile, Authentication Information's vector, its
//! re-synchronisation, Purge) answered from the subscriber store.

use crate::{Hss, HssError, ImsiKey};
use pepc_seams::hss::{HssAnswer, HssData, HssFailure, HssRequest, SubscriptionData};
use std::sync::Arc;

/// What the embedded HSS's error is as an answer's failure: an unknown IMSI or an AUTS
/// that does not verify are the subscriber's; anything else is the HSS's own trouble.
pub fn failure_of(e: HssError) -> HssFailure {
    match e {
        HssError::UnknownImsi(_) => HssFailure::UnknownSubscriber,
        HssError::ResyncMacFailure(_) => HssFailure::ResyncRefused,
        other => HssFailure::Unavailable(other.to_string()),
    }
}

/// The embedded HSS behind the S6a seam: a request in, its answer out. It owns the
/// RAND source of the vectors it makes (a CSPRNG in production). It answers in a few
/// µs, so the node's proxy runs it inline on the thread of the slice that asked.
pub struct EmbeddedHss {
    hss: Arc<Hss>,
    rand: Box<dyn FnMut() -> [u8; 16] + Send>,
    /// Requests answered.
    pub served: u64,
}

impl EmbeddedHss {
    pub fn new(hss: Arc<Hss>, rand: Box<dyn FnMut() -> [u8; 16] + Send>) -> EmbeddedHss {
        EmbeddedHss {
            hss,
            rand,
            served: 0,
        }
    }

    pub fn hss(&self) -> &Arc<Hss> {
        &self.hss
    }

    /// Answer one request; a purge has no answer (the embedded HSS keeps no record
    /// of which MME serves a subscriber, so there is nothing to mark purged).
    pub fn answer(&mut self, req: HssRequest) -> Option<HssAnswer> {
        self.served += 1;
        let r = req.reference();
        let result = match req {
            HssRequest::Purge { .. } => return None,
            HssRequest::Profile { imsi, .. } => self.profile(imsi).map(HssData::Profile),
            HssRequest::Vector { imsi, plmn, .. } => self.vector(imsi, plmn),
            HssRequest::Resync {
                imsi,
                plmn,
                rand,
                auts,
                ..
            } => ImsiKey::fifteen_digits(imsi)
                .ok_or(HssFailure::UnknownSubscriber)
                .and_then(|k| self.hss.resync(&k.digits(), rand, auts).map_err(failure_of))
                .and_then(|()| self.vector(imsi, plmn)),
        };
        Some(HssAnswer { r, result })
    }

    fn profile(&self, imsi: u64) -> Result<SubscriptionData, HssFailure> {
        let key = ImsiKey::fifteen_digits(imsi).ok_or(HssFailure::UnknownSubscriber)?;
        let s = self
            .hss
            .profile_of(key)
            .map_err(failure_of)?
            .ok_or(HssFailure::UnknownSubscriber)?;
        Ok(SubscriptionData {
            msisdn: s.msisdn.clone(),
            apn: s.apn.clone(),
            pdn_type: s.pdn_type,
            qci: s.qci,
            arp_priority: s.arp_priority,
            ambr_ul_bps: s.ambr_ul_bps,
            ambr_dl_bps: s.ambr_dl_bps,
        })
    }

    fn vector(&mut self, imsi: u64, plmn: [u8; 3]) -> Result<HssData, HssFailure> {
        let key = ImsiKey::fifteen_digits(imsi).ok_or(HssFailure::UnknownSubscriber)?;
        let v = self
            .hss
            .next_vector_of(key, plmn, &mut self.rand)
            .map_err(failure_of)?;
        Ok(HssData::Vector(Box::new(v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pepc_seams::hss::HssRef;

    #[test]
    fn embedded_hss_errors_become_failures() {
        let f = failure_of(HssError::UnknownImsi("1".into()));
        assert_eq!(f, HssFailure::UnknownSubscriber);
        let f = failure_of(HssError::ResyncMacFailure("1".into()));
        assert_eq!(f, HssFailure::ResyncRefused);
        let f = failure_of(HssError::SqnExhausted("1".into()));
        assert!(matches!(f, HssFailure::Unavailable(_)));
        assert_eq!(HssRequest::Purge { imsi: 1 }.reference(), HssRef::NONE);
    }

    #[test]
    fn embedded_proxy_answers_each_request() {
        let hss = Arc::new(Hss::in_memory().unwrap());
        let mut p = EmbeddedHss::new(hss.clone(), Box::new(|| [3u8; 16]));
        let r = HssRef {
            mme_ue_id: 7,
            seq: 1,
        };
        let imsi = 1010000000001;
        let a = p.answer(HssRequest::Profile { r, imsi }).unwrap();
        assert_eq!(a.r, r);
        assert!(matches!(a.result, Err(HssFailure::UnknownSubscriber)));
        hss.add(&crate::Subscriber {
            imsi: "001010000000001".into(),
            k: pepc_security::Key128::from_hex("465B5CE8B199B49FAA5F0A2EE238A6BC").unwrap(),
            op_kind: crate::OpKind::Opc(
                *pepc_security::Key128::from_hex("E8ED289DEBA952E4283B54E88E6183CA")
                    .unwrap()
                    .as_bytes(),
            ),
            amf: [0x80, 0x00],
            sqn: 32,
            msisdn: "1".into(),
            apn: "internet".into(),
            pdn_type: crate::PdnType::Ipv4,
            qci: 9,
            arp_priority: 8,
            ambr_ul_bps: 50_000_000,
            ambr_dl_bps: 100_000_000,
        })
        .unwrap();
        let a = p.answer(HssRequest::Profile { r, imsi }).unwrap();
        let Ok(HssData::Profile(s)) = a.result else {
            panic!("{a:?}")
        };
        assert_eq!(
            (s.apn.as_str(), s.qci, s.ambr_dl_bps),
            ("internet", 9, 100_000_000)
        );
        let plmn = [0x00, 0xf1, 0x10];
        let a = p.answer(HssRequest::Vector { r, imsi, plmn }).unwrap();
        assert!(matches!(a.result, Ok(HssData::Vector(ref v)) if v.rand == [3; 16]));
        // An AUTS whose MAC-S does not verify: refused, no vector.
        let a = p
            .answer(HssRequest::Resync {
                r,
                imsi,
                plmn,
                rand: [3; 16],
                auts: [0; 14],
            })
            .unwrap();
        assert!(matches!(a.result, Err(HssFailure::ResyncRefused)), "{a:?}");
        assert!(p.answer(HssRequest::Purge { imsi }).is_none());
        assert_eq!(p.served, 5);
    }
}
