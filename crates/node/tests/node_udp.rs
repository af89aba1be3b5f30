//! A node on loopback: GTP-U in on S1-U, inner packets out to the SGi peer, downlink
//! back through the tunnel, Echo answered. Real sockets, bounded in time.

use pepc_mme::ControlPlane;
use pepc_node::config::NodeConfig;
use pepc_node::node::Node;
use pepc_node::runtime::ControlDriver;
use pepc_slice::control::{AttachParams, Attached};
use pepc_slice::packets::{gpdu, ipv4_udp};
use std::net::{Ipv4Addr, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct AttachOne {
    enb: Ipv4Addr,
    out: Arc<Mutex<Option<Attached>>>,
}

impl ControlDriver for AttachOne {
    fn run_once(&mut self, cp: &mut ControlPlane, _now: Instant) -> bool {
        let mut o = self.out.lock().unwrap();
        if o.is_none() {
            let mut p = AttachParams::new(1);
            p.enb_addr = self.enb;
            p.enb_teid = 0x42;
            *o = Some(cp.attach(&p).unwrap());
            return true;
        }
        false
    }
}

fn recv(s: &UdpSocket) -> Vec<u8> {
    let mut buf = [0u8; 2048];
    let (n, _) = s
        .recv_from(&mut buf)
        .expect("nothing received within the timeout");
    buf[..n].to_vec()
}

#[test]
fn gtpu_round_trip_through_a_running_node() {
    let enb_ip = Ipv4Addr::new(127, 0, 0, 77);
    let enb = UdpSocket::bind((enb_ip, 2152)).unwrap();
    let pdn = UdpSocket::bind("127.0.0.1:0").unwrap();
    for s in [&enb, &pdn] {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    }
    let cfg = format!(
        "[node]\nmax_users = 100\npin = false\n[s1u]\nbind = \"127.0.0.1:0\"\n[sgi]\nmode = \"udp\"\nsink_local = \"127.0.0.1:0\"\nsink_peer = \"{}\"\n",
        pdn.local_addr().unwrap()
    );
    let v = NodeConfig::parse(&cfg).unwrap().validate().unwrap();
    let out = Arc::new(Mutex::new(None));
    let o2 = out.clone();
    let node = Node::start(&v, &pepc_node::plan::Plan::node_only(&v), &mut |_| {
        Some(Box::new(AttachOne {
            enb: enb_ip,
            out: o2.clone(),
        }) as Box<dyn ControlDriver>)
    })
    .unwrap();
    let t0 = Instant::now();
    let a = loop {
        if let Some(a) = *out.lock().unwrap() {
            break a;
        }
        assert!(t0.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(5));
    };
    std::thread::sleep(Duration::from_millis(50)); // let the data thread apply the insert
    let server = Ipv4Addr::new(198, 51, 100, 1);
    let inner = ipv4_udp(a.ue_ip, server, 4000, 9000, 100);
    enb.send_to(&gpdu(a.teid_ul, &inner), node.s1u_addr)
        .unwrap();
    assert_eq!(
        recv(&pdn),
        inner,
        "uplink inner packet reaches the SGi peer"
    );

    let down = ipv4_udp(server, a.ue_ip, 9000, 4000, 64);
    pdn.send_to(&down, node.sgi_local.unwrap()).unwrap();
    let g = recv(&enb);
    assert_eq!(
        &g[4..8],
        &0x42u32.to_be_bytes(),
        "downlink uses the eNB's TEID"
    );
    assert_eq!(&g[8..], &down[..]);

    let mut echo = [0u8; 16];
    let n = pepc_wire::gtpu::echo_request(9, &mut echo).unwrap();
    enb.send_to(&echo[..n], node.s1u_addr).unwrap();
    let r = recv(&enb);
    assert_eq!(r[1], pepc_wire::gtpu::ECHO_RESPONSE);

    for s in node.slices {
        let (_cp, dp) = s.join();
        let c = dp.counters();
        assert_eq!(c.ul_forwarded.load(std::sync::atomic::Ordering::Relaxed), 1);
        assert_eq!(c.dl_forwarded.load(std::sync::atomic::Ordering::Relaxed), 1);
    }
}
