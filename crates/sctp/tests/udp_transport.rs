//! Loopback tests of `UdpSctpTransport`: server and client in one process.

use std::time::{Duration, Instant};

use pepc_sctp::{
    open_server, AssocId, Backend, Config, S1Transport, TransportConfig, TransportEvent,
    UdpSctpTransport, S1AP_PPID,
};

fn poll_until(
    t: &mut dyn S1Transport,
    other: &mut dyn S1Transport,
    mut done: impl FnMut(&[TransportEvent], &[TransportEvent]) -> bool,
) -> (Vec<TransportEvent>, Vec<TransportEvent>) {
    let mut a = Vec::new();
    let mut b = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done(&a, &b) {
        assert!(Instant::now() < deadline, "timed out: {a:?} {b:?}");
        t.poll(Duration::from_millis(2), &mut a).unwrap();
        other.poll(Duration::from_millis(2), &mut b).unwrap();
    }
    (a, b)
}

fn up_id(ev: &[TransportEvent]) -> Vec<AssocId> {
    ev.iter()
        .filter_map(|e| match e {
            TransportEvent::Up { assoc, .. } => Some(*assoc),
            _ => None,
        })
        .collect()
}

fn data(ev: &[TransportEvent]) -> Vec<(AssocId, u16, u32, Vec<u8>)> {
    ev.iter()
        .filter_map(|e| match e {
            TransportEvent::Data {
                assoc,
                stream,
                ppid,
                data,
            } => Some((*assoc, *stream, *ppid, data.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn server_and_clients_exchange_s1ap_messages() {
    let mut server =
        UdpSctpTransport::bind("127.0.0.1:0".parse().unwrap(), 36412, Config::default()).unwrap();
    let saddr = server.local_addr();
    let mut client = UdpSctpTransport::connect(
        "127.0.0.1:0".parse().unwrap(),
        saddr,
        36412,
        Config::default(),
    )
    .unwrap();
    let second = client.open_association().unwrap();
    let (sev, cev) = poll_until(&mut server, &mut client, |s, c| {
        up_id(s).len() == 2 && up_id(c).len() == 2
    });
    let server_ids = up_id(&sev);
    let client_ids = up_id(&cev);
    assert!(client_ids.contains(&second));
    for e in &sev {
        if let TransportEvent::Up {
            peer,
            out_streams,
            in_streams,
            ..
        } = e
        {
            assert_eq!(*peer, client.local_addr());
            assert_eq!((*out_streams, *in_streams), (32, 32));
        }
    }
    // 1000 messages from each client association over streams 0/1, server echoes.
    let n = 1000;
    for i in 0..n {
        for &a in &client_ids {
            let m = format!("msg {i} on {a}").into_bytes();
            client.send(a, (i % 2) as u16, S1AP_PPID, &m).unwrap();
        }
    }
    let mut echoed = 0;
    let mut got_back = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got_back.len() < 2 * n {
        assert!(
            Instant::now() < deadline,
            "echo timed out at {}",
            got_back.len()
        );
        let mut ev = Vec::new();
        server.poll(Duration::from_millis(1), &mut ev).unwrap();
        for (a, s, p, d) in data(&ev) {
            assert_eq!(p, S1AP_PPID);
            assert!(server_ids.contains(&a));
            server.send(a, s, p, &d).unwrap();
            echoed += 1;
        }
        let mut ev = Vec::new();
        client.poll(Duration::from_millis(1), &mut ev).unwrap();
        got_back.extend(data(&ev));
    }
    assert_eq!(echoed, 2 * n);
    for &a in &client_ids {
        for s in 0..2u16 {
            let got: Vec<Vec<u8>> = got_back
                .iter()
                .filter(|x| x.0 == a && x.1 == s)
                .map(|x| x.3.clone())
                .collect();
            let want: Vec<Vec<u8>> = (0..n)
                .filter(|i| (i % 2) as u16 == s)
                .map(|i| format!("msg {i} on {a}").into_bytes())
                .collect();
            assert_eq!(got, want, "order on assoc {a} stream {s}");
        }
    }
    // A big message crosses too.
    let big: Vec<u8> = (0..20_000).map(|i| i as u8).collect();
    client.send(client_ids[0], 0, S1AP_PPID, &big).unwrap();
    let (sev, _) = poll_until(&mut server, &mut client, |s, _| !data(s).is_empty());
    assert_eq!(data(&sev)[0].3, big);
    // Graceful close: both sides see Down.
    client.close(client_ids[0]);
    let (sev, cev) = poll_until(&mut server, &mut client, |s, c| {
        s.iter().any(|e| matches!(e, TransportEvent::Down { .. }))
            && c.iter().any(|e| matches!(e, TransportEvent::Down { .. }))
    });
    assert!(cev
        .iter()
        .any(|e| matches!(e, TransportEvent::Down { assoc, reason } if *assoc == client_ids[0] && reason == "shutdown")));
    assert_eq!(
        sev.iter()
            .filter(|e| matches!(e, TransportEvent::Down { .. }))
            .count(),
        1
    );
    assert_eq!(client.associations(), 1);
    // Abort of the other one.
    client.abort(client_ids[1]);
    let (sev, _) = poll_until(&mut server, &mut client, |s, _| {
        s.iter().any(|e| matches!(e, TransportEvent::Down { .. }))
    });
    assert!(sev
        .iter()
        .any(|e| matches!(e, TransportEvent::Down { reason, .. } if reason == "aborted by peer")));
}

#[test]
fn open_server_falls_back_to_udp() {
    let cfg = TransportConfig {
        udp_port: 0,
        ..TransportConfig::default()
    };
    let kernel = open_server(&TransportConfig {
        backend: Backend::Kernel,
        ..cfg.clone()
    });
    let mut server = open_server(&cfg).unwrap();
    if kernel.is_err() {
        // No kernel SCTP here: Auto must have chosen UDP, so a UDP client can reach it.
        let mut client = UdpSctpTransport::connect(
            "127.0.0.1:0".parse().unwrap(),
            server.local_addr(),
            36412,
            Config::default(),
        )
        .unwrap();
        poll_until(&mut *server, &mut client, |s, c| {
            !up_id(s).is_empty() && !up_id(c).is_empty()
        });
    }
    let forced = open_server(&TransportConfig {
        backend: Backend::Udp,
        ..cfg
    })
    .unwrap();
    assert!(forced.local_addr().port() != 0);
}

#[test]
fn poll_honours_timeout_without_traffic() {
    let mut server =
        UdpSctpTransport::bind("127.0.0.1:0".parse().unwrap(), 36412, Config::default()).unwrap();
    let t0 = Instant::now();
    let mut ev = Vec::new();
    server.poll(Duration::from_millis(50), &mut ev).unwrap();
    let el = t0.elapsed();
    assert!(ev.is_empty());
    assert!(
        el >= Duration::from_millis(50) && el < Duration::from_millis(500),
        "{el:?}"
    );
}

#[test]
fn failed_connect_reports_down() {
    let cfg = Config {
        rto_initial: Duration::from_millis(20),
        rto_min: Duration::from_millis(20),
        rto_max: Duration::from_millis(40),
        max_init_retransmits: 2,
        ..Config::default()
    };
    // A UDP socket that never answers.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut client = UdpSctpTransport::connect(
        "127.0.0.1:0".parse().unwrap(),
        silent.local_addr().unwrap(),
        36412,
        cfg,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut ev = Vec::new();
    while ev.is_empty() {
        assert!(Instant::now() < deadline, "no Down");
        client.poll(Duration::from_millis(50), &mut ev).unwrap();
    }
    assert!(
        matches!(&ev[0], TransportEvent::Down { reason, .. } if reason == "association setup timed out"),
        "{ev:?}"
    );
    assert_eq!(client.associations(), 0);
}
