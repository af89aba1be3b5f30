//! A slice thread that panics does not leave a node that silently serves nothing: the
//! node names the stopped thread (`pepc run` then exits non-zero with that message).

use pepc_mme::ControlPlane;
use pepc_node::config::NodeConfig;
use pepc_node::node::Node;
use pepc_node::runtime::ControlDriver;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

/// A control driver that fails on its third round.
struct Faulty(u32);

impl ControlDriver for Faulty {
    fn run_once(&mut self, _cp: &mut ControlPlane, _now: Instant) -> bool {
        self.0 += 1;
        assert!(self.0 < 3, "injected fault in the control thread");
        false
    }
}

#[test]
fn a_panicked_control_thread_is_reported() {
    let pdn = UdpSocket::bind("127.0.0.1:0").unwrap();
    let cfg = format!(
        "[node]\nmax_users = 100\npin = false\n[s1u]\nbind = \"127.0.0.1:0\"\n[sgi]\nmode = \"udp\"\nsink_local = \"127.0.0.1:0\"\nsink_peer = \"{}\"\n",
        pdn.local_addr().unwrap()
    );
    let v = NodeConfig::parse(&cfg).unwrap().validate().unwrap();
    let mut d: Option<Box<dyn ControlDriver>> = Some(Box::new(Faulty(0)));
    let node = Node::start(&v, &pepc_node::plan::Plan::node_only(&v), &mut |_| d.take()).unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    let failed = loop {
        if let Some(f) = node.failed() {
            break f;
        }
        assert!(Instant::now() < until, "the failure was never seen");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(failed, "slice 0's control thread stopped");
    // A healthy node reports nothing (the data thread still runs).
    assert!(!node.slices[0].data.is_finished());
    node.slices[0]
        .stop
        .store(true, std::sync::atomic::Ordering::Relaxed);
}
