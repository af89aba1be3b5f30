//! One entry per UE: the signaling part a UE gets at its first message, the data-path
//! part created in the same entry at session creation, and their removal.

use pepc_slice::control::{AttachParams, CtrlError};
use pepc_slice::slice::{build_with_signaling, SliceConfig};

/// What an MME would keep of a UE (the table's type parameter).
#[derive(Debug, PartialEq)]
struct Sig {
    mme_ue_id: u32,
}

#[test]
fn signaling_first_then_session_in_the_same_entry() {
    let (mut cp, mut dp) = build_with_signaling::<Sig>(&SliceConfig::for_users(100));
    let slot = cp.reserve_ue(Box::new(Sig { mme_ue_id: 7 })).unwrap();
    assert_eq!(cp.entry_count(), 1);
    assert_eq!(cp.ue_count(), 0, "no session yet");
    assert!(cp.ue(slot).is_none());
    assert_eq!(cp.signaling(slot), Some(&Sig { mme_ue_id: 7 }));
    cp.signaling_mut(slot).unwrap().mme_ue_id = 8;

    let mut p = AttachParams::new(1);
    p.ue_slot = Some(slot);
    let a = cp.attach(&p).unwrap();
    assert_eq!(a.ue_slot, slot);
    assert_eq!(cp.ue(slot).unwrap().imsi, 1);
    assert_eq!(cp.entry_count(), 1);
    // The entry is taken: a second session cannot be created in it.
    let mut q = AttachParams::new(2);
    q.ue_slot = Some(slot);
    assert_eq!(cp.attach(&q).unwrap_err(), CtrlError::UnknownUe(slot));
    dp.sync(2);

    // Detach drops the data-path part; the signaling part keeps the entry.
    cp.detach(slot).unwrap();
    assert!(cp.ue(slot).is_none());
    assert_eq!(cp.signaling(slot), Some(&Sig { mme_ue_id: 8 }));
    assert_eq!(cp.entry_count(), 1);
    let other = cp.attach(&AttachParams::new(3)).unwrap();
    assert_ne!(other.ue_slot, slot);

    // Release frees the entry and hands the signaling part back.
    let sig = cp.release_ue(slot).unwrap();
    assert_eq!(*sig, Sig { mme_ue_id: 8 });
    assert!(cp.signaling(slot).is_none());
    assert_eq!(cp.entry_count(), 1, "the other UE");
    assert!(cp.release_ue(slot).is_none());
}

#[test]
fn release_with_a_session_detaches_it() {
    let (mut cp, mut dp) = build_with_signaling::<Sig>(&SliceConfig::for_users(100));
    let slot = cp.reserve_ue(Box::new(Sig { mme_ue_id: 1 })).unwrap();
    let mut p = AttachParams::new(42);
    p.ue_slot = Some(slot);
    cp.attach(&p).unwrap();
    dp.sync(2);
    assert!(cp.release_ue(slot).is_some());
    assert_eq!((cp.ue_count(), cp.entry_count()), (0, 0));
    assert!(cp.find_imsi(42).is_none());
    // The slot is handed out again.
    let again = cp.reserve_ue(Box::new(Sig { mme_ue_id: 2 })).unwrap();
    assert!(cp.signaling(again).is_some());
}

#[test]
fn entries_are_bounded_by_the_slots() {
    let mut cfg = SliceConfig::for_users(4);
    cfg.ue_slots = 4;
    let (mut cp, _dp) = build_with_signaling::<Sig>(&cfg);
    let mut n = 0;
    while cp.reserve_ue(Box::new(Sig { mme_ue_id: n })).is_ok() {
        n += 1;
        assert!(n < 100, "unbounded");
    }
    assert_eq!(
        cp.reserve_ue(Box::new(Sig { mme_ue_id: 0 })).unwrap_err(),
        CtrlError::Exhausted("UE slots")
    );
    assert_eq!(cp.entry_count(), n as usize);
}
