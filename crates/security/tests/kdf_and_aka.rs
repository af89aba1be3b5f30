//! TS 33.401 Annex A KDFs and EPS-AKA flows.
//! Independent checks: (1) Open5GS's KASME unit vector; (2) a Python script
//! (stdlib hmac/hashlib) that builds S from the Annex A formulas itself;
//! (3) the Open5GS capture testattach.pcapng, whose RES and whose NAS
//! SECURITY MODE COMMAND MAC must be reproduced from K/OPc alone.

mod common;
use common::{a, h};
use pepc_security::*;
use std::process::Command;

fn k256(b: [u8; 32]) -> Key256 {
    Key256::new(b)
}

#[test]
fn kasme_matches_open5gs_vector() {
    // open5gs tests/unit/security-test.c security_test3 (TS 35.208 set 1 CK/IK).
    let ck = Key128::from_hex("b40ba9a3c58b2a05bbf0d987b21bf8cb").unwrap();
    let ik = Key128::from_hex("f769bcd751044604127672711c6d3441").unwrap();
    let sqn: [u8; 6] = a("fd8eef40df7d");
    let ak: [u8; 6] = a("aa689c648370");
    let x: [u8; 6] = core::array::from_fn(|i| sqn[i] ^ ak[i]);
    let kasme = kasme(&ck, &ik, a("024830"), x);
    assert_eq!(
        hex::encode(kasme.as_bytes()),
        "238e457e0f758badbca8d34bb2612c10428d426757cb5553b2b184fa64bfc549"
    );
}

/// Python implementation of TS 33.220 B.2 / TS 33.401 Annex A written from
/// the spec, independent of ours. Reads lines "name key_hex fc p0_hex p1_hex..."
/// and prints "name hmac_hex".
const PY: &str = r#"
import sys, hmac, hashlib
for line in sys.stdin:
    f = line.split()
    if not f: continue
    name, key, fc, params = f[0], bytes.fromhex(f[1]), int(f[2], 16), f[3:]
    s = bytes([fc])
    for p in params:
        b = bytes.fromhex(p)
        s += b + len(b).to_bytes(2, 'big')
    print(name, hmac.new(key, s, hashlib.sha256).hexdigest())
"#;

fn python_kdf(lines: &[String]) -> Vec<(String, String)> {
    use std::io::Write;
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(PY)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 must be installed for the KDF cross-check");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(lines.join("\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "python failed");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let mut it = l.split_whitespace();
            (
                it.next().unwrap().to_string(),
                it.next().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn kdfs_match_independent_python_hmac() {
    let ck = Key128::new(core::array::from_fn(|i| (i * 7 + 1) as u8));
    let ik = Key128::new(core::array::from_fn(|i| (i * 13 + 5) as u8));
    let base = k256(core::array::from_fn(|i| (i * 31 + 3) as u8));
    let other = k256(core::array::from_fn(|i| (255 - i) as u8));
    let plmn = [0x09, 0xf1, 0x07];
    let sqnak = [1, 2, 3, 4, 5, 6];
    let ckik = format!(
        "{}{}",
        hex::encode(ck.as_bytes()),
        hex::encode(ik.as_bytes())
    );
    let b = hex::encode(base.as_bytes());

    let mut ours: Vec<(String, String)> = vec![
        (
            "kasme".into(),
            hex::encode(kasme(&ck, &ik, plmn, sqnak).as_bytes()),
        ),
        (
            "kenb".into(),
            hex::encode(kenb(&base, 0x0000_1234).as_bytes()),
        ),
        (
            "kenb_ho".into(),
            hex::encode(kenb(&base, 0xffff_ffff).as_bytes()),
        ),
        ("nh".into(), hex::encode(nh(&base, &other).as_bytes())),
        (
            "kenbs_short".into(),
            hex::encode(kenb_star(&base, 42, 6300).as_bytes()),
        ),
        (
            "kenbs_long".into(),
            hex::encode(kenb_star(&base, 503, 70000).as_bytes()),
        ),
    ];
    let mut lines = vec![
        format!(
            "kasme {ckik} 10 {} {}",
            hex::encode(plmn),
            hex::encode(sqnak)
        ),
        format!("kenb {b} 11 00001234"),
        format!("kenb_ho {b} 11 ffffffff"),
        format!("nh {b} 12 {}", hex::encode(other.as_bytes())),
        format!("kenbs_short {b} 13 002a 189c"),
        format!("kenbs_long {b} 13 01f7 011170"),
    ];
    for td in 1..=6u8 {
        for alg in 0..=3u8 {
            let name = format!("alg_{td}_{alg}");
            // Only the low 128 bits are the key (A.7): compare the Python
            // output's second half.
            ours.push((
                name.clone(),
                hex::encode(algorithm_key(&base, td, alg).as_bytes()),
            ));
            lines.push(format!("{name} {b} 15 {td:02x} {alg:02x}"));
        }
    }
    let py = python_kdf(&lines);
    assert_eq!(py.len(), ours.len());
    for ((n1, mine), (n2, theirs)) in ours.iter().zip(py.iter()) {
        assert_eq!(n1, n2);
        let theirs = if n1.starts_with("alg_") {
            &theirs[32..]
        } else {
            &theirs[..]
        };
        assert_eq!(mine, theirs, "{n1}");
    }
    let (enc, int) = nas_keys(&base, 2, 1);
    assert_eq!(enc, algorithm_key(&base, NAS_ENC_ALG, 2));
    assert_eq!(int, algorithm_key(&base, NAS_INT_ALG, 1));
}

#[test]
fn nh_chain_starts_from_kenb() {
    let kasme_k = k256([0x11; 32]);
    let kenb0 = kenb(&kasme_k, 0);
    let nh1 = nh(&kasme_k, &kenb0);
    let nh2 = nh(&kasme_k, &nh1);
    assert_ne!(nh1, nh2);
    assert_eq!(nh2, nh(&kasme_k, &nh(&kasme_k, &kenb0)));
}

// ---- Open5GS capture (testattach.pcapng) --------------------------------
const K: &str = "465B5CE8B199B49FAA5F0A2EE238A6BC";
const OPC: &str = "E8ED289DEBA952E4283B54E88E6183CA";
// Frame 46, Authentication request.
const RAND: &str = "2b6af03df2dddd1292f73931cc138552";
const AUTN: &str = "c10b4fcdde3180004a3e9d91fd62d73d";
// Frame 47, Authentication response.
const RES: &str = "30b32a4f09a54ac4";
// Serving PLMN 901/70 encoded as in TS 24.008 10.5.1.3.
const PLMN: [u8; 3] = [0x09, 0xf1, 0x07];

fn capture_mil() -> Milenage {
    Milenage::new_with_opc(&Key128::from_hex(K).unwrap(), a(OPC))
}

#[test]
fn open5gs_capture_eps_aka_and_smc_mac() {
    let mil = capture_mil();
    let (rand, autn) = (a::<16>(RAND), a::<16>(AUTN));
    let (res, ck, ik, ak) = mil.f2345(rand);
    assert_eq!(hex::encode(res), RES, "RES of frame 47");

    // USIM side accepts the AUTN (its SQN is fresh for a new USIM) ...
    let ok = usim_check(&mil, rand, autn, 0).expect("capture AUTN must verify");
    assert_eq!(hex::encode(ok.res), RES);
    let sqn_xor_ak: [u8; 6] = autn[..6].try_into().unwrap();
    assert_eq!(
        sqn_from_u64(ok.sqn),
        core::array::from_fn(|i| sqn_xor_ak[i] ^ ak[i])
    );

    // ... and the HSS, given that SQN, would have produced the same AUTN.
    let av = generate_vector(&mil, sqn_from_u64(ok.sqn), [0x80, 0x00], rand, PLMN);
    assert_eq!(av.autn, autn);
    assert_eq!(hex::encode(&av.xres), RES);
    assert_eq!(av.kasme, kasme(&ck, &ik, PLMN, sqn_xor_ak));

    // Frame 48: SECURITY MODE COMMAND, integrity protected with the new
    // context, 128-EIA1, NAS COUNT 0, downlink. NAS-MAC = a8a82a32 is
    // computed over SEQ || plain message. Reproducing it validates KASME
    // and KNASint derivation end to end against a real core.
    let (_enc, int) = nas_keys(&av.kasme, 0, 1);
    let smc = h("00 075d010005f0f0c04070c14f08a35e5f5912506ad4");
    assert_eq!(
        hex::encode(eia_mac(Eia::Eia1, &int, 0, 0, 1, &smc)),
        "a8a82a32"
    );
}

#[test]
fn usim_rejects_bad_mac_and_non_eps_amf() {
    let mil = capture_mil();
    let rand = a::<16>(RAND);
    let mut autn = a::<16>(AUTN);
    autn[15] ^= 1;
    assert_eq!(
        usim_check(&mil, rand, autn, 0).unwrap_err(),
        UsimError::MacFailure
    );
    // A properly MAC'd AUTN with the separation bit clear is refused for EPS.
    let av = generate_vector(&mil, sqn_from_u64(64), [0x00, 0x00], rand, PLMN);
    assert_eq!(
        usim_check(&mil, rand, av.autn, 0).unwrap_err(),
        UsimError::NonEpsAuthUnacceptable
    );
    // Another subscriber's K gives MAC failure.
    let other = Milenage::new_with_opc(&Key128::new([1; 16]), a(OPC));
    assert_eq!(
        usim_check(&other, rand, a(AUTN), 0).unwrap_err(),
        UsimError::MacFailure
    );
}

#[test]
fn sqn_freshness_and_resync() {
    let mil = capture_mil();
    let rand = [0x42; 16];
    let amf = [0x80, 0x00];
    let hss_sqn = 32 * 10;
    let av = generate_vector(&mil, sqn_from_u64(hss_sqn), amf, rand, PLMN);
    // Fresh: UE highest seen is below.
    assert_eq!(
        usim_check(&mil, rand, av.autn, hss_sqn - 32).unwrap().sqn,
        hss_sqn
    );
    // Replay / stale: equal or lower than highest seen -> synch failure.
    let ue_max = 32 * 500 + 7;
    let err = usim_check(&mil, rand, av.autn, ue_max).unwrap_err();
    let UsimError::SynchFailure { auts } = err else {
        panic!("expected synch failure, got {err:?}")
    };
    // HSS recovers SQN_MS from AUTS (MAC-S with AMF 0000).
    assert_eq!(sqn_to_u64(resync_sqn(&mil, rand, auts).unwrap()), ue_max);
    assert_eq!(auts, make_auts(&mil, rand, sqn_from_u64(ue_max)));
    // AUTS's MAC-S uses AMF 0000 (TS 33.102 6.3.3): check it directly.
    let ak_star = mil.f5_star(rand);
    let sqn_ms: [u8; 6] = core::array::from_fn(|i| auts[i] ^ ak_star[i]);
    assert_eq!(sqn_ms, sqn_from_u64(ue_max));
    assert_eq!(auts[6..], mil.f1_star(rand, sqn_ms, [0, 0]));
    // Tampered AUTS is refused.
    let mut bad = auts;
    bad[13] ^= 0x80;
    assert_eq!(resync_sqn(&mil, rand, bad), Err(AuthError::MacFailure));
    // Too far ahead (beyond delta) is also a synch failure.
    let far = generate_vector(&mil, sqn_from_u64(SQN_DELTA + 64), amf, rand, PLMN);
    assert!(matches!(
        usim_check(&mil, rand, far.autn, 32),
        Err(UsimError::SynchFailure { .. })
    ));
    // After resync the HSS issues SQN_MS + 32, which is accepted.
    let next = generate_vector(&mil, sqn_from_u64(ue_max + 32), amf, rand, PLMN);
    assert_eq!(
        usim_check(&mil, rand, next.autn, ue_max).unwrap().sqn,
        ue_max + 32
    );
}

#[test]
fn vector_debug_hides_secrets() {
    let mil = capture_mil();
    let av = generate_vector(&mil, sqn_from_u64(32), [0x80, 0], a(RAND), PLMN);
    let d = format!("{av:?}");
    assert!(d.contains(RAND), "{d}");
    assert!(!d.contains(&hex::encode(&av.xres)), "{d}");
    let ok = usim_check(&mil, av.rand, av.autn, 0).unwrap();
    let d = format!("{ok:?}");
    assert!(!d.contains(&hex::encode(ok.res)), "{d}");
}
