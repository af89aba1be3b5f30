//! The start record: what a replay rebuilds the MME and its slice control plane from.
//! Every field is named on both sides, so a new configuration field fails to compile
//! until the recording carries it.

use super::codec::{R, W};
use super::RecordError;
use crate::endpoint::{SlicePolicy, SliceRole};
use crate::overload::OverloadConfig;
use crate::pcrf::PolicyConfig;
use crate::MmeConfig;
use pepc_s1ap::msg::OverloadAction;
use pepc_security::{Eea, Eia};
use pepc_slice::control::ControlConfig;
use pepc_slice::ids::{IdLayout, IotPool, MAX_PDNS};
use std::time::Duration;

/// The configuration of a recorded MME and its slice.
#[derive(Debug, Clone)]
pub struct Header {
    pub role: SliceRole,
    pub mme: MmeConfig,
    pub slice: ControlConfig,
}

fn put_dur(w: &mut W<'_>, d: Duration) {
    w.uv(d.as_secs());
    w.uv(u64::from(d.subsec_nanos()));
}

fn get_dur(r: &mut R<'_>) -> Result<Duration, RecordError> {
    let s = r.uv()?;
    let n = r.u32()?;
    if n >= 1_000_000_000 {
        return Err(RecordError::Invalid("duration"));
    }
    Ok(Duration::new(s, n))
}

fn usize_of(v: u64) -> Result<usize, RecordError> {
    usize::try_from(v).map_err(|_| RecordError::Invalid("size"))
}

impl Header {
    pub(crate) fn put(&self, w: &mut W<'_>) {
        let SliceRole {
            index,
            count,
            policy,
        } = self.role;
        w.uv(index as u64);
        w.uv(count as u64);
        w.u8(match policy {
            SlicePolicy::ConsistentHash => 0,
            SlicePolicy::Modulo => 1,
        });
        put_mme(w, &self.mme);
        let ControlConfig {
            slice,
            layout,
            iot,
            ue_slots,
            bearer_slots,
            default_rule_set,
        } = &self.slice;
        w.uv(u64::from(*slice));
        let IdLayout {
            slice_bits,
            ue_pool,
            ue_pool_len,
            pdn_pools,
            pdn_count,
        } = layout;
        w.uv(u64::from(*slice_bits));
        w.ip(*ue_pool);
        w.u8(*ue_pool_len);
        for p in pdn_pools {
            w.ip(*p);
        }
        w.u8(*pdn_count);
        w.opt(iot, |w, p| {
            let IotPool {
                teid_base,
                ip_base,
                size,
            } = p;
            w.uv(u64::from(*teid_base));
            w.ip(*ip_base);
            w.uv(u64::from(*size));
        });
        w.uv(*ue_slots as u64);
        w.uv(*bearer_slots as u64);
        w.uv(u64::from(*default_rule_set));
    }

    pub(crate) fn get(r: &mut R<'_>) -> Result<Header, RecordError> {
        let role = SliceRole {
            index: usize_of(r.uv()?)?,
            count: usize_of(r.uv()?)?,
            policy: match r.u8()? {
                0 => SlicePolicy::ConsistentHash,
                1 => SlicePolicy::Modulo,
                _ => return Err(RecordError::Invalid("slice policy")),
            },
        };
        let mme = get_mme(r)?;
        let slice = r.u32()?;
        let slice_bits = r.u32()?;
        let ue_pool = r.ip()?;
        let ue_pool_len = r.u8()?;
        let mut pdn_pools = [std::net::Ipv4Addr::UNSPECIFIED; MAX_PDNS];
        for p in &mut pdn_pools {
            *p = r.ip()?;
        }
        let pdn_count = r.u8()?;
        let iot = r.opt(|r| {
            Ok(IotPool {
                teid_base: r.u32()?,
                ip_base: r.ip()?,
                size: r.u32()?,
            })
        })?;
        let slice = ControlConfig {
            slice,
            layout: IdLayout {
                slice_bits,
                ue_pool,
                ue_pool_len,
                pdn_pools,
                pdn_count,
            },
            iot,
            ue_slots: usize_of(r.uv()?)?,
            bearer_slots: usize_of(r.uv()?)?,
            default_rule_set: r.u16()?,
        };
        Ok(Header { role, mme, slice })
    }
}

fn overload_code(a: OverloadAction) -> u8 {
    match a {
        OverloadAction::RejectNonEmergencyMoDt => 0,
        OverloadAction::RejectRrcCrSignalling => 1,
        OverloadAction::PermitEmergencyAndMtOnly => 2,
        OverloadAction::PermitHighPriorityAndMtOnly => 3,
        OverloadAction::RejectDelayTolerantAccess => 4,
    }
}

fn overload_of(c: u8) -> Result<OverloadAction, RecordError> {
    Ok(match c {
        0 => OverloadAction::RejectNonEmergencyMoDt,
        1 => OverloadAction::RejectRrcCrSignalling,
        2 => OverloadAction::PermitEmergencyAndMtOnly,
        3 => OverloadAction::PermitHighPriorityAndMtOnly,
        4 => OverloadAction::RejectDelayTolerantAccess,
        _ => return Err(RecordError::Invalid("overload action")),
    })
}

fn put_mme(w: &mut W<'_>, c: &MmeConfig) {
    let MmeConfig {
        plmn,
        mme_group_id,
        mme_code,
        mme_name,
        relative_capacity,
        served_tacs,
        eea_preference,
        eia_preference,
        t3412,
        t3450,
        t3460,
        t3470,
        t3422,
        t3413,
        paging_attempts,
        mobile_reachable,
        esm_info_request,
        default_apn,
        s1u_addr,
        network_name,
        default_ambr,
        extra_apns,
        ue_requested_qcis,
        parked_contexts,
        parked_context_ttl,
        hss_timeout,
        release_guard,
        unauth_context_ttl,
        max_unauth_contexts,
        max_unauth_per_enb,
        purge_on_detach,
        checkpoints,
        overload,
        policy,
    } = c;
    w.0.extend_from_slice(&plmn.0);
    w.uv(u64::from(*mme_group_id));
    w.u8(*mme_code);
    w.opt(mme_name, |w, n| w.str(n));
    w.u8(*relative_capacity);
    w.uv(served_tacs.len() as u64);
    for t in served_tacs {
        w.uv(u64::from(*t));
    }
    w.bytes(&eea_preference.iter().map(|a| *a as u8).collect::<Vec<_>>());
    w.bytes(&eia_preference.iter().map(|a| *a as u8).collect::<Vec<_>>());
    for d in [t3412, t3450, t3460, t3470, t3422, t3413] {
        put_dur(w, *d);
    }
    w.uv(u64::from(*paging_attempts));
    put_dur(w, *mobile_reachable);
    w.bool(*esm_info_request);
    w.str(default_apn);
    w.ip(*s1u_addr);
    w.opt(network_name, |w, n| w.str(n));
    w.pair(*default_ambr);
    w.uv(extra_apns.len() as u64);
    for a in extra_apns {
        w.str(a);
    }
    w.bytes(ue_requested_qcis);
    w.uv(*parked_contexts as u64);
    for d in [
        parked_context_ttl,
        hss_timeout,
        release_guard,
        unauth_context_ttl,
    ] {
        put_dur(w, *d);
    }
    w.uv(*max_unauth_contexts as u64);
    w.uv(*max_unauth_per_enb as u64);
    w.bool(*purge_on_detach);
    w.bool(*checkpoints);
    let OverloadConfig {
        high,
        low,
        t3346,
        action,
        hold,
    } = overload;
    w.uv(*high as u64);
    w.uv(*low as u64);
    put_dur(w, *t3346);
    w.u8(overload_code(*action));
    put_dur(w, *hold);
    let PolicyConfig {
        enabled,
        timeout,
        continue_on_failure,
        usage_check,
        interim,
    } = policy;
    w.bool(*enabled);
    put_dur(w, *timeout);
    w.bool(*continue_on_failure);
    put_dur(w, *usage_check);
    w.opt(interim, |w, d| put_dur(w, *d));
}

fn get_mme(r: &mut R<'_>) -> Result<MmeConfig, RecordError> {
    let plmn = pepc_s1ap::Plmn(r.array()?);
    let mme_group_id = r.u16()?;
    let mme_code = r.u8()?;
    let mme_name = r.opt(|r| r.str())?;
    let relative_capacity = r.u8()?;
    let n = r.count()?;
    let served_tacs = (0..n).map(|_| r.u16()).collect::<Result<_, _>>()?;
    let eea_preference = r
        .bytes()?
        .iter()
        .map(|a| Eea::try_from(*a).map_err(|_| RecordError::Invalid("EEA")))
        .collect::<Result<_, _>>()?;
    let eia_preference = r
        .bytes()?
        .iter()
        .map(|a| Eia::try_from(*a).map_err(|_| RecordError::Invalid("EIA")))
        .collect::<Result<_, _>>()?;
    let t3412 = get_dur(r)?;
    let t3450 = get_dur(r)?;
    let t3460 = get_dur(r)?;
    let t3470 = get_dur(r)?;
    let t3422 = get_dur(r)?;
    let t3413 = get_dur(r)?;
    let paging_attempts = r.u32()?;
    let mobile_reachable = get_dur(r)?;
    let esm_info_request = r.bool()?;
    let default_apn = r.str()?;
    let s1u_addr = r.ip()?;
    let network_name = r.opt(|r| r.str())?;
    let default_ambr = r.pair()?;
    let n = r.count()?;
    let extra_apns = (0..n).map(|_| r.str()).collect::<Result<_, _>>()?;
    let ue_requested_qcis = r.bytes()?.to_vec();
    let parked_contexts = usize_of(r.uv()?)?;
    let parked_context_ttl = get_dur(r)?;
    let hss_timeout = get_dur(r)?;
    let release_guard = get_dur(r)?;
    let unauth_context_ttl = get_dur(r)?;
    let max_unauth_contexts = usize_of(r.uv()?)?;
    let max_unauth_per_enb = usize_of(r.uv()?)?;
    let purge_on_detach = r.bool()?;
    let checkpoints = r.bool()?;
    let overload = OverloadConfig {
        high: usize_of(r.uv()?)?,
        low: usize_of(r.uv()?)?,
        t3346: get_dur(r)?,
        action: overload_of(r.u8()?)?,
        hold: get_dur(r)?,
    };
    let policy = PolicyConfig {
        enabled: r.bool()?,
        timeout: get_dur(r)?,
        continue_on_failure: r.bool()?,
        usage_check: get_dur(r)?,
        interim: r.opt(get_dur)?,
    };
    Ok(MmeConfig {
        plmn,
        mme_group_id,
        mme_code,
        mme_name,
        relative_capacity,
        served_tacs,
        eea_preference,
        eia_preference,
        t3412,
        t3450,
        t3460,
        t3470,
        t3422,
        t3413,
        paging_attempts,
        mobile_reachable,
        esm_info_request,
        default_apn,
        s1u_addr,
        network_name,
        default_ambr,
        extra_apns,
        ue_requested_qcis,
        parked_contexts,
        parked_context_ttl,
        hss_timeout,
        release_guard,
        unauth_context_ttl,
        max_unauth_contexts,
        max_unauth_per_enb,
        purge_on_detach,
        checkpoints,
        overload,
        policy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_reads_back_as_written() {
        let mut mme = MmeConfig {
            mme_name: None,
            served_tacs: vec![1, 7, 65535],
            checkpoints: true,
            ..MmeConfig::default()
        };
        mme.policy.interim = None;
        mme.overload.action = OverloadAction::RejectDelayTolerantAccess;
        let layout = IdLayout::new(4, std::net::Ipv4Addr::new(10, 0, 0, 0), 8).unwrap();
        let h = Header {
            role: SliceRole {
                index: 3,
                count: 4,
                policy: SlicePolicy::Modulo,
            },
            mme,
            slice: ControlConfig {
                slice: 3,
                layout,
                iot: Some(IotPool::new(0x8000_0000, "10.200.0.0".parse().unwrap(), 16).unwrap()),
                ue_slots: 1000,
                bearer_slots: 2000,
                default_rule_set: 2,
            },
        };
        let mut b = vec![];
        h.put(&mut W(&mut b));
        let mut r = R::new(&b);
        let back = Header::get(&mut r).unwrap();
        assert!(r.done());
        assert_eq!(format!("{h:?}"), format!("{back:?}"));
        for n in 0..b.len() {
            assert!(Header::get(&mut R::new(&b[..n])).is_err());
        }
    }
}
