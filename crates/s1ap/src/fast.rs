//! Hand-written aligned-PER encoders for the S1AP PDUs the MME sends most: every
//! attach sends two DownlinkNASTransport messages (Authentication Request, Security
//! Mode Command), and each later NAS exchange one more. The generic builder encodes
//! each IE into its own buffer and then the container (≈ 5K instructions and a
//! dozen allocations per PDU); this writes the same octets straight into one buffer.
//!
//! The output is byte-identical to the generic encoder for every input it accepts
//! (tested below over boundary values); anything it does not handle (an eNB UE S1AP
//! ID out of range, a NAS PDU needing fragmentation) returns `None` and the caller
//! uses the generic path, which reports the error.

/// Procedure code of DownlinkNASTransport (TS 36.413 §9.3.7).
const DOWNLINK_NAS_TRANSPORT: u8 = 11;
/// ProtocolIE-IDs (TS 36.413 §9.3.6).
const ID_MME_UE_S1AP_ID: u16 = 0;
const ID_ENB_UE_S1AP_ID: u16 = 8;
const ID_NAS_PDU: u16 = 26;
/// Criticality values, in the top two bits of their octet (X.691 aligned).
const REJECT: u8 = 0x00;
const IGNORE: u8 = 0x40;

/// An unconstrained length determinant (X.691 §11.9.3.6-7) for `n` < 16384.
fn length(out: &mut Vec<u8>, n: usize) {
    if n < 128 {
        out.push(n as u8);
    } else {
        out.push(0x80 | (n >> 8) as u8);
        out.push(n as u8);
    }
}

/// A constrained INTEGER whose range exceeds 64K (X.691 §11.5.7.4): the octet count
/// (from 1) in two bits, then the value in that many aligned octets.
fn wide_integer(v: u32) -> ([u8; 5], usize) {
    let octets = (4 - v.leading_zeros() as usize / 8).max(1);
    let mut b = [0u8; 5];
    b[0] = ((octets - 1) as u8) << 6;
    b[1..1 + octets].copy_from_slice(&v.to_be_bytes()[4 - octets..]);
    (b, 1 + octets)
}

/// One ProtocolIE-Field: id, criticality, and the value as an open type.
fn ie(out: &mut Vec<u8>, id: u16, criticality: u8, value: &[&[u8]]) {
    out.extend_from_slice(&id.to_be_bytes());
    out.push(criticality);
    length(out, value.iter().map(|v| v.len()).sum());
    for v in value {
        out.extend_from_slice(v);
    }
}

/// DownlinkNASTransport with exactly the three mandatory IEs.
pub(crate) fn downlink_nas_transport(
    mme_ue_id: u32,
    enb_ue_id: u32,
    nas: &[u8],
) -> Option<Vec<u8>> {
    if enb_ue_id > 0x00FF_FFFF || nas.len() >= 16384 - 8 {
        return None;
    }
    let (mme, mme_len) = wide_integer(mme_ue_id);
    let (enb, enb_len) = wide_integer(enb_ue_id);
    let mut nas_len = Vec::with_capacity(2);
    length(&mut nas_len, nas.len());
    // The message value: extension bit + padding, IE count, the three IEs.
    let value_len = 3
        + (4 + mme_len)
        + (4 + enb_len)
        + (4 + usize::from(nas_len.len() + nas.len() >= 128) + nas_len.len() + nas.len());
    if value_len >= 16384 {
        return None;
    }
    let mut out = Vec::with_capacity(value_len + 6);
    // S1AP-PDU: extension bit 0, choice index 0 (initiatingMessage), padding.
    out.push(0x00);
    out.push(DOWNLINK_NAS_TRANSPORT);
    out.push(IGNORE);
    length(&mut out, value_len);
    let start = out.len();
    out.extend_from_slice(&[0x00, 0x00, 0x03]);
    ie(&mut out, ID_MME_UE_S1AP_ID, REJECT, &[&mme[..mme_len]]);
    ie(&mut out, ID_ENB_UE_S1AP_ID, REJECT, &[&enb[..enb_len]]);
    ie(&mut out, ID_NAS_PDU, REJECT, &[&nas_len, nas]);
    debug_assert_eq!(out.len() - start, value_len);
    Some(out)
}

#[cfg(test)]
mod tests {
    use crate::msg::DownlinkNasTransport;

    fn generic(m: &DownlinkNasTransport) -> Vec<u8> {
        crate::encode(&m.to_pdu().unwrap()).unwrap()
    }

    #[test]
    fn byte_identical_to_the_generic_encoder() {
        let ids = [
            0u32,
            1,
            127,
            128,
            255,
            256,
            65535,
            65536,
            0x00FF_FFFF,
            0x0100_0000,
            u32::MAX,
        ];
        let lens = [
            0usize, 1, 2, 60, 119, 120, 121, 124, 125, 127, 128, 255, 1000, 16000,
        ];
        let mut checked = 0;
        for &mme_ue_id in &ids {
            for &enb_ue_id in ids.iter().filter(|&&i| i <= 0x00FF_FFFF) {
                for &n in &lens {
                    let m = DownlinkNasTransport {
                        mme_ue_id,
                        enb_ue_id,
                        nas_pdu: (0..n).map(|i| (i * 7 + 3) as u8).collect(),
                    };
                    let want = generic(&m);
                    match super::downlink_nas_transport(mme_ue_id, enb_ue_id, &m.nas_pdu) {
                        Some(got) => {
                            assert_eq!(got, want, "mme {mme_ue_id} enb {enb_ue_id} nas {n}");
                            checked += 1;
                        }
                        None => assert!(n >= 16384 - 8, "fell back for nas {n}"),
                    }
                    // And the public encoder (whichever path it takes) agrees.
                    assert_eq!(m.encode().unwrap(), want);
                }
            }
        }
        assert!(checked > 800, "{checked}");
    }

    #[test]
    fn out_of_range_ids_fall_back_to_the_generic_error() {
        assert!(super::downlink_nas_transport(1, 0x0100_0000, &[1, 2]).is_none());
        let m = DownlinkNasTransport {
            mme_ue_id: 1,
            enb_ue_id: 0x0100_0000,
            nas_pdu: vec![1, 2],
        };
        assert!(m.encode().is_err());
    }
}
