//! The MME fed whole recorded flows with mutations.
//!
//! Seeds are streams recorded from the scripted eNB + UE (`pepc_fuzz::flow`: S1
//! Setup, attach, idle and paging, Service Request, TAU, X2 and S1 handover, detach,
//! eNB loss). The mutator works on the stream's records: it mutates one or several
//! S1AP messages (their octets, the NAS-PDU they carry, their UE S1AP IDs), and the
//! order (swap, move, duplicate, drop, re-address to another eNB, insert a clock
//! advance). Each stream replays into a fresh node; no panic, and the UE contexts
//! stay bounded by the Initial UE Messages fed (see `flow::replay`).
#![no_main]

use libfuzzer_sys::{fuzz_mutator, fuzz_target, fuzzer_mutate};
use pepc_fuzz::flow::{self, Rec, ASSOCS};
use pepc_s1ap::msg::S1apMessage;

fuzz_target!(|data: &[u8]| {
    flow::replay(&flow::parse(data));
});

/// xorshift over the seed libFuzzer gives the mutator (reproducible mutations).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// libFuzzer's own byte mutations on a buffer, with room to grow.
fn mutate_bytes(b: &mut Vec<u8>, rng: &mut Rng) {
    let len = b.len();
    b.resize(len + 16 + rng.below(64), 0);
    let cap = b.len();
    let n = fuzzer_mutate(b, len, cap);
    b.truncate(n);
}

/// The (MME, eNB) UE S1AP IDs of the messages the flows carry them in.
fn ids(m: &mut S1apMessage) -> Option<(&mut u32, &mut u32)> {
    use S1apMessage as M;
    Some(match m {
        M::UplinkNasTransport(x) => (&mut x.mme_ue_id, &mut x.enb_ue_id),
        M::InitialContextSetupResponse(x) => (&mut x.mme_ue_id, &mut x.enb_ue_id),
        M::UeContextReleaseRequest(x) => (&mut x.mme_ue_id, &mut x.enb_ue_id),
        M::UeContextReleaseComplete(x) => (&mut x.mme_ue_id, &mut x.enb_ue_id),
        M::HandoverRequired(x) => (&mut x.mme_ue_id, &mut x.enb_ue_id),
        M::HandoverRequestAcknowledge(x) => (&mut x.mme_ue_id, &mut x.enb_ue_id),
        M::HandoverNotify(x) => (&mut x.mme_ue_id, &mut x.enb_ue_id),
        M::PathSwitchRequest(x) => (&mut x.source_mme_ue_id, &mut x.enb_ue_id),
        _ => return None,
    })
}

/// A structural mutation of one S1AP message: its NAS-PDU or its IDs. `None` when
/// the message does not decode or has neither.
fn mutate_message(bytes: &[u8], rng: &mut Rng) -> Option<Vec<u8>> {
    let mut m = S1apMessage::decode(bytes).ok()?;
    let nas = match &mut m {
        S1apMessage::InitialUeMessage(x) => Some(&mut x.nas_pdu),
        S1apMessage::UplinkNasTransport(x) => Some(&mut x.nas_pdu),
        _ => None,
    };
    match (nas, rng.below(2)) {
        (Some(nas), 0) => mutate_bytes(nas, rng),
        _ => {
            let (mme, enb) = ids(&mut m)?;
            let v = if rng.below(2) == 0 { mme } else { enb };
            *v = match rng.below(4) {
                0 => v.wrapping_add(1),
                1 => v.wrapping_sub(1),
                2 => rng.next() as u32 & 0xff,
                _ => rng.next() as u32,
            };
        }
    }
    m.encode().ok()
}

fn mutate(recs: &mut Vec<Rec>, rng: &mut Rng) {
    let n = recs.len();
    if n == 0 {
        // Start over from a recorded flow rather than from nothing.
        let flows = flow::recorded_flows();
        *recs = flows[rng.below(flows.len())].1.clone();
        return;
    }
    let i = rng.below(n);
    match rng.below(10) {
        0..=2 => {
            if let Rec::S1ap { bytes, .. } | Rec::Downlink { packet: bytes } = &mut recs[i] {
                mutate_bytes(bytes, rng);
            }
        }
        3..=4 => {
            if let Rec::S1ap { bytes, .. } = &mut recs[i] {
                if let Some(b) = mutate_message(bytes, rng) {
                    *bytes = b;
                }
            }
        }
        5 => recs.swap(i, rng.below(n)),
        6 => {
            let r = recs.remove(i);
            recs.insert(rng.below(n), r);
        }
        7 => {
            let r = recs[i].clone();
            recs.insert(rng.below(n + 1), r);
        }
        8 => {
            recs.remove(i);
        }
        _ => match &mut recs[i] {
            Rec::S1ap { assoc, .. } | Rec::EnbUp { assoc } | Rec::EnbDown { assoc } => {
                *assoc = 1 + (*assoc + rng.below(2) as u8) % ASSOCS;
            }
            _ => recs.insert(
                i,
                Rec::Advance {
                    secs: rng.next() as u8,
                },
            ),
        },
    }
}

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    let mut rng = Rng(u64::from(seed) << 1 | 1);
    let mut recs = flow::parse(&data[..size]);
    for _ in 0..1 + rng.below(3) {
        mutate(&mut recs, &mut rng);
    }
    let out = flow::serialize(&recs);
    let n = out.len().min(max_size);
    data[..n].copy_from_slice(&out[..n]);
    n
});
