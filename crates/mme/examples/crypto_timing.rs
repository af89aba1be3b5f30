//! Native cost (ns) of the security work in one attach, on the MME side: the HSS's
//! vector (Milenage f1-f5 + KASME), the NAS security context from KASME (K_NASint,
//! K_NASenc; `nas_context_ns`), the same with the first message it protects, which
//! sets up the algorithms' key schedules (`nas_context_first_protect_ns`: what an
//! attach pays), KeNB, and protecting one short NAS message. `cargo run --release --example crypto_timing -p pepc-mme`

use pepc_mme::nasx::{self, SecCtx};
use pepc_security::{generate_vector, kenb, Eea, Eia, Key128, Milenage};
use std::hint::black_box;
use std::time::Instant;

fn time<R>(n: u32, mut f: impl FnMut(u32) -> R) -> f64 {
    for i in 0..n / 10 {
        black_box(f(i));
    }
    let t = Instant::now();
    for i in 0..n {
        black_box(f(i));
    }
    t.elapsed().as_nanos() as f64 / f64::from(n)
}

fn main() {
    let n = 200_000;
    let k = Key128::from_hex("465B5CE8B199B49FAA5F0A2EE238A6BC").expect("key");
    let mil = Milenage::new_with_opc(&k, [7; 16]);
    let plmn = [0x00, 0xf1, 0x10];
    let vector = time(n, |i| {
        generate_vector(
            &mil,
            [0, 0, 0, 0, 0, i as u8],
            [0x80, 0],
            [i as u8; 16],
            plmn,
        )
    });
    let kasme = generate_vector(&mil, [0, 0, 0, 0, 0, 1], [0x80, 0], [1; 16], plmn)
        .kasme
        .clone();
    let ctx = time(n, |_| SecCtx::new(kasme.clone(), 0, Eea::Eea2, Eia::Eia2));
    let msg = nasx::NasEpsMessage::new_emm(nasx::NasEmmInformation::new());
    let first = time(n, |_| {
        let mut s = SecCtx::new(kasme.clone(), 0, Eea::Eea2, Eia::Eia2).expect("context");
        s.protect(&msg, false, nasx::Direction::Downlink)
            .expect("protect")
    });
    let kenb_ns = time(n, |i| kenb(&kasme, i));
    let kdf_ns = time(n, |_| pepc_security::KasmeKdf::new(&kasme));
    let kdf = pepc_security::KasmeKdf::new(&kasme);
    let nas_keys_ns = time(n, |_| kdf.nas_keys(2, 2));
    let (enc, int) = kdf.nas_keys(2, 2);
    let keyed_ns = time(n, |_| {
        (
            pepc_security::EiaKeyed::new(Eia::Eia2, &int),
            pepc_security::EeaKeyed::new(Eea::Eea2, &enc),
        )
    });
    let mut sec = SecCtx::new(kasme.clone(), 0, Eea::Eea2, Eia::Eia2).expect("context");
    let protect = time(n, |_| {
        sec.protect(&msg, false, nasx::Direction::Downlink)
            .expect("protect")
    });
    println!(
        "{{\"vector_ns\":{vector:.0},\"nas_context_ns\":{ctx:.0},\"nas_context_first_protect_ns\":{first:.0},\"kasme_kdf_ns\":{kdf_ns:.0},\"nas_keys_ns\":{nas_keys_ns:.0},\"eia2_eea2_setup_ns\":{keyed_ns:.0},\"kenb_ns\":{kenb_ns:.0},\"protect_ns\":{protect:.0}}}"
    );
}
