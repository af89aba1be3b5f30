//! Paging (TS 36.413 §8.5).

use super::*;

// ------------------------------------------------------------------ Paging

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paging {
    /// UE identity index value: IMSI mod 1024 (10 bits).
    pub ue_identity_index: u16,
    pub paging_id: PagingIdentity,
    pub cn_domain: CnDomain,
    pub tai_list: Vec<Tai>,
}
message!(Paging, Initiating, proc_code::PAGING, "Paging");
impl Paging {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let idx = oxirush_s1ap::Bits::new(self.ue_identity_index.into(), 10).map_err(|_| {
            S1apError::Invalid(format!(
                "UE identity index {} exceeds 10 bits",
                self.ue_identity_index
            ))
        })?;
        let id = match &self.paging_id {
            PagingIdentity::STmsi(s) => raw::UEPagingID::s_TMSI(s.to_raw()),
            PagingIdentity::Imsi(i) => {
                raw::UEPagingID::iMSI(raw::IMSI(oxirush_s1ap::Octets::from(i.clone())))
            }
        };
        let dom = match self.cn_domain {
            CnDomain::Ps => raw::CNDomain::ps,
            CnDomain::Cs => raw::CNDomain::cs,
        };
        let tais = self
            .tai_list
            .iter()
            .map(|t| Ok(build_s1ap_ie!(IGNORE TAIItem(raw::TAIItem::new(t.to_raw(), None)))?))
            .collect::<R<Vec<_>>>()?;
        pdu!(
            Paging,
            vec![
                build_s1ap_ie!(Paging, UEIdentityIndexValue(raw::UEIdentityIndexValue(idx)))?,
                build_s1ap_ie!(Paging, UEPagingID(id))?,
                build_s1ap_ie!(Paging, CNDomain(dom))?,
                build_s1ap_ie!(Paging, TAIList(raw::TAIList(tais)))?,
            ]
        )
    }
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, Paging,
            req idx: u16 = UEIdentityIndexValue(v) => v.0.value() as u16,
            req paging_id: PagingIdentity = UEPagingID(p) => match p {
                raw::UEPagingID::s_TMSI(s) => PagingIdentity::STmsi(STmsi::from_raw(&s)),
                raw::UEPagingID::iMSI(i) => PagingIdentity::Imsi(i.0.to_vec()),
                _ => return Err(S1apError::InvalidIe { ie: "UEPagingID", reason: "unknown alternative".into() }),
            },
            req dom: CnDomain = CNDomain(d) => if enums::cn_domain_to(d) == 0 { CnDomain::Ps } else { CnDomain::Cs },
            req tai_list: Vec<Tai> = TAIList(l) => list::<raw::TAIItem>(&l.0, "TAIItem")?.iter().map(|i| Tai::from_raw(&i.tai)).collect(),
        );
        Ok(Paging {
            ue_identity_index: idx,
            paging_id,
            cn_domain: dom,
            tai_list,
        })
    }
}
