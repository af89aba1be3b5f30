//! NAS decode + unprotect: plain decoding in both directions with a round trip, the
//! demux's identity peek, and the network side of NAS security (integrity check,
//! deciphering, COUNT estimation) under a fixed test key context.
//!
//! The first octet selects the algorithms, the header type and the COUNTs; the rest
//! is the NAS PDU. Random octets almost never carry a valid MAC, so the PDU is also
//! protected by a UE context with the same keys and must unprotect to itself: that
//! is what drives the deciphering and COUNT paths.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pepc_nas::security::{security_header_type, NasSecurityContext, Role};
use pepc_nas::{Direction, NasMessage};
use pepc_security::{Eea, Eia, Key128};

const KNAS_INT: [u8; 16] = *b"fuzz-knas-int-01";
const KNAS_ENC: [u8; 16] = *b"fuzz-knas-enc-01";

fn context(role: Role, sel: u8) -> NasSecurityContext {
    let eia = [Eia::Eia1, Eia::Eia2, Eia::Eia3, Eia::Eia2][usize::from(sel & 3)];
    let eea = [Eea::Eea0, Eea::Eea1, Eea::Eea2, Eea::Eea3][usize::from(sel >> 2 & 3)];
    let mut c = NasSecurityContext::new(
        role,
        Key128::new(KNAS_INT),
        Key128::new(KNAS_ENC),
        eia,
        eea,
        1,
    );
    // COUNTs near 0, near a SEQ overflow and near the 24-bit wrap.
    let count = [0u32, 0xff, 0x1_00ff, 0xff_ffff][usize::from(sel >> 4 & 3)];
    c.set_counts(count, count, sel & 0x40 != 0);
    c
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, pdu)) = data.split_first() else {
        return;
    };

    for dir in [None, Some(Direction::Uplink), Some(Direction::Downlink)] {
        let m = match dir {
            None => NasMessage::decode(pdu),
            Some(d) => NasMessage::decode_dir(pdu, d),
        };
        if let Ok(m) = m {
            if let Ok(bytes) = m.encode() {
                let again = match dir {
                    None => NasMessage::decode(&bytes),
                    Some(d) => NasMessage::decode_dir(&bytes, d),
                };
                assert_eq!(again.as_ref(), Ok(&m), "NAS round trip");
            }
        }
    }

    let _ = pepc_nas::peek::initial_identity(pdu);
    let _ = pepc_nas::peek::mobile_identity(pdu);
    let _ = security_header_type(pdu);

    // The network side as it meets a PDU from the air.
    let mut net = context(Role::Network, sel);
    if let Ok((plain, _count)) = net.unprotect(pdu) {
        let _ = NasMessage::decode_dir(&plain, Direction::Uplink);
    }
    let mut net = context(Role::Network, sel);
    let _ = net.verify_service_request(pdu);

    // A genuine protected PDU around the octets: must come back unchanged, once.
    // (A protected PDU holds a message, so not empty: unprotect wants 7 octets.)
    if pdu.is_empty() {
        return;
    }
    let sht = [1u8, 2, 3, 4][usize::from(sel >> 6)];
    let mut ue = context(Role::Ue, sel);
    let mut net = context(Role::Network, sel);
    let sent = ue.ul_count;
    let protected = ue.protect(pdu, sht).expect("protect accepts any message");
    let (plain, count) = net.unprotect(&protected).expect("own protection verifies");
    assert_eq!(plain, pdu, "unprotect(protect(x)) != x");
    assert_eq!(count, sent, "COUNT estimated from the SEQ");
    // A replayed PDU is never accepted twice.
    assert!(net.unprotect(&protected).is_err(), "replay accepted");
});
