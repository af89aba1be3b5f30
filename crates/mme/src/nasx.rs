//! The NAS surface the MME (and the simulated UE) uses: identities, the IEs we build,
//! and the NAS security context. Everything NAS goes through here so the codec can be
//! swapped for `pepc-nas` without touching the procedures.

pub use oxirush_nas::nas_eps::*;
use pepc_security::{KasmeKdf, Key128, Key256};

/// NAS EPS identity as the MME sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    Imsi(u64),
    /// (PLMN, MMEGI, MMEC, M-TMSI)
    Guti([u8; 3], u16, u8, u32),
    Other,
}

/// Parse a mobile identity value (TS 24.301 9.9.3.12 / TS 24.008 10.5.1.4).
pub fn parse_identity(v: &[u8]) -> Identity {
    let Some(&first) = v.first() else {
        return Identity::Other;
    };
    match first & 0x07 {
        1 => {
            // IMSI: first digit in the high nibble of octet 1, then BCD.
            // The digits are folded as they come (no buffer): at most 15, each 0-9.
            let odd = first & 0x08 != 0;
            let (mut n, mut imsi, mut bad) = (1usize, u64::from(first >> 4), first >> 4 > 9);
            let mut digit = |d: u8| {
                n += 1;
                bad |= d > 9;
                imsi = imsi.wrapping_mul(10).wrapping_add(u64::from(d));
            };
            for (i, b) in v[1..].iter().enumerate() {
                digit(b & 0x0f);
                let last = i == v.len() - 2;
                if !last || odd {
                    digit(b >> 4);
                }
            }
            if n > 15 || bad {
                return Identity::Other;
            }
            Identity::Imsi(imsi)
        }
        6 if v.len() >= 11 => Identity::Guti(
            [v[1], v[2], v[3]],
            u16::from_be_bytes([v[4], v[5]]),
            v[6],
            u32::from_be_bytes([v[7], v[8], v[9], v[10]]),
        ),
        _ => Identity::Other,
    }
}

/// IMSI identity value (odd/even digit count as given by the string).
pub fn imsi_value(imsi: &str) -> Vec<u8> {
    let d: Vec<u8> = imsi.bytes().map(|b| b - b'0').collect();
    let odd = d.len() % 2 == 1;
    let mut out = vec![(d[0] << 4) | if odd { 0x08 } else { 0 } | 1];
    let mut i = 1;
    while i < d.len() {
        let lo = d[i];
        let hi = d.get(i + 1).copied().unwrap_or(0x0f);
        out.push((hi << 4) | lo);
        i += 2;
    }
    out
}

pub fn imsi_string(imsi: u64) -> String {
    format!("{imsi:015}")
}

/// GUTI identity value.
pub fn guti_value(plmn: [u8; 3], mmegi: u16, mmec: u8, m_tmsi: u32) -> Vec<u8> {
    let [g0, g1] = mmegi.to_be_bytes();
    let [t0, t1, t2, t3] = m_tmsi.to_be_bytes();
    vec![
        0xf6, plmn[0], plmn[1], plmn[2], g0, g1, mmec, t0, t1, t2, t3,
    ]
}

/// TAI list, type 0 (one PLMN, non-consecutive TACs), TS 24.301 9.9.3.33.
pub fn tai_list_value(plmn: [u8; 3], tacs: &[u16]) -> Vec<u8> {
    let n = tacs.len().clamp(1, 16);
    let mut v = Vec::with_capacity(4 + 2 * n);
    v.extend_from_slice(&[(n - 1) as u8, plmn[0], plmn[1], plmn[2]]);
    for t in tacs.iter().take(16) {
        v.extend_from_slice(&t.to_be_bytes());
    }
    v
}

/// GPRS timer (TS 24.008 10.5.7.3) for a duration in seconds.
pub fn gprs_timer(secs: u64) -> u8 {
    if secs <= 2 * 31 && secs.is_multiple_of(2) {
        (secs / 2) as u8
    } else if secs <= 31 * 60 {
        0x20 | (secs / 60).min(31) as u8
    } else {
        0x40 | (secs / 360).min(31) as u8
    }
}

/// Bit rate in kbps as EPS QoS octets (TS 24.301 9.9.4.3, without extensions).
pub fn kbps_octet(kbps: u64) -> u8 {
    match kbps {
        0 => 0xff,
        1..=63 => kbps as u8,
        64..=568 => 0x40 + ((kbps - 64) / 8) as u8,
        _ => 0x80 + ((kbps.min(8640) - 576) / 64) as u8,
    }
}

/// Bit rate in kbps of an EPS QoS bit-rate octet (TS 24.008 10.5.6.5; 0xff = 0 kbps).
pub fn octet_kbps(v: u8) -> u64 {
    match v {
        0xff | 0 => 0,
        1..=0x3f => v as u64,
        0x40..=0x7f => 64 + (v as u64 - 0x40) * 8,
        _ => 576 + (v as u64 - 0x80) * 64,
    }
}

/// (mbr_ul, mbr_dl, gbr_ul, gbr_dl) in bit/s.
pub type BitRates = (u64, u64, u64, u64);

/// (QCI, bit rates) of an EPS QoS IE value; `None` when it is too short to hold a
/// QCI or has a partial bit-rate group.
pub fn parse_eps_qos(v: &[u8]) -> Option<(u8, Option<BitRates>)> {
    let qci = *v.first()?;
    match v.len() {
        1 => Some((qci, None)),
        n if n >= 5 => {
            let k = |i: usize| octet_kbps(v[i]) * 1000;
            Some((qci, Some((k(1), k(2), k(3), k(4)))))
        }
        _ => None,
    }
}

/// EPS QoS IE value: QCI, plus MBR/GBR for GBR bearers.
pub fn eps_qos_value(qci: u8, gbr: Option<(u64, u64, u64, u64)>) -> Vec<u8> {
    match gbr {
        // (mbr_ul, mbr_dl, gbr_ul, gbr_dl) in bit/s
        Some((mu, md, gu, gd)) => vec![
            qci,
            kbps_octet(mu / 1000),
            kbps_octet(md / 1000),
            kbps_octet(gu / 1000),
            kbps_octet(gd / 1000),
        ],
        None => vec![qci],
    }
}

/// APN as DNS labels (TS 23.003 9.1).
pub fn apn_value(apn: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(apn.len() + 1);
    for l in apn.split('.').filter(|l| !l.is_empty()) {
        v.push(l.len().min(63) as u8);
        v.extend_from_slice(&l.as_bytes()[..l.len().min(63)]);
    }
    v
}

pub fn apn_string(v: &[u8]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < v.len() {
        let n = v[i] as usize;
        let end = (i + 1 + n).min(v.len());
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(&String::from_utf8_lossy(&v[i + 1..end]));
        i = end;
    }
    out
}

/// Network name IE value in UCS2 (TS 24.008 10.5.3.5a).
pub fn network_name_value(name: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(1 + 2 * name.len());
    v.push(0x90);
    for u in name.encode_utf16() {
        v.extend_from_slice(&u.to_be_bytes());
    }
    v
}

/// A TFT creating one bidirectional filter (protocol UDP) — enough to carry a
/// dedicated bearer whose real filters live in our PCEF rules.
pub fn default_tft_value() -> Vec<u8> {
    vec![0x21, 0x31, 0x00, 0x02, 0x30, 0x11]
}

/// The TFT the network gives a bearer created from a UE's traffic flow aggregate
/// (Bearer Resource Allocation, TS 24.301 §6.5.3): "create new TFT" with the UE's
/// packet filters, identifiers renumbered 0.. (the UE may send 0 for new filters).
/// `Err` is the ESM cause for the reject.
pub fn network_tft_from_aggregate(tfa: &NasTrafficFlowAggregateDescription) -> Result<Vec<u8>, u8> {
    let mut t = tfa.parse_tft().map_err(|e| e.esm_cause() as u8)?;
    if !matches!(t.operation, TftOperation::Create | TftOperation::AddFilters) {
        return Err(41); // semantic error in the TFT operation
    }
    if t.packet_filters.is_empty() || t.packet_filters.len() > 16 {
        return Err(44); // semantic errors in packet filter(s)
    }
    t.operation = TftOperation::Create;
    for (i, f) in t.packet_filters.iter_mut().enumerate() {
        f.identifier = i as u8;
        if f.precedence.is_none() {
            f.precedence = Some(i as u8);
        }
    }
    t.to_bytes().map_err(|_| 44)
}

/// A TFT with `operation` (1 create new TFT, 3 add packet filters) and the packet
/// filters of PCC rules' flows, each with its identifier and evaluation precedence
/// (TS 24.008 §10.5.6.12). Directions: downlink only 1, uplink only 2,
/// bidirectional 3; the remote address, protocol and ports as components.
pub fn tft_value(operation: u8, filters: &[(u8, u8, &crate::pcrf::FlowFilter)]) -> Vec<u8> {
    use crate::pcrf::FlowDirection;
    let op = match operation {
        3 => TftOperation::AddFilters,
        _ => TftOperation::Create,
    };
    let pfs = filters
        .iter()
        .map(|&(id, prec, f)| {
            let mut c = Vec::new();
            if f.remote_len > 0 {
                let mask = u32::MAX << (32 - u32::from(f.remote_len));
                c.push(TftPacketFilterComponent::Ipv4RemoteAddress {
                    address: f.remote.octets(),
                    mask: mask.to_be_bytes(),
                });
            }
            if let Some(p) = f.protocol {
                c.push(TftPacketFilterComponent::ProtocolIdentifierNextHeader(p));
            }
            match f.ue_ports {
                (0, u16::MAX) => {}
                (a, b) if a == b => c.push(TftPacketFilterComponent::SingleLocalPort(a)),
                (low, high) => c.push(TftPacketFilterComponent::LocalPortRange { low, high }),
            }
            match f.remote_ports {
                (0, u16::MAX) => {}
                (a, b) if a == b => c.push(TftPacketFilterComponent::SingleRemotePort(a)),
                (low, high) => c.push(TftPacketFilterComponent::RemotePortRange { low, high }),
            }
            if c.is_empty() {
                // A filter must hold a component: "any protocol" is protocol 0..
                // nothing to match on, so match the remote side 0.0.0.0/0.
                c.push(TftPacketFilterComponent::Ipv4RemoteAddress {
                    address: [0; 4],
                    mask: [0; 4],
                });
            }
            let contents = c
                .iter()
                .filter_map(|x| x.to_bytes().ok())
                .collect::<Vec<_>>()
                .concat();
            let dir = match f.direction {
                FlowDirection::Downlink => 1,
                FlowDirection::Uplink => 2,
                FlowDirection::Both => 3,
            };
            TftPacketFilter::new(id & 0x0f, dir, Some(prec), contents)
        })
        .collect();
    Tft::new(op, pfs, vec![])
        .to_bytes()
        .unwrap_or_else(|_| default_tft_value())
}

/// TFT operation code (bits 8-6 of the first octet) of a TFT / traffic flow aggregate
/// value; `None` when empty.
pub fn tft_operation(v: &[u8]) -> Option<u8> {
    v.first().map(|b| b >> 5)
}

pub fn ciphering(a: pepc_security::Eea) -> CipheringAlgorithm {
    match a {
        pepc_security::Eea::Eea0 => CipheringAlgorithm::EEA0,
        pepc_security::Eea::Eea1 => CipheringAlgorithm::EEA1,
        pepc_security::Eea::Eea2 => CipheringAlgorithm::EEA2,
        pepc_security::Eea::Eea3 => CipheringAlgorithm::EEA3,
    }
}

pub fn integrity(a: pepc_security::Eia) -> IntegrityAlgorithm {
    match a {
        pepc_security::Eia::Eia0 => IntegrityAlgorithm::EIA0,
        pepc_security::Eia::Eia1 => IntegrityAlgorithm::EIA1,
        pepc_security::Eia::Eia2 => IntegrityAlgorithm::EIA2,
        pepc_security::Eia::Eia3 => IntegrityAlgorithm::EIA3,
    }
}

/// The simulated UE's NAS security context: oxirush-nas's, an implementation
/// independent of the MME's ([`SecCtx`], pepc-nas), so that every MME test and the
/// attach benchmark check the two against each other. `Debug` shows no keys.
pub struct UeSecCtx {
    pub ctx: NasSecurityContext,
    pub kasme: Key256,
    pub ksi: u8,
    pub eea: pepc_security::Eea,
    pub eia: pepc_security::Eia,
    /// Uplink COUNT of the last message sent (KeNB input).
    pub last_ul_count: u32,
}

/// What `Debug` shows of a NAS security context: never its keys.
fn debug_ctx(
    f: &mut core::fmt::Formatter<'_>,
    name: &str,
    ksi: u8,
    eea: pepc_security::Eea,
    eia: pepc_security::Eia,
    last_ul_count: u32,
) -> core::fmt::Result {
    f.debug_struct(name)
        .field("ksi", &ksi)
        .field("eea", &eea)
        .field("eia", &eia)
        .field("last_ul_count", &last_ul_count)
        .finish_non_exhaustive()
}

impl core::fmt::Debug for UeSecCtx {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        debug_ctx(
            f,
            "UeSecCtx",
            self.ksi,
            self.eea,
            self.eia,
            self.last_ul_count,
        )
    }
}

/// Why a NAS security context could not be made or a message not protected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NasSecError {
    /// TS 33.401 §5.1.4.2: EIA0 is only used with EEA0.
    #[error("EIA0 with {0:?}: null integrity goes with null ciphering only")]
    NullIntegrityWithCiphering(pepc_security::Eea),
    /// A context protects one direction only (the MME's downlink, a UE's uplink).
    #[error("this context protects {0:?} messages only")]
    WrongDirection(Direction),
    #[error("EPS security protects a plain EMM or ESM message")]
    NotEmmOrEsm,
    /// The codec refused the message or the context (its own words).
    #[error("NAS codec: {0}")]
    Codec(String),
}

/// Why an uplink protected message was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnprotectError {
    BadMac,
    Replay,
    Malformed(String),
}

/// The (MAC, SN) tags of the last [`RecentTags::LEN`] accepted uplink messages, in
/// place (no allocation per UE): a message that fails its MAC check but carries one
/// of them is a replay, not a forgery.
#[derive(Debug, Clone, Default)]
pub struct RecentTags {
    tags: [[u8; 5]; RecentTags::LEN],
    /// Tags pushed so far (the oldest is overwritten once the ring is full).
    pushed: usize,
}

impl RecentTags {
    pub const LEN: usize = 16;

    pub fn push(&mut self, tag: [u8; 5]) {
        self.tags[self.pushed % Self::LEN] = tag;
        self.pushed += 1;
    }

    pub fn contains(&self, tag: &[u8; 5]) -> bool {
        self.tags[..self.pushed.min(Self::LEN)].contains(tag)
    }

    /// The tags held, oldest first: pushing them in this order into an empty ring
    /// rebuilds an equal one (snapshots).
    pub fn oldest_first(&self) -> impl Iterator<Item = &[u8; 5]> + '_ {
        let n = self.pushed.min(Self::LEN);
        let start = if self.pushed > Self::LEN {
            self.pushed % Self::LEN
        } else {
            0
        };
        (0..n).map(move |i| &self.tags[(start + i) % Self::LEN])
    }

    pub fn len(&self) -> usize {
        self.pushed.min(Self::LEN)
    }

    pub fn is_empty(&self) -> bool {
        self.pushed == 0
    }
}

impl UeSecCtx {
    pub fn new(
        kasme: Key256,
        ksi: u8,
        eea: pepc_security::Eea,
        eia: pepc_security::Eia,
    ) -> Result<UeSecCtx, NasSecError> {
        // oxirush's own key derivation: the MME derives with ours.
        let ctx = NasSecurityContext::from_fresh_kasme(
            &KAsme::new(kasme.as_bytes()),
            integrity(eia),
            ciphering(eea),
        )
        .map_err(|e| NasSecError::Codec(e.to_string()))?;
        Ok(UeSecCtx {
            ctx,
            kasme,
            ksi,
            eea,
            eia,
            last_ul_count: 0,
        })
    }

    /// Protect (and cipher unless EEA0) a plain message in `dir`.
    pub fn protect(
        &mut self,
        msg: &NasEpsMessage,
        new_ctx: bool,
        dir: Direction,
    ) -> Result<Vec<u8>, NasSecError> {
        let cipher = self.eea != pepc_security::Eea::Eea0 && !new_ctx;
        let sht = match (new_ctx, cipher) {
            (true, _) if dir == Direction::Downlink => {
                NasEpsSecurityHeaderType::IntegrityProtectedWithNewEpsSecurityContext
            }
            (true, _) => {
                NasEpsSecurityHeaderType::IntegrityProtectedAndCipheredWithNewEpsSecurityContext
            }
            (false, true) => NasEpsSecurityHeaderType::IntegrityProtectedAndCiphered,
            (false, false) => NasEpsSecurityHeaderType::IntegrityProtected,
        };
        self.ctx
            .protect(msg, sht, dir)
            .map_err(|e| NasSecError::Codec(e.to_string()))
    }

    /// Verify the MAC (before anything else) and decipher.
    pub fn unprotect(
        &mut self,
        data: &[u8],
        dir: Direction,
    ) -> Result<NasEpsMessage, UnprotectError> {
        match self.ctx.unprotect(data, dir) {
            Ok(v) => {
                if dir == Direction::Uplink {
                    self.last_ul_count = v.count.get();
                }
                Ok(v.message)
            }
            Err(oxirush_nas::NasError::IntegrityCheckFailed) => Err(UnprotectError::BadMac),
            Err(e) => Err(UnprotectError::Malformed(e.to_string())),
        }
    }
}

/// The MME's NAS security context for one UE (pepc-nas framing, keys set up once),
/// with what the procedures need beside it. `Debug` shows no keys.
pub struct SecCtx {
    pub ctx: pepc_nas::security::NasSecurityContext,
    pub kasme: Key256,
    /// The KDF keyed with `kasme` (K_NASint, K_NASenc, KeNB, NH), made when first
    /// needed ([`SecCtx::kdf`]): a context restored with its NAS keys has no use for
    /// it until the next KeNB or NH.
    pub(crate) kdf: Option<KasmeKdf>,
    pub ksi: u8,
    pub eea: pepc_security::Eea,
    pub eia: pepc_security::Eia,
    /// Uplink COUNT of the last verified message (KeNB input).
    pub last_ul_count: u32,
    /// (MAC, SN) of recently accepted uplink messages, to tell replays from forgeries.
    pub recent: RecentTags,
}

impl core::fmt::Debug for SecCtx {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        debug_ctx(
            f,
            "SecCtx",
            self.ksi,
            self.eea,
            self.eia,
            self.last_ul_count,
        )
    }
}

impl SecCtx {
    /// A fresh context for a new KASME (COUNTs at zero). EIA0 only goes with EEA0.
    pub fn new(
        kasme: Key256,
        ksi: u8,
        eea: pepc_security::Eea,
        eia: pepc_security::Eia,
    ) -> Result<SecCtx, NasSecError> {
        if eia == pepc_security::Eia::Eia0 && eea != pepc_security::Eea::Eea0 {
            return Err(NasSecError::NullIntegrityWithCiphering(eea));
        }
        let kdf = KasmeKdf::new(&kasme);
        let (enc, int) = kdf.nas_keys(eea as u8, eia as u8);
        Ok(Self::with_kdf(kasme, Some(kdf), int, enc, ksi, eea, eia))
    }

    /// A context whose K_NASint and K_NASenc were derived from `kasme` before (a
    /// snapshot carries them): the same as [`SecCtx::new`] without deriving them
    /// again. They are not checked against `kasme`; the caller vouches for them. Nothing
    /// is keyed here: the KASME-keyed KDF and the algorithms' key schedules are made on
    /// first use. EIA0 only goes with EEA0.
    pub fn from_nas_keys(
        kasme: Key256,
        knas_int: Key128,
        knas_enc: Key128,
        ksi: u8,
        eea: pepc_security::Eea,
        eia: pepc_security::Eia,
    ) -> Result<SecCtx, NasSecError> {
        if eia == pepc_security::Eia::Eia0 && eea != pepc_security::Eea::Eea0 {
            return Err(NasSecError::NullIntegrityWithCiphering(eea));
        }
        Ok(Self::with_kdf(
            kasme, None, knas_int, knas_enc, ksi, eea, eia,
        ))
    }

    fn with_kdf(
        kasme: Key256,
        kdf: Option<KasmeKdf>,
        knas_int: Key128,
        knas_enc: Key128,
        ksi: u8,
        eea: pepc_security::Eea,
        eia: pepc_security::Eia,
    ) -> SecCtx {
        let ctx = pepc_nas::security::NasSecurityContext::new(
            pepc_nas::security::Role::Network,
            knas_int,
            knas_enc,
            eia,
            eea,
            ksi,
        );
        SecCtx {
            ctx,
            kasme,
            kdf,
            ksi,
            eea,
            eia,
            last_ul_count: 0,
            recent: RecentTags::default(),
        }
    }

    /// The KDF keyed with KASME (KeNB, NH), made now if this is its first use.
    pub fn kdf(&mut self) -> &KasmeKdf {
        let kasme = &self.kasme;
        self.kdf.get_or_insert_with(|| KasmeKdf::new(kasme))
    }

    /// Protect (and cipher unless EEA0 or a new context) a plain downlink message.
    pub fn protect(
        &mut self,
        msg: &NasEpsMessage,
        new_ctx: bool,
        dir: Direction,
    ) -> Result<Vec<u8>, NasSecError> {
        use pepc_nas::security::sht;
        if dir != Direction::Downlink {
            return Err(NasSecError::WrongDirection(Direction::Downlink));
        }
        if !matches!(msg, NasEpsMessage::Emm(..) | NasEpsMessage::Esm(..)) {
            return Err(NasSecError::NotEmmOrEsm);
        }
        let header = match (new_ctx, self.eea != pepc_security::Eea::Eea0) {
            (true, _) => sht::INTEGRITY_NEW_CONTEXT,
            (false, true) => sht::INTEGRITY_CIPHERED,
            (false, false) => sht::INTEGRITY,
        };
        // Encoded after room for the security header: no copy of the message.
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&[0; pepc_nas::security::HEADER_LEN]);
        msg.encode_into(&mut out)
            .map_err(|e| NasSecError::Codec(e.to_string()))?;
        self.ctx
            .protect_in_place(out, header)
            .map_err(|e| NasSecError::Codec(e.to_string()))
    }

    /// Verify the MAC (before anything else), decipher and decode an uplink message.
    pub fn unprotect(
        &mut self,
        data: &[u8],
        dir: Direction,
    ) -> Result<NasEpsMessage, UnprotectError> {
        if dir != Direction::Uplink {
            return Err(UnprotectError::Malformed(
                "the MME's context checks uplink messages only".into(),
            ));
        }
        let tag: Option<[u8; 5]> = data.get(1..6).map(|s| s.try_into().unwrap_or([0; 5]));
        match self.ctx.unprotect(data) {
            Ok((plain, count)) => {
                // Authentic: the COUNT is used whatever the content turns out to be.
                self.last_ul_count = count;
                if let Some(t) = tag {
                    self.recent.push(t);
                }
                match NasEpsMessage::decode_with_direction(&plain, Direction::Uplink) {
                    Ok(m @ (NasEpsMessage::Emm(..) | NasEpsMessage::Esm(..))) => Ok(m),
                    Ok(_) => Err(UnprotectError::Malformed(
                        "a security-protected PDU inside a protected PDU".into(),
                    )),
                    Err(e) => Err(UnprotectError::Malformed(e.to_string())),
                }
            }
            Err(e) => Err(self.refused(e, tag)),
        }
    }

    /// Why a PDU carrying `tag` was refused: a MAC that fails but matches a recently
    /// accepted message's is a replay too.
    fn refused(&self, e: pepc_nas::security::NasSecError, tag: Option<[u8; 5]>) -> UnprotectError {
        use pepc_nas::security::NasSecError;
        match e {
            NasSecError::Replay { .. } => UnprotectError::Replay,
            NasSecError::BadMac { .. } if tag.is_some_and(|t| self.recent.contains(&t)) => {
                UnprotectError::Replay
            }
            NasSecError::BadMac { .. } => UnprotectError::BadMac,
            e => UnprotectError::Malformed(e.to_string()),
        }
    }

    /// Verify a short SERVICE REQUEST; returns the NAS COUNT it used.
    pub fn unprotect_service_request(
        &mut self,
        sr: &NasServiceRequest,
    ) -> Result<u32, UnprotectError> {
        use pepc_nas::security::sht;
        let [mac_hi, mac_lo] = sr.message_authentication_code.to_be_bytes();
        let pdu = [
            sht::SERVICE_REQUEST << 4 | 0x07,
            sr.ksi_and_sequence_number,
            mac_hi,
            mac_lo,
        ];
        let tag = [0, 0, 0, sr.ksi_and_sequence_number, mac_lo];
        match self.ctx.verify_service_request(&pdu) {
            Ok(c) => {
                self.last_ul_count = c;
                self.recent.push(tag);
                Ok(c)
            }
            Err(e) => Err(self.refused(e, Some(tag))),
        }
    }
}

/// The inner message of an integrity-protected but unciphered PDU, unverified
/// (TS 24.301 §4.4.4.3: some messages are processed without a known context).
pub fn unverified_inner(data: &[u8]) -> Option<NasEpsMessage> {
    match NasEpsMessage::decode(data).ok()? {
        NasEpsMessage::SecurityProtected(h, inner)
            if h.security_header_type == NasEpsSecurityHeaderType::IntegrityProtected =>
        {
            Some(*inner)
        }
        m @ NasEpsMessage::Emm(..) => Some(m),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pepc_security::{Eea, Eia};

    fn pair(eea: Eea, eia: Eia) -> (SecCtx, UeSecCtx) {
        let kasme = Key256::new(core::array::from_fn(|i| (i as u8).wrapping_mul(13) ^ 0x5c));
        (
            SecCtx::new(kasme.clone(), 3, eea, eia).unwrap(),
            UeSecCtx::new(kasme, 3, eea, eia).unwrap(),
        )
    }

    fn uplink(ue: &mut UeSecCtx) -> Vec<u8> {
        ue.protect(
            &NasEpsMessage::new_emm(NasTrackingAreaUpdateComplete::new()),
            false,
            Direction::Uplink,
        )
        .unwrap()
    }

    /// The MME's context (pepc-nas framing, our KDF and AES) against the simulated
    /// UE's (oxirush-nas and oxirush-security throughout), both ways, for every pair
    /// of algorithms and past a SEQ wrap.
    #[test]
    fn mme_context_interoperates_with_the_independent_ue_context() {
        for eea in [Eea::Eea0, Eea::Eea1, Eea::Eea2, Eea::Eea3] {
            for eia in [Eia::Eia1, Eia::Eia2, Eia::Eia3] {
                let (mut mme, mut ue) = pair(eea, eia);
                // Security Mode Command: integrity protected with the new context.
                let smc = NasSecurityModeCommand::new(
                    NasSecurityAlgorithms::new(((eea as u8) << 4) | eia as u8),
                    NasKeySetIdentifier::new(3),
                    NasUeSecurityCapability::new(vec![0xf0, 0xf0]),
                );
                let smc = mme
                    .protect(&NasEpsMessage::new_emm(smc), true, Direction::Downlink)
                    .unwrap();
                assert_eq!(smc[0] >> 4, 3, "{eea:?}/{eia:?}: SMC header");
                let took = ue.unprotect(&smc, Direction::Downlink);
                assert!(took.is_ok(), "{eea:?}/{eia:?}: UE takes the SMC: {took:?}");
                for i in 0..300u32 {
                    let down = mme
                        .protect(
                            &NasEpsMessage::new_emm(NasEmmInformation::new()),
                            false,
                            Direction::Downlink,
                        )
                        .unwrap();
                    let got = ue.unprotect(&down, Direction::Downlink);
                    assert!(got.is_ok(), "{eea:?}/{eia:?}: downlink {i}: {got:?}");
                    let up = uplink(&mut ue);
                    match mme.unprotect(&up, Direction::Uplink) {
                        Ok(NasEpsMessage::Emm(_, NasEmmMessage::TrackingAreaUpdateComplete(_))) => {
                        }
                        other => panic!("{eea:?}/{eia:?}: uplink {i}: {other:?}"),
                    }
                    assert_eq!(mme.last_ul_count, i, "{eea:?}/{eia:?}: uplink COUNT");
                }
                // A replayed uplink PDU is told from a forged one.
                let up = uplink(&mut ue);
                assert!(mme.unprotect(&up, Direction::Uplink).is_ok());
                assert_eq!(
                    mme.unprotect(&up, Direction::Uplink),
                    Err(UnprotectError::Replay)
                );
                let mut forged = uplink(&mut ue);
                forged[2] ^= 1;
                assert_eq!(
                    mme.unprotect(&forged, Direction::Uplink),
                    Err(UnprotectError::BadMac)
                );
                // The short MAC of a SERVICE REQUEST.
                let sr = ue.ctx.protect_service_request(3).unwrap();
                let c = mme
                    .unprotect_service_request(&sr)
                    .expect("service request verifies");
                assert_eq!(c, 302, "{eea:?}/{eia:?}: SR COUNT");
                assert_eq!(
                    mme.unprotect_service_request(&sr),
                    Err(UnprotectError::Replay)
                );
            }
        }
    }

    #[test]
    fn mme_context_refuses_null_integrity_with_a_cipher() {
        let k = Key256::new([1; 32]);
        assert_eq!(
            SecCtx::new(k.clone(), 0, Eea::Eea2, Eia::Eia0).err(),
            Some(NasSecError::NullIntegrityWithCiphering(Eea::Eea2))
        );
        let mut s = SecCtx::new(k, 0, Eea::Eea0, Eia::Eia0).unwrap();
        // The MME's context protects downlink only, and only EMM or ESM messages.
        let m = NasEpsMessage::new_emm(NasDetachAccept::new());
        assert_eq!(
            s.protect(&m, false, Direction::Uplink).err(),
            Some(NasSecError::WrongDirection(Direction::Downlink))
        );
    }

    #[test]
    fn recent_tags_keep_the_last_sixteen() {
        let mut r = RecentTags::default();
        assert!(
            !r.contains(&[0; 5]),
            "an empty ring holds no tag, not even zeros"
        );
        for i in 0..40u8 {
            r.push([i; 5]);
        }
        assert!((24..40).all(|i| r.contains(&[i; 5])));
        assert!((0..24).all(|i| !r.contains(&[i; 5])));
        // Oldest first, and pushing them again rebuilds the same ring (snapshots).
        let order: Vec<u8> = r.oldest_first().map(|t| t[0]).collect();
        assert_eq!(order, (24..40).collect::<Vec<u8>>());
        let mut again = RecentTags::default();
        for t in r.oldest_first() {
            again.push(*t);
        }
        assert!(again.oldest_first().eq(r.oldest_first()));
        let mut few = RecentTags::default();
        few.push([1; 5]);
        few.push([2; 5]);
        assert_eq!(few.oldest_first().map(|t| t[0]).collect::<Vec<_>>(), [1, 2]);
    }

    /// The digit-buffer form `parse_identity` had (kept here as the reference).
    fn imsi_by_buffer(v: &[u8]) -> Option<u64> {
        let first = *v.first()?;
        let odd = first & 0x08 != 0;
        let mut digits: Vec<u8> = vec![first >> 4];
        for (i, b) in v[1..].iter().enumerate() {
            digits.push(b & 0x0f);
            if i != v.len() - 2 || odd {
                digits.push(b >> 4);
            }
        }
        (digits.len() <= 15 && digits.iter().all(|d| *d <= 9))
            .then(|| digits.iter().fold(0u64, |a, d| a * 10 + *d as u64))
    }

    #[test]
    fn imsi_parse_equals_the_digit_buffer_form() {
        let mut cases: Vec<Vec<u8>> = vec![
            vec![0x01],
            vec![0x09],
            vec![0xf9],
            imsi_value("001010000000001"),
            imsi_value("99999999999999"),
            imsi_value("1234567890123456"),
        ];
        // Every length up to 10 octets, odd and even, with a pseudo-random fill that
        // mixes valid digits, fillers and invalid nibbles.
        let mut x = 0x1234_5678u32;
        for len in 1..=10usize {
            for round in 0..400 {
                let mut v: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        let (lo, hi) = ((x % 10) as u8, ((x >> 8) % 10) as u8);
                        match (x >> 16) % 8 {
                            0 => (x >> 20) as u8,
                            1 => 0xf0 | lo,
                            _ => hi << 4 | lo,
                        }
                    })
                    .collect();
                v[0] = (v[0] & 0xf0) | if round % 2 == 0 { 0x09 } else { 0x01 };
                cases.push(v);
            }
        }
        for v in &cases {
            let ours = match parse_identity(v) {
                Identity::Imsi(i) => Some(i),
                _ => None,
            };
            assert_eq!(ours, imsi_by_buffer(v), "{v:02x?}");
        }
    }
}
