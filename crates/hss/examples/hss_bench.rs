//! Hand-run cost measurement (not a test):
//! `cargo run --release -p pepc-hss --example hss_bench [DIR]`
//! Measures next_vector (served from implicit leases: no fsync), next_vectors(32)
//! (a durable lease extension per call) and next_vector_batch, on disk and in memory,
//! and the first vector of subscribers not yet in memory, in IMSI and shuffled order.

use pepc_hss::{Hss, OpKind, PdnType, Subscriber};
use pepc_security::{generate_vector, sqn_from_u64, Key128};
use std::time::Instant;

const PLMN: [u8; 3] = [0x09, 0xf1, 0x07];

fn sub(i: usize) -> Subscriber {
    Subscriber {
        imsi: format!("99970{i:010}"),
        k: Key128::new([0x46; 16]),
        op_kind: OpKind::Opc([0xe8; 16]),
        amf: [0x80, 0],
        sqn: 0,
        msisdn: String::new(),
        apn: "internet".into(),
        pdn_type: PdnType::Ipv4,
        qci: 9,
        arp_priority: 8,
        ambr_ul_bps: 1,
        ambr_dl_bps: 1,
    }
}

fn run(label: &str, hss: &Hss) {
    let subs: Vec<Subscriber> = (0..1000).map(sub).collect();
    hss.add_many(&subs).unwrap();
    let imsis: Vec<&str> = subs.iter().map(|s| s.imsi.as_str()).collect();
    let mut n = 0u128;
    let mut rand = || {
        n += 1;
        n.to_be_bytes()
    };
    let calls = 2000;
    let t = Instant::now();
    for i in 0..calls {
        hss.next_vector(imsis[i % imsis.len()], PLMN, &mut rand)
            .unwrap();
    }
    let per = t.elapsed() / calls as u32;
    println!(
        "{label}: next_vector            {per:>10.2?}/vector ({:.0}/s)",
        1.0 / per.as_secs_f64()
    );

    let t = Instant::now();
    for i in 0..200 {
        hss.next_vectors(imsis[i % imsis.len()], PLMN, 32, &mut rand)
            .unwrap();
    }
    let per = t.elapsed() / (200 * 32);
    println!(
        "{label}: next_vectors(n=32)     {per:>10.2?}/vector ({:.0}/s)",
        1.0 / per.as_secs_f64()
    );

    let t = Instant::now();
    for _ in 0..20 {
        hss.next_vector_batch(&imsis, PLMN, 1, &mut rand).unwrap();
    }
    let per = t.elapsed() / (20 * imsis.len() as u32);
    println!(
        "{label}: batch(1000 IMSIs x 1)  {per:>10.2?}/vector ({:.0}/s)",
        1.0 / per.as_secs_f64()
    );
}

/// First vector of each of 20,000 subscribers (nothing in memory yet), asked in IMSI
/// order (the read-ahead serves 256 per read) and in a shuffled order (one read each).
fn first_vectors(label: &str, hss_of: impl Fn() -> Hss) {
    let n = 20_000;
    let subs: Vec<Subscriber> = (0..n).map(sub).collect();
    for shuffled in [false, true] {
        let hss = hss_of();
        hss.add_many(&subs).unwrap();
        let mut order: Vec<usize> = (0..n).collect();
        if shuffled {
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            for i in (1..n).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                order.swap(i, (x % (i as u64 + 1)) as usize);
            }
        }
        let mut r = 0u128;
        let mut rand = || {
            r += 1;
            r.to_be_bytes()
        };
        let t = Instant::now();
        for &i in &order {
            hss.next_vector(&subs[i].imsi, PLMN, &mut rand).unwrap();
        }
        let per = t.elapsed() / n as u32;
        println!(
            "{label}: first vector, {:8} {per:>10.2?}/subscriber",
            if shuffled { "shuffled" } else { "in order" }
        );
    }
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let path = dir.join(format!("pepc-hss-bench-{}.redb", std::process::id()));
    {
        let hss = Hss::open(&path).unwrap();
        run("disk  ", &hss);
    }
    let _ = std::fs::remove_file(&path);
    run("memory", &Hss::in_memory().unwrap());
    first_vectors("memory", || Hss::in_memory().unwrap());

    // Pure crypto cost (Milenage + KASME) for reference.
    let mil = pepc_security::Milenage::new_with_opc(&Key128::new([0x46; 16]), [0xe8; 16]);
    let t = Instant::now();
    let n = 100_000u32;
    for i in 0..n {
        std::hint::black_box(generate_vector(
            &mil,
            sqn_from_u64(i as u64),
            [0x80, 0],
            [i as u8; 16],
            PLMN,
        ));
    }
    let per = t.elapsed() / n;
    println!(
        "crypto: generate_vector          {per:>10.2?}/vector ({:.0}/s)",
        1.0 / per.as_secs_f64()
    );
}
