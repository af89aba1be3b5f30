//! HSS behaviour: persistence, SQN never reused across reopen, CSV import,
//! resynchronisation against a UE built from pepc-security, no key leaks.

use pepc_hss::{next_sqn, Hss, HssError, OpKind, PdnType, Subscriber};
use pepc_security::{usim_check, Key128, Milenage, UsimError};
use std::path::PathBuf;

const PLMN: [u8; 3] = [0x09, 0xf1, 0x07];
const K: &str = "465b5ce8b199b49faa5f0a2ee238a6bc";
const OPC: &str = "e8ed289deba952e4283b54e88e6183ca";
const OP: &str = "cdc202d5123e20f62b6d676ac72cb318";

/// Unique temp dir removed on drop (tests run in parallel).
struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("pepc-hss-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn opc() -> [u8; 16] {
    hex::decode(OPC).unwrap().try_into().unwrap()
}

fn sub(imsi: &str) -> Subscriber {
    Subscriber {
        imsi: imsi.into(),
        k: Key128::from_hex(K).unwrap(),
        op_kind: OpKind::Opc(opc()),
        amf: [0x80, 0x00],
        sqn: 0,
        msisdn: "821012345678".into(),
        apn: "internet".into(),
        pdn_type: PdnType::Ipv4v6,
        qci: 9,
        arp_priority: 8,
        ambr_ul_bps: 50_000_000,
        ambr_dl_bps: 100_000_000,
    }
}

fn ue() -> Milenage {
    Milenage::new_with_opc(&Key128::from_hex(K).unwrap(), opc())
}

fn counter_rand() -> impl FnMut() -> [u8; 16] {
    let mut n = 0u128;
    move || {
        n += 1;
        (n.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)).to_be_bytes()
    }
}

#[test]
fn sqn_never_reused_across_reopen() {
    let dir = TempDir::new("reopen");
    let path = dir.0.join("hss.redb");
    let imsi = "999700000000001";
    let mut rand = counter_rand();
    let mut seen = Vec::new();
    {
        let hss = Hss::open(&path).unwrap();
        hss.add(&sub(imsi)).unwrap();
        for _ in 0..3 {
            let v = hss.next_vector(imsi, PLMN, &mut rand).unwrap();
            seen.push(usim_check(&ue(), v.rand, v.autn, 0).unwrap().sqn);
        }
        assert_eq!(hss.get(imsi).unwrap().unwrap().sqn, *seen.last().unwrap());
    } // dropped: simulates a restart
    let hss = Hss::open(&path).unwrap();
    // On disk is the lease's high-water mark: at or above every SQN issued.
    let high_water = hss.get(imsi).unwrap().unwrap().sqn;
    assert!(high_water >= *seen.last().unwrap());
    let v = hss.next_vector(imsi, PLMN, &mut rand).unwrap();
    let sqn = usim_check(&ue(), v.rand, v.autn, *seen.last().unwrap())
        .expect("UE accepts the first vector after restart")
        .sqn;
    assert!(seen.iter().all(|&s| s < sqn));
    assert!(sqn > high_water, "restart must skip the whole old lease");
    // SEQ advances by one per vector, IND by one (mod 32).
    assert_eq!(seen[0], 32 + 1);
    assert_eq!(seen[1], 64 + 2);
    assert_eq!(next_sqn(31), Some(32)); // SEQ 0->1, IND 31->0
    assert_eq!(next_sqn(pepc_security::SQN_MAX), None);
    // A batch is consecutive and durable too.
    let vs = hss.next_vectors(imsi, PLMN, 5, &mut rand).unwrap();
    let mut last = sqn;
    for v in &vs {
        let s = usim_check(&ue(), v.rand, v.autn, last).unwrap().sqn;
        assert!(s > last);
        last = s;
    }
    drop(hss);
    assert!(Hss::open(&path).unwrap().get(imsi).unwrap().unwrap().sqn >= last);
}

#[test]
fn lease_of_one_commits_every_vector() {
    let dir = TempDir::new("lease1");
    let path = dir.0.join("hss.redb");
    let imsi = "999700000000001";
    let mut rand = counter_rand();
    let mut last = 0;
    {
        let hss = Hss::open(&path).unwrap();
        hss.set_lease(1);
        hss.add(&sub(imsi)).unwrap();
        for _ in 0..3 {
            let v = hss.next_vector(imsi, PLMN, &mut rand).unwrap();
            last = usim_check(&ue(), v.rand, v.autn, last).unwrap().sqn;
        }
    }
    assert_eq!(
        Hss::open(&path).unwrap().get(imsi).unwrap().unwrap().sqn,
        last
    );
}

#[test]
fn first_vectors_need_no_commit_and_a_restart_skips_their_lease() {
    let dir = TempDir::new("readahead");
    let path = dir.0.join("hss.redb");
    let imsis: Vec<String> = (1..=10).map(|i| format!("9997000000000{i:02}")).collect();
    let mut rand = counter_rand();
    let mut issued = Vec::new();
    {
        let hss = Hss::open(&path).unwrap();
        for i in &imsis {
            hss.add(&sub(i)).unwrap();
        }
        for i in &imsis[..5] {
            let v = hss.next_vector(i, PLMN, &mut rand).unwrap();
            issued.push(usim_check(&ue(), v.rand, v.autn, 0).unwrap().sqn);
        }
        let st = hss.stats();
        assert_eq!(st.lease_commits, 0, "implicit leases: no fsync per attach");
        assert_eq!(
            st.leased, 10,
            "one read loaded the following subscribers too"
        );
        // Read ahead but nothing issued yet.
        assert_eq!(hss.get(&imsis[5]).unwrap().unwrap().sqn, 0);
    }
    let hss = Hss::open(&path).unwrap();
    for (n, i) in imsis.iter().enumerate() {
        let hw = hss.get(i).unwrap().unwrap().sqn;
        assert!(
            hw >= 32 * 32,
            "{i}: the last generation's whole lease counts as issued"
        );
        if let Some(&s) = issued.get(n) {
            assert!(hw >= s);
        }
        let v = hss.next_vector(i, PLMN, &mut rand).unwrap();
        let s = usim_check(&ue(), v.rand, v.autn, 0).unwrap().sqn;
        assert!(
            s > hw,
            "{i}: after a restart vectors start above the old lease"
        );
    }
    assert_eq!(hss.stats().lease_commits, 0);
}

#[test]
fn sqn_increases_over_many_restarts_with_and_without_use() {
    let dir = TempDir::new("generations");
    let path = dir.0.join("hss.redb");
    let (busy, idle) = ("999700000000001", "999700000000002");
    let mut rand = counter_rand();
    {
        let hss = Hss::open(&path).unwrap();
        hss.add(&sub(busy)).unwrap();
        hss.add(&sub(idle)).unwrap();
    }
    let mut last_busy = 0;
    let mut last_idle = 0;
    for round in 0..6u64 {
        let hss = Hss::open(&path).unwrap();
        // `busy` uses more than one implicit lease in some generations, forcing a
        // durable extension; `idle` authenticates only every third generation.
        let n = if round % 2 == 0 { 40 } else { 3 };
        for _ in 0..n {
            let v = hss.next_vector(busy, PLMN, &mut rand).unwrap();
            last_busy = usim_check(&ue(), v.rand, v.autn, last_busy)
                .unwrap_or_else(|e| panic!("round {round}: {e:?}"))
                .sqn;
        }
        if round % 2 == 0 {
            assert!(
                hss.stats().lease_commits >= 1,
                "40 vectors outgrow the 32-step lease"
            );
        }
        if round % 3 == 0 {
            let v = hss.next_vector(idle, PLMN, &mut rand).unwrap();
            last_idle = usim_check(&ue(), v.rand, v.autn, last_idle)
                .unwrap_or_else(|e| panic!("round {round}: {e:?}"))
                .sqn;
        }
    }
}

/// One vector for `imsis[n]`, checked by a USIM that last saw `last[n]` (so an SQN
/// issued twice or out of order fails here).
fn issue_checked(
    hss: &Hss,
    imsis: &[String],
    n: usize,
    last: &mut [u64],
    rand: &mut impl FnMut() -> [u8; 16],
    when: &str,
) {
    let v = hss.next_vector(&imsis[n], PLMN, rand).unwrap();
    last[n] = usim_check(&ue(), v.rand, v.autn, last[n])
        .unwrap_or_else(|e| panic!("{} {when}: {e:?}", imsis[n]))
        .sqn;
}

#[test]
fn bounded_lease_table_never_reissues_an_sqn() {
    let dir = TempDir::new("evict");
    let path = dir.0.join("hss.redb");
    let imsis: Vec<String> = (1..=12).map(|i| format!("9997000000001{i:02}")).collect();
    let mut rand = counter_rand();
    let mut last = vec![0u64; imsis.len()];
    for restart in 0..3 {
        let hss = Hss::open(&path).unwrap();
        if restart == 0 {
            for i in &imsis {
                hss.add(&sub(i)).unwrap();
            }
        }
        hss.set_max_leased(4);
        // Round-robin over 12 subscribers with room for 4: every subscriber is
        // evicted and reloaded again and again, most with SQNs issued in between.
        for round in 0..5 {
            for n in 0..imsis.len() {
                for _ in 0..(1 + (n + round) % 3) {
                    issue_checked(
                        &hss,
                        &imsis,
                        n,
                        &mut last,
                        &mut rand,
                        &format!("restart {restart}"),
                    );
                }
            }
            assert!(hss.stats().leased <= 4, "{:?}", hss.stats());
        }
        let st = hss.stats();
        assert!(st.evicted >= 50, "{st:?}");
        assert!(
            st.lease_commits >= 1,
            "dirty evictions are committed: {st:?}"
        );
    }
}

#[test]
fn preload_reads_every_subscriber_and_keeps_sqns_fresh_across_restarts() {
    let dir = TempDir::new("preload");
    let path = dir.0.join("hss.redb");
    let imsis: Vec<String> = (1..=30).map(|i| format!("9997000000002{i:02}")).collect();
    let mut rand = counter_rand();
    let mut last = vec![0u64; imsis.len()];
    for restart in 0..3 {
        let hss = Hss::open(&path).unwrap();
        if restart == 0 {
            for i in &imsis {
                hss.add(&sub(i)).unwrap();
            }
        }
        assert_eq!(hss.preload().unwrap(), imsis.len());
        assert_eq!(hss.stats().leased, imsis.len());
        for n in (0..imsis.len()).rev() {
            issue_checked(
                &hss,
                &imsis,
                n,
                &mut last,
                &mut rand,
                &format!("restart {restart}"),
            );
        }
        assert_eq!(hss.stats().lease_commits, 0);
    }
    // Bounded: only as many as the table may hold.
    let hss = Hss::open(&path).unwrap();
    hss.set_max_leased(7);
    assert_eq!(hss.preload().unwrap(), 7);
}

#[test]
fn opens_that_issue_no_vector_do_not_move_sqns() {
    let dir = TempDir::new("lazygen");
    let path = dir.0.join("hss.redb");
    let imsi = "999700000000301";
    let mut rand = counter_rand();
    let first = {
        let hss = Hss::open(&path).unwrap();
        hss.add(&sub(imsi)).unwrap();
        let v = hss.next_vector(imsi, PLMN, &mut rand).unwrap();
        usim_check(&ue(), v.rand, v.autn, 0).unwrap().sqn
    };
    // Subscriber management (list, show, add another) opens the file many times.
    let shown: Vec<u64> = (0..5)
        .map(|k| {
            let hss = Hss::open(&path).unwrap();
            hss.add(&sub(&format!("9997000000004{k:02}"))).unwrap();
            hss.get(imsi).unwrap().unwrap().sqn
        })
        .collect();
    assert!(shown.iter().all(|&s| s == shown[0]), "{shown:?}");
    assert!(shown[0] >= first);
    // The next node run starts just above the last run's implicit lease.
    let hss = Hss::open(&path).unwrap();
    let v = hss.next_vector(imsi, PLMN, &mut rand).unwrap();
    let next = usim_check(&ue(), v.rand, v.autn, first).unwrap().sqn;
    assert!(next > shown[0]);
    assert_eq!(next, pepc_hss::next_sqn(shown[0]).unwrap());
}

#[test]
fn crud_and_batch_across_subscribers() {
    let hss = Hss::in_memory().unwrap();
    hss.add(&sub("001010000000002")).unwrap();
    hss.add(&sub("001010000000001")).unwrap();
    let mut s = sub("001010000000001");
    s.apn = "ims".into();
    hss.add(&s).unwrap(); // upsert
    let list = hss.list().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].imsi, "001010000000001");
    assert_eq!(list[0].apn, "ims");
    assert_eq!(hss.get("001010000000001").unwrap().unwrap(), s);
    assert!(hss.get("001019999999999").unwrap().is_none());

    let mut rand = counter_rand();
    let out = hss
        .next_vector_batch(
            &["001010000000001", "001010000000404", "001010000000002"],
            PLMN,
            2,
            &mut rand,
        )
        .unwrap();
    assert_eq!(out[0].as_ref().unwrap().len(), 2);
    assert!(matches!(&out[1], Err(HssError::UnknownImsi(i)) if i == "001010000000404"));
    assert_eq!(out[2].as_ref().unwrap().len(), 2);
    assert!(matches!(
        hss.next_vector("001010000000404", PLMN, &mut rand),
        Err(HssError::UnknownImsi(_))
    ));

    assert!(hss.remove("001010000000002").unwrap());
    assert!(!hss.remove("001010000000002").unwrap());
    assert_eq!(hss.list().unwrap().len(), 1);
    // Invalid subscribers are refused, naming the field.
    let mut bad = sub("12ab");
    assert!(matches!(
        hss.add(&bad),
        Err(HssError::Invalid { field: "imsi", .. })
    ));
    bad.imsi = "001010000000009".into();
    bad.arp_priority = 0;
    assert!(matches!(
        hss.add(&bad),
        Err(HssError::Invalid { field: "arp", .. })
    ));
}

#[test]
fn resync_flow_with_ue() {
    let hss = Hss::in_memory().unwrap();
    let imsi = "999700000000002";
    hss.add(&sub(imsi)).unwrap();
    let mut rand = counter_rand();
    // The USIM has seen far higher SQNs (e.g. used against another core).
    let ue_max = 32 * 1000 + 17;
    let v = hss.next_vector(imsi, PLMN, &mut rand).unwrap();
    let auts = match usim_check(&ue(), v.rand, v.autn, ue_max) {
        Err(UsimError::SynchFailure { auts }) => auts,
        other => panic!("expected synch failure, got {other:?}"),
    };
    // A corrupted AUTS is refused and leaves SQN alone.
    let before = hss.get(imsi).unwrap().unwrap().sqn;
    let mut bad = auts;
    bad[7] ^= 1;
    assert!(matches!(
        hss.resync(imsi, v.rand, bad),
        Err(HssError::ResyncMacFailure(_))
    ));
    assert_eq!(hss.get(imsi).unwrap().unwrap().sqn, before);
    assert!(matches!(
        hss.resync("999709999999999", v.rand, auts),
        Err(HssError::UnknownImsi(_))
    ));

    hss.resync(imsi, v.rand, auts).unwrap();
    assert_eq!(hss.get(imsi).unwrap().unwrap().sqn, ue_max);
    let v2 = hss.next_vector(imsi, PLMN, &mut rand).unwrap();
    let ok = usim_check(&ue(), v2.rand, v2.autn, ue_max).expect("fresh after resync");
    assert_eq!(ok.sqn, next_sqn(ue_max).unwrap());
    assert_eq!(v2.xres, ok.res);
    // UE and HSS agree on KASME.
    let kasme = pepc_security::kasme(&ok.ck, &ok.ik, PLMN, v2.autn[..6].try_into().unwrap());
    assert_eq!(kasme, v2.kasme);
}

#[test]
fn debug_never_shows_keys() {
    let mut s = sub("999700000000003");
    let d = format!("{s:?}");
    assert!(d.contains("999700000000003"));
    assert!(!d.to_lowercase().contains(K), "{d}");
    assert!(!d.to_lowercase().contains(OPC), "{d}");
    s.op_kind = OpKind::Op(hex::decode(OP).unwrap().try_into().unwrap());
    let d = format!("{s:?} {:?}", Hss::in_memory().unwrap());
    assert!(!d.to_lowercase().contains(OP), "{d}");
    assert!(!d.to_lowercase().contains(K), "{d}");
    // Vectors from the store hide XRES and KASME too.
    let hss = Hss::in_memory().unwrap();
    hss.add(&s).unwrap();
    let v = hss.next_vector(&s.imsi, PLMN, &mut counter_rand()).unwrap();
    let d = format!("{v:?} {:?}", hss.list().unwrap());
    assert!(!d.contains(&hex::encode(&v.xres)), "{d}");
    assert!(!d.to_lowercase().contains(K), "{d}");
}

const HEADER: &str = "imsi,k,opc,op,amf,sqn,msisdn,apn,pdn_type,qci,arp,ambr_ul,ambr_dl\n";

fn write_csv(dir: &TempDir, name: &str, body: &str) -> PathBuf {
    let p = dir.0.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

#[test]
fn csv_import_good_file() {
    let dir = TempDir::new("csvgood");
    let body = format!(
        "{HEADER}# comment line\n\
         999700000000010,{K},{OPC},,8000,0,821000000010,internet,ipv4,9,8,1000000,2000000\n\
         999700000000011, {K} ,,{OP},8000,4096,,ims,IPv4v6,5,1,128000,128000\n"
    );
    let p = write_csv(&dir, "good.csv", &body);
    let hss = Hss::in_memory().unwrap();
    assert_eq!(hss.import_csv(&p).unwrap(), 2);
    let a = hss.get("999700000000010").unwrap().unwrap();
    assert_eq!(a.op_kind, OpKind::Opc(opc()));
    assert_eq!((a.qci, a.arp_priority, a.ambr_dl_bps), (9, 8, 2_000_000));
    let b = hss.get("999700000000011").unwrap().unwrap();
    assert_eq!(b.sqn, 4096);
    assert_eq!(b.pdn_type, PdnType::Ipv4v6);
    assert!(matches!(b.op_kind, OpKind::Op(_)));
    // A subscriber stored with OP authenticates against a USIM holding OPc.
    let v = hss.next_vector(&b.imsi, PLMN, &mut counter_rand()).unwrap();
    let usim = Milenage::new_with_op(
        &Key128::from_hex(K).unwrap(),
        hex::decode(OP).unwrap().try_into().unwrap(),
    );
    assert_eq!(
        usim_check(&usim, v.rand, v.autn, 4096).unwrap().sqn,
        next_sqn(4096).unwrap()
    );
}

#[test]
fn csv_import_bad_lines_name_line_and_column() {
    let dir = TempDir::new("csvbad");
    let good = format!("999700000000020,{K},{OPC},,8000,0,1,internet,ipv4,9,8,1,1\n");
    let cases: &[(&str, u64, &str)] = &[
        (
            "999700000000021,465b,{OPC},,8000,0,1,internet,ipv4,9,8,1,1",
            3,
            "k",
        ),
        (
            "999700000000021,{K},,,8000,0,1,internet,ipv4,9,8,1,1",
            3,
            "opc",
        ),
        (
            "999700000000021,{K},{OPC},{OP},8000,0,1,internet,ipv4,9,8,1,1",
            3,
            "opc",
        ),
        (
            "999700000000021,{K},{OPC},,80,0,1,internet,ipv4,9,8,1,1",
            3,
            "amf",
        ),
        (
            "999700000000021,{K},{OPC},,8000,-1,1,internet,ipv4,9,8,1,1",
            3,
            "sqn",
        ),
        (
            "999700000000021,{K},{OPC},,8000,0,1,internet,ipx,9,8,1,1",
            3,
            "pdn_type",
        ),
        (
            "999700000000021,{K},{OPC},,8000,0,1,internet,ipv4,300,8,1,1",
            3,
            "qci",
        ),
        (
            "999700000000021,{K},{OPC},,8000,0,1,internet,ipv4,9,16,1,1",
            3,
            "arp",
        ),
        (
            "999700000000021,{K},{OPC},,8000,0,1,internet,ipv4,9,8,x,1",
            3,
            "ambr_ul",
        ),
        (
            "99970000000002x,{K},{OPC},,8000,0,1,internet,ipv4,9,8,1,1",
            3,
            "imsi",
        ),
    ];
    let hss = Hss::in_memory().unwrap();
    for (i, (line, want_line, want_col)) in cases.iter().enumerate() {
        let line = line
            .replace("{K}", K)
            .replace("{OPC}", OPC)
            .replace("{OP}", OP);
        let p = write_csv(
            &dir,
            &format!("bad{i}.csv"),
            &format!("{HEADER}{good}{line}\n"),
        );
        match hss.import_csv(&p) {
            Err(HssError::Csv { line, column, what }) => {
                assert_eq!(
                    (line, column.as_str()),
                    (*want_line, *want_col),
                    "case {i}: {what}"
                );
                assert!(
                    !what.to_lowercase().contains(K),
                    "key leaked in error: {what}"
                );
            }
            other => panic!("case {i}: expected CSV error, got {other:?}"),
        }
        // All-or-nothing: the good line before the bad one was not stored.
        assert!(hss.list().unwrap().is_empty(), "case {i}");
    }
    // Missing required header columns.
    let p = write_csv(&dir, "nohdr.csv", "imsi,opc\n1,2\n");
    assert!(matches!(
        hss.import_csv(&p),
        Err(HssError::Csv { line: 1, ref column, .. }) if column == "k"
    ));
    let p = write_csv(&dir, "noop.csv", "imsi,k\n1,2\n");
    assert!(matches!(
        hss.import_csv(&p),
        Err(HssError::Csv { line: 1, ref column, .. }) if column == "opc"
    ));
    // Optional columns absent or empty take the defaults.
    let p = write_csv(
        &dir,
        "minimal.csv",
        &format!("imsi,k,opc,apn\n999700000000031,{K},{OPC},\n"),
    );
    assert_eq!(hss.import_csv(&p).unwrap(), 1);
    let s = hss.get("999700000000031").unwrap().unwrap();
    assert_eq!(
        (s.apn.as_str(), s.qci, s.arp_priority, s.amf),
        ("internet", 9, 8, [0x80, 0])
    );
    hss.remove("999700000000031").unwrap();
    // Unreadable file.
    assert!(matches!(
        hss.import_csv(dir.0.join("missing.csv")),
        Err(HssError::Csv { .. })
    ));
}
