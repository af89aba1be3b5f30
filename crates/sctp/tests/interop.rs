//! Interop with libusrsctp (SCTP over UDP, RFC 6951) in both roles, plus captures of
//! what went over the wire checked by tshark.
//!
//! The C peer (tests/interop/usrsctp_peer.c) is compiled here with `cc -lusrsctp`;
//! scripts/test.sh installs libusrsctp-dev and tshark.

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use pepc_sctp::wire::{self, Chunk, SctpPacket};
use pepc_sctp::{Config, S1Transport, TransportEvent, UdpSctpTransport, S1AP_PPID};
use pepc_wire::pcap::{ipv4_datagrams, read_capture, PcapWriter};

fn peer_binary() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/usrsctp_peer.c");
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("usrsctp_peer");
        let o = Command::new("cc")
            .args(["-O1", "-Wall", "-o"])
            .arg(&out)
            .arg(&src)
            .args(["-lusrsctp", "-lpthread"])
            .output()
            .expect("cannot run cc: a C compiler is required for the usrsctp interop test");
        assert!(
            o.status.success(),
            "compiling the usrsctp peer failed (is libusrsctp-dev installed? scripts/test.sh \
             installs it): {}",
            String::from_utf8_lossy(&o.stderr)
        );
        out
    })
    .clone()
}

fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Kills the child if the test fails half-way.
struct Reaper(Child);
impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

type Log = Arc<Mutex<Vec<(u64, bool, SocketAddr, Vec<u8>)>>>;

fn tap(t: &mut UdpSctpTransport) -> Log {
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    let t0 = Instant::now();
    t.set_tap(Box::new(move |out, peer, pkt| {
        let ts = 1_700_000_000_000_000_000 + t0.elapsed().as_nanos() as u64;
        l.lock().unwrap().push((ts, out, peer, pkt.to_vec()));
    }));
    log
}

/// Writes the tapped packets as IPv4/UDP, with our side on UDP 9899 (the port tshark
/// decodes as SCTP by default).
fn write_pcap(log: &Log, local: SocketAddr, name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let f = std::fs::File::create(&path).unwrap();
    let mut w = PcapWriter::new(std::io::BufWriter::new(f)).unwrap();
    let ours = SocketAddrV4::new("127.0.0.1".parse().unwrap(), 9899);
    let _ = local;
    for (ts, out, peer, pkt) in log.lock().unwrap().iter() {
        let SocketAddr::V4(p) = peer else {
            panic!("IPv4 only")
        };
        let p = SocketAddrV4::new("127.0.0.2".parse().unwrap(), p.port());
        if *out {
            w.write_ipv4_udp(*ts, ours, p, pkt).unwrap();
        } else {
            w.write_ipv4_udp(*ts, p, ours, pkt).unwrap();
        }
    }
    w.flush().unwrap();
    path
}

fn tshark(args: &[&str], pcap: &PathBuf) -> String {
    let mut c = Command::new("tshark");
    c.arg("-n").arg("-r").arg(pcap).args(args);
    let o = c
        .stdin(Stdio::null())
        .output()
        .expect("cannot run tshark (scripts/test.sh installs it)");
    assert!(
        o.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Asserts tshark decodes every frame as SCTP with verified CRC32c, DATA with PPID 18,
/// and reports nothing malformed and no expert warnings or errors.
fn check_capture(pcap: &PathBuf, extra: &[&str], frames: usize) -> String {
    let mut args = vec!["-o", "sctp.checksum:CRC 32c", "-V"];
    args.extend_from_slice(extra);
    let text = tshark(&args, pcap);
    let sctp_frames = text
        .matches("Stream Control Transmission Protocol, Src Port")
        .count();
    assert_eq!(sctp_frames, frames, "every frame decodes as SCTP");
    assert!(!text.contains("Malformed"), "malformed packet in capture");
    assert!(
        text.contains("Payload protocol identifier: S1 Application Protocol (S1AP) (18)"),
        "no PPID 18 in capture"
    );
    assert!(!text.contains("[Checksum Status: Bad]"), "bad CRC32c");
    assert!(
        text.contains("[Checksum Status: Good]"),
        "CRC32c not verified"
    );
    let mut ex = vec!["-q", "-o", "sctp.checksum:CRC 32c", "-z", "expert"];
    ex.extend_from_slice(extra);
    let expert = tshark(&ex, pcap);
    for sev in ["Errors (", "Warnings ("] {
        assert!(!expert.contains(sev), "tshark expert info:\n{expert}");
    }
    text
}

fn reverse(d: &[u8]) -> Vec<u8> {
    d.iter().rev().copied().collect()
}

fn child_output(child: &mut Child) -> String {
    let mut s = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut s);
    }
    s
}

#[test]
fn usrsctp_client_to_our_server() {
    let bin = peer_binary();
    let mut server =
        UdpSctpTransport::bind("127.0.0.1:0".parse().unwrap(), 36412, Config::default()).unwrap();
    let log = tap(&mut server);
    let n = 200;
    let child = Command::new(&bin)
        .args(["client", &free_udp_port().to_string()])
        .arg(server.local_addr().port().to_string())
        .args(["36412", &n.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Reaper(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = 0;
    let mut up = None;
    let mut down = None;
    let mut streams = [0usize; 2];
    while down.is_none() {
        assert!(Instant::now() < deadline, "timed out after {got} messages");
        let mut ev = Vec::new();
        server.poll(Duration::from_millis(20), &mut ev).unwrap();
        for e in ev {
            match e {
                TransportEvent::Up {
                    assoc,
                    out_streams,
                    in_streams,
                    ..
                } => {
                    assert_eq!((out_streams, in_streams), (2, 2));
                    up = Some(assoc);
                }
                TransportEvent::Data {
                    assoc,
                    stream,
                    ppid,
                    data,
                } => {
                    assert_eq!(Some(assoc), up);
                    assert_eq!(ppid, S1AP_PPID);
                    streams[stream as usize] += 1;
                    server
                        .send(assoc, stream, S1AP_PPID, &reverse(&data))
                        .unwrap();
                    got += 1;
                }
                TransportEvent::Down { reason, .. } => down = Some(reason),
            }
        }
        if let Some(st) = child.0.try_wait().unwrap() {
            if !st.success() {
                panic!("usrsctp client failed: {}", child_output(&mut child.0));
            }
        }
    }
    assert_eq!(got, n);
    assert_eq!(streams, [n / 2, n / 2]);
    assert_eq!(down.as_deref(), Some("shutdown"));
    let st = child.0.wait().unwrap();
    let out = child_output(&mut child.0);
    assert!(
        st.success() && out.contains(&format!("OK {n}")),
        "usrsctp: {out}"
    );

    // The capture of both directions decodes cleanly. Payloads are not real S1AP, so
    // the S1AP dissector is off here (the next test carries real S1AP).
    let pcap = write_pcap(&log, server.local_addr(), "usrsctp_client.pcap");
    let frames = log.lock().unwrap().len();
    let text = check_capture(&pcap, &["--disable-protocol", "s1ap"], frames);
    assert!(text.contains("INIT_ACK chunk"));
    assert!(text.contains("COOKIE_ECHO chunk"));
    assert!(text.contains("SHUTDOWN_COMPLETE chunk"));
}

#[test]
fn our_client_to_usrsctp_server() {
    let bin = peer_binary();
    let port = free_udp_port();
    let n = 100usize;
    let child = Command::new(&bin)
        .args(["server", &port.to_string(), "36412", &n.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Reaper(child);
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "LISTENING", "usrsctp server did not start");
    let remote: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut client = UdpSctpTransport::connect(
        "127.0.0.1:0".parse().unwrap(),
        remote,
        36412,
        Config::default(),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut assoc = None;
    let mut sent: Vec<Vec<Vec<u8>>> = vec![Vec::new(), Vec::new()];
    let mut replies: Vec<Vec<Vec<u8>>> = vec![Vec::new(), Vec::new()];
    let mut down = None;
    let mut closing = false;
    while down.is_none() {
        assert!(Instant::now() < deadline, "timed out: {replies:?}");
        let mut ev = Vec::new();
        client.poll(Duration::from_millis(20), &mut ev).unwrap();
        for e in ev {
            match e {
                TransportEvent::Up { assoc: a, .. } => {
                    assoc = Some(a);
                    for i in 0..n {
                        let len = if i % 10 == 9 {
                            2500 + i
                        } else {
                            30 + (i * 53) % 500
                        };
                        let m: Vec<u8> = (0..len).map(|j| (i * 3 + j * 11) as u8).collect();
                        let s = i % 2;
                        client.send(a, s as u16, S1AP_PPID, &m).unwrap();
                        sent[s].push(m);
                    }
                }
                TransportEvent::Data {
                    stream, ppid, data, ..
                } => {
                    assert_eq!(ppid, S1AP_PPID);
                    replies[stream as usize].push(data);
                }
                TransportEvent::Down { reason, .. } => down = Some(reason),
            }
        }
        if !closing && replies[0].len() + replies[1].len() == n {
            closing = true;
            client.close(assoc.unwrap());
        }
    }
    assert_eq!(down.as_deref(), Some("shutdown"));
    for s in 0..2 {
        let want: Vec<Vec<u8>> = sent[s].iter().map(|m| reverse(m)).collect();
        assert_eq!(replies[s], want, "stream {s}");
    }
    let st = child.0.wait().unwrap();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(
        st.success() && rest.contains(&format!("OK {n}")),
        "usrsctp: {rest}"
    );
}

/// S1AP PDUs out of a real capture, found with our SCTP wire parser.
fn s1ap_from_capture() -> Vec<Vec<u8>> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/captures/srsenb.pcapng");
    let frames = read_capture(&path).unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
    let mut out = Vec::new();
    for d in ipv4_datagrams(&frames) {
        let ip = &d.bytes;
        if ip.len() < 20 || ip[9] != 132 {
            continue;
        }
        let ihl = (ip[0] & 0x0f) as usize * 4;
        let Ok(p) = SctpPacket::new_checked(&ip[ihl..]) else {
            continue;
        };
        for c in p.chunks().flatten() {
            if let Ok(Chunk::Data(d)) = c.parse() {
                if d.ppid == S1AP_PPID && d.beginning() && d.ending() {
                    out.push(d.payload.to_vec());
                }
            }
        }
    }
    out
}

#[test]
fn capture_of_real_s1ap_decodes_cleanly() {
    let msgs = s1ap_from_capture();
    assert!(
        msgs.len() >= 5,
        "only {} S1AP messages in the capture",
        msgs.len()
    );
    let mut server =
        UdpSctpTransport::bind("127.0.0.1:0".parse().unwrap(), 36412, Config::default()).unwrap();
    let log = tap(&mut server);
    let mut client = UdpSctpTransport::connect(
        "127.0.0.1:0".parse().unwrap(),
        server.local_addr(),
        36412,
        Config::default(),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut sassoc, mut cassoc) = (None, None);
    let (mut got_s, mut got_c) = (Vec::new(), Vec::new());
    let (mut sent, mut closing, mut downs) = (false, false, 0);
    while downs < 2 {
        assert!(Instant::now() < deadline, "timed out");
        let mut sev = Vec::new();
        let mut cev = Vec::new();
        server.poll(Duration::from_millis(1), &mut sev).unwrap();
        client.poll(Duration::from_millis(1), &mut cev).unwrap();
        for (ev, assoc_slot, got) in [
            (sev, &mut sassoc, &mut got_s),
            (cev, &mut cassoc, &mut got_c),
        ] {
            for e in ev {
                match e {
                    TransportEvent::Up { assoc, .. } => *assoc_slot = Some(assoc),
                    TransportEvent::Data { data, ppid, .. } => {
                        assert_eq!(ppid, S1AP_PPID);
                        got.push(data);
                    }
                    TransportEvent::Down { .. } => downs += 1,
                }
            }
        }
        if let (Some(s), Some(c), false) = (sassoc, cassoc, sent) {
            sent = true;
            for m in &msgs {
                client.send(c, 1, S1AP_PPID, m).unwrap();
                server.send(s, 0, S1AP_PPID, m).unwrap();
            }
        }
        if !closing && got_s.len() == msgs.len() && got_c.len() == msgs.len() {
            closing = true;
            client.close(cassoc.unwrap());
        }
    }
    assert_eq!(got_s, msgs);
    assert_eq!(got_c, msgs);
    let pcap = write_pcap(&log, server.local_addr(), "s1ap_loopback.pcap");
    let frames = log.lock().unwrap().len();
    let text = check_capture(&pcap, &[], frames);
    assert!(text.contains("S1 Application Protocol"));
    // Our parser agrees with the emitted packets.
    for (_, _, _, p) in log.lock().unwrap().iter() {
        wire::parse_packet(p).unwrap();
    }
}
