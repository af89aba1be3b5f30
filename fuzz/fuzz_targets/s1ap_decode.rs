//! S1AP decode: the node's routing peek, the hand-written fast decoders and the
//! generic aligned-PER decoder must agree wherever they accept the same octets, and
//! whatever decodes must re-encode to something that decodes to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pepc_s1ap::msg::{
    InitialContextSetupResponse, InitialUeMessage, S1apMessage, UplinkNasTransport,
};
use pepc_s1ap::peek::{peek, PduKind};
use pepc_s1ap::Direction;

fuzz_target!(|data: &[u8]| check(data));

fn check(data: &[u8]) {
    let generic = pepc_s1ap::decode(data);
    // `S1apMessage::decode` takes a hand-written path for the canonical attach PDUs
    // and falls back to the generic decoder otherwise, so any difference between the
    // two comes from a fast path.
    let fast = S1apMessage::decode(data);
    let slow = generic.clone().and_then(|p| S1apMessage::from_pdu(&p));
    match (&fast, &slow) {
        (Ok(f), Ok(s)) => assert_eq!(f, s, "fast and generic decoders disagree"),
        (Ok(f), Err(e)) => panic!("fast path accepted {f:?}, generic decoder refused: {e}"),
        (Err(e), Ok(s)) => panic!("generic decoder accepted {s:?}, fast path refused: {e}"),
        (Err(_), Err(_)) => {}
    }
    // The per-message entry points with their own fast paths.
    fn same<T: PartialEq + core::fmt::Debug>(a: Result<T, pepc_s1ap::S1apError>, b: Option<T>) {
        if let (Ok(a), Some(b)) = (a, b) {
            assert_eq!(
                a, b,
                "per-message decode disagrees with S1apMessage::decode"
            );
        }
    }
    let typed = slow.as_ref().ok();
    same(
        InitialUeMessage::decode(data),
        typed.and_then(|m| match m {
            S1apMessage::InitialUeMessage(x) => Some(x.clone()),
            _ => None,
        }),
    );
    same(
        UplinkNasTransport::decode(data),
        typed.and_then(|m| match m {
            S1apMessage::UplinkNasTransport(x) => Some(x.clone()),
            _ => None,
        }),
    );
    same(
        InitialContextSetupResponse::decode(data),
        typed.and_then(|m| match m {
            S1apMessage::InitialContextSetupResponse(x) => Some(x.clone()),
            _ => None,
        }),
    );

    // The demux's peek routes on what it reads; where the full decoder accepts the
    // PDU too, the routing view must be the PDU's.
    let pk = peek(data);
    if let (Ok(p), Ok(pdu)) = (&pk, &generic) {
        assert_eq!(
            p.procedure,
            pepc_s1ap::procedure_code(pdu),
            "peek: procedure"
        );
        let dir = match p.kind {
            PduKind::Initiating => Direction::Initiating,
            PduKind::Successful => Direction::Successful,
            PduKind::Unsuccessful => Direction::Unsuccessful,
        };
        assert_eq!(dir, pepc_s1ap::direction(pdu), "peek: direction");
        let _ = p.is_non_ue_associated();
        if let Ok(m) = &slow {
            // Where both read an MME UE S1AP ID it must be the same, or the demux
            // routes the PDU to another slice than the one its UE is in. (Peek also
            // reports a stray ID IE in a message that has none, e.g. an Initial UE
            // Message, which routes on its S-TMSI and NAS; and messages we do not
            // model have no typed ID.)
            if let (Some(a), Some(b)) = (p.mme_ue_id, m.mme_ue_id()) {
                assert_eq!(a, b, "peek: MME UE S1AP ID");
            }
            match m {
                S1apMessage::InitialUeMessage(x) => {
                    assert_eq!(p.nas_pdu, Some(&x.nas_pdu[..]), "peek: NAS-PDU");
                    assert_eq!(
                        p.s_tmsi,
                        x.s_tmsi.map(|s| (s.mmec, s.m_tmsi)),
                        "peek: S-TMSI"
                    );
                }
                S1apMessage::PathSwitchRequest(x) if p.source_mme_ue_id.is_some() => {
                    assert_eq!(p.source_mme_ue_id, Some(x.source_mme_ue_id));
                }
                _ => {}
            }
        }
    }

    // Round trips: the PDU, and the typed message.
    if let Ok(pdu) = &generic {
        if let Ok(bytes) = pepc_s1ap::encode(pdu) {
            let again = pepc_s1ap::decode(&bytes).expect("re-encoded PDU decodes");
            assert_eq!(&again, pdu, "PDU round trip");
        }
    }
    if let Ok(m) = &slow {
        if let Ok(bytes) = m.encode() {
            let again = S1apMessage::decode(&bytes).expect("re-encoded message decodes");
            assert_eq!(&again, m, "message round trip");
        }
    }
}
