//! Memory comes back: storms of attach + switch-off detach against
//! one node in this process, the live heap (a counting allocator over mimalloc, as
//! the `pepc` binary has) after each storm back at its level after the first within
//! 1%. RSS per storm is printed beside it (not asserted: what the allocator keeps is
//! its choice; `pepc bench memory` reports the slope at full scale).

use pepc::demo::DemoPorts;
use pepc::memory::{run, MemoryOpts};
use std::net::Ipv4Addr;

#[global_allocator]
static A: pepc::alloc::Counting<pepc::alloc::Mi> = pepc::alloc::Counting(pepc::alloc::Mi);

#[test]
fn live_heap_is_back_at_its_level_after_every_storm() {
    pepc::alloc::set_purge_delay();
    pepc::alloc::count_live_heap();
    let ports = DemoPorts {
        s1mme_udp: 19_740,
        s1u: Ipv4Addr::new(127, 0, 77, 1),
        sgi_sink_local: 15_740,
        sgi_sink_peer: 15_741,
        enb_gtpu: Ipv4Addr::new(127, 0, 77, 2),
    };
    let r = run(
        &ports,
        &MemoryOpts {
            storms: 6,
            ues: 1000,
            attach_rate: 2000.0,
            slices: 2,
            enbs: 1,
        },
    )
    .expect("storms");
    eprintln!("{}", serde_json::to_string_pretty(&r).unwrap());
    assert_eq!(r.failed, 0, "every attach and detach completes");
    assert_eq!(r.storms.len(), 6);
    for s in &r.storms {
        assert_eq!(s.attached, 1000, "storm {}", s.storm);
    }
    let first = r.storms[0].live_heap_bytes;
    assert!(first > 0, "the count is on: {first}");
    for s in &r.storms[1..] {
        let drift = (s.live_heap_bytes - first) as f64 / first as f64;
        assert!(
            drift.abs() <= 0.01,
            "storm {}: live heap {} B against {first} B after the first ({:+.3}%)",
            s.storm,
            s.live_heap_bytes,
            drift * 100.0
        );
    }
}
