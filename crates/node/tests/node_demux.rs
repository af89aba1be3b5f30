//! A node with several slices behind the demux thread, or with a socket per slice that
//! the kernel steers (`demux = "queues"`), on loopback with real sockets:
//! uplink G-PDUs of every slice's UEs come out on SGi, downlink to their addresses
//! comes back GTP-U encapsulated to the right eNB TEID, unknown TEIDs get an Error
//! Indication, and every packet is accounted for in the node's stats. Bounded in time.

use pepc_mme::ControlPlane;
use pepc_node::config::{DemuxMode, NodeConfig};
use pepc_node::node::Node;
use pepc_node::runtime::ControlDriver;
use pepc_slice::control::{AttachParams, Attached};
use pepc_slice::ids::IdLayout;
use pepc_slice::packets::{gpdu, ipv4_udp};
use pepc_wire::gtpu;
use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const UES_PER_SLICE: u32 = 2;

/// Attaches a few UEs on its slice, then reports them once the data thread has applied
/// every update.
struct AttachSome {
    slice: usize,
    enb: Ipv4Addr,
    attached: Vec<(usize, Attached, u32)>,
    out: Arc<Mutex<Vec<(usize, Attached, u32)>>>,
    reported: bool,
}

fn enb_teid(slice: usize, i: u32) -> u32 {
    0x1000 + slice as u32 * 0x100 + i
}

impl ControlDriver for AttachSome {
    fn run_once(&mut self, cp: &mut ControlPlane, _now: Instant) -> bool {
        if self.attached.is_empty() {
            for i in 0..UES_PER_SLICE {
                let mut p = AttachParams::new(1_000 + self.slice as u64 * 100 + i as u64);
                p.enb_addr = self.enb;
                p.enb_teid = enb_teid(self.slice, i);
                let a = cp.attach(&p).unwrap();
                self.attached.push((self.slice, a, p.enb_teid));
            }
            return true;
        }
        if !self.reported && cp.in_flight() == 0 {
            self.out
                .lock()
                .unwrap()
                .extend(self.attached.iter().copied());
            self.reported = true;
        }
        false
    }
}

struct Net {
    enb: UdpSocket,
    pdn: UdpSocket,
}

impl Net {
    fn new(enb_ip: Ipv4Addr) -> Net {
        // The data path sends downlink to the eNB's GTP-U port, so the eNB needs 2152 on
        // an address of its own; each test uses a different one.
        let enb = UdpSocket::bind((enb_ip, gtpu::GTPU_PORT)).unwrap();
        let pdn = UdpSocket::bind("127.0.0.1:0").unwrap();
        for s in [&enb, &pdn] {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        }
        Net { enb, pdn }
    }
}

fn recv(s: &UdpSocket) -> (Vec<u8>, SocketAddr) {
    let mut buf = [0u8; 2048];
    let (n, from) = s
        .recv_from(&mut buf)
        .expect("nothing received within the timeout");
    (buf[..n].to_vec(), from)
}

fn config(slices: usize, demux: &str, ring_batches: usize, pdn: &UdpSocket) -> String {
    format!(
        "[node]\nslices = {slices}\ndemux = \"{demux}\"\nring_batches = {ring_batches}\nmax_users = 100\npin = false\n[s1u]\nbind = \"127.0.0.1:0\"\n[sgi]\nmode = \"udp\"\nsink_local = \"127.0.0.1:0\"\nsink_peer = \"{}\"\n",
        pdn.local_addr().unwrap()
    )
}

fn start(
    slices: usize,
    demux: &str,
    ring_batches: usize,
    net: &Net,
    enb_ip: Ipv4Addr,
) -> (Node, Vec<(usize, Attached, u32)>) {
    let v = NodeConfig::parse(&config(slices, demux, ring_batches, &net.pdn))
        .unwrap()
        .validate()
        .unwrap();
    let out = Arc::new(Mutex::new(Vec::new()));
    let o2 = out.clone();
    let node = Node::start(&v, &pepc_node::plan::Plan::node_only(&v), &mut |s| {
        Some(Box::new(AttachSome {
            slice: s,
            enb: enb_ip,
            attached: Vec::new(),
            out: o2.clone(),
            reported: false,
        }) as Box<dyn ControlDriver>)
    })
    .unwrap();
    let t0 = Instant::now();
    let want = slices * UES_PER_SLICE as usize;
    loop {
        let got = out.lock().unwrap().clone();
        if got.len() == want {
            return (node, got);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "UEs not attached in time"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Wait until the node's counters stop moving (every packet processed).
fn settle(node: &Node) -> pepc_node::stats::NodeStats {
    let t0 = Instant::now();
    let mut last = node.stats();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = node.stats();
        if now == last || t0.elapsed() > Duration::from_secs(5) {
            return now;
        }
        last = now;
    }
}

fn round_trip(slices: usize, demux: &str, enb_ip: Ipv4Addr) {
    let net = Net::new(enb_ip);
    let (node, ues) = start(slices, demux, 64, &net, enb_ip);
    let queues = demux != "thread";
    let mode = if queues {
        DemuxMode::Queues
    } else {
        DemuxMode::Thread
    };
    assert_eq!(node.mode, mode);
    // The operator is told how packets reach the slices.
    for d in [&node.s1u_io.description, &node.sgi_io.description] {
        assert_eq!(d.contains("through the demux thread"), !queues, "{d}");
        assert_eq!(d.contains("per slice"), queues && slices > 1, "{d}");
    }
    let layout = IdLayout::new(slices, Ipv4Addr::new(10, 0, 0, 0), 10).unwrap(); // the default ue_pool
    for (s, a, _) in &ues {
        assert_eq!(
            layout.split_ue_ip(u32::from(a.ue_ip)).unwrap().0 as usize,
            *s,
            "each UE's address names its slice"
        );
    }
    let server = Ipv4Addr::new(198, 51, 100, 1);

    // Uplink: every UE's packet comes out on SGi, unchanged.
    let mut want = BTreeSet::new();
    for (k, (_, a, _)) in ues.iter().enumerate() {
        let inner = ipv4_udp(a.ue_ip, server, 4000 + k as u16, 9000, 50 + k);
        net.enb
            .send_to(&gpdu(a.teid_ul, &inner), node.s1u_addr)
            .unwrap();
        want.insert(inner);
    }
    let got: BTreeSet<_> = (0..ues.len()).map(|_| recv(&net.pdn).0).collect();
    assert_eq!(got, want, "uplink inner packets reach the SGi peer");

    // Downlink: each UE's packet comes back in its eNB tunnel, from our S1-U address.
    let sgi = node.sgi_local.unwrap();
    let mut want = BTreeSet::new();
    for (k, (s, a, teid)) in ues.iter().enumerate() {
        let down = ipv4_udp(server, a.ue_ip, 9000, 4000 + k as u16, 30 + k);
        net.pdn.send_to(&down, sgi).unwrap();
        let mut g = gpdu(*teid, &down);
        g[2..4].copy_from_slice(&(down.len() as u16).to_be_bytes());
        want.insert((*s, g));
    }
    let mut got = BTreeSet::new();
    for _ in 0..ues.len() {
        let (g, from) = recv(&net.enb);
        assert_eq!(
            from,
            SocketAddr::V4(node.s1u_addr),
            "sent from our S1-U port"
        );
        let teid = u32::from_be_bytes(g[4..8].try_into().unwrap());
        let (s, _, _) = ues.iter().find(|u| u.2 == teid).expect("a known eNB TEID");
        got.insert((*s, g));
    }
    assert_eq!(got, want, "downlink encapsulated to each UE's eNB TEID");

    // Unknown TEIDs: pool space (no slice: default slice) and an empty slot of the
    // last slice (that slice): both answered with an Error Indication.
    let junk = ipv4_udp(Ipv4Addr::new(10, 9, 9, 9), server, 1, 2, 10);
    let unknown = [0x8000_1234u32, layout.teid(slices as u32 - 1, 999, 0)];
    for t in unknown {
        net.enb.send_to(&gpdu(t, &junk), node.s1u_addr).unwrap();
        let (r, _) = recv(&net.enb);
        assert_eq!(r[1], gtpu::ERROR_INDICATION, "unknown TEID {t:#x}");
        assert!(
            r.windows(5)
                .any(|w| w[0] == 16 && w[1..5] == t.to_be_bytes()),
            "the Error Indication names TEID {t:#x}"
        );
    }

    // Echo is answered (by slice 0's data path).
    let mut echo = [0u8; 16];
    let n = gtpu::echo_request(9, &mut echo).unwrap();
    net.enb.send_to(&echo[..n], node.s1u_addr).unwrap();
    assert_eq!(recv(&net.enb).0[1], gtpu::ECHO_RESPONSE);

    let st = settle(&node);
    let n_ues = ues.len() as u64;
    if queues {
        assert!(st.demux.is_none(), "no demux thread in queue mode");
    } else {
        let d = st.demux.as_ref().expect("demux stats");
        assert_eq!(d.rx_s1u, n_ues + 3);
        assert_eq!(d.rx_sgi, n_ues);
        assert_eq!((d.unknown_teid, d.path_management, d.ring_full), (1, 1, 0));
    }
    assert_eq!(st.slices.len(), slices);
    for s in &st.slices {
        let last = s.slice == slices - 1;
        assert_eq!(s.ul_forwarded, UES_PER_SLICE as u64, "slice {}", s.slice);
        assert_eq!(s.dl_forwarded, UES_PER_SLICE as u64, "slice {}", s.slice);
        let ei = u64::from(s.slice == 0) + u64::from(last);
        assert_eq!(s.error_indications, ei, "slice {}", s.slice);
        assert_eq!(s.echo_replies, u64::from(s.slice == 0));
        // Each slice's packets, and the pool-space TEID and Echo on slice 0.
        let ul = UES_PER_SLICE as u64 + 2 * u64::from(s.slice == 0) + u64::from(last);
        match s.demux {
            Some(dm) => {
                assert_eq!(dm.ul, ul, "slice {}", s.slice);
                assert_eq!(dm.dl, UES_PER_SLICE as u64);
            }
            None => {
                // The kernel put every packet on its slice's own socket: none handed on.
                assert!(queues);
                assert_eq!(
                    (s.s1u.handed_off, s.sgi.handed_off),
                    (0, 0),
                    "slice {}",
                    s.slice
                );
            }
        }
        assert_eq!(s.s1u.rx_packets, ul, "slice {}", s.slice);
        assert_eq!(s.sgi.rx_packets, UES_PER_SLICE as u64);
        assert_eq!(s.sgi.tx_packets, UES_PER_SLICE as u64);
        assert_eq!(s.s1u.tx_packets, UES_PER_SLICE as u64 + ei + s.echo_replies);
        assert_eq!(s.s1u.tx_failed + s.sgi.tx_failed, 0);
    }
    let text = st.to_string();
    assert!(text.contains(&format!("slice {}", slices - 1)));
    assert_eq!(text.contains("demux: rx s1u"), !queues, "{text}");
    let halves = node.shutdown();
    assert_eq!(halves.len(), slices);
    for (cp, _) in &halves {
        assert_eq!(cp.ue_count(), UES_PER_SLICE as usize);
    }
}

#[test]
fn two_slices_behind_the_demux() {
    round_trip(2, "thread", Ipv4Addr::new(127, 0, 3, 2));
}

#[test]
fn three_slices_behind_the_demux() {
    round_trip(3, "thread", Ipv4Addr::new(127, 0, 3, 3));
}

#[test]
fn two_slices_on_sockets_of_their_own() {
    // What "auto" picks for several slices on kernel sockets.
    round_trip(2, "auto", Ipv4Addr::new(127, 0, 3, 6));
}

#[test]
fn three_slices_on_sockets_of_their_own() {
    round_trip(3, "queues", Ipv4Addr::new(127, 0, 3, 7));
}

#[test]
fn one_slice_through_the_demux_thread_when_asked() {
    round_trip(1, "thread", Ipv4Addr::new(127, 0, 3, 1));
}

/// A burst into tiny rings: whatever the demux could not hand over is counted as
/// ring-full, and every packet is accounted for exactly once.
#[test]
fn burst_into_small_rings_is_accounted_for() {
    let enb_ip = Ipv4Addr::new(127, 0, 3, 4);
    let net = Net::new(enb_ip);
    let (node, ues) = start(2, "thread", 1, &net, enb_ip);
    let server = Ipv4Addr::new(198, 51, 100, 1);
    let pkts: Vec<Vec<u8>> = ues
        .iter()
        .map(|(_, a, _)| gpdu(a.teid_ul, &ipv4_udp(a.ue_ip, server, 1, 2, 20)))
        .collect();
    let sent = 4000usize;
    for i in 0..sent {
        net.enb
            .send_to(&pkts[i % pkts.len()], node.s1u_addr)
            .unwrap();
    }
    let st = settle(&node);
    let d = st.demux.as_ref().unwrap();
    assert!(d.rx_s1u > 0 && d.rx_s1u <= sent as u64);
    let steered: u64 = d.slices.iter().map(|s| s.ul + s.ul_ring_full).sum();
    assert_eq!(
        steered, d.rx_s1u,
        "every received packet steered or dropped"
    );
    assert_eq!(
        d.ring_full,
        d.slices.iter().map(|s| s.ul_ring_full).sum::<u64>()
    );
    for (s, dm) in st.slices.iter().zip(&d.slices) {
        assert!(dm.ul > 0, "slice {} got traffic", s.slice);
        assert_eq!(
            s.s1u.rx_packets, dm.ul,
            "slice {}: ring delivered all it took",
            s.slice
        );
        assert_eq!(s.ul_forwarded + s.drops, dm.ul, "slice {}", s.slice);
        assert_eq!(s.sgi.tx_packets + s.sgi.tx_failed, s.ul_forwarded);
    }
    eprintln!(
        "burst of {sent}: demux received {}, ring-full drops {}",
        d.rx_s1u, d.ring_full
    );
    node.shutdown();
}

/// A control driver that serves one slice only (as the S1-MME driver does) is refused
/// with more slices, naming the key.
#[test]
fn single_slice_driver_refuses_more_slices() {
    struct OneSlice;
    impl ControlDriver for OneSlice {
        fn run_once(&mut self, _cp: &mut ControlPlane, _now: Instant) -> bool {
            false
        }
        fn max_slices(&self) -> Option<usize> {
            Some(1)
        }
    }
    let pdn = UdpSocket::bind("127.0.0.1:0").unwrap();
    let v = NodeConfig::parse(&config(2, "auto", 4, &pdn))
        .unwrap()
        .validate()
        .unwrap();
    let e = Node::start(&v, &pepc_node::plan::Plan::node_only(&v), &mut |_| {
        Some(Box::new(OneSlice) as Box<dyn ControlDriver>)
    })
    .err()
    .expect("refused")
    .to_string();
    assert!(
        e.contains("node.slices") && e.contains("at most 1 slice"),
        "{e}"
    );
}
