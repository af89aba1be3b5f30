//! The S6a client's cost per AIR+ULR with answers, without sockets (the proxy's CPU
//! per attach; the target is ≥ 50K AIR+ULR per core-second). Ignored by default:
//! `cargo test --release -p pepc-diameter --test throughput -- --ignored --nocapture`.

use pepc_diameter::base::{self, Action, Client};
use pepc_diameter::codec::{self, AvpWriter, MessageView};
use pepc_diameter::dict::{avp, avp3, VENDOR_3GPP as V};
use pepc_diameter::s6a::{S6aClient, S6aConfig};
use pepc_seams::{HssRef, HssRequest};
use std::time::{Duration, Instant};

fn answer(req: &[u8], body: impl FnOnce(&mut AvpWriter<'_>)) -> Vec<u8> {
    let v = MessageView::new_checked(req).unwrap();
    let mut b = vec![];
    codec::begin(
        &mut b,
        0,
        v.command_code(),
        v.application_id(),
        v.hop_by_hop(),
        v.end_to_end(),
    );
    let mut w = AvpWriter::new(&mut b);
    w.str(avp::SESSION_ID, 0, true, "mme.pepc.test;1;1");
    w.u32(avp::RESULT_CODE, 0, true, 2001);
    w.str(avp::ORIGIN_HOST, 0, true, "hss.test");
    w.str(avp::ORIGIN_REALM, 0, true, "test");
    body(&mut w);
    codec::finish(&mut b);
    b
}

#[test]
#[ignore]
fn air_and_ulr_per_second() {
    let t = Instant::now();
    let mut cfg = base::Config::new("mme.pepc.test", "pepc.test");
    cfg.watchdog = Duration::from_secs(3600);
    let s6a = S6aConfig {
        destination_realm: "test".into(),
        destination_host: None,
        visited_plmn: [0, 0xf1, 0x10],
    };
    let mut c = S6aClient::new(Client::new(cfg, 1, t, 1), s6a, 1);
    c.handle_timeout(t);
    assert_eq!(c.base().poll_action(), Some(Action::Connect(0)));
    c.base().on_connected(0, t);
    let cer = std::mem::take(c.base().tx(0));
    c.base().on_bytes(
        0,
        t,
        &answer(&cer, |w| {
            w.grouped(avp::VENDOR_SPECIFIC_APPLICATION_ID, 0, true, |w| {
                w.u32(avp::VENDOR_ID, 0, true, V);
                w.u32(avp::AUTH_APPLICATION_ID, 0, true, 16777251);
            })
        }),
    );
    let aia = |req: &[u8]| {
        answer(req, |w| {
            w.grouped(avp3::AUTHENTICATION_INFO, V, true, |w| {
                w.grouped(avp3::E_UTRAN_VECTOR, V, true, |w| {
                    w.octets(avp3::RAND, V, true, &[1; 16]);
                    w.octets(avp3::XRES, V, true, &[2; 8]);
                    w.octets(avp3::AUTN, V, true, &[3; 16]);
                    w.octets(avp3::KASME, V, true, &[4; 32]);
                })
            })
        })
    };
    let ula = |req: &[u8]| {
        answer(req, |w| {
            w.grouped(avp3::SUBSCRIPTION_DATA, V, true, |w| {
                w.octets(avp3::MSISDN, V, true, &[0x64, 0x21, 0xf3]);
                w.grouped(avp3::APN_CONFIGURATION_PROFILE, V, true, |w| {
                    w.u32(avp3::CONTEXT_IDENTIFIER, V, true, 1);
                    w.grouped(avp3::APN_CONFIGURATION, V, true, |w| {
                        w.u32(avp3::CONTEXT_IDENTIFIER, V, true, 1);
                        w.i32(avp3::PDN_TYPE, V, true, 0);
                        w.str(avp::SERVICE_SELECTION, 0, true, "internet");
                        w.grouped(avp3::EPS_SUBSCRIBED_QOS_PROFILE, V, true, |w| {
                            w.i32(avp3::QOS_CLASS_IDENTIFIER, V, true, 9);
                            w.grouped(avp3::ALLOCATION_RETENTION_PRIORITY, V, true, |w| {
                                w.u32(avp3::PRIORITY_LEVEL, V, true, 8)
                            });
                        });
                    });
                });
            })
        })
    };
    let n = 100_000u32;
    let mut got = Vec::with_capacity(2);
    let start = Instant::now();
    for k in 0..n {
        let r = HssRef {
            mme_ue_id: k,
            seq: 1,
        };
        c.submit(
            t,
            HssRequest::Profile {
                r,
                imsi: 1010000000001,
            },
        );
        c.submit(
            t,
            HssRequest::Vector {
                r,
                imsi: 1010000000001,
                plmn: [0, 0xf1, 0x10],
            },
        );
        let tx = std::mem::take(c.base().tx(0));
        let first = MessageView::new_checked(&tx[..]).unwrap().length() as usize;
        // The HSS's side (building answers) is inside the timing: an upper bound.
        let (a1, a2) = (ula(&tx[..first]), aia(&tx[first..]));
        c.base().on_bytes(0, t, &a1);
        c.base().on_bytes(0, t, &a2);
        c.process();
        c.take_answers(&mut got);
        assert!(got.len() == 2 && got.iter().all(|a| a.result.is_ok()));
        got.clear();
    }
    let dt = start.elapsed();
    println!(
        "{n} AIR+ULR pairs with answers in {dt:?}: {:.0} pairs/s, {:.2} µs per pair",
        n as f64 / dt.as_secs_f64(),
        dt.as_secs_f64() * 1e6 / n as f64
    );
}
