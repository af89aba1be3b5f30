//! What the node's S1AP demux needs to know of a PDU before any slice decodes it: the
//! procedure, whether it is UE-associated, and the identifiers that name the UE's
//! slice (MME UE S1AP ID, the Source MME UE S1AP ID of a Path Switch Request, the
//! S-TMSI and NAS-PDU of an Initial UE Message). Read in place from the aligned-PER
//! octets, without decoding the PDU, so the demux costs tens of nanoseconds per
//! message; the slice that gets it decodes it fully.
//!
//! Anything the peek cannot read (truncated, an unknown PDU choice, fragmented
//! lengths) is an error, and the node answers it as the generic decoder would.

/// Procedure codes (TS 36.413 §9.3.7) the demux treats specially.
pub mod procedure {
    pub const HANDOVER_RESOURCE_ALLOCATION: u8 = 1;
    pub const PATH_SWITCH_REQUEST: u8 = 3;
    pub const PAGING: u8 = 10;
    pub const INITIAL_UE_MESSAGE: u8 = 12;
    pub const RESET: u8 = 14;
    pub const ERROR_INDICATION: u8 = 15;
    pub const S1_SETUP: u8 = 17;
    pub const ENB_CONFIGURATION_UPDATE: u8 = 29;
    pub const MME_CONFIGURATION_UPDATE: u8 = 30;
    pub const OVERLOAD_START: u8 = 34;
    pub const OVERLOAD_STOP: u8 = 35;
    pub const WRITE_REPLACE_WARNING: u8 = 36;
    pub const ENB_DIRECT_INFORMATION_TRANSFER: u8 = 37;
    pub const MME_DIRECT_INFORMATION_TRANSFER: u8 = 38;
    pub const PRIVATE_MESSAGE: u8 = 39;
    pub const ENB_CONFIGURATION_TRANSFER: u8 = 40;
    pub const MME_CONFIGURATION_TRANSFER: u8 = 41;
    pub const KILL: u8 = 43;
}

/// ProtocolIE-IDs (TS 36.413 §9.3.6) the peek reads.
const ID_MME_UE_S1AP_ID: u16 = 0;
const ID_NAS_PDU: u16 = 26;
const ID_SOURCE_MME_UE_S1AP_ID: u16 = 88;
const ID_S_TMSI: u16 = 96;

/// The S1AP-PDU choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PduKind {
    Initiating,
    Successful,
    Unsuccessful,
}

/// Why a PDU could not be peeked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeekError {
    /// Ends before `need` octets at offset `at`.
    Truncated { at: usize },
    /// The S1AP-PDU choice octet is not one of the three root choices.
    UnknownChoice(u8),
    /// A length determinant the peek does not follow (fragmented, > 16K octets).
    Length { at: usize },
}

impl core::fmt::Display for PeekError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PeekError::Truncated { at } => write!(f, "S1AP PDU truncated at octet {at}"),
            PeekError::UnknownChoice(c) => write!(f, "S1AP-PDU choice octet {c:#04x} unknown"),
            PeekError::Length { at } => write!(f, "S1AP length determinant at octet {at}"),
        }
    }
}

impl std::error::Error for PeekError {}

/// The routing view of one PDU. `nas_pdu` borrows from the PDU's octets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peek<'a> {
    pub kind: PduKind,
    pub procedure: u8,
    pub mme_ue_id: Option<u32>,
    pub source_mme_ue_id: Option<u32>,
    /// (MMEC, M-TMSI) of an Initial UE Message's S-TMSI IE.
    pub s_tmsi: Option<(u8, u32)>,
    pub nas_pdu: Option<&'a [u8]>,
}

impl Peek<'_> {
    /// Whether the procedure concerns the eNB or the association, not one UE (TS
    /// 36.413 §8.1 "non UE-associated"): the node handles it itself.
    pub fn is_non_ue_associated(&self) -> bool {
        use procedure::*;
        matches!(
            self.procedure,
            PAGING
                | RESET
                | ERROR_INDICATION
                | S1_SETUP
                | ENB_CONFIGURATION_UPDATE
                | MME_CONFIGURATION_UPDATE
                | OVERLOAD_START
                | OVERLOAD_STOP
                | WRITE_REPLACE_WARNING
                | ENB_DIRECT_INFORMATION_TRANSFER
                | MME_DIRECT_INFORMATION_TRANSFER
                | PRIVATE_MESSAGE
                | ENB_CONFIGURATION_TRANSFER
                | MME_CONFIGURATION_TRANSFER
                | KILL
        )
    }
}

/// Length determinant at `b[at..]`: (length, octets it took).
fn length(b: &[u8], at: usize) -> Result<(usize, usize), PeekError> {
    match *b.get(at).ok_or(PeekError::Truncated { at })? {
        n if n & 0x80 == 0 => Ok((usize::from(n), 1)),
        n if n & 0xC0 == 0x80 => {
            let lo = *b.get(at + 1).ok_or(PeekError::Truncated { at: at + 1 })?;
            Ok(((usize::from(n & 0x3F) << 8) | usize::from(lo), 2))
        }
        _ => Err(PeekError::Length { at }),
    }
}

/// A wide constrained INTEGER (0..2^32-1): octet count in the top two bits, then
/// the octets. `None` if it does not fit its open type.
fn wide_integer(v: &[u8]) -> Option<u32> {
    let (&head, rest) = v.split_first()?;
    let n = usize::from(head >> 6) + 1;
    let octets = rest.get(..n)?;
    Some(octets.iter().fold(0u32, |a, &x| a << 8 | u32::from(x)))
}

/// Reads the routing view of an S1AP PDU. Stops at the MME UE S1AP ID where that is
/// all the routing needs, so IEs after it are not checked.
pub fn peek(b: &[u8]) -> Result<Peek<'_>, PeekError> {
    let head = b.get(..3).ok_or(PeekError::Truncated { at: b.len() })?;
    let kind = match head[0] {
        0x00 => PduKind::Initiating,
        0x20 => PduKind::Successful,
        0x40 => PduKind::Unsuccessful,
        c => return Err(PeekError::UnknownChoice(c)),
    };
    let mut p = Peek {
        kind,
        procedure: head[1],
        mme_ue_id: None,
        source_mme_ue_id: None,
        s_tmsi: None,
        nas_pdu: None,
    };
    let (len, used) = length(b, 3)?;
    let start = 3 + used;
    let value = b
        .get(start..start + len)
        .ok_or(PeekError::Truncated { at: b.len() })?;
    // Message SEQUENCE preamble (extension bit), then the IE count (16 bits).
    let count = value
        .get(1..3)
        .ok_or(PeekError::Truncated { at: start + 1 })?;
    let count = u16::from_be_bytes([count[0], count[1]]);
    let mut at = 3;
    for _ in 0..count {
        let ie = value
            .get(at..at + 3)
            .ok_or(PeekError::Truncated { at: start + at })?;
        let id = u16::from_be_bytes([ie[0], ie[1]]);
        let (n, used) = length(value, at + 3).map_err(|e| match e {
            PeekError::Truncated { at } | PeekError::Length { at } => {
                PeekError::Truncated { at: start + at }
            }
            e => e,
        })?;
        let c0 = at + 3 + used;
        let content = value
            .get(c0..c0 + n)
            .ok_or(PeekError::Truncated { at: start + c0 })?;
        // An IE repeated (an abstract syntax error the full decoder resolves to the
        // first occurrence) counts once, at its first place: routing must read the
        // PDU as the slice's decoder will.
        match id {
            ID_MME_UE_S1AP_ID if p.mme_ue_id.is_some() => {}
            ID_MME_UE_S1AP_ID => {
                p.mme_ue_id = wide_integer(content);
                // All a message that names its UE this way needs (it comes first in
                // practice, so the rest of the PDU is not walked).
                if !matches!(
                    p.procedure,
                    procedure::INITIAL_UE_MESSAGE | procedure::PATH_SWITCH_REQUEST
                ) {
                    break;
                }
            }
            ID_SOURCE_MME_UE_S1AP_ID if p.source_mme_ue_id.is_none() => {
                p.source_mme_ue_id = wide_integer(content)
            }
            ID_S_TMSI if content.len() >= 6 && p.s_tmsi.is_none() => {
                // [ext][iE-Extensions?][MMEC: 8 bits unaligned][pad][M-TMSI: 4 octets]
                let mmec = (content[0] << 2) | (content[1] >> 6);
                let t = u32::from_be_bytes([content[2], content[3], content[4], content[5]]);
                p.s_tmsi = Some((mmec, t));
            }
            ID_NAS_PDU if p.nas_pdu.is_none() => {
                if let Ok((l, u)) = length(content, 0) {
                    p.nas_pdu = content.get(u..u + l);
                }
            }
            _ => {}
        }
        at = c0 + n;
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::*;
    use crate::{Cause, Ecgi, Plmn, STmsi, Tai};

    fn plmn() -> Plmn {
        Plmn::from_mcc_mnc("001", "01").unwrap()
    }

    fn initial(s_tmsi: Option<STmsi>, nas: Vec<u8>) -> Vec<u8> {
        S1apMessage::from(InitialUeMessage {
            enb_ue_id: 77,
            nas_pdu: nas,
            tai: Tai {
                plmn: plmn(),
                tac: 1,
            },
            ecgi: Ecgi {
                plmn: plmn(),
                cell_id: 0x101,
            },
            rrc_cause: 3,
            s_tmsi,
            gummei: None,
        })
        .encode()
        .unwrap()
    }

    /// A fuzzer's find: an IE repeated in a PDU the full decoder reads by the first
    /// occurrence. Peek read the last one, and the demux would have routed the PDU by
    /// another MME UE S1AP ID than the slice's MME then acts on.
    #[test]
    fn a_repeated_ie_counts_at_its_first_place() {
        let b = [
            0x20, 0x0c, 0x00, 0x11, 0x00, 0x00, 0x02, // successful, proc 12, 2 IEs
            0x00, 0x00, 0x40, 0x02, 0x00, 0x15, // MME UE S1AP ID 21
            0x00, 0x00, 0x00, 0x04, 0xbf, 0xf8, 0x01, 0x2d, // again: 0xf8012d
        ];
        assert_eq!(peek(&b).unwrap().mme_ue_id, Some(21));
        let m = crate::decode(&b)
            .and_then(|p| S1apMessage::from_pdu(&p))
            .unwrap();
        assert_eq!(m.mme_ue_id(), Some(21), "what the MME will act on");
    }

    #[test]
    fn reads_what_the_generic_codec_wrote() {
        for mmec in [0u8, 1, 0x5a, 0xff] {
            for t in [0u32, 1, 0x8000_0001, u32::MAX, 0xC123_4567] {
                let b = initial(Some(STmsi { mmec, m_tmsi: t }), vec![7, 0x41, 1, 2, 3]);
                let p = peek(&b).unwrap();
                assert_eq!(p.procedure, procedure::INITIAL_UE_MESSAGE);
                assert_eq!(p.s_tmsi, Some((mmec, t)));
                assert_eq!(p.nas_pdu, Some(&[7u8, 0x41, 1, 2, 3][..]));
                assert_eq!(p.mme_ue_id, None);
                assert!(!p.is_non_ue_associated());
            }
        }
        let big = vec![0x5a; 300];
        let b = initial(None, big.clone());
        assert_eq!(peek(&b).unwrap().nas_pdu, Some(&big[..]));
        for id in [
            0u32,
            1,
            255,
            256,
            65535,
            65536,
            0x00ff_ffff,
            0x0100_0000,
            u32::MAX,
        ] {
            let b = S1apMessage::from(UplinkNasTransport {
                mme_ue_id: id,
                enb_ue_id: 5,
                nas_pdu: vec![1, 2],
                ecgi: Ecgi {
                    plmn: plmn(),
                    cell_id: 1,
                },
                tai: Tai {
                    plmn: plmn(),
                    tac: 1,
                },
            })
            .encode()
            .unwrap();
            assert_eq!(peek(&b).unwrap().mme_ue_id, Some(id));
            let b = S1apMessage::from(UeContextReleaseComplete {
                mme_ue_id: id,
                enb_ue_id: 5,
            })
            .encode()
            .unwrap();
            let p = peek(&b).unwrap();
            assert_eq!((p.kind, p.mme_ue_id), (PduKind::Successful, Some(id)));
        }
        let b = S1apMessage::from(ErrorIndication {
            mme_ue_id: Some(9),
            enb_ue_id: None,
            cause: Some(Cause::UNKNOWN_MME_UE_S1AP_ID),
        })
        .encode()
        .unwrap();
        let p = peek(&b).unwrap();
        assert!(p.is_non_ue_associated());
        assert_eq!(p.mme_ue_id, Some(9));
    }

    #[test]
    fn never_panics_on_truncation_or_garbage() {
        let b = initial(Some(STmsi { mmec: 1, m_tmsi: 2 }), vec![7; 40]);
        for n in 0..b.len() {
            assert!(peek(&b[..n]).is_err(), "prefix of {n} octets");
        }
        let mut x = 0x1234_5678u32;
        for _ in 0..20_000 {
            let mut m = b.clone();
            for _ in 0..3 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let i = x as usize % m.len();
                m[i] = (x >> 8) as u8;
            }
            let _ = peek(&m); // must return, whatever it returns
        }
    }
}
