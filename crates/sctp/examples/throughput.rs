//! Hand-run loopback throughput of `UdpSctpTransport`: a client thread sends S1AP-sized
//! requests with up to `window` outstanding, a server thread echoes them.
//!
//!     cargo run --release -p pepc-sctp --example throughput -- [messages] [window] [assocs]

use std::time::{Duration, Instant};

use pepc_sctp::{Config, S1Transport, TransportEvent, UdpSctpTransport, S1AP_PPID};

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let total = *args.first().unwrap_or(&1_000_000);
    let window = *args.get(1).unwrap_or(&256);
    let nassoc = *args.get(2).unwrap_or(&1);
    let mut server =
        UdpSctpTransport::bind("127.0.0.1:0".parse().unwrap(), 36412, Config::default()).unwrap();
    let saddr = server.local_addr();
    let srv = std::thread::spawn(move || {
        let mut ev = Vec::new();
        let mut downs = 0;
        let mut ups = 0;
        while ups == 0 || downs < ups {
            ev.clear();
            server.poll(Duration::from_millis(100), &mut ev).unwrap();
            for e in ev.drain(..) {
                match e {
                    TransportEvent::Data {
                        assoc,
                        stream,
                        ppid,
                        data,
                    } => server.send(assoc, stream, ppid, &data).unwrap(),
                    TransportEvent::Up { .. } => ups += 1,
                    TransportEvent::Down { .. } => downs += 1,
                }
            }
        }
    });
    let mut client = UdpSctpTransport::connect(
        "127.0.0.1:0".parse().unwrap(),
        saddr,
        36412,
        Config::default(),
    )
    .unwrap();
    for _ in 1..nassoc {
        client.open_association().unwrap();
    }
    let mut ev = Vec::new();
    let mut assocs = Vec::new();
    while assocs.len() < nassoc {
        client.poll(Duration::from_millis(100), &mut ev).unwrap();
        for e in ev.drain(..) {
            if let TransportEvent::Up { assoc, .. } = e {
                assocs.push(assoc);
            }
        }
    }
    let msg = vec![0x5au8; 120];
    let t0 = Instant::now();
    let (mut sent, mut recvd) = (0usize, 0usize);
    while recvd < total {
        while sent < total && sent - recvd < window {
            client
                .send(assocs[sent % nassoc], (sent % 8) as u16, S1AP_PPID, &msg)
                .unwrap();
            sent += 1;
        }
        client.poll(Duration::from_millis(100), &mut ev).unwrap();
        for e in ev.drain(..) {
            if let TransportEvent::Data { .. } = e {
                recvd += 1;
            }
        }
    }
    let el = t0.elapsed();
    println!(
        "{total} request/response pairs in {el:?}: {:.0} round trips/s ({} assocs, window {window})",
        total as f64 / el.as_secs_f64(),
        nassoc
    );
    for a in assocs {
        client.close(a);
    }
    let end = Instant::now() + Duration::from_secs(5);
    while client.associations() > 0 && Instant::now() < end {
        client.poll(Duration::from_millis(10), &mut ev).unwrap();
    }
    srv.join().unwrap();
}
