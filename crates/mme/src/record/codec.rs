//! The recording's byte format: LEB128 integers, length-prefixed bytes, and the MME's
//! inputs field by field (every field named, so a new one fails to compile until the
//! format carries it). Outputs are only compared, never rebuilt: they are written in
//! a canonical form ([`put_output`]).

use super::RecordError;
use crate::hss::{
    CancellationType, DefaultApn, HssAnswer, HssData, HssFailure, HssRef, SubscriptionData,
    SubscriptionUpdate,
};
use crate::mme::{Input, Output};
use crate::pcrf::{
    FlowDirection, FlowFilter, PccRule, PcrfAnswer, PcrfFailure, PolicyDecision, UsageGrant,
};
use pepc_s1ap::{EnbId, GlobalEnbId, UeConnection};
use pepc_security::{AuthVector, Key256};
use pepc_slice::control::ControlEvent;
use pepc_types::PdnType;
use std::net::Ipv4Addr;

/// Appends to a byte buffer.
pub(crate) struct W<'a>(pub(crate) &'a mut Vec<u8>);

impl W<'_> {
    pub(crate) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub(crate) fn uv(&mut self, mut v: u64) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.0.push(b);
                return;
            }
            self.0.push(b | 0x80);
        }
    }
    pub(crate) fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.uv(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    pub(crate) fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    pub(crate) fn ip(&mut self, a: Ipv4Addr) {
        self.0.extend_from_slice(&a.octets());
    }
    pub(crate) fn opt<T>(&mut self, v: &Option<T>, f: impl FnOnce(&mut Self, &T)) {
        match v {
            None => self.u8(0),
            Some(x) => {
                self.u8(1);
                f(self, x)
            }
        }
    }
    pub(crate) fn pair(&mut self, (a, b): (u64, u64)) {
        self.uv(a);
        self.uv(b);
    }
}

/// Reads what [`W`] wrote; every read checks the length left.
pub(crate) struct R<'a> {
    pub(crate) b: &'a [u8],
}

impl<'a> R<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Self {
        R { b }
    }
    pub(crate) fn done(&self) -> bool {
        self.b.is_empty()
    }
    pub(crate) fn u8(&mut self) -> Result<u8, RecordError> {
        let (&v, rest) = self.b.split_first().ok_or(RecordError::Truncated)?;
        self.b = rest;
        Ok(v)
    }
    pub(crate) fn uv(&mut self) -> Result<u64, RecordError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(RecordError::Invalid("integer longer than 64 bits"))
    }
    pub(crate) fn u32(&mut self) -> Result<u32, RecordError> {
        u32::try_from(self.uv()?).map_err(|_| RecordError::Invalid("32-bit value"))
    }
    pub(crate) fn u16(&mut self) -> Result<u16, RecordError> {
        u16::try_from(self.uv()?).map_err(|_| RecordError::Invalid("16-bit value"))
    }
    pub(crate) fn bool(&mut self) -> Result<bool, RecordError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(RecordError::Invalid("boolean")),
        }
    }
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], RecordError> {
        let n = usize::try_from(self.uv()?).map_err(|_| RecordError::Truncated)?;
        if n > self.b.len() {
            return Err(RecordError::Truncated);
        }
        let (v, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(v)
    }
    pub(crate) fn str(&mut self) -> Result<String, RecordError> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| RecordError::Invalid("UTF-8 text"))
    }
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], RecordError> {
        if self.b.len() < N {
            return Err(RecordError::Truncated);
        }
        let (v, rest) = self.b.split_at(N);
        self.b = rest;
        Ok(v.try_into().expect("N bytes"))
    }
    pub(crate) fn ip(&mut self) -> Result<Ipv4Addr, RecordError> {
        Ok(Ipv4Addr::from(self.array::<4>()?))
    }
    pub(crate) fn opt<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, RecordError>,
    ) -> Result<Option<T>, RecordError> {
        Ok(if self.bool()? { Some(f(self)?) } else { None })
    }
    pub(crate) fn pair(&mut self) -> Result<(u64, u64), RecordError> {
        Ok((self.uv()?, self.uv()?))
    }
    /// A count of items, each at least one byte: bounded by what is left.
    pub(crate) fn count(&mut self) -> Result<usize, RecordError> {
        let n = usize::try_from(self.uv()?).map_err(|_| RecordError::Truncated)?;
        if n > self.b.len() {
            return Err(RecordError::Truncated);
        }
        Ok(n)
    }
}

// ---- inputs ------------------------------------------------------------------------

pub(crate) fn put_input(w: &mut W<'_>, i: &Input) {
    match i {
        Input::Congestion { on } => {
            w.u8(0);
            w.bool(*on);
        }
        Input::EnbUp { assoc, out_streams } => {
            w.u8(1);
            w.uv(*assoc);
            w.uv(u64::from(*out_streams));
        }
        Input::EnbDown { assoc } => {
            w.u8(2);
            w.uv(*assoc);
        }
        Input::EnbSetup {
            assoc,
            out_streams,
            global_id,
        } => {
            w.u8(3);
            w.uv(*assoc);
            w.uv(u64::from(*out_streams));
            put_global_enb_id(w, global_id);
        }
        Input::EnbReset {
            assoc,
            token,
            connections,
        } => {
            w.u8(4);
            w.uv(*assoc);
            w.uv(*token);
            w.opt(connections, |w, cs| {
                w.uv(cs.len() as u64);
                for c in cs {
                    let UeConnection {
                        mme_ue_id,
                        enb_ue_id,
                    } = c;
                    w.opt(mme_ue_id, |w, v| w.uv(u64::from(*v)));
                    w.opt(enb_ue_id, |w, v| w.uv(u64::from(*v)));
                }
            });
        }
        Input::Supersede { imsi } => {
            w.u8(5);
            w.uv(*imsi);
        }
        Input::S1ap {
            assoc,
            stream,
            bytes,
        } => put_s1ap_input(w, *assoc, *stream, bytes),
        Input::Control(e) => {
            w.u8(7);
            match e {
                ControlEvent::Page { ue_slot, imsi } => {
                    w.u8(0);
                    w.uv(u64::from(*ue_slot));
                    w.uv(*imsi);
                }
                ControlEvent::EnbErrorIndication { enb_teid, enb_addr } => {
                    w.u8(1);
                    w.uv(u64::from(*enb_teid));
                    w.ip(*enb_addr);
                }
            }
        }
        Input::Hss(a) => {
            w.u8(8);
            put_hss_answer(w, a);
        }
        Input::HssCancelLocation {
            imsi,
            cancellation_type,
            reattach_required,
        } => {
            w.u8(9);
            w.uv(*imsi);
            w.uv(u64::from(cancellation_code(*cancellation_type)));
            w.bool(*reattach_required);
        }
        Input::HssInsertSubscriberData { imsi, update } => {
            w.u8(10);
            w.uv(*imsi);
            let SubscriptionUpdate { ambr, default_apn } = update;
            w.opt(ambr, |w, a| w.pair(*a));
            w.opt(default_apn, |w, d| {
                let DefaultApn {
                    apn,
                    pdn_type,
                    qci,
                    arp_priority,
                } = d;
                w.str(apn);
                w.u8(pdn_code(*pdn_type));
                w.u8(*qci);
                w.u8(*arp_priority);
            });
        }
        Input::Pcrf(a) => {
            w.u8(11);
            let PcrfAnswer {
                r,
                imsi,
                ebi,
                result,
            } = a;
            put_ref(w, r);
            w.uv(*imsi);
            w.u8(*ebi);
            match result {
                Ok(d) => {
                    w.u8(0);
                    put_decision(w, d);
                }
                Err(PcrfFailure::Rejected(c)) => {
                    w.u8(1);
                    w.uv(u64::from(*c));
                }
                Err(PcrfFailure::Unavailable(s)) => {
                    w.u8(2);
                    w.str(s);
                }
                Err(PcrfFailure::Timeout) => w.u8(3),
            }
        }
        Input::PolicyUpdate {
            imsi,
            ebi,
            decision,
        } => {
            w.u8(12);
            w.uv(*imsi);
            w.opt(ebi, |w, e| w.u8(*e));
            put_decision(w, decision);
        }
    }
}

/// `Input::S1ap` as [`put_input`] writes it, from a PDU the caller keeps
/// (`Mme::handle_s1ap`).
pub(crate) fn put_s1ap_input(w: &mut W<'_>, assoc: u64, stream: u16, bytes: &[u8]) {
    w.u8(6);
    w.uv(assoc);
    w.uv(u64::from(stream));
    w.bytes(bytes);
}

pub(crate) fn get_input(r: &mut R<'_>) -> Result<Input, RecordError> {
    Ok(match r.u8()? {
        0 => Input::Congestion { on: r.bool()? },
        1 => Input::EnbUp {
            assoc: r.uv()?,
            out_streams: r.u16()?,
        },
        2 => Input::EnbDown { assoc: r.uv()? },
        3 => Input::EnbSetup {
            assoc: r.uv()?,
            out_streams: r.u16()?,
            global_id: get_global_enb_id(r)?,
        },
        4 => Input::EnbReset {
            assoc: r.uv()?,
            token: r.uv()?,
            connections: r.opt(|r| {
                let n = r.count()?;
                (0..n)
                    .map(|_| {
                        Ok(UeConnection {
                            mme_ue_id: r.opt(|r| r.u32())?,
                            enb_ue_id: r.opt(|r| r.u32())?,
                        })
                    })
                    .collect::<Result<Vec<_>, RecordError>>()
            })?,
        },
        5 => Input::Supersede { imsi: r.uv()? },
        6 => Input::S1ap {
            assoc: r.uv()?,
            stream: r.u16()?,
            bytes: r.bytes()?.to_vec(),
        },
        7 => Input::Control(match r.u8()? {
            0 => ControlEvent::Page {
                ue_slot: r.u32()?,
                imsi: r.uv()?,
            },
            1 => ControlEvent::EnbErrorIndication {
                enb_teid: r.u32()?,
                enb_addr: r.ip()?,
            },
            _ => return Err(RecordError::Invalid("control event")),
        }),
        8 => Input::Hss(get_hss_answer(r)?),
        9 => Input::HssCancelLocation {
            imsi: r.uv()?,
            cancellation_type: CancellationType::from(r.u32()?),
            reattach_required: r.bool()?,
        },
        10 => Input::HssInsertSubscriberData {
            imsi: r.uv()?,
            update: SubscriptionUpdate {
                ambr: r.opt(|r| r.pair())?,
                default_apn: r.opt(|r| {
                    Ok(DefaultApn {
                        apn: r.str()?,
                        pdn_type: pdn_of(r.u8()?)?,
                        qci: r.u8()?,
                        arp_priority: r.u8()?,
                    })
                })?,
            },
        },
        11 => Input::Pcrf(PcrfAnswer {
            r: get_ref(r)?,
            imsi: r.uv()?,
            ebi: r.u8()?,
            result: match r.u8()? {
                0 => Ok(get_decision(r)?),
                1 => Err(PcrfFailure::Rejected(r.u32()?)),
                2 => Err(PcrfFailure::Unavailable(r.str()?)),
                3 => Err(PcrfFailure::Timeout),
                _ => return Err(RecordError::Invalid("PCRF result")),
            },
        }),
        12 => Input::PolicyUpdate {
            imsi: r.uv()?,
            ebi: r.opt(|r| r.u8())?,
            decision: get_decision(r)?,
        },
        _ => return Err(RecordError::Invalid("input kind")),
    })
}

fn put_global_enb_id(w: &mut W<'_>, g: &GlobalEnbId) {
    let GlobalEnbId { plmn, enb_id } = g;
    w.0.extend_from_slice(&plmn.0);
    let (k, v) = match enb_id {
        EnbId::Macro(v) => (0, v),
        EnbId::Home(v) => (1, v),
        EnbId::ShortMacro(v) => (2, v),
        EnbId::LongMacro(v) => (3, v),
    };
    w.u8(k);
    w.uv(u64::from(*v));
}

fn get_global_enb_id(r: &mut R<'_>) -> Result<GlobalEnbId, RecordError> {
    let plmn = pepc_s1ap::Plmn(r.array::<3>()?);
    let k = r.u8()?;
    let v = r.u32()?;
    let enb_id = match k {
        0 => EnbId::Macro(v),
        1 => EnbId::Home(v),
        2 => EnbId::ShortMacro(v),
        3 => EnbId::LongMacro(v),
        _ => return Err(RecordError::Invalid("eNB ID kind")),
    };
    Ok(GlobalEnbId { plmn, enb_id })
}

fn put_ref(w: &mut W<'_>, r: &HssRef) {
    let HssRef { mme_ue_id, seq } = r;
    w.uv(u64::from(*mme_ue_id));
    w.uv(u64::from(*seq));
}

fn get_ref(r: &mut R<'_>) -> Result<HssRef, RecordError> {
    Ok(HssRef {
        mme_ue_id: r.u32()?,
        seq: r.u32()?,
    })
}

fn cancellation_code(c: CancellationType) -> u32 {
    match c {
        CancellationType::MmeUpdate => 0,
        CancellationType::SgsnUpdate => 1,
        CancellationType::SubscriptionWithdrawal => 2,
        CancellationType::UpdateIwf => 3,
        CancellationType::InitialAttach => 4,
        CancellationType::Other(v) => v,
    }
}

fn pdn_code(p: PdnType) -> u8 {
    match p {
        PdnType::Ipv4 => 0,
        PdnType::Ipv6 => 1,
        PdnType::Ipv4v6 => 2,
    }
}

fn pdn_of(c: u8) -> Result<PdnType, RecordError> {
    Ok(match c {
        0 => PdnType::Ipv4,
        1 => PdnType::Ipv6,
        2 => PdnType::Ipv4v6,
        _ => return Err(RecordError::Invalid("PDN type")),
    })
}

/// An HSS answer; a vector's keys are in it (the recording holds key material, like
/// a UE snapshot).
fn put_hss_answer(w: &mut W<'_>, a: &HssAnswer) {
    let HssAnswer { r, result } = a;
    put_ref(w, r);
    match result {
        Ok(HssData::Profile(s)) => {
            w.u8(0);
            let SubscriptionData {
                msisdn,
                apn,
                pdn_type,
                qci,
                arp_priority,
                ambr_ul_bps,
                ambr_dl_bps,
            } = s;
            w.str(msisdn);
            w.str(apn);
            w.u8(pdn_code(*pdn_type));
            w.u8(*qci);
            w.u8(*arp_priority);
            w.uv(*ambr_ul_bps);
            w.uv(*ambr_dl_bps);
        }
        Ok(HssData::Vector(v)) => {
            w.u8(1);
            let AuthVector {
                rand,
                xres,
                autn,
                kasme,
            } = &**v;
            w.0.extend_from_slice(rand);
            w.0.extend_from_slice(xres);
            w.0.extend_from_slice(autn);
            w.0.extend_from_slice(kasme.as_bytes());
        }
        Err(f) => {
            w.u8(2);
            match f {
                HssFailure::UnknownSubscriber => w.u8(0),
                HssFailure::NoEpsSubscription => w.u8(1),
                HssFailure::ResyncRefused => w.u8(2),
                HssFailure::Unavailable(s) => {
                    w.u8(3);
                    w.str(s);
                }
                HssFailure::Timeout => w.u8(4),
                HssFailure::RoamingNotAllowed => w.u8(5),
                HssFailure::RatNotAllowed => w.u8(6),
            }
        }
    }
}

fn get_hss_answer(r: &mut R<'_>) -> Result<HssAnswer, RecordError> {
    let rf = get_ref(r)?;
    let result = match r.u8()? {
        0 => Ok(HssData::Profile(SubscriptionData {
            msisdn: r.str()?,
            apn: r.str()?,
            pdn_type: pdn_of(r.u8()?)?,
            qci: r.u8()?,
            arp_priority: r.u8()?,
            ambr_ul_bps: r.uv()?,
            ambr_dl_bps: r.uv()?,
        })),
        1 => Ok(HssData::Vector(Box::new(AuthVector {
            rand: r.array()?,
            xres: r.array()?,
            autn: r.array()?,
            kasme: Key256::new(r.array()?),
        }))),
        2 => Err(match r.u8()? {
            0 => HssFailure::UnknownSubscriber,
            1 => HssFailure::NoEpsSubscription,
            2 => HssFailure::ResyncRefused,
            3 => HssFailure::Unavailable(r.str()?),
            4 => HssFailure::Timeout,
            5 => HssFailure::RoamingNotAllowed,
            6 => HssFailure::RatNotAllowed,
            _ => return Err(RecordError::Invalid("HSS failure")),
        }),
        _ => return Err(RecordError::Invalid("HSS result")),
    };
    Ok(HssAnswer { r: rf, result })
}

/// A PCC rule, field by field (also the snapshot's PCC section's).
pub(crate) fn put_rule(w: &mut W<'_>, rule: &PccRule) {
    let PccRule {
        name,
        precedence,
        qci,
        arp_priority,
        mbr,
        gbr,
        rating_group,
        monitoring_key,
        flows,
    } = rule;
    w.str(name);
    w.uv(u64::from(*precedence));
    w.u8(*qci);
    w.u8(*arp_priority);
    w.pair(*mbr);
    w.pair(*gbr);
    w.opt(rating_group, |w, g| w.uv(u64::from(*g)));
    w.opt(monitoring_key, |w, k| w.str(k));
    w.uv(flows.len() as u64);
    for f in flows {
        let FlowFilter {
            direction,
            protocol,
            remote,
            remote_len,
            remote_ports,
            ue_ports,
        } = f;
        w.u8(match direction {
            FlowDirection::Downlink => 0,
            FlowDirection::Uplink => 1,
            FlowDirection::Both => 2,
        });
        w.opt(protocol, |w, p| w.u8(*p));
        w.ip(*remote);
        w.u8(*remote_len);
        for (a, b) in [remote_ports, ue_ports] {
            w.uv(u64::from(*a));
            w.uv(u64::from(*b));
        }
    }
}

/// What [`put_rule`] wrote.
pub(crate) fn get_rule(r: &mut R<'_>) -> Result<PccRule, RecordError> {
    let name = r.str()?;
    let precedence = r.u32()?;
    let qci = r.u8()?;
    let arp_priority = r.u8()?;
    let mbr = r.pair()?;
    let gbr = r.pair()?;
    let rating_group = r.opt(|r| r.u32())?;
    let monitoring_key = r.opt(|r| r.str())?;
    let nf = r.count()?;
    let mut flows = Vec::with_capacity(nf);
    for _ in 0..nf {
        let direction = match r.u8()? {
            0 => FlowDirection::Downlink,
            1 => FlowDirection::Uplink,
            2 => FlowDirection::Both,
            _ => return Err(RecordError::Invalid("flow direction")),
        };
        flows.push(FlowFilter {
            direction,
            protocol: r.opt(|r| r.u8())?,
            remote: r.ip()?,
            remote_len: r.u8()?,
            remote_ports: (r.u16()?, r.u16()?),
            ue_ports: (r.u16()?, r.u16()?),
        });
    }
    Ok(PccRule {
        name,
        precedence,
        qci,
        arp_priority,
        mbr,
        gbr,
        rating_group,
        monitoring_key,
        flows,
    })
}

pub(crate) fn put_decision(w: &mut W<'_>, d: &PolicyDecision) {
    let PolicyDecision {
        default_qos,
        ambr,
        install,
        remove,
        monitoring,
    } = d;
    w.opt(default_qos, |w, (q, a)| {
        w.u8(*q);
        w.u8(*a);
    });
    w.opt(ambr, |w, a| w.pair(*a));
    w.uv(install.len() as u64);
    for rule in install {
        put_rule(w, rule);
    }
    w.uv(remove.len() as u64);
    for n in remove {
        w.str(n);
    }
    w.uv(monitoring.len() as u64);
    for g in monitoring {
        let UsageGrant { key, octets } = g;
        w.str(key);
        w.uv(*octets);
    }
}

pub(crate) fn get_decision(r: &mut R<'_>) -> Result<PolicyDecision, RecordError> {
    let default_qos = r.opt(|r| Ok((r.u8()?, r.u8()?)))?;
    let ambr = r.opt(|r| r.pair())?;
    let n = r.count()?;
    let install = (0..n).map(|_| get_rule(r)).collect::<Result<_, _>>()?;
    let n = r.count()?;
    let remove = (0..n).map(|_| r.str()).collect::<Result<_, _>>()?;
    let n = r.count()?;
    let monitoring = (0..n)
        .map(|_| {
            Ok(UsageGrant {
                key: r.str()?,
                octets: r.uv()?,
            })
        })
        .collect::<Result<_, RecordError>>()?;
    Ok(PolicyDecision {
        default_qos,
        ambr,
        install,
        remove,
        monitoring,
    })
}

// ---- outputs -----------------------------------------------------------------------

/// An output in canonical form, for comparison only: `kind u8 | length u32 LE | body`,
/// every field of the output in the body (no `Debug` text: formatting cost the
/// recording more than the rest of it).
pub(crate) fn put_output(w: &mut W<'_>, o: &Output) {
    use crate::hss::HssRequest;
    use crate::pcrf::{PcrfRequest, PolicySession, UsageReport};
    let kind = match o {
        Output::S1ap { .. } => 0,
        Output::Checkpoint { .. } => 1,
        Output::Page { .. } => 2,
        Output::CloseAssoc { .. } => 3,
        Output::ResetDone { .. } => 4,
        Output::ClaimImsi { .. } => 5,
        Output::ReleaseImsi { .. } => 6,
        Output::Hss(_) => 7,
        Output::Forget { .. } => 8,
        Output::Congestion { .. } => 9,
        Output::Pcrf(_) => 10,
        Output::UsageRecord(_) => 11,
    };
    w.u8(kind);
    let at = w.0.len();
    w.0.extend_from_slice(&[0; 4]);
    let session = |w: &mut W<'_>, s: &PolicySession| {
        let PolicySession {
            imsi,
            apn,
            ebi,
            ue_ip,
        } = s;
        w.uv(*imsi);
        w.str(apn);
        w.u8(*ebi);
        w.ip(*ue_ip);
    };
    let reports = |w: &mut W<'_>, u: &[UsageReport]| {
        w.uv(u.len() as u64);
        for UsageReport {
            key,
            ul_bytes,
            dl_bytes,
        } in u
        {
            w.str(key);
            w.uv(*ul_bytes);
            w.uv(*dl_bytes);
        }
    };
    match o {
        Output::S1ap {
            assoc,
            stream,
            bytes,
        } => {
            w.uv(*assoc);
            w.uv(u64::from(*stream));
            w.bytes(bytes);
        }
        Output::Checkpoint { imsi, snapshot } => {
            w.uv(*imsi);
            w.bytes(&snapshot.0);
        }
        Output::Page { tais, bytes } => {
            w.uv(tais.len() as u64);
            for t in tais {
                w.0.extend_from_slice(&t.plmn.0);
                w.uv(u64::from(t.tac));
            }
            w.bytes(bytes);
        }
        Output::CloseAssoc { assoc } => w.uv(*assoc),
        Output::ResetDone { token } => w.uv(*token),
        Output::ClaimImsi { imsi } | Output::ReleaseImsi { imsi } | Output::Forget { imsi } => {
            w.uv(*imsi)
        }
        Output::Congestion { on } => w.bool(*on),
        Output::Hss(h) => match h {
            HssRequest::Profile { r, imsi } => {
                w.u8(0);
                put_ref(w, r);
                w.uv(*imsi);
            }
            HssRequest::Vector { r, imsi, plmn } => {
                w.u8(1);
                put_ref(w, r);
                w.uv(*imsi);
                w.0.extend_from_slice(plmn);
            }
            HssRequest::Resync {
                r,
                imsi,
                plmn,
                rand,
                auts,
            } => {
                w.u8(2);
                put_ref(w, r);
                w.uv(*imsi);
                w.0.extend_from_slice(plmn);
                w.0.extend_from_slice(rand);
                w.0.extend_from_slice(auts);
            }
            HssRequest::Purge { imsi } => {
                w.u8(3);
                w.uv(*imsi);
            }
        },
        Output::Pcrf(p) => match p {
            PcrfRequest::Establish {
                r,
                session: s,
                subscribed,
            } => {
                w.u8(0);
                put_ref(w, r);
                session(w, s);
                let crate::pcrf::SessionQos {
                    qci,
                    arp_priority,
                    ambr_ul,
                    ambr_dl,
                } = subscribed;
                w.u8(*qci);
                w.u8(*arp_priority);
                w.pair((*ambr_ul, *ambr_dl));
            }
            PcrfRequest::Report {
                r,
                session: s,
                usage,
            } => {
                w.u8(1);
                put_ref(w, r);
                session(w, s);
                reports(w, usage);
            }
            PcrfRequest::Terminate { session: s, usage } => {
                w.u8(2);
                session(w, s);
                reports(w, usage);
            }
        },
        Output::UsageRecord(u) => {
            let crate::pcrf::UsageRecord {
                imsi,
                apn,
                ue_ip,
                ebi,
                default_ebi,
                qci,
                rules,
                usage,
                duration,
                cause,
                sequence,
            } = &**u;
            w.uv(*imsi);
            w.str(apn);
            w.ip(*ue_ip);
            w.u8(*ebi);
            w.u8(*default_ebi);
            w.u8(*qci);
            w.uv(rules.len() as u64);
            for crate::pcrf::RuleUsage {
                name,
                rating_group,
                ul_bytes,
                dl_bytes,
            } in rules
            {
                w.str(name);
                w.opt(rating_group, |w, g| w.uv(u64::from(*g)));
                w.opt(ul_bytes, |w, b| w.uv(*b));
                w.opt(dl_bytes, |w, b| w.uv(*b));
            }
            let pepc_slice::counters::Usage {
                ul_packets,
                ul_bytes,
                dl_packets,
                dl_bytes,
                ul_dropped,
                dl_dropped,
            } = usage;
            for v in [
                ul_packets, ul_bytes, dl_packets, dl_bytes, ul_dropped, dl_dropped,
            ] {
                w.uv(*v);
            }
            w.uv(duration.as_nanos() as u64);
            w.str(cause.as_str());
            w.uv(u64::from(*sequence));
        }
    }
    let len = (w.0.len() - at - 4) as u32;
    w.0[at..at + 4].copy_from_slice(&len.to_le_bytes());
}

/// The kind of an output as [`put_output`] numbers it, for reports.
pub(crate) fn output_kind(code: u8) -> &'static str {
    match code {
        0 => "S1AP",
        1 => "checkpoint",
        2 => "paging",
        3 => "close association",
        4 => "reset done",
        5 => "IMSI claim",
        6 => "IMSI release",
        7 => "HSS request",
        8 => "forget",
        9 => "congestion",
        10 => "PCRF request",
        11 => "usage record",
        _ => "output",
    }
}

/// What [`put_output`] wrote, read back for a report: its kind and its body.
pub(crate) fn get_output<'a>(r: &mut R<'a>) -> Result<(&'static str, &'a [u8]), RecordError> {
    let kind = r.u8()?;
    if kind > 11 {
        return Err(RecordError::Invalid("output kind"));
    }
    let len = u32::from_le_bytes(r.array::<4>()?) as usize;
    if len > r.b.len() {
        return Err(RecordError::Truncated);
    }
    let (body, rest) = r.b.split_at(len);
    r.b = rest;
    Ok((output_kind(kind), body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_input_kind_reads_back_as_written() {
        let decision = PolicyDecision {
            default_qos: Some((5, 2)),
            ambr: Some((1, 2)),
            install: vec![PccRule {
                name: "voice".into(),
                precedence: 10,
                qci: 1,
                arp_priority: 2,
                mbr: (64_000, 64_000),
                gbr: (32_000, 32_000),
                rating_group: Some(7),
                monitoring_key: Some("mk".into()),
                flows: vec![FlowFilter {
                    direction: FlowDirection::Both,
                    protocol: Some(17),
                    remote: Ipv4Addr::new(10, 1, 2, 3),
                    remote_len: 32,
                    remote_ports: (5060, 5060),
                    ue_ports: (0, 65535),
                }],
            }],
            remove: vec!["old".into()],
            monitoring: vec![UsageGrant {
                key: "mk".into(),
                octets: 1 << 30,
            }],
        };
        let r = HssRef {
            mme_ue_id: 77,
            seq: 3,
        };
        let inputs = vec![
            Input::Congestion { on: true },
            Input::EnbUp {
                assoc: 1,
                out_streams: 2,
            },
            Input::EnbDown { assoc: u64::MAX },
            Input::EnbSetup {
                assoc: 4,
                out_streams: 3,
                global_id: GlobalEnbId {
                    plmn: pepc_s1ap::Plmn([0, 0xf1, 0x10]),
                    enb_id: EnbId::Home(0x0ab_cdef),
                },
            },
            Input::EnbReset {
                assoc: 4,
                token: 9,
                connections: Some(vec![UeConnection {
                    mme_ue_id: Some(5),
                    enb_ue_id: None,
                }]),
            },
            Input::Supersede {
                imsi: 1010000000001,
            },
            Input::S1ap {
                assoc: 4,
                stream: 1,
                bytes: vec![0, 12, 0xff],
            },
            Input::Control(ControlEvent::EnbErrorIndication {
                enb_teid: 3,
                enb_addr: Ipv4Addr::LOCALHOST,
            }),
            Input::Hss(HssAnswer {
                r,
                result: Ok(HssData::Vector(Box::new(AuthVector {
                    rand: [1; 16],
                    xres: [2; 8],
                    autn: [3; 16],
                    kasme: Key256::new([4; 32]),
                }))),
            }),
            Input::Hss(HssAnswer {
                r,
                result: Err(HssFailure::Unavailable("db".into())),
            }),
            Input::HssCancelLocation {
                imsi: 1,
                cancellation_type: CancellationType::Other(9),
                reattach_required: true,
            },
            Input::HssInsertSubscriberData {
                imsi: 1,
                update: SubscriptionUpdate {
                    ambr: Some((3, 4)),
                    default_apn: Some(DefaultApn {
                        apn: "ims".into(),
                        pdn_type: PdnType::Ipv4v6,
                        qci: 5,
                        arp_priority: 1,
                    }),
                },
            },
            Input::Pcrf(PcrfAnswer {
                r,
                imsi: 1,
                ebi: 5,
                result: Ok(decision.clone()),
            }),
            Input::PolicyUpdate {
                imsi: 1,
                ebi: None,
                decision,
            },
        ];
        for i in inputs {
            let mut buf = vec![];
            put_input(&mut W(&mut buf), &i);
            let mut r = R::new(&buf);
            let back = get_input(&mut r).unwrap();
            assert!(r.done());
            // Input has no PartialEq (answers hold keys): compare re-encodings.
            let mut again = vec![];
            put_input(&mut W(&mut again), &back);
            assert_eq!(buf, again, "{i:?}");
            // Every truncation is an error, never a panic.
            for n in 0..buf.len() {
                assert!(get_input(&mut R::new(&buf[..n])).is_err());
            }
        }
    }
}
