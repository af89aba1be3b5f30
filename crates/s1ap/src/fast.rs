//! Hand-written aligned-PER encoders for the S1AP PDUs the MME sends on every
//! attach: two DownlinkNASTransport (Authentication Request, Security Mode Command)
//! and one InitialContextSetupRequest. The generic builder encodes each IE into its
//! own buffer and then the container (5-7K instructions and a dozen allocations per
//! PDU); these write the same octets straight into one buffer.
//!
//! The output is byte-identical to the generic encoder for every input it accepts
//! (tested below over boundary values); anything it does not handle (an eNB UE S1AP
//! ID out of range, a NAS PDU needing fragmentation) returns `None` and the caller
//! uses the generic path, which reports the error.
//!
//! Decoders too, for the PDUs that start and carry every attach (InitialUEMessage,
//! UplinkNASTransport three times, InitialContextSetupResponse). They accept only the canonical form an eNB sends
//! (the mandatory IEs, minimal lengths, no extensions) and return `None` for
//! anything else, which then goes through the generic decoder; differential tests
//! check that whatever they accept, the generic decoder decodes to the same message.

use crate::msg::{InitialContextSetupResponse, InitialUeMessage, UplinkNasTransport};
use crate::{Ambr, ERab, ERabTunnel, Ecgi, Key256, Plmn, Tai, UeSecurityCapabilities};

/// Procedure codes (TS 36.413 §9.3.7).
const DOWNLINK_NAS_TRANSPORT: u8 = 11;
const UPLINK_NAS_TRANSPORT: u8 = 13;
const INITIAL_UE_MESSAGE: u8 = 12;
const INITIAL_CONTEXT_SETUP: u8 = 9;
/// ProtocolIE-IDs (TS 36.413 §9.3.6).
const ID_MME_UE_S1AP_ID: u16 = 0;
const ID_ENB_UE_S1AP_ID: u16 = 8;
const ID_NAS_PDU: u16 = 26;
const ID_E_RAB_TO_BE_SETUP_LIST_CTXT_SU_REQ: u16 = 24;
const ID_E_RAB_TO_BE_SETUP_ITEM_CTXT_SU_REQ: u16 = 52;
const ID_UE_AGGREGATE_MAXIMUM_BITRATE: u16 = 66;
const ID_UE_SECURITY_CAPABILITIES: u16 = 107;
const ID_SECURITY_KEY: u16 = 73;
const ID_EUTRAN_CGI: u16 = 100;
const ID_TAI: u16 = 67;
const ID_RRC_ESTABLISHMENT_CAUSE: u16 = 134;
const ID_E_RAB_SETUP_LIST_CTXT_SU_RES: u16 = 51;
const ID_E_RAB_SETUP_ITEM_CTXT_SU_RES: u16 = 50;
/// BitRate ::= INTEGER (0..10,000,000,000).
const BIT_RATE_MAX: u64 = 10_000_000_000;
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

/// Writes an open type in place: a length placeholder, the value `f` writes, then
/// the length (one octet, or two if the value reached 128 octets). `None` if the
/// value needs fragmentation (16K octets or more) or `f` refuses.
fn open_type(out: &mut Vec<u8>, f: impl FnOnce(&mut Vec<u8>) -> Option<()>) -> Option<()> {
    let at = out.len();
    out.push(0);
    f(out)?;
    let n = out.len() - at - 1;
    if n < 128 {
        out[at] = n as u8;
    } else if n < 16384 {
        out[at] = 0x80 | (n >> 8) as u8;
        out.insert(at + 1, n as u8);
    } else {
        return None;
    }
    Some(())
}

/// One ProtocolIE-Field: id, criticality, and the value (written by `f`) as an
/// open type.
fn ie(
    out: &mut Vec<u8>,
    id: u16,
    criticality: u8,
    f: impl FnOnce(&mut Vec<u8>) -> Option<()>,
) -> Option<()> {
    out.extend_from_slice(&id.to_be_bytes());
    out.push(criticality);
    open_type(out, f)
}

/// A ProtocolIE-Field holding a wide constrained INTEGER (UE S1AP IDs).
/// Written as one fixed-size copy (id, criticality, the open type's one-octet length,
/// the value's at most 5 octets) cut back to its length: a copy of `n` octets would
/// be a call to memcpy.
fn ie_id(out: &mut Vec<u8>, id: u16, criticality: u8, v: u32) -> Option<()> {
    let (b, n) = wide_integer(v);
    let [i0, i1] = id.to_be_bytes();
    out.extend_from_slice(&[i0, i1, criticality, n as u8, b[0], b[1], b[2], b[3], b[4]]);
    out.truncate(out.len() - (b.len() - n));
    Some(())
}

/// MSB-first bit writer over the end of a buffer, with octet alignment, for the few
/// IEs whose fields do not fall on octet boundaries.
struct Bits<'a> {
    out: &'a mut Vec<u8>,
    /// Bits used in the last octet (0 = aligned).
    used: u8,
}

impl<'a> Bits<'a> {
    fn new(out: &'a mut Vec<u8>) -> Self {
        Bits { out, used: 0 }
    }
    fn put(&mut self, value: u64, n: u8) {
        // Fill the current octet, then whole octets, MSB first.
        let mut left = n;
        while left > 0 {
            if self.used == 0 {
                self.out.push(0);
            }
            let room = 8 - self.used;
            let take = room.min(left);
            let chunk = ((value >> (left - take)) & ((1u64 << take) - 1)) as u8;
            let last = self.out.len() - 1;
            self.out[last] |= chunk << (room - take);
            self.used = (self.used + take) % 8;
            left -= take;
        }
    }
    fn align(&mut self) {
        self.used = 0;
    }
    fn octets(&mut self, b: &[u8]) {
        self.align();
        self.out.extend_from_slice(b);
    }
    /// BitRate: octet count (1..5) in 3 bits, then the value, aligned.
    fn bit_rate(&mut self, v: u64) {
        let octets = (8 - v.leading_zeros() as usize / 8).max(1);
        self.put(octets as u64 - 1, 3);
        self.octets(&v.to_be_bytes()[8 - octets..]);
    }
}

/// E-RABToBeSetupItemCtxtSUReq (TS 36.413 §9.1.4.1), appended to `out`.
fn ctxt_item(out: &mut Vec<u8>, e: &ERab) -> Option<()> {
    let nas_len = e.nas_pdu.as_ref().map_or(0, |n| n.len());
    if e.id > 15 || e.arp.priority_level > 15 || nas_len >= 16384 {
        return None;
    }
    let mut b = Bits::new(out);
    b.put(0, 1); // extension
    b.put(u64::from(e.nas_pdu.is_some()), 1);
    b.put(0, 1); // iE-Extensions absent
    b.put(0, 1); // E-RAB-ID: extension
    b.put(u64::from(e.id), 4);
    // E-RABLevelQoSParameters: extension, gbrQosInformation?, iE-Extensions?
    b.put(0, 1);
    b.put(u64::from(e.gbr.is_some()), 1);
    b.put(0, 1);
    b.octets(&[e.qci]);
    // AllocationAndRetentionPriority: extension, iE-Extensions?, level, cap, vuln.
    b.put(0, 2);
    b.put(u64::from(e.arp.priority_level), 4);
    b.put(u64::from(e.arp.pre_emption_capability), 1);
    b.put(u64::from(e.arp.pre_emption_vulnerability), 1);
    if let Some(g) = e.gbr {
        if [g.mbr_dl, g.mbr_ul, g.gbr_dl, g.gbr_ul]
            .iter()
            .any(|&r| r > BIT_RATE_MAX)
        {
            return None;
        }
        b.put(0, 2); // extension, iE-Extensions absent
        b.bit_rate(g.mbr_dl);
        b.bit_rate(g.mbr_ul);
        b.bit_rate(g.gbr_dl);
        b.bit_rate(g.gbr_ul);
    }
    // TransportLayerAddress BIT STRING (SIZE (1..160, ...)): extension, length - 1.
    b.put(0, 1);
    b.put(32 - 1, 8);
    b.octets(&e.transport.octets());
    b.octets(&e.teid.to_be_bytes());
    if let Some(nas) = &e.nas_pdu {
        b.align();
        length(out, nas.len());
        out.extend_from_slice(nas);
    }
    Some(())
}

/// InitialContextSetupRequest with the six mandatory IEs.
pub(crate) fn initial_context_setup_request(
    mme_ue_id: u32,
    enb_ue_id: u32,
    ambr: Ambr,
    erabs: &[ERab],
    caps: UeSecurityCapabilities,
    key: &Key256,
) -> Option<Vec<u8>> {
    if enb_ue_id > 0x00FF_FFFF
        || ambr.dl > BIT_RATE_MAX
        || ambr.ul > BIT_RATE_MAX
        || erabs.is_empty()
        || erabs.len() > 256
    {
        return None;
    }
    let nas: usize = erabs
        .iter()
        .map(|e| e.nas_pdu.as_ref().map_or(0, |n| n.len()))
        .sum();
    let mut out = Vec::with_capacity(128 + 32 * erabs.len() + nas);
    out.extend_from_slice(&[0x00, INITIAL_CONTEXT_SETUP, REJECT]);
    open_type(&mut out, |v| {
        v.extend_from_slice(&[0x00, 0x00, 0x06]);
        ie_id(v, ID_MME_UE_S1AP_ID, REJECT, mme_ue_id)?;
        ie_id(v, ID_ENB_UE_S1AP_ID, REJECT, enb_ue_id)?;
        // UEAggregateMaximumBitrate: extension, iE-Extensions?, downlink, uplink.
        ie(v, ID_UE_AGGREGATE_MAXIMUM_BITRATE, REJECT, |v| {
            let mut b = Bits::new(v);
            b.put(0, 2);
            b.bit_rate(ambr.dl);
            b.bit_rate(ambr.ul);
            Some(())
        })?;
        // E-RABToBeSetupListCtxtSUReq: count - 1 in one octet, then single containers.
        ie(v, ID_E_RAB_TO_BE_SETUP_LIST_CTXT_SU_REQ, REJECT, |v| {
            v.push((erabs.len() - 1) as u8);
            for e in erabs {
                ie(v, ID_E_RAB_TO_BE_SETUP_ITEM_CTXT_SU_REQ, REJECT, |v| {
                    ctxt_item(v, e)
                })?;
            }
            Some(())
        })?;
        // UESecurityCapabilities: extension, iE-Extensions?, then each BIT STRING
        // (SIZE (16, ...)): its extension bit and 16 bits, unaligned.
        ie(v, ID_UE_SECURITY_CAPABILITIES, REJECT, |v| {
            let mut b = Bits::new(v);
            b.put(0, 2);
            b.put(0, 1);
            b.put(u64::from(caps.eea), 16);
            b.put(0, 1);
            b.put(u64::from(caps.eia), 16);
            Some(())
        })?;
        // SecurityKey BIT STRING (SIZE (256)): fixed, octet-aligned.
        ie(v, ID_SECURITY_KEY, REJECT, |v| {
            v.extend_from_slice(&key.0);
            Some(())
        })
    })?;
    Some(out)
}

/// DownlinkNASTransport with exactly the three mandatory IEs.
pub(crate) fn downlink_nas_transport(
    mme_ue_id: u32,
    enb_ue_id: u32,
    nas: &[u8],
) -> Option<Vec<u8>> {
    if enb_ue_id > 0x00FF_FFFF || nas.len() >= 16384 {
        return None;
    }
    let mut out = Vec::with_capacity(nas.len() + 32);
    // S1AP-PDU: extension bit 0, choice index 0 (initiatingMessage), padding.
    out.extend_from_slice(&[0x00, DOWNLINK_NAS_TRANSPORT, IGNORE]);
    open_type(&mut out, |v| {
        // Extension bit + padding, IE count, the three IEs.
        v.extend_from_slice(&[0x00, 0x00, 0x03]);
        ie_id(v, ID_MME_UE_S1AP_ID, REJECT, mme_ue_id)?;
        ie_id(v, ID_ENB_UE_S1AP_ID, REJECT, enb_ue_id)?;
        ie(v, ID_NAS_PDU, REJECT, |v| {
            length(v, nas.len());
            v.extend_from_slice(nas);
            Some(())
        })
    })?;
    Some(out)
}

/// Reads an unconstrained length determinant (short or long form; fragmentation is
/// left to the generic decoder) and returns (length, octets consumed).
fn read_length(b: &[u8]) -> Option<(usize, usize)> {
    match *b.first()? {
        n if n & 0x80 == 0 => Some((usize::from(n), 1)),
        n if n & 0xC0 == 0x80 => Some(((usize::from(n & 0x3F) << 8) | usize::from(*b.get(1)?), 2)),
        _ => None,
    }
}

/// Splits `b` into (content of a length-prefixed field, rest).
fn take_length_prefixed(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let (n, used) = read_length(b)?;
    let rest = b.get(used..)?;
    (rest.len() >= n).then(|| rest.split_at(n))
}

/// A wide constrained INTEGER (see `wide_integer`) in minimal form, of at most
/// `max_octets` octets, filling its whole open type.
fn read_wide_integer(v: &[u8], max_octets: usize) -> Option<u32> {
    let (&head, value) = v.split_first()?;
    let octets = usize::from(head >> 6) + 1;
    if head & 0x3F != 0 || octets > max_octets || value.len() != octets {
        return None;
    }
    if octets > 1 && value[0] == 0 {
        return None; // not minimal
    }
    Some(value.iter().fold(0u32, |a, &x| a << 8 | u32::from(x)))
}

/// The IE list of an initiating message with procedure code `code` and message
/// criticality `crit`, holding exactly `count` IEs and nothing after the PDU.
fn initiating_ies(b: &[u8], code: u8, crit: u8, count: u8) -> Option<&[u8]> {
    pdu_ies(b, 0x00, code, crit, count)
}

/// The same for any S1AP-PDU choice: `choice` is its first octet (0x00 initiating,
/// 0x20 successful, 0x40 unsuccessful outcome).
fn pdu_ies(b: &[u8], choice: u8, code: u8, crit: u8, count: u8) -> Option<&[u8]> {
    if b.get(..3)? != [choice, code, crit] {
        return None;
    }
    let (value, rest) = take_length_prefixed(&b[3..])?;
    if !rest.is_empty() || value.get(..3)? != [0x00, 0x00, count] {
        return None;
    }
    Some(&value[3..])
}

/// The next ProtocolIE-Field: (id, criticality octet, value).
fn next_ie<'a>(ies: &mut &'a [u8]) -> Option<(u16, u8, &'a [u8])> {
    let (head, after) = ies.split_at_checked(3)?;
    let (content, next) = take_length_prefixed(after)?;
    *ies = next;
    Some((u16::from_be_bytes([head[0], head[1]]), head[2], content))
}

/// NAS-PDU: its own length determinant filling the open type.
fn read_nas(content: &[u8]) -> Option<Vec<u8>> {
    let (pdu, tail) = take_length_prefixed(content)?;
    tail.is_empty().then(|| pdu.to_vec())
}

/// EUTRAN-CGI: no extension or iE-Extensions, PLMN, 28-bit cell id + 4 zero bits.
fn read_ecgi(c: &[u8]) -> Option<Ecgi> {
    if c.len() != 8 || c[0] != 0 || c[7] & 0x0F != 0 {
        return None;
    }
    Some(Ecgi {
        plmn: Plmn([c[1], c[2], c[3]]),
        cell_id: u32::from_be_bytes([c[4], c[5], c[6], c[7]]) >> 4,
    })
}

/// TAI: no extension or iE-Extensions, PLMN, TAC.
fn read_tai(c: &[u8]) -> Option<Tai> {
    if c.len() != 6 || c[0] != 0 {
        return None;
    }
    Some(Tai {
        plmn: Plmn([c[1], c[2], c[3]]),
        tac: u16::from_be_bytes([c[4], c[5]]),
    })
}

/// UplinkNASTransport in the canonical form, or `None`.
pub(crate) fn uplink_nas_transport(b: &[u8]) -> Option<UplinkNasTransport> {
    let mut ies = initiating_ies(b, UPLINK_NAS_TRANSPORT, IGNORE, 5)?;
    let (mut mme, mut enb, mut nas, mut ecgi, mut tai) = (None, None, None, None, None);
    for _ in 0..5 {
        let (id, crit, content) = next_ie(&mut ies)?;
        match (id, crit) {
            (ID_MME_UE_S1AP_ID, REJECT) if mme.is_none() => {
                mme = Some(read_wide_integer(content, 4)?)
            }
            (ID_ENB_UE_S1AP_ID, REJECT) if enb.is_none() => {
                enb = Some(read_wide_integer(content, 3)?)
            }
            (ID_NAS_PDU, REJECT) if nas.is_none() => nas = Some(read_nas(content)?),
            (ID_EUTRAN_CGI, IGNORE) if ecgi.is_none() => ecgi = Some(read_ecgi(content)?),
            (ID_TAI, IGNORE) if tai.is_none() => tai = Some(read_tai(content)?),
            _ => return None,
        }
    }
    if !ies.is_empty() {
        return None;
    }
    Some(UplinkNasTransport {
        mme_ue_id: mme?,
        enb_ue_id: enb?,
        nas_pdu: nas?,
        ecgi: ecgi?,
        tai: tai?,
    })
}

/// InitialUEMessage with only its five mandatory IEs (no S-TMSI, no GUMMEI), or
/// `None`.
pub(crate) fn initial_ue_message(b: &[u8]) -> Option<InitialUeMessage> {
    let mut ies = initiating_ies(b, INITIAL_UE_MESSAGE, IGNORE, 5)?;
    let (mut enb, mut nas, mut tai, mut ecgi, mut cause) = (None, None, None, None, None);
    for _ in 0..5 {
        let (id, crit, content) = next_ie(&mut ies)?;
        match (id, crit) {
            (ID_ENB_UE_S1AP_ID, REJECT) if enb.is_none() => {
                enb = Some(read_wide_integer(content, 3)?)
            }
            (ID_NAS_PDU, REJECT) if nas.is_none() => nas = Some(read_nas(content)?),
            (ID_TAI, REJECT) if tai.is_none() => tai = Some(read_tai(content)?),
            (ID_EUTRAN_CGI, IGNORE) if ecgi.is_none() => ecgi = Some(read_ecgi(content)?),
            (ID_RRC_ESTABLISHMENT_CAUSE, IGNORE) if cause.is_none() => {
                // Extensible ENUMERATED: five root values in 3 bits, or the extension
                // bit and a small index (the three extension values known here).
                let [v] = content else { return None };
                cause = Some(match *v {
                    v if v & 0x8F == 0 && v >> 4 <= 4 => v >> 4,
                    v if v & 0xC0 == 0x80 && v & 0x3F <= 2 => 5 + (v & 0x3F),
                    _ => return None,
                });
            }
            _ => return None,
        }
    }
    if !ies.is_empty() {
        return None;
    }
    Some(InitialUeMessage {
        enb_ue_id: enb?,
        nas_pdu: nas?,
        tai: tai?,
        ecgi: ecgi?,
        rrc_cause: cause?,
        s_tmsi: None,
        gummei: None,
    })
}

/// InitialContextSetupResponse with its three mandatory IEs, IPv4 transport
/// addresses, and no failed list or criticality diagnostics; else `None`.
pub(crate) fn initial_context_setup_response(b: &[u8]) -> Option<InitialContextSetupResponse> {
    let mut ies = pdu_ies(b, 0x20, INITIAL_CONTEXT_SETUP, REJECT, 3)?;
    let (mut mme, mut enb, mut erabs) = (None, None, None);
    for _ in 0..3 {
        let (id, crit, content) = next_ie(&mut ies)?;
        match (id, crit) {
            (ID_MME_UE_S1AP_ID, IGNORE) if mme.is_none() => {
                mme = Some(read_wide_integer(content, 4)?)
            }
            (ID_ENB_UE_S1AP_ID, IGNORE) if enb.is_none() => {
                enb = Some(read_wide_integer(content, 3)?)
            }
            (ID_E_RAB_SETUP_LIST_CTXT_SU_RES, IGNORE) if erabs.is_none() => {
                let (&count, mut items) = content.split_first()?;
                let mut list = Vec::with_capacity(usize::from(count) + 1);
                for _ in 0..=count {
                    let (item_id, item_crit, v) = next_ie(&mut items)?;
                    // E-RABSetupItemCtxtSURes: extension and iE-Extensions bits clear,
                    // E-RAB-ID (extension bit, 4 bits), TransportLayerAddress
                    // (extension bit, length - 1 = 31: IPv4), aligned address, TEID.
                    if item_id != ID_E_RAB_SETUP_ITEM_CTXT_SU_RES
                        || item_crit != IGNORE
                        || v.len() != 10
                        || v[0] & 0xE1 != 0
                        || v[1] != 31
                    {
                        return None;
                    }
                    list.push(ERabTunnel {
                        id: v[0] >> 1,
                        transport: std::net::Ipv4Addr::new(v[2], v[3], v[4], v[5]),
                        teid: u32::from_be_bytes([v[6], v[7], v[8], v[9]]),
                    });
                }
                if !items.is_empty() {
                    return None;
                }
                erabs = Some(list);
            }
            _ => return None,
        }
    }
    if !ies.is_empty() {
        return None;
    }
    Some(InitialContextSetupResponse {
        mme_ue_id: mme?,
        enb_ue_id: enb?,
        erabs: erabs?,
        failed: vec![],
    })
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
                        None => assert!(n >= 16000, "fell back for nas {n}"),
                    }
                    // And the public encoder (whichever path it takes) agrees.
                    assert_eq!(m.encode().unwrap(), want);
                }
            }
        }
        assert!(checked > 800, "{checked}");
    }

    #[test]
    fn initial_context_setup_request_byte_identical() {
        use crate::msg::InitialContextSetupRequest;
        use crate::{Ambr, Arp, ERab, GbrQos, Key256, UeSecurityCapabilities};
        let rates = [
            0u64,
            1,
            255,
            256,
            65_535,
            1_000_000,
            1 << 32,
            10_000_000_000,
        ];
        let mut checked = 0;
        for (i, &r) in rates.iter().enumerate() {
            for nerabs in 1..=3usize {
                for &nas_len in &[0usize, 5, 127, 128, 600] {
                    let erabs: Vec<ERab> = (0..nerabs)
                        .map(|k| ERab {
                            id: (5 + k + i) as u8 % 16,
                            qci: [9u8, 1, 5, 255][(k + i) % 4],
                            arp: Arp {
                                priority_level: ((i * 3 + k) % 16) as u8,
                                pre_emption_capability: (k + i) % 2 == 0,
                                pre_emption_vulnerability: (k + i) % 3 == 0,
                            },
                            gbr: (k % 2 == 1).then_some(GbrQos {
                                mbr_dl: r,
                                mbr_ul: rates[(i + 1) % rates.len()],
                                gbr_dl: rates[(i + 2) % rates.len()],
                                gbr_ul: 0,
                            }),
                            transport: std::net::Ipv4Addr::new(10, k as u8, i as u8, 1),
                            teid: 0x0100_0000u32.wrapping_mul((i + k + 1) as u32),
                            nas_pdu: (k == 0 && nas_len > 0)
                                .then(|| (0..nas_len).map(|x| x as u8).collect()),
                        })
                        .collect();
                    let m = InitialContextSetupRequest {
                        mme_ue_id: [0u32, 300, 70_000, u32::MAX][i % 4],
                        enb_ue_id: [0u32, 1, 0x00FF_FFFF, 65_536][(i + nerabs) % 4],
                        ue_ambr: Ambr {
                            dl: r,
                            ul: rates[(i + 3) % rates.len()],
                        },
                        erabs,
                        ue_security_capabilities: UeSecurityCapabilities {
                            eea: 0xE000 ^ (i as u16),
                            eia: 0x6000 | (nerabs as u16),
                        },
                        security_key: Key256([i as u8; 32]),
                    };
                    let want = crate::encode(&m.to_pdu().unwrap()).unwrap();
                    let got = super::initial_context_setup_request(
                        m.mme_ue_id,
                        m.enb_ue_id,
                        m.ue_ambr,
                        &m.erabs,
                        m.ue_security_capabilities,
                        &m.security_key,
                    )
                    .expect("handled");
                    assert_eq!(got, want, "rate {r} erabs {nerabs} nas {nas_len}");
                    assert_eq!(m.encode().unwrap(), want);
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, rates.len() * 3 * 5);
    }

    fn uplink_samples() -> Vec<Vec<u8>> {
        use crate::msg::UplinkNasTransport;
        use crate::{Ecgi, Plmn, Tai};
        let mut out = Vec::new();
        for (i, &id) in [0u32, 1, 255, 256, 65_536, 0x00FF_FFFF, u32::MAX]
            .iter()
            .enumerate()
        {
            for &n in &[0usize, 1, 50, 127, 128, 300] {
                let m = UplinkNasTransport {
                    mme_ue_id: id,
                    enb_ue_id: id & 0x00FF_FFFF,
                    nas_pdu: (0..n).map(|x| (x * 13 + i) as u8).collect(),
                    ecgi: Ecgi {
                        plmn: Plmn([0x00, 0xf1, 0x10 + i as u8]),
                        cell_id: (id & 0x0FFF_FFFF) ^ 0x0123_4567 & 0x0FFF_FFFF,
                    },
                    tai: Tai {
                        plmn: Plmn([0x21, 0xf3, i as u8]),
                        tac: (id as u16) ^ 0xBEEF,
                    },
                };
                out.push(crate::encode(&m.to_pdu().unwrap()).unwrap());
            }
        }
        out
    }

    #[test]
    fn uplink_nas_transport_decodes_like_the_generic_decoder() {
        use crate::msg::UplinkNasTransport;
        for b in uplink_samples() {
            let fast = super::uplink_nas_transport(&b).expect("canonical form");
            let generic = UplinkNasTransport::try_from(&crate::decode(&b).unwrap()).unwrap();
            assert_eq!(fast, generic);
            assert_eq!(UplinkNasTransport::decode(&b).unwrap(), generic);
        }
    }

    fn initial_ue_samples() -> Vec<Vec<u8>> {
        use crate::msg::InitialUeMessage;
        use crate::{Ecgi, Plmn, Tai};
        let mut out = Vec::new();
        for (i, &id) in [0u32, 1, 255, 256, 65_536, 0x00FF_FFFF].iter().enumerate() {
            for &n in &[0usize, 1, 50, 127, 128, 300] {
                for cause in 0..=7u8 {
                    let m = InitialUeMessage {
                        enb_ue_id: id,
                        nas_pdu: (0..n).map(|x| (x * 5 + i) as u8).collect(),
                        tai: Tai {
                            plmn: Plmn([0x13, 0x00, 0x14 + i as u8]),
                            tac: (id as u16) ^ 0x0101,
                        },
                        ecgi: Ecgi {
                            plmn: Plmn([0x00, 0xf1, 0x10]),
                            cell_id: id & 0x0FFF_FFFF,
                        },
                        rrc_cause: cause,
                        s_tmsi: None,
                        gummei: None,
                    };
                    out.push(crate::encode(&m.to_pdu().unwrap()).unwrap());
                }
            }
        }
        out
    }

    #[test]
    fn initial_ue_message_decodes_like_the_generic_decoder() {
        use crate::msg::InitialUeMessage;
        for b in initial_ue_samples() {
            let fast = super::initial_ue_message(&b).expect("canonical form");
            let generic = InitialUeMessage::try_from(&crate::decode(&b).unwrap()).unwrap();
            assert_eq!(fast, generic);
        }
        // With S-TMSI the generic decoder takes over.
        let m = InitialUeMessage {
            enb_ue_id: 9,
            nas_pdu: vec![7; 20],
            tai: Default::default(),
            ecgi: Default::default(),
            rrc_cause: 3,
            s_tmsi: Some(crate::STmsi {
                mmec: 1,
                m_tmsi: 0xdead_beef,
            }),
            gummei: None,
        };
        let b = m.encode().unwrap();
        assert!(super::initial_ue_message(&b).is_none());
        assert_eq!(InitialUeMessage::decode(&b).unwrap(), m);
    }

    /// Every truncation, one extra octet, and three random single-octet corruptions
    /// per position of each sample: whatever `fast` accepts, `generic` must decode to
    /// the same message. Returns how many mutants `fast` accepted.
    fn differential<T: PartialEq + core::fmt::Debug>(
        samples: Vec<Vec<u8>>,
        fast: impl Fn(&[u8]) -> Option<T>,
        generic: impl Fn(&[u8]) -> Result<T, crate::S1apError>,
    ) -> usize {
        let mut accepted_mutants = 0;
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        for b in samples {
            let mut cases: Vec<Vec<u8>> = (0..b.len()).map(|n| b[..n].to_vec()).collect();
            for pos in 0..b.len() {
                for _ in 0..3 {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let mut m = b.clone();
                    m[pos] ^= (rng as u8).max(1);
                    cases.push(m);
                }
            }
            let mut longer = b.clone();
            longer.push(0);
            cases.push(longer);
            for c in cases {
                if let Some(f) = fast(&c) {
                    let g = generic(&c)
                        .unwrap_or_else(|e| panic!("fast accepted what generic refuses: {e}"));
                    assert_eq!(f, g);
                    accepted_mutants += 1;
                }
            }
        }
        accepted_mutants
    }

    fn ics_response_samples() -> Vec<Vec<u8>> {
        use crate::msg::InitialContextSetupResponse;
        use crate::ERabTunnel;
        let mut out = Vec::new();
        for (i, &id) in [0u32, 1, 255, 65_536, 0x00FF_FFFF].iter().enumerate() {
            for n in 1..=4usize {
                let m = InitialContextSetupResponse {
                    mme_ue_id: id ^ 0x8000_0000,
                    enb_ue_id: id,
                    erabs: (0..n)
                        .map(|k| ERabTunnel {
                            id: ((5 + k + i) % 16) as u8,
                            transport: std::net::Ipv4Addr::new(192, 168, i as u8, k as u8),
                            teid: (id ^ 0x1234_5678).wrapping_add(k as u32),
                        })
                        .collect(),
                    failed: vec![],
                };
                out.push(crate::encode(&m.to_pdu().unwrap()).unwrap());
            }
        }
        out
    }

    #[test]
    fn ics_response_decodes_like_the_generic_decoder() {
        use crate::msg::InitialContextSetupResponse;
        for b in ics_response_samples() {
            let fast = super::initial_context_setup_response(&b).expect("canonical form");
            let generic =
                InitialContextSetupResponse::try_from(&crate::decode(&b).unwrap()).unwrap();
            assert_eq!(fast, generic);
        }
    }

    #[test]
    fn fast_decoders_never_accept_what_the_generic_one_reads_differently() {
        use crate::msg::{InitialContextSetupResponse, InitialUeMessage, UplinkNasTransport};
        let ics = differential(
            ics_response_samples(),
            super::initial_context_setup_response,
            |c| crate::decode(c).and_then(|p| InitialContextSetupResponse::try_from(&p)),
        );
        assert!(ics > 100, "{ics}");
        let ul = differential(uplink_samples(), super::uplink_nas_transport, |c| {
            crate::decode(c).and_then(|p| UplinkNasTransport::try_from(&p))
        });
        let iu = differential(initial_ue_samples(), super::initial_ue_message, |c| {
            crate::decode(c).and_then(|p| InitialUeMessage::try_from(&p))
        });
        // Payload corruptions (NAS octets, PLMN, TAC, cell id) stay valid messages.
        assert!(ul > 1000 && iu > 1000, "{ul} {iu}");
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
