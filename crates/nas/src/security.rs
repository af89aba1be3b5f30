//! NAS security framing (TS 24.301 §4.4, §9.1, §9.9.3.28; TS 33.401 §8).
//!
//! A security-protected NAS PDU is `SHT|PD, MAC(4), SEQ, message`. The MAC (EIA, bearer
//! 0, direction 0 up / 1 down) covers `SEQ || message` as sent (ciphered if SHT 2/4);
//! the full 32-bit NAS COUNT is `overflow(16) << 8 | SEQ`. The receiver estimates the
//! COUNT from SEQ, verifies the MAC *before* returning anything, and refuses replays.
//! Service Request (SHT 12) carries KSI + 5-bit SEQ and a 16-bit short MAC over its
//! first two octets.

pub use pepc_security::{Eea, Eia, Key128};
use pepc_security::{EeaKeyed, EiaKeyed};

/// Security header types (TS 24.301 §9.3.1).
pub mod sht {
    pub const PLAIN: u8 = 0;
    pub const INTEGRITY: u8 = 1;
    pub const INTEGRITY_CIPHERED: u8 = 2;
    pub const INTEGRITY_NEW_CONTEXT: u8 = 3;
    pub const INTEGRITY_CIPHERED_NEW_CONTEXT: u8 = 4;
    pub const SERVICE_REQUEST: u8 = 12;
}

const PD_EMM: u8 = 0x07;

/// Octets of a protected PDU before its message: SHT|PD, MAC (4), SEQ.
pub const HEADER_LEN: usize = 6;

/// Which side of the NAS link this context protects for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The MME: protects downlink, unprotects uplink.
    Network,
    /// The UE (emulator): protects uplink, unprotects downlink.
    Ue,
}

/// Why a protected NAS PDU was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NasSecError {
    /// Shorter than its header.
    Truncated { need: usize, have: usize },
    /// Not an EMM protected PDU, or a header type we do not handle here.
    BadHeader(u8),
    /// The MAC does not verify under the estimated COUNT.
    BadMac { count: u32 },
    /// The MAC verifies, but under a COUNT not greater than the last one accepted.
    Replay { count: u32, last: u32 },
    /// Plain NAS message where protection is required.
    NotProtected,
}

impl core::fmt::Display for NasSecError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            NasSecError::Truncated { need, have } => {
                write!(f, "protected NAS PDU truncated: need {need}, have {have}")
            }
            NasSecError::BadHeader(h) => write!(f, "unexpected NAS security header octet {h:#04x}"),
            NasSecError::BadMac { count } => write!(f, "NAS MAC failure at COUNT {count:#x}"),
            NasSecError::Replay { count, last } => {
                write!(f, "NAS replay: COUNT {count:#x} not above {last:#x}")
            }
            NasSecError::NotProtected => write!(f, "NAS message is not integrity protected"),
        }
    }
}

impl std::error::Error for NasSecError {}

/// An EPS NAS security context. Debug never shows the keys. The keys are set up
/// for their algorithms once (round keys, CMAC subkeys), not per message, and only
/// when first used: a context made and put aside (restored from a snapshot, say)
/// costs no key setup until it next protects or verifies a message. The keys are
/// zeroized on drop ([`Key128`]).
#[derive(Clone)]
pub struct NasSecurityContext {
    pub role: Role,
    knas_int: Key128,
    knas_enc: Key128,
    /// `knas_int` set up for `eia`, made on first use ([`Self::int_keyed`]).
    int: Option<EiaKeyed>,
    /// `knas_enc` set up for `eea`, made on first use ([`Self::enc_keyed`]).
    enc: Option<EeaKeyed>,
    eia: Eia,
    eea: Eea,
    /// eKSI this context belongs to (0..=6, TSC in bit 3).
    pub ksi: u8,
    /// Next uplink COUNT to send (UE) / one above the last accepted (network).
    pub ul_count: u32,
    /// Next downlink COUNT to send (network) / one above the last accepted (UE).
    pub dl_count: u32,
    /// Whether any PDU has been accepted in the receive direction yet.
    rx_started: bool,
}

impl core::fmt::Debug for NasSecurityContext {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("NasSecurityContext")
            .field("role", &self.role)
            .field("eia", &self.eia)
            .field("eea", &self.eea)
            .field("ksi", &self.ksi)
            .field("ul_count", &self.ul_count)
            .field("dl_count", &self.dl_count)
            .finish_non_exhaustive()
    }
}

impl NasSecurityContext {
    /// A fresh context (COUNTs 0), as after a Security Mode Command. The keys are set
    /// up for their algorithms on first use, not here.
    pub fn new(
        role: Role,
        knas_int: Key128,
        knas_enc: Key128,
        eia: Eia,
        eea: Eea,
        ksi: u8,
    ) -> Self {
        NasSecurityContext {
            role,
            knas_int,
            knas_enc,
            int: None,
            enc: None,
            eia,
            eea,
            ksi,
            ul_count: 0,
            dl_count: 0,
            rx_started: false,
        }
    }

    /// Derive K_NASint/K_NASenc from KASME (TS 33.401 Annex A.7) and build the context.
    pub fn from_kasme(
        role: Role,
        kasme: &pepc_security::Key256,
        eia: Eia,
        eea: Eea,
        ksi: u8,
    ) -> Self {
        let (enc, int) = pepc_security::nas_keys(kasme, eea as u8, eia as u8);
        Self::new(role, int, enc, eia, eea, ksi)
    }

    pub fn eia(&self) -> Eia {
        self.eia
    }

    /// K_NASint (a snapshot carries it, so that restore need not derive it again).
    pub fn knas_int(&self) -> &Key128 {
        &self.knas_int
    }

    /// K_NASenc (a snapshot carries it, so that restore need not derive it again).
    pub fn knas_enc(&self) -> &Key128 {
        &self.knas_enc
    }

    /// Whether the keys have been set up for their algorithms yet (they are on the
    /// first message protected or verified).
    pub fn keyed(&self) -> bool {
        self.int.is_some()
    }

    /// K_NASint set up for EIA, made now if this is its first use.
    #[inline]
    fn int_keyed(&mut self) -> &EiaKeyed {
        let (eia, key) = (self.eia, &self.knas_int);
        self.int.get_or_insert_with(|| EiaKeyed::new(eia, key))
    }

    /// K_NASenc set up for EEA, made now if this is its first use.
    #[inline]
    fn enc_keyed(&mut self) -> &EeaKeyed {
        let (eea, key) = (self.eea, &self.knas_enc);
        self.enc.get_or_insert_with(|| EeaKeyed::new(eea, key))
    }

    pub fn eea(&self) -> Eea {
        self.eea
    }

    /// Whether a PDU has been accepted in the receive direction (the replay check of an
    /// old-overflow COUNT starts then). With the COUNTs, all the state beyond the keys:
    /// what a snapshot keeps of the context.
    pub fn rx_started(&self) -> bool {
        self.rx_started
    }

    /// Set the COUNTs and the receive flag of a context rebuilt from its keys (restore
    /// of a snapshot); COUNTs are 24 bits.
    pub fn set_counts(&mut self, ul_count: u32, dl_count: u32, rx_started: bool) {
        self.ul_count = ul_count & 0x00ff_ffff;
        self.dl_count = dl_count & 0x00ff_ffff;
        self.rx_started = rx_started;
    }

    fn tx_dir(&self) -> u8 {
        match self.role {
            Role::Network => 1,
            Role::Ue => 0,
        }
    }

    fn tx_count(&mut self) -> &mut u32 {
        match self.role {
            Role::Network => &mut self.dl_count,
            Role::Ue => &mut self.ul_count,
        }
    }

    fn rx_count(&self) -> u32 {
        match self.role {
            Role::Network => self.ul_count,
            Role::Ue => self.dl_count,
        }
    }

    fn set_rx_count(&mut self, next: u32) {
        match self.role {
            Role::Network => self.ul_count = next,
            Role::Ue => self.dl_count = next,
        }
        self.rx_started = true;
    }

    fn mac(&mut self, count: u32, dir: u8, data: &[u8]) -> [u8; 4] {
        self.int_keyed().mac(count, 0, dir, data)
    }

    /// Protect a plain NAS message with the given security header type (1..=4) under
    /// the next transmit COUNT, which is then advanced.
    pub fn protect(
        &mut self,
        plain: &[u8],
        security_header_type: u8,
    ) -> Result<Vec<u8>, NasSecError> {
        let mut out = Vec::with_capacity(plain.len() + HEADER_LEN);
        out.extend_from_slice(&[0; HEADER_LEN]);
        out.extend_from_slice(plain);
        self.protect_in_place(out, security_header_type)
    }

    /// [`NasSecurityContext::protect`] of a message the caller encoded after
    /// [`HEADER_LEN`] octets of room for the header (no copy of the message).
    pub fn protect_in_place(
        &mut self,
        mut out: Vec<u8>,
        security_header_type: u8,
    ) -> Result<Vec<u8>, NasSecError> {
        let ciphered = match security_header_type {
            sht::INTEGRITY | sht::INTEGRITY_NEW_CONTEXT => false,
            sht::INTEGRITY_CIPHERED | sht::INTEGRITY_CIPHERED_NEW_CONTEXT => true,
            other => return Err(NasSecError::BadHeader(other << 4 | PD_EMM)),
        };
        if out.len() < HEADER_LEN {
            return Err(NasSecError::Truncated {
                need: HEADER_LEN,
                have: out.len(),
            });
        }
        let dir = self.tx_dir();
        let count = *self.tx_count();
        out[0] = security_header_type << 4 | PD_EMM;
        out[5] = count as u8;
        if ciphered {
            self.enc_keyed().apply(count, 0, dir, &mut out[6..]);
        }
        let mac = self.mac(count, dir, &out[5..]);
        out[1..5].copy_from_slice(&mac);
        *self.tx_count() = count.wrapping_add(1) & 0x00ff_ffff;
        Ok(out)
    }

    /// Estimate the full COUNT from the low `bits` of a received SEQ (TS 24.301
    /// §4.4.3.1): same overflow as the next expected COUNT, or the next overflow when
    /// SEQ is below the expected one (wrapped).
    fn estimate(&self, seq: u32, bits: u32) -> u32 {
        let expected = self.rx_count();
        let mask = (1u32 << bits) - 1;
        let mut c = (expected & !mask) | (seq & mask);
        if c < expected {
            c = c.wrapping_add(1 << bits);
        }
        c & 0x00ff_ffff
    }

    /// Verify and (if ciphered) decipher a received protected NAS PDU. Returns the
    /// plain NAS message and the COUNT it was sent with. Nothing is returned unless the
    /// MAC verifies, and the receive COUNT only advances on success.
    pub fn unprotect(&mut self, pdu: &[u8]) -> Result<(Vec<u8>, u32), NasSecError> {
        let h = *pdu
            .first()
            .ok_or(NasSecError::Truncated { need: 1, have: 0 })?;
        if h & 0x0f != PD_EMM {
            return Err(if h & 0x0f == 0x02 {
                NasSecError::NotProtected
            } else {
                NasSecError::BadHeader(h)
            });
        }
        let t = h >> 4;
        if t == sht::PLAIN {
            return Err(NasSecError::NotProtected);
        }
        if t == sht::SERVICE_REQUEST {
            let count = self.verify_service_request(pdu)?;
            return Ok((pdu.to_vec(), count));
        }
        let ciphered = match t {
            sht::INTEGRITY | sht::INTEGRITY_NEW_CONTEXT => false,
            sht::INTEGRITY_CIPHERED | sht::INTEGRITY_CIPHERED_NEW_CONTEXT => true,
            _ => return Err(NasSecError::BadHeader(h)),
        };
        if pdu.len() < 7 {
            return Err(NasSecError::Truncated {
                need: 7,
                have: pdu.len(),
            });
        }
        let rx_dir = 1 - self.tx_dir();
        let mac: [u8; 4] = [pdu[1], pdu[2], pdu[3], pdu[4]];
        let seq = u32::from(pdu[5]);
        let count = self.estimate(seq, 8);
        let (rx_started, last) = (self.rx_started, self.rx_count().wrapping_sub(1));
        let int = self.int_keyed();
        let ok = |c: u32| int.mac(c, 0, rx_dir, &pdu[5..]) == mac;
        if !ok(count) {
            // Same SEQ one overflow back: an old COUNT, i.e. a replay, if the MAC fits it.
            let old = count.wrapping_sub(256) & 0x00ff_ffff;
            if rx_started && count >= 256 && ok(old) {
                return Err(NasSecError::Replay { count: old, last });
            }
            return Err(NasSecError::BadMac { count });
        }
        let mut plain = pdu[6..].to_vec();
        if ciphered {
            self.enc_keyed().apply(count, 0, rx_dir, &mut plain);
        }
        self.set_rx_count(count.wrapping_add(1) & 0x00ff_ffff);
        Ok((plain, count))
    }

    /// UE side: build a SERVICE REQUEST (SHT 12) under the next uplink COUNT.
    pub fn protect_service_request(&mut self) -> [u8; 4] {
        let count = *self.tx_count();
        let mut out = [
            sht::SERVICE_REQUEST << 4 | PD_EMM,
            (self.ksi & 7) << 5 | (count as u8 & 0x1f),
            0,
            0,
        ];
        let mac = self.mac(count, self.tx_dir(), &out[..2]);
        out[2..4].copy_from_slice(&mac[2..4]);
        *self.tx_count() = count.wrapping_add(1) & 0x00ff_ffff;
        out
    }

    /// Network side: verify a SERVICE REQUEST's short MAC, estimating the COUNT from its
    /// 5-bit SEQ. Returns the COUNT (which feeds KeNB derivation).
    pub fn verify_service_request(&mut self, pdu: &[u8]) -> Result<u32, NasSecError> {
        if pdu.len() < 4 {
            return Err(NasSecError::Truncated {
                need: 4,
                have: pdu.len(),
            });
        }
        if pdu[0] != (sht::SERVICE_REQUEST << 4 | PD_EMM) {
            return Err(NasSecError::BadHeader(pdu[0]));
        }
        let rx_dir = 1 - self.tx_dir();
        let count = self.estimate(u32::from(pdu[1] & 0x1f), 5);
        let (rx_started, last) = (self.rx_started, self.rx_count().wrapping_sub(1));
        let int = self.int_keyed();
        let short = |c: u32| {
            let m = int.mac(c, 0, rx_dir, &pdu[..2]);
            [m[2], m[3]] == [pdu[2], pdu[3]]
        };
        if !short(count) {
            let old = count.wrapping_sub(32) & 0x00ff_ffff;
            if rx_started && count >= 32 && short(old) {
                return Err(NasSecError::Replay { count: old, last });
            }
            return Err(NasSecError::BadMac { count });
        }
        self.set_rx_count(count.wrapping_add(1) & 0x00ff_ffff);
        Ok(count)
    }
}

/// The security header type of a NAS PDU (0 plain, 1..4 protected, 12 service request).
pub fn security_header_type(pdu: &[u8]) -> Option<u8> {
    let h = *pdu.first()?;
    (h & 0x0f == PD_EMM).then_some(h >> 4).or(Some(0))
}
