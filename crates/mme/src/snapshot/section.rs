//! The MME section's byte format (version 3, in the module docs): one UE's MME
//! context written and read field by field, with every value checked on the way in.

use super::*;

/// The state code of procedure `p` (the record's `wait` byte).
pub(super) fn proc_code(p: &Procedure) -> u8 {
    // Exhaustive: a new state fails to compile until the snapshot carries it.
    match p {
        Procedure::Idle => 0,
        Procedure::ExpectIdentity => 1,
        Procedure::ExpectAuthResponse { .. } => 2,
        Procedure::ExpectSmcComplete { .. } => 3,
        Procedure::ExpectEsmInfo => 4,
        Procedure::ExpectIcsResponse { attach: false } => 5,
        Procedure::ExpectIcsResponse { attach: true } => 6,
        Procedure::ExpectAttachComplete => 7,
        Procedure::ExpectGutiReallocComplete { .. } => 8,
        Procedure::ExpectDetachAccept => 9,
        Procedure::ExpectReleaseComplete { then_remove: false } => 10,
        Procedure::ExpectReleaseComplete { then_remove: true } => 11,
        // 13 was a profile asked for a parked context's attach (before Update Location
        // moved after AKA): read as 12.
        Procedure::ExpectHssProfile { .. } => 12,
        Procedure::ExpectHssVector { .. } => 14,
        Procedure::ExpectPolicy { .. } => 15,
    }
}

/// What a procedure state carries beyond its code, read from the record.
pub(super) struct ProcParts {
    hss: Option<(u32, u16)>,
    new_sec: Option<Box<SecCtx>>,
    vector: Option<Box<AuthVector>>,
    pending_tmsi: Option<u32>,
    resynced: bool,
    then: Resume,
}

/// The record's `resume` byte.
pub(super) fn resume_code(r: Resume) -> u8 {
    match r {
        Resume::Attach => 0,
        Resume::Tau { active: false } => 1,
        Resume::Tau { active: true } => 2,
        Resume::Detach => 3,
    }
}

pub(super) fn resume_of(code: u8) -> Result<Resume, SnapshotError> {
    Ok(match code {
        0 => Resume::Attach,
        1 => Resume::Tau { active: false },
        2 => Resume::Tau { active: true },
        3 => Resume::Detach,
        _ => return Err(SnapshotError::Invalid("what the authentication resumes")),
    })
}

/// States that carry a `resume` byte.
pub(super) fn has_resume(code: u8) -> bool {
    matches!(code, 2 | 3 | 14)
}

/// The procedure of state `code` with its parts; parts that the state does not hold,
/// or that it needs and lack, make the record invalid.
pub(super) fn proc_of(code: u8, p: ProcParts) -> Result<Procedure, SnapshotError> {
    use SnapshotError::Invalid;
    let ProcParts {
        hss,
        new_sec,
        vector,
        pending_tmsi,
        resynced,
        then,
    } = p;
    let (seq, attach) = hss.unwrap_or((0, 0));
    let proc = match (code, new_sec, vector, pending_tmsi) {
        (2, None, Some(vector), None) => Procedure::ExpectAuthResponse {
            vector,
            resynced,
            then,
        },
        (3, Some(sec), None, None) => Procedure::ExpectSmcComplete { sec, then },
        (8, None, None, Some(m_tmsi)) => Procedure::ExpectGutiReallocComplete { m_tmsi },
        (2 | 3 | 8, ..) => return Err(Invalid("procedure state without its parts")),
        (_, None, None, None) => match code {
            0 => Procedure::Idle,
            1 => Procedure::ExpectIdentity,
            4 => Procedure::ExpectEsmInfo,
            5 => Procedure::ExpectIcsResponse { attach: false },
            6 => Procedure::ExpectIcsResponse { attach: true },
            7 => Procedure::ExpectAttachComplete,
            9 => Procedure::ExpectDetachAccept,
            10 => Procedure::ExpectReleaseComplete { then_remove: false },
            11 => Procedure::ExpectReleaseComplete { then_remove: true },
            12 | 13 => Procedure::ExpectHssProfile { seq, attach },
            14 => Procedure::ExpectHssVector {
                seq,
                attach,
                resynced,
                then,
            },
            15 => Procedure::ExpectPolicy { seq },
            _ => return Err(Invalid("procedure state")),
        },
        _ => return Err(Invalid("procedure parts in a state that holds none")),
    };
    if resynced && !matches!(code, 2 | 14) {
        return Err(Invalid("resynchronisation flag outside authentication"));
    }
    Ok(proc)
}

/// Microseconds from `now` to `t`, rounded up (restored deadlines never come early);
/// 0 when `t` is past.
pub(super) fn remaining_us(t: Instant, now: Instant) -> u64 {
    let d = t.saturating_duration_since(now);
    let us = d.as_micros() + u128::from(!d.subsec_nanos().is_multiple_of(1000));
    u64::try_from(us).unwrap_or(u64::MAX)
}

pub(super) fn deadline(now: Instant, us: u64) -> Result<Instant, SnapshotError> {
    now.checked_add(Duration::from_micros(us))
        .ok_or(SnapshotError::Invalid("timer beyond the clock's range"))
}

pub(super) fn eea_of(v: u8) -> Result<Eea, SnapshotError> {
    Eea::try_from(v).map_err(|_| SnapshotError::Invalid("EEA"))
}

pub(super) fn eia_of(v: u8) -> Result<Eia, SnapshotError> {
    Eia::try_from(v).map_err(|_| SnapshotError::Invalid("EIA"))
}

pub(super) fn write_ue(
    id: u32,
    u: &Ue,
    subscribed_apn_name: Option<&str>,
    now: Instant,
    out: &mut Vec<u8>,
    version: u8,
) -> Result<(), SnapshotError> {
    // Every field named: a new one fails to compile until the snapshot decides on it.
    let Ue {
        id: _,
        imsi,
        emm,
        conn,
        proc,
        sec,
        nas_secured,
        claim_imsi,
        ue_net_cap,
        pti,
        apn,
        slot,
        m_tmsi,
        tai,
        ecgi,
        nh,
        ncc,
        retx,
        retx_count,
        nas_timer,
        paging_timer,
        paging_left,
        reach_timer,
        guard_timer,
        unauth_on: _,
        // A latency measurement does not survive a move: not state of the UE.
        started: _,
        // The ledger's count of what is open belongs to the process that counted it.
        open: _,
        ckpt_dl: _,
        handover: ho,
        old_conn,
        x2_source,
        ambr,
        qci,
        arp_priority,
        next_ksi,
        pending_bearers,
        esm_info_flag,
        resumed,
        superseded,
        page_after_release,
        subscribed_apn,
        // Derived on restore from the EMM state and the procedure.
        hss_location: _,
        // In the snapshot's PCC section (pcc.rs), not the MME section.
        policy: _,
    } = u;
    // The parts of the procedure's state, each in its own field of the record.
    let (mut new_sec, mut vector, mut pending_tmsi, mut resync_done, mut hss) =
        (None, None, None, false, None);
    match proc {
        Procedure::ExpectAuthResponse {
            vector: v,
            resynced,
            then: _,
        } => {
            vector = Some(v);
            resync_done = *resynced;
        }
        Procedure::ExpectSmcComplete { sec, then: _ } => new_sec = Some(sec),
        Procedure::ExpectGutiReallocComplete { m_tmsi } => pending_tmsi = Some(m_tmsi),
        Procedure::ExpectHssProfile { seq, attach, .. } => hss = Some((*seq, *attach)),
        Procedure::ExpectPolicy { seq } => hss = Some((*seq, 0)),
        Procedure::ExpectHssVector {
            seq,
            attach,
            resynced,
            then: _,
        } => {
            hss = Some((*seq, *attach));
            resync_done = *resynced;
        }
        _ => {}
    }
    // Written beside `hss` below.
    let resume = proc.resume().map(resume_code);
    // An index into this MME's APN table: the snapshot carries the name.
    let _ = subscribed_apn;
    let registered = match emm {
        Emm_::Registered => true,
        Emm_::Deregistered => false,
    };
    let too_long = |what, len, max| SnapshotError::TooLong { what, len, max };
    if ue_net_cap.len() > MAX_NET_CAP {
        return Err(too_long(
            "UE network capability",
            ue_net_cap.len(),
            MAX_NET_CAP,
        ));
    }
    if apn.len() > MAX_APN {
        return Err(too_long("APN", apn.len(), MAX_APN));
    }
    if pending_bearers.len() > MAX_PENDING_BEARERS {
        return Err(too_long(
            "pending bearers",
            pending_bearers.len(),
            MAX_PENDING_BEARERS,
        ));
    }
    let mut flags = 0u32;
    let mut set = |b: bool, f: u32| {
        if b {
            flags |= f
        }
    };
    set(imsi.is_some(), F_IMSI);
    set(registered, F_REGISTERED);
    set(conn.is_some(), F_CONN);
    set(sec.is_some(), F_SEC);
    set(new_sec.is_some(), F_NEW_SEC);
    set(vector.is_some(), F_VECTOR);
    set(nh.is_some(), F_NH);
    set(retx.is_some(), F_RETX);
    set(retx.as_ref().is_some_and(|r| r.1), F_RETX_NEW_CTX);
    set(pending_tmsi.is_some(), F_PENDING_TMSI);
    set(ho.is_some(), F_HO);
    set(old_conn.is_some(), F_OLD_CONN);
    set(x2_source.is_some(), F_X2_SOURCE);
    set(resync_done, F_RESYNC_DONE);
    set(*nas_secured, F_NAS_SECURED);
    set(*claim_imsi, F_CLAIM_IMSI);
    set(*esm_info_flag && version >= 3, F_ESM_INFO);
    set(*resumed, F_RESUMED);
    set(*superseded, F_SUPERSEDED);
    set(*page_after_release, F_PAGE_AFTER_RELEASE);
    set(subscribed_apn_name.is_some(), F_SUBSCRIBED_APN);
    set(slot.is_some(), F_SLOT);
    set(nas_timer.is_some(), F_NAS_TIMER);
    set(paging_timer.is_some(), F_PAGING_TIMER);
    set(reach_timer.is_some(), F_REACH_TIMER);
    set(guard_timer.is_some() && version >= 3, F_GUARD_TIMER);

    let mut w = Writer(container::Writer(out), version);
    w.u8(version);
    w.u32(id);
    w.varint(flags as u64);
    w.u8(proc_code(proc));
    if let Some(i) = imsi {
        w.varint(*i);
    }
    if let Some(c) = conn {
        w.conn(*c);
    }
    w.u32(*m_tmsi);
    if let Some(t) = pending_tmsi {
        w.u32(*t);
    }
    w.bytes(&tai.plmn.0);
    w.u16(tai.tac);
    w.bytes(&ecgi.plmn.0);
    w.u32(ecgi.cell_id);
    w.varint(ambr.0);
    w.varint(ambr.1);
    w.u8(*qci);
    w.u8(*arp_priority);
    w.u8(*next_ksi);
    w.u8(*pti);
    w.u8(*ncc);
    w.varint(u64::from(*paging_left));
    w.varint(u64::from(*retx_count));
    w.short_bytes(ue_net_cap);
    w.short_bytes(apn.as_bytes());
    if version >= 3 {
        w.short_bytes(pending_bearers);
    } else {
        // Before version 3 the ESM information flag was a 0xff pending bearer.
        let mut b = pending_bearers.clone();
        if *esm_info_flag {
            b.push(0xff);
        }
        w.short_bytes(&b);
    }
    if let Some(a) = subscribed_apn_name {
        if a.len() > MAX_APN {
            return Err(too_long("subscribed APN", a.len(), MAX_APN));
        }
        w.short_bytes(a.as_bytes());
    }
    if let Some((seq, attach)) = hss {
        w.varint(u64::from(seq));
        w.u16(attach);
    }
    if version >= 3 && has_resume(proc_code(proc)) {
        w.u8(resume.unwrap_or(0));
    }
    if let Some(s) = sec {
        w.sec(s);
    }
    if let Some(s) = new_sec {
        w.sec(s);
    }
    if let Some(v) = vector {
        w.bytes(&v.rand);
        w.bytes(&v.xres);
        w.bytes(&v.autn);
        w.bytes(v.kasme.as_bytes());
    }
    if let Some(k) = nh {
        w.bytes(k.as_bytes());
    }
    if let Some(r) = retx {
        let len_at = w.0 .0.len();
        r.0.encode_into(w.0 .0)
            .map_err(|_| SnapshotError::Invalid("NAS message to retransmit does not encode"))?;
        let len = w.0 .0.len() - len_at;
        if len > MAX_RETX_NAS {
            return Err(too_long("NAS message to retransmit", len, MAX_RETX_NAS));
        }
        // The length goes before the message: encode it, then move the message up.
        let mut lv = [0u8; 10];
        let n = varint_into(len as u64, &mut lv);
        w.0 .0.splice(len_at..len_at, lv[..n].iter().copied());
    }
    if let Some(h) = ho {
        let HoState {
            target_assoc,
            target_enb_ue_id,
            admitted,
            source,
            // A restored handover's latency counts from its restore.
            started: _,
        } = &**h;
        if admitted.len() > MAX_ADMITTED {
            return Err(too_long("admitted E-RABs", admitted.len(), MAX_ADMITTED));
        }
        w.varint(*target_assoc);
        w.u8(target_enb_ue_id.is_some() as u8);
        if let Some(e) = target_enb_ue_id {
            w.varint(u64::from(*e));
        }
        w.conn(*source);
        w.u8(admitted.len() as u8);
        for a in admitted {
            let ERabAdmitted {
                id,
                transport,
                teid,
                dl_forwarding,
                ul_forwarding,
            } = a;
            w.u8(*id);
            w.u8(dl_forwarding.is_some() as u8 | (ul_forwarding.is_some() as u8) << 1);
            w.bytes(&transport.octets());
            w.u32(*teid);
            for (addr, teid) in [dl_forwarding, ul_forwarding].into_iter().flatten() {
                w.bytes(&addr.octets());
                w.u32(*teid);
            }
        }
    }
    if let Some(c) = old_conn {
        w.conn(*c);
    }
    if let Some((c, until)) = x2_source {
        w.conn(*c);
        w.varint(remaining_us(*until, now));
    }
    let guard = guard_timer.filter(|_| version >= 3);
    for t in [nas_timer, paging_timer, reach_timer, &guard]
        .into_iter()
        .flatten()
    {
        w.varint(remaining_us(*t, now));
    }
    Ok(())
}

/// A decoded MME section.
pub(super) struct Decoded {
    pub(super) mme_ue_id: u32,
    pub(super) had_slot: bool,
    pub(super) ue: Box<Ue>,
    /// The subscribed APN's name (the context holds an index into its MME's table).
    pub(super) subscribed_apn: Option<String>,
}

pub(super) fn read_ue(buf: &[u8], now: Instant) -> Result<Decoded, SnapshotError> {
    use SnapshotError::Invalid;
    let mut r = Reader::new(buf);
    let v = r.u8()?;
    if !(MME_SECTION_VERSION_MIN..=MME_SECTION_VERSION).contains(&v) {
        return Err(SnapshotError::UnsupportedVersion(v));
    }
    r.version = v;
    let mme_ue_id = r.u32()?;
    let flags = r.varint()?;
    if flags & !u64::from(F_ALL) != 0 {
        return Err(Invalid("reserved flag bits set"));
    }
    let flags = flags as u32;
    let has = |f: u32| flags & f != 0;
    if has(F_RETX_NEW_CTX) && !has(F_RETX) {
        return Err(Invalid("retransmission flag without a message"));
    }
    let code = r.u8()?;
    let imsi = if has(F_IMSI) { Some(r.varint()?) } else { None };
    let conn = if has(F_CONN) { Some(r.conn()?) } else { None };
    let m_tmsi = r.u32()?;
    let pending_tmsi = if has(F_PENDING_TMSI) {
        Some(r.u32()?)
    } else {
        None
    };
    let tai = Tai {
        plmn: Plmn(r.array()?),
        tac: r.u16()?,
    };
    let ecgi = Ecgi {
        plmn: Plmn(r.array()?),
        cell_id: r.u32()?,
    };
    let ambr = (r.varint()?, r.varint()?);
    let qci = r.u8()?;
    let arp_priority = r.u8()?;
    let next_ksi = r.u8()?;
    if next_ksi >= 7 {
        return Err(Invalid("next KSI"));
    }
    let pti = r.u8()?;
    let ncc = r.u8()?;
    if ncc >= 8 {
        return Err(Invalid("NCC"));
    }
    let paging_left = r.varint_u32()?;
    let retx_count = r.varint_u32()?;
    let ue_net_cap = r
        .short_bytes(MAX_NET_CAP, "UE network capability")?
        .to_vec();
    let apn = std::str::from_utf8(r.short_bytes(MAX_APN, "APN")?)
        .map_err(|_| Invalid("APN not UTF-8"))?
        .to_owned();
    let mut pending_bearers = r
        .short_bytes(MAX_PENDING_BEARERS, "pending bearers")?
        .to_vec();
    let mut esm_info_flag = has(F_ESM_INFO);
    if v < 3 && pending_bearers.contains(&0xff) {
        pending_bearers.retain(|b| *b != 0xff);
        esm_info_flag = true;
    }
    let subscribed_apn = if has(F_SUBSCRIBED_APN) {
        Some(
            std::str::from_utf8(r.short_bytes(MAX_APN, "subscribed APN")?)
                .map_err(|_| Invalid("subscribed APN not UTF-8"))?
                .to_owned(),
        )
    } else {
        None
    };
    let hss = if matches!(code, 12..=15) {
        Some((r.varint_u32()?, r.u16()?))
    } else {
        None
    };
    // Before version 3 every authentication was an attach's.
    let then = if v >= 3 && has_resume(code) {
        resume_of(r.u8()?)?
    } else {
        Resume::Attach
    };
    let sec = if has(F_SEC) {
        Some(Box::new(r.sec()?))
    } else {
        None
    };
    // Before version 3: a connected UE with a context had its exchange secured.
    let nas_secured = if v >= 3 {
        has(F_NAS_SECURED)
    } else {
        conn.is_some() && sec.is_some()
    };
    let new_sec = if has(F_NEW_SEC) {
        Some(Box::new(r.sec()?))
    } else {
        None
    };
    let vector = if has(F_VECTOR) {
        Some(Box::new(AuthVector {
            rand: r.array()?,
            xres: r.array()?,
            autn: r.array()?,
            kasme: r.key()?,
        }))
    } else {
        None
    };
    let proc = proc_of(
        code,
        ProcParts {
            hss,
            new_sec,
            vector,
            pending_tmsi,
            resynced: has(F_RESYNC_DONE),
            then,
        },
    )?;
    let nh = if has(F_NH) { Some(r.key()?) } else { None };
    let retx = if has(F_RETX) {
        let len = r.varint()?;
        if len > MAX_RETX_NAS as u64 {
            return Err(SnapshotError::TooLong {
                what: "NAS message to retransmit",
                len: len as usize,
                max: MAX_RETX_NAS,
            });
        }
        let m = NasEpsMessage::decode_with_direction(r.take(len as usize)?, Direction::Downlink)
            .map_err(|_| Invalid("NAS message to retransmit does not decode"))?;
        if !matches!(m, NasEpsMessage::Emm(..) | NasEpsMessage::Esm(..)) {
            return Err(Invalid(
                "NAS message to retransmit is not a plain EMM/ESM one",
            ));
        }
        Some(Box::new((m, has(F_RETX_NEW_CTX))))
    } else {
        None
    };
    let ho = if has(F_HO) {
        let target_assoc = r.varint()?;
        let hf = r.u8()?;
        if hf & !1 != 0 {
            return Err(Invalid("reserved handover flag bits set"));
        }
        let target_enb_ue_id = if hf & 1 != 0 {
            Some(r.varint_u32()?)
        } else {
            None
        };
        let source = r.conn()?;
        let n = r.u8()? as usize;
        if n > MAX_ADMITTED {
            return Err(Invalid("admitted E-RAB count"));
        }
        let mut admitted = Vec::with_capacity(n);
        for _ in 0..n {
            let id = r.u8()?;
            let f = r.u8()?;
            if f & !3 != 0 {
                return Err(Invalid("reserved E-RAB flag bits set"));
            }
            let transport = Ipv4Addr::from(r.array::<4>()?);
            let teid = r.u32()?;
            let mut fwd = || -> Result<(Ipv4Addr, u32), SnapshotError> {
                Ok((Ipv4Addr::from(r.array::<4>()?), r.u32()?))
            };
            let dl_forwarding = if f & 1 != 0 { Some(fwd()?) } else { None };
            let ul_forwarding = if f & 2 != 0 { Some(fwd()?) } else { None };
            admitted.push(ERabAdmitted {
                id,
                transport,
                teid,
                dl_forwarding,
                ul_forwarding,
            });
        }
        Some(Box::new(HoState {
            target_assoc,
            target_enb_ue_id,
            admitted,
            source,
            started: now,
        }))
    } else {
        None
    };
    let old_conn = if has(F_OLD_CONN) {
        Some(r.conn()?)
    } else {
        None
    };
    let x2_source = if has(F_X2_SOURCE) {
        let c = r.conn()?;
        Some((c, deadline(now, r.varint()?)?))
    } else {
        None
    };
    let mut timer = |f: u32| -> Result<Option<Instant>, SnapshotError> {
        if has(f) {
            Ok(Some(deadline(now, r.varint()?)?))
        } else {
            Ok(None)
        }
    };
    let nas_timer = timer(F_NAS_TIMER)?;
    let paging_timer = timer(F_PAGING_TIMER)?;
    let reach_timer = timer(F_REACH_TIMER)?;
    let guard_timer = timer(F_GUARD_TIMER)?;
    if r.remaining() != 0 {
        return Err(SnapshotError::Trailing(r.remaining()));
    }
    // The HSS holds this MME for every registered UE, and for an attach past its
    // Update Location (policy, context setup, completion).
    let hss_location = has(F_REGISTERED)
        || matches!(
            proc,
            Procedure::ExpectPolicy { .. }
                | Procedure::ExpectIcsResponse { attach: true }
                | Procedure::ExpectAttachComplete
        );
    Ok(Decoded {
        mme_ue_id,
        had_slot: has(F_SLOT),
        ue: Box::new(Ue {
            // Set by the restoring MME (kept, or renumbered).
            id: mme_ue_id,
            imsi,
            emm: if has(F_REGISTERED) {
                Emm_::Registered
            } else {
                Emm_::Deregistered
            },
            conn,
            proc,
            sec,
            nas_secured,
            claim_imsi: has(F_CLAIM_IMSI),
            ue_net_cap,
            pti,
            apn,
            slot: None,
            m_tmsi,
            tai,
            ecgi,
            nh,
            ncc,
            retx,
            retx_count,
            nas_timer,
            paging_timer,
            paging_left,
            reach_timer,
            guard_timer,
            // Counted again by the restoring MME.
            unauth_on: None,
            started: None,
            ckpt_dl: 0,
            handover: ho,
            old_conn,
            x2_source,
            ambr,
            qci,
            arp_priority,
            next_ksi,
            pending_bearers,
            esm_info_flag,
            resumed: has(F_RESUMED),
            superseded: has(F_SUPERSEDED),
            hss_location,
            page_after_release: has(F_PAGE_AFTER_RELEASE),
            open: 0,
            subscribed_apn: 0,
            policy: None,
        }),
        subscribed_apn,
    })
}
