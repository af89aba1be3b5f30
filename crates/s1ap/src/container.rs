//! The eNB-to-eNB transparent containers of S1 handover (TS 36.413 9.2.1.56/9.2.1.57),
//! which the MME relays untouched, and the smallest valid RRC messages to put inside
//! them (TS 36.331 10.2.2 HandoverPreparationInformation / HandoverCommand, UPER).
//! An eNB emulator needs them to be decodable by a real target eNB and by Wireshark.

use crate::types::EcgiRaw;
use crate::{Ecgi, S1apError};
use oxirush_s1ap::s1ap as raw;

/// HandoverPreparationInformation: c1 / handoverPreparationInformation-r8 with an
/// empty ue-RadioAccessCapabilityInfo and no optional fields (UPER).
pub const MIN_HANDOVER_PREPARATION_INFORMATION: [u8; 2] = [0x00, 0x00];

/// HandoverCommand: c1 / handoverCommand-r8 whose handoverCommandMessage contains a
/// DL-DCCH-Message RRCConnectionReconfiguration-r8 with no optional fields (UPER).
pub const MIN_HANDOVER_COMMAND: [u8; 5] = [0x00, 0x19, 0x00, 0x00, 0x00];

/// Source-ToTarget-TransparentContainer carrying a SourceeNB-ToTargeteNB container.
/// `history` lists the last visited E-UTRAN cells (cell, seconds stayed), newest first;
/// at least one is required (UE-HistoryInformation is SIZE(1..16)).
pub fn source_to_target(
    rrc: &[u8],
    target_cell: Ecgi,
    history: &[(Ecgi, u16)],
) -> Result<Vec<u8>, S1apError> {
    if history.is_empty() || history.len() > 16 {
        return Err(S1apError::Invalid(format!(
            "UE history must list 1..16 cells, got {}",
            history.len()
        )));
    }
    let mut cells = Vec::with_capacity(history.len());
    for (cell, secs) in history {
        cells.push(raw::LastVisitedCellItem::e_UTRAN_Cell(
            raw::LastVisitedEUTRANCellInformation::new(
                cell.to_raw()?,
                raw::CellType::new(raw::CellSize::small, None),
                raw::TimeUEStayedInCell((*secs).min(4095)),
                None,
            ),
        ));
    }
    let c = raw::SourceeNBToTargeteNBTransparentContainer::new(
        raw::RRCContainer(rrc.to_vec().into()),
        None,
        target_cell.to_raw()?,
        None,
        raw::UEHistoryInformation(cells),
        None,
    );
    raw::encode_open_type(&c)
        .map(|b| b.into_vec())
        .map_err(|e| S1apError::Invalid(format!("SourceeNB-ToTargeteNB container: {e}")))
}

/// Target-ToSource-TransparentContainer carrying a TargeteNB-ToSourceeNB container.
pub fn target_to_source(rrc: &[u8]) -> Result<Vec<u8>, S1apError> {
    let c = raw::TargeteNBToSourceeNBTransparentContainer::new(
        raw::RRCContainer(rrc.to_vec().into()),
        None,
    );
    raw::encode_open_type(&c)
        .map(|b| b.into_vec())
        .map_err(|e| S1apError::Invalid(format!("TargeteNB-ToSourceeNB container: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Plmn;

    #[test]
    fn containers_decode_back() {
        let plmn = Plmn([0x00, 0xf1, 0x10]);
        let cell = |c| Ecgi { plmn, cell_id: c };
        let b = source_to_target(
            &MIN_HANDOVER_PREPARATION_INFORMATION,
            cell(0x19c01),
            &[(cell(0x19b01), 30)],
        )
        .unwrap();
        let c: raw::SourceeNBToTargeteNBTransparentContainer = raw::decode_open_type(&b).unwrap();
        assert_eq!(
            &c.rrc_container.0[..],
            &MIN_HANDOVER_PREPARATION_INFORMATION
        );
        assert_eq!(Ecgi::from_raw(&c.target_cell_id).cell_id, 0x19c01);
        assert_eq!(c.ue_history_information.0.len(), 1);
        let b = target_to_source(&MIN_HANDOVER_COMMAND).unwrap();
        let c: raw::TargeteNBToSourceeNBTransparentContainer = raw::decode_open_type(&b).unwrap();
        assert_eq!(&c.rrc_container.0[..], &MIN_HANDOVER_COMMAND);
        assert!(source_to_target(&[], cell(1), &[]).is_err());
    }
}
