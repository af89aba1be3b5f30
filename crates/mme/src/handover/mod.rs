//! Handover (TS 23.401 §5.5.1): the {NH, NCC} chain (TS 33.401 §7.2.8) that X2 and S1
//! handover share.

mod s1;
mod x2;

use crate::prelude::*;

/// Next {NH, NCC} of `u`: NH_{n+1} = KDF(KASME, NH_n) (TS 33.401 A.4, §7.2.8.4).
pub(crate) fn next_nh(u: &mut Ue) -> Option<SecurityContext> {
    let sec = u.sec.as_mut()?;
    let prev = u.nh.clone()?;
    let nh = sec.kdf().nh(&prev);
    u.ncc = (u.ncc + 1) & 7;
    let sc = SecurityContext {
        ncc: u.ncc,
        next_hop: S1Key(*nh.as_bytes()),
    };
    u.nh = Some(nh);
    Some(sc)
}
