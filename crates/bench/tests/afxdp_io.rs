//! The node's AF_XDP ports on veth pairs in network namespaces this test makes (issue
//! 14): the XDP program redirects only our traffic and the kernel keeps the rest; the
//! node forwards a generator's Table 2 traffic both ways with every packet accounted
//! for; the kernel-socket backend runs the same bench. Needs root; without it each
//! test says why and returns.

use pepc_bench::io::{run, Backend, GenIo, IoOpts, IoReport, Mix, RxMode, Steer};
use pepc_bench::netns::{enter, unavailable, End, Topology};
use pepc_node::io::afxdp::neigh::interface;
use pepc_node::io::afxdp::xsk::XskSocket;
use pepc_node::io::afxdp::{AfXdpConfig, AfXdpPort, Role, XdpMode, XskConfig, ZeroCopy};
use pepc_node::io::{PacketIo, SocketDropReason};
use pepc_wire::{Batch, Verdict};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

/// One bench at a time: each runs a node and a generator, and on two cores several at
/// once starve each other into losses that are the machine's, not the node's.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn skip() -> bool {
    match unavailable() {
        Some(why) => {
            eprintln!("SKIPPED: {why}");
            true
        }
        None => false,
    }
}

/// Root (else None, having said why) and the one-at-a-time lock.
fn my_turn() -> Option<std::sync::MutexGuard<'static, ()>> {
    if skip() {
        return None;
    }
    Some(ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Every packet sent either way came out, in order per user, and the node dropped none.
fn every_packet_through(r: &IoReport) {
    assert_eq!(r.received_ul, r.sent_ul, "{r:?}");
    assert_eq!(r.received_dl, r.sent_dl, "{r:?}");
    assert_eq!((r.lost, r.reordered, r.node_drops), (0, 0, 0), "{r:?}");
    assert_eq!((r.node_kernel_drops, r.link_drops), (0, 0), "{r:?}");
}

/// For a test of its own: root (else None, having said why), the one-at-a-time lock,
/// a tag, and two fresh namespaces `{prefix}{tag}a` and `{prefix}{tag}b`.
fn two_namespaces(
    prefix: &str,
) -> Option<(
    std::sync::MutexGuard<'static, ()>,
    u32,
    String,
    String,
    Topology,
)> {
    let one = my_turn()?;
    let tag = std::process::id() % 100_000;
    let (a, b) = (format!("{prefix}{tag}a"), format!("{prefix}{tag}b"));
    let topo = Topology::new(&[&a, &b]).unwrap();
    Some((one, tag, a, b, topo))
}

/// A veth pair `{dev}a` in `ns.0` (`net.1`) and `{dev}b` in `ns.1` (`net.2`), /24.
fn veth_pair(topo: &Topology, ns: (&str, &str), dev: &str, net: [u8; 3]) -> (End, End) {
    let end = |ns: &str, side: &str, last: u8| End {
        ns: ns.to_string(),
        dev: format!("{dev}{side}"),
        addr: Ipv4Addr::new(net[0], net[1], net[2], last),
        prefix: 24,
    };
    let (a, b) = (end(ns.0, "a", 1), end(ns.1, "b", 2));
    topo.veth(&a, &b, 1).unwrap();
    (a, b)
}

/// An S1-U AF_XDP port on `dev`, taking GTP-U to `node`:2152.
fn s1u_port(dev: String, node: Ipv4Addr, xsk: XskConfig) -> AfXdpPort {
    AfXdpPort::open(&AfXdpConfig {
        interface: dev,
        queue: 0,
        xdp_mode: XdpMode::Auto,
        zero_copy: ZeroCopy::Auto,
        role: Role::S1u {
            addr: SocketAddrV4::new(node, 2152),
        },
        xsk,
    })
    .unwrap()
}

fn opts(backend: Backend, rate_pps: u64) -> IoOpts {
    IoOpts {
        backend,
        users: 2000,
        seconds: 1.0,
        rate_pps,
        mix: Mix::Table2,
        seed: 7,
        xdp_mode: XdpMode::Auto,
        napi_threads: false,
        slices: 1,
        rx: RxMode::Demux,
        steer: Steer::Rss,
        ring_size: 4096,
        tun_queue_len: pepc_node::io::tun::DEFAULT_QUEUE_LEN,
        gen_io: GenIo::Afxdp,
        node_gro: true,
    }
}

#[test]
fn afxdp_node_forwards_every_packet_below_saturation() {
    let Some(_one) = my_turn() else {
        return;
    };
    // 50K packets/s is far below what either side can do on this machine.
    let r = run(&opts(Backend::Afxdp, 50_000)).unwrap();
    assert!(r.s1u_io.contains("AF_XDP"), "{}", r.s1u_io);
    assert!(r.sgi_io.contains("AF_XDP"), "{}", r.sgi_io);
    // The configured rings (here the default) are the socket's.
    assert!(r.sgi_io.contains("rings of 4096"), "{}", r.sgi_io);
    assert!(r.sent_ul > 5_000 && r.sent_dl > 3 * 5_000 - 1_000, "{r:?}");
    every_packet_through(&r);
    assert!(r.latency_us_p99 > 0.0 && r.mpps_per_core > 0.0, "{r:?}");
}

/// Table IV's mix (Rajan et al.): ~38% uplink, downlink packets up to 1,440 bytes. The
/// big frames cross both AF_XDP ports (2 KB frames, a 1,500-byte MTU) with none lost,
/// and the mean size shows the mix was sent (Table 2's packets are 64-128 bytes).
#[test]
fn afxdp_node_forwards_table_iv_traffic() {
    let Some(_one) = my_turn() else {
        return;
    };
    let mut o = opts(Backend::Afxdp, 20_000);
    o.mix = Mix::TableIv;
    let r = run(&o).unwrap();
    every_packet_through(&r);
    let ul_share = r.sent_ul as f64 / (r.sent_ul + r.sent_dl) as f64;
    assert!(
        (0.33..0.43).contains(&ul_share),
        "uplink share {ul_share}: {r:?}"
    );
    let fwd = (r.received_ul + r.received_dl) as f64;
    let mean_bytes = r.gbps * 1e9 / 8.0 * r.seconds / fwd;
    assert!(
        (350.0..650.0).contains(&mean_bytes),
        "mean {mean_bytes} bytes: {r:?}"
    );
}

#[test]
fn two_slices_send_on_their_own_queues_behind_the_demux() {
    let Some(_one) = my_turn() else {
        return;
    };
    let mut o = opts(Backend::Afxdp, 40_000);
    o.slices = 2;
    let r = run(&o).unwrap();
    assert_eq!(r.slices, 2);
    assert!(r.slice_forwarded.iter().all(|&n| n > 1_000), "{r:?}");
    every_packet_through(&r);
}

/// Queue mode: each slice receives and sends on its own queues, no demux thread. With
/// a flow hash spreading packets blind to slices, about half of them arrive at the
/// other slice's queue and are handed on; with steering by slice, none are. Either
/// way every packet gets through, in order per user.
#[test]
fn two_slices_receive_on_their_own_queues_and_hand_packets_on() {
    let Some(_one) = my_turn() else {
        return;
    };
    for steer in [Steer::Rss, Steer::Slice] {
        let mut o = opts(Backend::Afxdp, 40_000);
        o.slices = 2;
        o.rx = RxMode::Queues;
        o.steer = steer;
        let r = run(&o).unwrap();
        assert!(r.s1u_io.contains("slice k on queue"), "{}", r.s1u_io);
        assert!(r.slice_forwarded.iter().all(|&n| n > 1_000), "{r:?}");
        every_packet_through(&r);
        assert_eq!(r.handoff_dropped, 0, "{r:?}");
        let sent = r.sent_ul + r.sent_dl;
        match steer {
            // About half: between a third and two thirds.
            Steer::Rss => assert!(
                r.handed_off > sent / 3 && r.handed_off < sent * 2 / 3,
                "{r:?}"
            ),
            Steer::Slice => assert_eq!(r.handed_off, 0, "{r:?}"),
        }
    }
}

/// Queue mode on the kernel backends: each slice has a UDP socket of its own in a
/// reuseport group on S1-U, and on SGi a socket of the UDP sink or a queue of the TUN
/// device; the kernel's steering programs put every packet on its own slice's socket,
/// so nothing is handed on, and every packet gets through in order.
#[test]
fn two_slices_on_kernel_sockets_of_their_own() {
    let Some(_one) = my_turn() else {
        return;
    };
    for (backend, sgi) in [
        (Backend::Udp, "a socket per slice"),
        (Backend::Tun, "a queue per slice"),
    ] {
        let mut o = opts(backend, 40_000);
        o.slices = 2;
        o.rx = RxMode::Queues;
        let r = run(&o).unwrap();
        assert!(
            r.s1u_io.contains("one per slice, steered by TEID"),
            "{}",
            r.s1u_io
        );
        assert!(r.sgi_io.contains(sgi), "{}", r.sgi_io);
        assert!(r.slice_forwarded.iter().all(|&n| n > 1_000), "{r:?}");
        every_packet_through(&r);
        assert_eq!((r.handed_off, r.handoff_dropped), (0, 0), "{r:?}");
    }
}

/// At full rate the node may fall behind and lose packets; each one is named by a
/// counter (the node's, its sockets', the links' or the generator's sockets'; where
/// the kernel drops GSO/GRO messages of several packets, the node's ports' counts
/// say how many were lost before and after it).
#[test]
fn at_saturation_every_lost_packet_is_named() {
    let Some(_one) = my_turn() else {
        return;
    };
    // With NAPI threads the veth rings overflow from the first packet (their
    // threads start late), so drops before the counters' baselines would show. With
    // TUN the device's queue to the node overflows (its own count).
    for (backend, napi_threads, gen_io) in [
        (Backend::Afxdp, false, GenIo::Afxdp),
        (Backend::Afxdp, true, GenIo::Afxdp),
        (Backend::Udp, false, GenIo::Afxdp),
        (Backend::Udp, true, GenIo::Sockets),
        (Backend::Tun, false, GenIo::Afxdp),
    ] {
        let r = run(&IoOpts {
            napi_threads,
            gen_io,
            ..opts(backend, 0)
        })
        .unwrap();
        assert!(
            r.lost_before_node + r.node_drops + r.node_tx_failed + r.lost_after_node <= r.lost + 16,
            "{r:?}"
        );
        assert!(r.received_ul > 0 && r.received_dl > 0, "{r:?}");
        assert_eq!(r.lost_unexplained, 0, "{r:?}");
        // Named, but not more than was lost: each drop counted once (a few ARP
        // packets may be dropped beside the counted traffic).
        assert!(r.lost_named <= r.lost + 16, "{r:?}");
        assert_eq!(r.reordered, 0, "{r:?}");
    }
}

#[test]
fn the_same_bench_runs_on_the_kernel_socket_backends() {
    let Some(_one) = my_turn() else {
        return;
    };
    for (backend, sgi) in [(Backend::Udp, "UDP sink"), (Backend::Tun, "TUN")] {
        let r = run(&opts(backend, 20_000)).unwrap();
        assert!(r.s1u_io.contains("UDP socket"), "{}", r.s1u_io);
        assert!(r.sgi_io.contains(sgi), "{}", r.sgi_io);
        assert!(r.received_ul > 0 && r.received_dl > 0, "{r:?}");
        assert_eq!((r.lost, r.reordered), (0, 0), "{r:?}");
    }
}

/// The UDP backend against a generator on kernel sockets: every packet arrives, in
/// order; the generator's veth ends run no XDP, so the node's end keeps UDP
/// segmentation (its GSO sends cross the veth whole) and the generator's have NAPI to
/// thread. A generator on sockets is refused for a node that is not on UDP sockets.
#[test]
fn the_udp_backend_runs_against_a_generator_on_kernel_sockets() {
    let Some(_one) = my_turn() else {
        return;
    };
    let r = run(&IoOpts {
        gen_io: GenIo::Sockets,
        napi_threads: true,
        ..opts(Backend::Udp, 20_000)
    })
    .unwrap();
    assert_eq!(r.gen_io, GenIo::Sockets);
    assert!(r.s1u_io.contains("UDP socket with GRO"), "{}", r.s1u_io);
    assert!(r.sgi_io.contains("with GRO"), "{}", r.sgi_io);
    assert!(r.received_ul > 0 && r.received_dl > 0, "{r:?}");
    assert_eq!((r.lost, r.reordered), (0, 0), "{r:?}");
    // Both generator ends were threaded (GRO gave them NAPI).
    assert!(r.napi_threads.len() >= 2, "{:?}", r.napi_threads);
    // The node's sockets without GRO: one datagram per receive, the same packets.
    let r = run(&IoOpts {
        gen_io: GenIo::Sockets,
        node_gro: false,
        ..opts(Backend::Udp, 20_000)
    })
    .unwrap();
    assert!(
        !r.s1u_io.contains("GRO") && !r.sgi_io.contains("GRO"),
        "{r:?}"
    );
    assert!(r.received_ul > 0 && r.received_dl > 0, "{r:?}");
    assert_eq!((r.lost, r.reordered), (0, 0), "{r:?}");
    let e = run(&IoOpts {
        gen_io: GenIo::Sockets,
        ..opts(Backend::Afxdp, 20_000)
    })
    .unwrap_err();
    assert!(e.contains("--backend udp"), "{e}");
}

/// With the S1-U port's XDP program attached, the kernel still gets everything that is
/// not GTP-U to our address: UDP to another port reaches a kernel socket, while GTP-U
/// reaches the port (with its sender), and what the port sends is a valid UDP datagram
/// the peer's kernel delivers.
#[test]
fn xdp_program_takes_only_gtpu_to_our_address() {
    let Some((_one, tag, a, b, topo)) = two_namespaces("pepcxt") else {
        return;
    };
    let (ea, eb) = veth_pair(&topo, (&a, &b), &format!("pxt{tag}"), [10, 81, 0]);
    let (node, peer) = (ea.addr, eb.addr);
    let dev = ea.dev.clone();
    let ns_a = a.clone();
    let port_thread = std::thread::spawn(move || {
        enter(&ns_a).unwrap();
        let mut port = s1u_port(dev, node, XskConfig::default());
        let other = UdpSocket::bind(SocketAddrV4::new(node, 9999)).unwrap();
        other
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        // GTP-U echo-like payloads to 2152: the port gets them.
        let mut b = Batch::default();
        let mut got = Vec::new();
        let until = Instant::now() + Duration::from_secs(5);
        while got.len() < 10 && Instant::now() < until {
            if port.recv_batch(&mut b).unwrap() > 0 {
                for p in b.packets() {
                    got.push((p.as_slice().to_vec(), p.meta.peer));
                }
            }
        }
        // The kernel socket on 9999 got its datagram past the XDP program.
        let mut buf = [0u8; 64];
        let (n, from) = other.recv_from(&mut buf).unwrap();
        // Send one back through the port.
        let mut out = Batch::new(1);
        out.len = 1;
        out.bufs[0].fill(b"reply-through-xdp");
        out.bufs[0].meta.peer = SocketAddrV4::new(peer, 2152);
        out.bufs[0].meta.verdict = Verdict::ToS1u;
        let until = Instant::now() + Duration::from_secs(5);
        // The first send may wait for ARP.
        while port.send_batch(&out, Verdict::ToS1u).unwrap() == 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        (got, buf[..n].to_vec(), from, port.stats())
    });
    std::thread::sleep(Duration::from_millis(300));
    enter(&b).unwrap();
    let s = UdpSocket::bind(SocketAddrV4::new(peer, 2152)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for i in 0..10u8 {
        s.send_to(&[0x30, 0xff, 0, 1, 0, 0, 0, 1, i], (node, 2152))
            .unwrap();
    }
    let k = UdpSocket::bind(SocketAddrV4::new(peer, 0)).unwrap();
    k.send_to(b"for the kernel", (node, 9999)).unwrap();
    let mut buf = [0u8; 64];
    let (n, from) = s.recv_from(&mut buf).unwrap();
    let (got, kernel_got, kernel_from, stats) = port_thread.join().unwrap();
    assert_eq!(got.len(), 10, "{stats:?}");
    for (i, (payload, sender)) in got.iter().enumerate() {
        assert_eq!(payload, &[0x30, 0xff, 0, 1, 0, 0, 0, 1, i as u8]);
        assert_eq!(*sender, SocketAddrV4::new(peer, 2152));
    }
    assert_eq!(kernel_got, b"for the kernel");
    assert_eq!(kernel_from, k.local_addr().unwrap());
    assert_eq!(&buf[..n], b"reply-through-xdp");
    assert_eq!(from, std::net::SocketAddr::from((node, 2152)));
    assert_eq!(stats.rx_malformed, 0);
    drop(topo);
}

/// A port that stops reading: its RX ring fills and the kernel drops the rest at the
/// socket. Every datagram sent is received, or counted by the port's kernel-drop probe
/// (what `/metrics` exports as `pepc_port_kernel_dropped`), or dropped by the link.
#[test]
fn a_port_that_falls_behind_has_its_kernel_drops_counted() {
    let Some((_one, tag, a, b, topo)) = two_namespaces("pepcxk") else {
        return;
    };
    let (ea, eb) = veth_pair(&topo, (&a, &b), &format!("pxk{tag}"), [10, 82, 0]);
    let (node, peer) = (ea.addr, eb.addr);
    let (dev, ns_a) = (ea.dev.clone(), a.clone());
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (sent_tx, sent_rx) = std::sync::mpsc::channel::<()>();
    let port_thread = std::thread::spawn(move || {
        enter(&ns_a).unwrap();
        // 64 frames for RX: a small ring that a burst overflows.
        let small = XskConfig {
            frames: 128,
            ring_size: 64,
        };
        let mut port = s1u_port(dev.clone(), node, small);
        // What the operator sees of it (`pepc_port_info`): veth has no zero-copy
        // driver, so the socket is in copy mode behind a native XDP program.
        let info = port.info();
        assert_eq!((info.io, info.interface.as_str()), ("afxdp", dev.as_str()));
        let x = info.afxdp.expect("AF_XDP details");
        assert_eq!(
            (x.queue, x.native, x.zero_copy, x.ring_size),
            (0, true, false, 64)
        );
        let probe = port
            .socket_drops()
            .expect("an AF_XDP port counts kernel drops");
        let mut b = Batch::default();
        let mut drain = |port: &mut AfXdpPort| {
            let mut got = 0;
            let quiet = Instant::now() + Duration::from_millis(300);
            while Instant::now() < quiet {
                got += port.recv_batch(&mut b).unwrap();
            }
            got
        };
        ready_tx.send(()).unwrap();
        // The warm-up datagram (it waited for ARP), then nothing until the burst is in.
        sent_rx.recv().unwrap();
        let warm = drain(&mut port);
        ready_tx.send(()).unwrap();
        sent_rx.recv().unwrap();
        let got = drain(&mut port);
        let drops = probe.read();
        // A packet for a host nobody answers ARP for: the port's own reason.
        let mut out = Batch::new(1);
        out.len = 1;
        out.bufs[0].fill(&[0x30, 0xff, 0, 0, 0, 0, 0, 9]);
        out.bufs[0].meta.peer = SocketAddrV4::new(Ipv4Addr::new(10, 82, 0, 77), 2152);
        out.bufs[0].meta.verdict = Verdict::ToS1u;
        assert_eq!(port.send_batch(&out, Verdict::ToS1u).unwrap(), 0);
        let after = probe.read();
        assert_eq!(after.get(SocketDropReason::NoNeighbour), 1, "{after:?}");
        assert_eq!(after.by_kernel(), drops.by_kernel(), "{after:?}");
        (warm, got, drops)
    });
    ready_rx.recv().unwrap();
    enter(&b).unwrap();
    let s = UdpSocket::bind(SocketAddrV4::new(peer, 2152)).unwrap();
    let gpdu = [0x30, 0xff, 0, 4, 0, 0, 0, 1, 1, 2, 3, 4];
    s.send_to(&gpdu, (node, 2152)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    sent_tx.send(()).unwrap();
    ready_rx.recv().unwrap();
    let link0 = topo.link_drops(&ea).unwrap() + topo.link_drops(&eb).unwrap();
    let burst = 1_000usize;
    for _ in 0..burst {
        s.send_to(&gpdu, (node, 2152)).unwrap();
    }
    sent_tx.send(()).unwrap();
    let (warm, got, drops) = port_thread.join().unwrap();
    let link = topo.link_drops(&ea).unwrap() + topo.link_drops(&eb).unwrap() - link0;
    assert_eq!(warm, 1, "the warm-up datagram arrived");
    assert!(got <= 64, "at most the RX frames: {got}");
    assert!(drops.total() > 0, "{drops:?}");
    assert_eq!(
        drops.total(),
        drops.get(SocketDropReason::RxRingFull) + drops.get(SocketDropReason::NoFrame),
        "{drops:?}"
    );
    // Each socket drop is a failed XDP redirect, which veth counts as its own drop too.
    assert!(drops.total() <= link, "{drops:?}, link {link}");
    assert_eq!(
        got as u64 + drops.total(),
        burst as u64,
        "{drops:?}, link {link}"
    );
    drop(topo);
}

/// Copy mode takes at most 32 TX descriptors per syscall, and none while the device
/// pushes back: a socket that queues 100 frames at once still sends all 100, because
/// it asks until the kernel has taken them (else the rest would wait for the next
/// send).
#[test]
fn every_queued_frame_leaves_past_the_kernels_per_call_budget() {
    let Some((_one, tag, a, b, topo)) = two_namespaces("pepcxf") else {
        return;
    };
    let (ea, eb) = veth_pair(&topo, (&a, &b), &format!("pxf{tag}"), [10, 83, 0]);
    let (node, peer) = (ea.addr, eb.addr);
    const N: usize = 100;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (peer_dev, ns_b) = (eb.dev.clone(), b.clone());
    let receiver = std::thread::spawn(move || {
        enter(&ns_b).unwrap();
        let (_, peer_mac) = interface(&peer_dev).unwrap();
        let s = UdpSocket::bind(SocketAddrV4::new(peer, 7000)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        ready_tx.send(peer_mac).unwrap();
        let mut got = 0;
        let mut buf = [0u8; 64];
        while got < N && s.recv(&mut buf).is_ok() {
            got += 1;
        }
        got
    });
    let peer_mac = ready_rx.recv().unwrap();
    let (dev, ns_a) = (ea.dev.clone(), a.clone());
    let sender = std::thread::spawn(move || {
        enter(&ns_a).unwrap();
        let (ifindex, mac) = interface(&dev).unwrap();
        let mut x = XskSocket::open(ifindex, 0, ZeroCopy::Auto, XskConfig::default()).unwrap();
        let queued = x.send(N, |i, f| {
            // Ethernet, IPv4 (checksummed), UDP to peer:7000 with a zero checksum.
            f[0..6].copy_from_slice(&peer_mac);
            f[6..12].copy_from_slice(&mac);
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            let ip = &mut f[14..34];
            ip.copy_from_slice(&[
                0x45, 0, 0, 32, 0, 0, 0x40, 0, 64, 17, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ]);
            ip[4..6].copy_from_slice(&(i as u16).to_be_bytes());
            ip[12..16].copy_from_slice(&node.octets());
            ip[16..20].copy_from_slice(&peer.octets());
            let sum = ip
                .chunks(2)
                .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
                .sum::<u32>();
            let sum = (sum & 0xffff) + (sum >> 16);
            let sum = !((sum & 0xffff) + (sum >> 16)) as u16;
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
            f[34..42].copy_from_slice(&[0x9c, 0x40, 0x1b, 0x58, 0, 12, 0, 0]);
            f[42..46].copy_from_slice(&(i as u32).to_be_bytes());
            46
        });
        (queued, x.tx_queued())
    });
    let (queued, left) = sender.join().unwrap();
    let got = receiver.join().unwrap();
    assert_eq!(queued, N);
    assert_eq!(left, 0, "the kernel took every queued frame");
    assert_eq!(got, N, "every frame arrived");
    drop(topo);
}

/// The SGi port refuses an interface whose own address lies in a UE pool (the XDP
/// program would take that address's traffic), and says which pool.
#[test]
fn sgi_port_refuses_an_interface_addressed_inside_a_ue_pool() {
    let Some((_one, tag, a, b, topo)) = two_namespaces("pepcxp") else {
        return;
    };
    let (ea, _) = veth_pair(&topo, (&a, &b), &format!("pxp{tag}"), [10, 79, 2]);
    let dev = ea.dev.clone();
    let r = std::thread::spawn(move || {
        enter(&a).unwrap();
        let open = |pool: (Ipv4Addr, u8)| {
            AfXdpPort::open(&AfXdpConfig {
                interface: dev.clone(),
                queue: 0,
                xdp_mode: XdpMode::Auto,
                zero_copy: ZeroCopy::Auto,
                role: Role::Sgi {
                    pools: vec![pool],
                    next_hop: None,
                },
                xsk: XskConfig::default(),
            })
            .map(|_| ())
            .map_err(|e| e.to_string())
        };
        (
            open((Ipv4Addr::new(10, 64, 0, 0), 10)),
            open((Ipv4Addr::new(10, 0, 0, 0), 10)),
        )
    })
    .join()
    .unwrap();
    let e = r.0.unwrap_err();
    assert!(e.contains("10.79.2.1") && e.contains("10.64.0.0/10"), "{e}");
    // Outside the pool: the port opens.
    r.1.unwrap();
    drop(topo);
}
