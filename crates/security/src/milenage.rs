//! MILENAGE (TS 35.206) over `oxirush_security::milenage`, with our key types.

use crate::keys::Key128;
use oxirush_security::milenage::{self as om, Amf, Sqn};
use oxirush_security::Rand;

/// One subscriber's MILENAGE instance: K, OPc and the standard constants.
/// `Debug` prints nothing of K or OPc.
#[derive(Clone)]
pub struct Milenage {
    inner: om::Milenage,
    opc: Key128,
}

impl core::fmt::Debug for Milenage {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Milenage(<redacted>)")
    }
}

impl Milenage {
    /// From K and OPc (what USIMs and most HSS databases store).
    pub fn new_with_opc(k: &Key128, opc: [u8; 16]) -> Self {
        let opc = Key128::new(opc);
        let inner = om::Milenage::new(&om::K::new(k.as_bytes()), &om::Opc::new(opc.as_bytes()));
        Self { inner, opc }
    }

    /// From K and OP; OPc = OP xor E_K(OP) is derived once here.
    pub fn new_with_op(k: &Key128, op: [u8; 16]) -> Self {
        let ok = om::K::new(k.as_bytes());
        let opc = om::Opc::from_op(&ok, &om::Op::new(&op));
        Self::new_with_opc(k, *opc.as_octets())
    }

    /// OPc in use (derived from OP when built with [`Milenage::new_with_op`]).
    pub fn opc(&self) -> &Key128 {
        &self.opc
    }

    pub(crate) fn inner(&self) -> &om::Milenage {
        &self.inner
    }

    /// f1: MAC-A.
    pub fn f1(&self, rand: [u8; 16], sqn: [u8; 6], amf: [u8; 2]) -> [u8; 8] {
        *self
            .inner
            .f1(&Rand::new(&rand), &Sqn::new(&sqn), &Amf::new(&amf))
            .as_octets()
    }

    /// f1*: MAC-S (resynchronisation; AUTS uses AMF 0000).
    pub fn f1_star(&self, rand: [u8; 16], sqn: [u8; 6], amf: [u8; 2]) -> [u8; 8] {
        *self
            .inner
            .f1_star(&Rand::new(&rand), &Sqn::new(&sqn), &Amf::new(&amf))
            .as_octets()
    }

    /// f2..f5: (RES, CK, IK, AK).
    pub fn f2345(&self, rand: [u8; 16]) -> ([u8; 8], Key128, Key128, [u8; 6]) {
        let (res, ck, ik, ak) = self.inner.f2345(&Rand::new(&rand));
        (
            *res.as_octets(),
            Key128::new(*ck.as_octets()),
            Key128::new(*ik.as_octets()),
            *ak.as_octets(),
        )
    }

    /// f5*: AK used to conceal SQN_MS in AUTS.
    pub fn f5_star(&self, rand: [u8; 16]) -> [u8; 6] {
        *self.inner.f5_star(&Rand::new(&rand)).as_octets()
    }
}
