//! GTP-U golden packets written by hand from TS 29.281 §5.1/§5.2 and §7.

use pepc_wire::gtpu::{self, ext, GtpuPacket, GtpuRepr, Ie};
use pepc_wire::{PacketBuf, WireError};
use std::net::{IpAddr, Ipv4Addr};

/// G-PDU, no optional fields: flags 0x30 (v1, PT), type 255, length 4, TEID 1.
const PLAIN: &[u8] = &[
    0x30, 0xff, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef,
];

/// G-PDU with S flag: seq 0x1234, N-PDU and next-ext octets present but unused.
const WITH_SEQ: &[u8] = &[
    0x32, 0xff, 0x00, 0x08, 0x00, 0x00, 0x00, 0x02, 0x12, 0x34, 0x00, 0x00, 0xab, 0xcd, 0xef, 0x01,
];

/// G-PDU with E flag and a PDU Session Container (0x85, §5.2.2.7 / TS 38.415):
/// UL PDU SESSION INFORMATION (type 1), QFI 9.
const WITH_PSC: &[u8] = &[
    0x34, 0xff, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x03, // header, length 12
    0x00, 0x00, 0x00, 0x85, // seq, N-PDU, next = PDU session container
    0x01, 0x10, 0x09, 0x00, // len 1 unit, content 10 09, next none
    0x45, 0x00, 0x00, 0x00, // 4 bytes of T-PDU
];

/// E+S+PN, a chain UDP Port (0x40) → unknown-but-skippable 0x21 (2 units) → 0x85.
const CHAIN: &[u8] = &[
    0x37, 0xff, 0x00, 0x18, 0xaa, 0xbb, 0xcc, 0xdd, // length 24
    0x00, 0x07, 0x42, 0x40, // seq 7, N-PDU 0x42, next UDP port
    0x01, 0x08, 0x68, 0x21, // UDP port 2152, next 0x21
    0x02, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x85, // 0x21: 6 content bytes, next 0x85
    0x01, 0x00, 0x05, 0x00, // PSC: DL (type 0), QFI 5
    0x99, 0x98, 0x97, 0x96,
];

#[test]
fn plain_gpdu() {
    let p = GtpuPacket::new_checked(PLAIN).unwrap();
    assert_eq!(
        (p.version(), p.flags(), p.msg_type()),
        (1, 0x30, gtpu::G_PDU)
    );
    assert_eq!((p.length(), p.teid()), (4, 1));
    assert_eq!((p.seq(), p.npdu(), p.next_ext_type()), (None, None, None));
    assert_eq!(p.header_len(), 8);
    assert_eq!(p.payload(), &[0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(p.extensions().count(), 0);
}

#[test]
fn gpdu_with_sequence_number() {
    let p = GtpuPacket::new_checked(WITH_SEQ).unwrap();
    assert_eq!(
        (p.seq(), p.npdu(), p.next_ext_type()),
        (Some(0x1234), None, None)
    );
    assert_eq!(p.header_len(), 12);
    assert_eq!(p.payload(), &[0xab, 0xcd, 0xef, 0x01]);
}

#[test]
fn gpdu_with_pdu_session_container() {
    let p = GtpuPacket::new_checked(WITH_PSC).unwrap();
    assert_eq!(p.seq(), None);
    assert_eq!(p.next_ext_type(), Some(ext::PDU_SESSION_CONTAINER));
    let e: Vec<_> = p.extensions().collect();
    assert_eq!(e, vec![(0x85, &[0x10, 0x09][..])]);
    assert_eq!(p.header_len(), 16);
    assert_eq!(p.payload(), &[0x45, 0, 0, 0]);
}

#[test]
fn extension_chain_skips_non_comprehension_required() {
    let p = GtpuPacket::new_checked(CHAIN).unwrap();
    assert_eq!(
        (p.seq(), p.npdu(), p.teid()),
        (Some(7), Some(0x42), 0xaabb_ccdd)
    );
    let e: Vec<_> = p.extensions().collect();
    assert_eq!(
        e,
        vec![
            (0x40, &[0x08, 0x68][..]),
            (0x21, &[1, 2, 3, 4, 5, 6][..]),
            (0x85, &[0x00, 0x05][..])
        ]
    );
    assert_eq!(p.header_len(), 28);
    assert_eq!(p.payload(), &[0x99, 0x98, 0x97, 0x96]);
    // An unknown type with high bits 01 is also skippable.
    let mut v = CHAIN.to_vec();
    v[15] = 0x41;
    let p = GtpuPacket::new_checked(&v[..]).unwrap();
    assert_eq!(p.extensions().nth(1).unwrap().0, 0x41);
}

#[test]
fn repr_round_trips_every_golden() {
    for g in [PLAIN, WITH_SEQ, WITH_PSC, CHAIN] {
        let p = GtpuPacket::new_checked(g).unwrap();
        let r = GtpuRepr::parse(&p).unwrap();
        assert_eq!(r.header_len(), p.header_len());
        assert_eq!(r.payload_len, p.payload().len());
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut GtpuPacket::new_unchecked(&mut out[..]))
            .unwrap();
        out[r.header_len()..].copy_from_slice(p.payload());
        assert_eq!(out, g);
    }
    let r = GtpuRepr::parse(&GtpuPacket::new_checked(CHAIN).unwrap()).unwrap();
    assert_eq!(r.ext.len(), 3);
    assert_eq!((r.seq, r.npdu), (Some(7), Some(0x42)));
}

#[test]
fn repr_emit_rejects_bad_extension_content_and_small_buffers() {
    let mut r = GtpuRepr::gpdu(1, 0);
    r.ext.push((0x85, vec![1, 2, 3]));
    let mut out = [0u8; 64];
    assert!(matches!(
        r.emit(&mut GtpuPacket::new_unchecked(&mut out[..])),
        Err(WireError::BadLength { .. })
    ));
    let r = GtpuRepr::gpdu(1, 0);
    assert!(matches!(
        r.emit(&mut GtpuPacket::new_unchecked(&mut out[..7])),
        Err(WireError::NoRoom { need: 8, have: 7 })
    ));
    assert!(matches!(
        GtpuRepr::gpdu(1, 70_000).emit(&mut GtpuPacket::new_unchecked(&mut out[..])),
        Err(WireError::BadLength { .. })
    ));
}

#[test]
fn truncated_at_every_length() {
    for g in [PLAIN, WITH_SEQ, WITH_PSC, CHAIN] {
        for cut in 0..g.len() {
            match GtpuPacket::new_checked(&g[..cut]) {
                Err(WireError::Truncated { need, have }) => {
                    assert_eq!(have, cut);
                    assert!(need > cut);
                }
                other => panic!("cut {cut}: {other:?}"),
            }
        }
        // Longer buffers are fine: the length field bounds the payload.
        let mut long = g.to_vec();
        long.extend([0xee; 5]);
        let p = GtpuPacket::new_checked(&long[..]).unwrap();
        assert_eq!(p.payload(), GtpuPacket::new_checked(g).unwrap().payload());
    }
}

#[test]
fn bad_headers_are_named() {
    let mut v = PLAIN.to_vec();
    v[0] = 0x50; // version 2
    assert_eq!(
        GtpuPacket::new_checked(&v[..]).err(),
        Some(WireError::BadVersion(2))
    );
    v[0] = 0x10; // version 0
    assert_eq!(
        GtpuPacket::new_checked(&v[..]).err(),
        Some(WireError::BadVersion(0))
    );
    v[0] = 0x20; // PT = 0: GTP'
    assert_eq!(
        GtpuPacket::new_checked(&v[..]).err(),
        Some(WireError::NotGtpu)
    );

    // Zero-length extension header.
    let mut z = WITH_PSC.to_vec();
    z[12] = 0;
    assert!(matches!(
        GtpuPacket::new_checked(&z[..]),
        Err(WireError::BadLength { value: 0, .. })
    ));
    // Unknown comprehension-required types (10xxxxxx and 11xxxxxx).
    for t in [0x8f, 0xbf, 0xcf, 0xff] {
        let mut u = WITH_PSC.to_vec();
        u[11] = t;
        assert_eq!(
            GtpuPacket::new_checked(&u[..]).err(),
            Some(WireError::UnknownExtension(t))
        );
    }
    // Unknown comprehension-required type later in the chain.
    let mut u = CHAIN.to_vec();
    u[23] = 0x9a;
    assert_eq!(
        GtpuPacket::new_checked(&u[..]).err(),
        Some(WireError::UnknownExtension(0x9a))
    );
    // Extension running past the length field.
    let mut p = WITH_PSC.to_vec();
    p[12] = 3;
    assert!(matches!(
        GtpuPacket::new_checked(&p[..]),
        Err(WireError::BadLength { .. })
    ));
    // Optional-field flags with a length too short for them.
    let s = [0x32, 0xff, 0x00, 0x02, 0, 0, 0, 1, 0, 0];
    assert!(matches!(
        GtpuPacket::new_checked(&s[..]),
        Err(WireError::BadLength { .. })
    ));
    // Chain needing more extensions than the message has.
    let mut e = WITH_PSC.to_vec();
    e[15] = 0x85; // "another PSC follows": payload byte 0x45 read as its length runs past the end
    assert!(GtpuPacket::new_checked(&e[..]).is_err());
}

#[test]
fn encap_decap_round_trip_and_errors() {
    let inner: Vec<u8> = (0..100u8).collect();
    let mut b = PacketBuf::new();
    b.fill(&inner);
    gtpu::encap_gpdu(&mut b, 0xfeed_f00d).unwrap();
    let p = GtpuPacket::new_checked(b.as_slice()).unwrap();
    assert_eq!(
        (p.teid(), p.length(), p.payload()),
        (0xfeed_f00d, 100, &inner[..])
    );
    assert_eq!(gtpu::decap_gpdu(&mut b).unwrap(), 0xfeed_f00d);
    assert_eq!(b.as_slice(), &inner[..]);

    // Decap of a G-PDU with extensions and trailing padding keeps exactly the T-PDU.
    let mut c = CHAIN.to_vec();
    c.extend([0; 6]);
    b.fill(&c);
    assert_eq!(gtpu::decap_gpdu(&mut b).unwrap(), 0xaabb_ccdd);
    assert_eq!(b.as_slice(), &[0x99, 0x98, 0x97, 0x96]);

    // No headroom left.
    b.fill(&inner);
    while b.prepend(8).is_some() {}
    let room = b.headroom();
    assert_eq!(
        gtpu::encap_gpdu(&mut b, 1),
        Err(WireError::NoRoom {
            need: 8,
            have: room
        })
    );
    // Decap errors leave the buffer alone.
    b.fill(&PLAIN[..10]);
    assert!(matches!(
        gtpu::decap_gpdu(&mut b),
        Err(WireError::Truncated { .. })
    ));
    assert_eq!(b.as_slice(), &PLAIN[..10]);
}

#[test]
fn echo_request_and_response() {
    let mut req = [0u8; 32];
    let n = gtpu::echo_request(0x1234, &mut req).unwrap();
    assert_eq!(
        &req[..n],
        &[0x32, 0x01, 0x00, 0x04, 0, 0, 0, 0, 0x12, 0x34, 0, 0]
    );
    let rq = GtpuPacket::new_checked(&req[..n]).unwrap();
    let e = gtpu::parse_echo(&rq).unwrap();
    assert_eq!((e.response, e.seq, e.recovery), (false, Some(0x1234), None));

    let mut resp = [0u8; 32];
    let m = gtpu::echo_response(&rq, &mut resp).unwrap();
    // §7.2.2: same seq, TEID 0, Recovery IE (14) with restart counter 0.
    assert_eq!(
        &resp[..m],
        &[0x32, 0x02, 0x00, 0x06, 0, 0, 0, 0, 0x12, 0x34, 0, 0, 14, 0]
    );
    let rp = GtpuPacket::new_checked(&resp[..m]).unwrap();
    assert_eq!(rp.ies().collect::<Vec<_>>(), vec![Ok(Ie::Recovery(0))]);
    let e = gtpu::parse_echo(&rp).unwrap();
    assert_eq!(
        (e.response, e.seq, e.recovery),
        (true, Some(0x1234), Some(0))
    );

    // Responding to a non-request, or into a short buffer, is an error.
    let mut other = [0u8; 32];
    assert!(gtpu::echo_response(&rp, &mut other).is_err());
    assert!(matches!(
        gtpu::echo_response(&rq, &mut resp[..13]),
        Err(WireError::NoRoom { need: 14, have: 13 })
    ));
    // A response without Recovery is rejected by the parser.
    let bad = [0x32, 0x02, 0x00, 0x04, 0, 0, 0, 0, 0x12, 0x34, 0, 0];
    assert!(gtpu::parse_echo(&GtpuPacket::new_checked(&bad[..]).unwrap()).is_err());
}

#[test]
fn error_indication_layout() {
    let mut out = [0u8; 64];
    let n =
        gtpu::error_indication(0x1122_3344, Ipv4Addr::new(10, 0, 0, 1), 2152, &mut out).unwrap();
    #[rustfmt::skip]
    let want = [
        0x36, 26, 0x00, 0x14, 0, 0, 0, 0, // E+S, length 20, TEID 0
        0x00, 0x00, 0x00, 0x40, // seq 0, N-PDU 0, next: UDP Port
        0x01, 0x08, 0x68, 0x00, // UDP Port 2152, no more
        16, 0x11, 0x22, 0x33, 0x44, // TEID Data I
        133, 0x00, 0x04, 10, 0, 0, 1, // GTP-U Peer Address
    ];
    assert_eq!(&out[..n], &want);
    let p = GtpuPacket::new_checked(&out[..n]).unwrap();
    let ei = gtpu::parse_error_indication(&p).unwrap();
    assert_eq!(ei.teid_data_i, 0x1122_3344);
    assert_eq!(ei.peer, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
    assert_eq!(ei.udp_port, Some(2152));
    for cut in 0..n {
        assert!(gtpu::error_indication(1, Ipv4Addr::LOCALHOST, 1, &mut out[..cut]).is_err());
    }
    // Missing a mandatory IE.
    let mut short = want.to_vec();
    short.truncate(21);
    short[3] = 13;
    let p = GtpuPacket::new_checked(&short[..]).unwrap();
    assert!(matches!(
        gtpu::parse_error_indication(&p),
        Err(WireError::BadField { .. })
    ));
    // Truncated IE inside a well-formed header.
    let mut t = want.to_vec();
    t.truncate(26);
    t[3] = 18;
    let p = GtpuPacket::new_checked(&t[..]).unwrap();
    assert!(matches!(
        gtpu::parse_error_indication(&p),
        Err(WireError::Truncated { .. })
    ));
}

#[test]
fn end_marker_and_ext_header_notification() {
    let mut out = [0u8; 16];
    let n = gtpu::end_marker(0x0102_0304, &mut out).unwrap();
    assert_eq!(&out[..n], &[0x30, 254, 0, 0, 1, 2, 3, 4]);
    let n = gtpu::supported_ext_headers_notification(9, &[0x40, 0x85], &mut out).unwrap();
    assert_eq!(
        &out[..n],
        &[0x32, 31, 0, 8, 0, 0, 0, 0, 0, 9, 0, 0, 141, 2, 0x40, 0x85]
    );
    let p = GtpuPacket::new_checked(&out[..n]).unwrap();
    assert_eq!(
        p.ies().collect::<Vec<_>>(),
        vec![Ok(Ie::ExtHeaderTypeList(&[0x40, 0x85][..]))]
    );
}

#[test]
fn set_teid_and_payload_mut_work_in_place() {
    let mut v = CHAIN.to_vec();
    let mut p = GtpuPacket::new_checked(&mut v[..]).unwrap();
    p.set_teid(42);
    p.payload_mut().copy_from_slice(&[1, 2, 3, 4]);
    assert_eq!(p.teid(), 42);
    assert_eq!(&v[4..8], &[0, 0, 0, 42]);
    assert_eq!(&v[28..], &[1, 2, 3, 4]);
}
