//! A faulty link for SCTP over UDP (RFC 6951): a relay between the eNBs and the MME
//! that loses, duplicates and reorders datagrams, each with its own probability, in
//! both directions, from a seeded generator (a run is repeatable). Each eNB address
//! gets its own upstream socket, so the MME sees one peer per eNB as without it.
//! Where the kernel has `sch_netem`, the tests use it on a veth pair instead; this
//! one needs neither root nor netem.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, Default)]
pub struct Faults {
    pub loss: f64,
    pub duplicate: f64,
    pub reorder: f64,
}

/// What the relay did to the traffic.
#[derive(Debug, Default)]
pub struct RelayCounts {
    pub forwarded: AtomicU64,
    pub lost: AtomicU64,
    pub duplicated: AtomicU64,
    pub reordered: AtomicU64,
}

pub struct Relay {
    pub addr: SocketAddr,
    pub counts: Arc<RelayCounts>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One direction's held-back datagram (sent after the next one, or after 20 ms).
type Held = Option<(Vec<u8>, Instant)>;

impl Relay {
    /// Listens on `listen` (the address the eNBs are given), forwards to `mme`.
    pub fn start(listen: SocketAddr, mme: SocketAddr, faults: Faults, seed: u64) -> Relay {
        let front = UdpSocket::bind(listen).expect("relay socket");
        front.set_nonblocking(true).unwrap();
        let addr = front.local_addr().unwrap();
        let counts = Arc::new(RelayCounts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (counts.clone(), stop.clone());
        let handle = std::thread::spawn(move || {
            let mut rng = Rng(seed | 1);
            // eNB address -> (upstream socket, held uplink, held downlink)
            let mut peers: HashMap<SocketAddr, (UdpSocket, Held, Held)> = HashMap::new();
            let mut buf = vec![0u8; 65536];
            // Sends `d` to `to` through `sock`, with the faults.
            let pass =
                |sock: &UdpSocket, to: SocketAddr, d: &[u8], held: &mut Held, rng: &mut Rng| {
                    if rng.unit() < faults.loss {
                        c.lost.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    if rng.unit() < faults.reorder && held.is_none() {
                        c.reordered.fetch_add(1, Ordering::Relaxed);
                        *held = Some((d.to_vec(), Instant::now()));
                        return;
                    }
                    let _ = sock.send_to(d, to);
                    c.forwarded.fetch_add(1, Ordering::Relaxed);
                    if rng.unit() < faults.duplicate {
                        c.duplicated.fetch_add(1, Ordering::Relaxed);
                        let _ = sock.send_to(d, to);
                    }
                    // The held one now goes after this one: reordered.
                    if let Some((h, _)) = held.take() {
                        let _ = sock.send_to(&h, to);
                        c.forwarded.fetch_add(1, Ordering::Relaxed);
                    }
                };
            while !s.load(Ordering::Relaxed) {
                let mut busy = false;
                while let Ok((n, from)) = front.recv_from(&mut buf) {
                    busy = true;
                    let e = peers.entry(from).or_insert_with(|| {
                        let up = UdpSocket::bind((listen.ip(), 0)).expect("upstream socket");
                        up.set_nonblocking(true).unwrap();
                        (up, None, None)
                    });
                    let (up, held_ul, _) = e;
                    pass(up, mme, &buf[..n], held_ul, &mut rng);
                }
                for (enb, (up, _, held_dl)) in peers.iter_mut() {
                    while let Ok((n, _)) = up.recv_from(&mut buf) {
                        busy = true;
                        pass(&front, *enb, &buf[..n], held_dl, &mut rng);
                    }
                }
                // A held datagram with nothing behind it goes after 20 ms.
                for (enb, (up, held_ul, held_dl)) in peers.iter_mut() {
                    for (sock, to, held) in [(&*up, mme, held_ul), (&front, *enb, held_dl)] {
                        if held
                            .as_ref()
                            .is_some_and(|(_, t)| t.elapsed() > Duration::from_millis(20))
                        {
                            let (d, _) = held.take().expect("checked");
                            let _ = sock.send_to(&d, to);
                            c.forwarded.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                if !busy {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        });
        Relay {
            addr,
            counts,
            stop,
            handle: Some(handle),
        }
    }
}
