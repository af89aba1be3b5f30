//! The node's overload control (`pepc_mme::overload`), sans-IO: backlogs and time in,
//! transitions out. The test is the driver, so it holds the clock.

use pepc_mme::overload::{Change, OverloadConfig, OverloadControl};
use std::time::{Duration, Instant};

fn cfg() -> OverloadConfig {
    OverloadConfig {
        high: 100,
        low: 10,
        hold: Duration::from_millis(100),
        ..OverloadConfig::default()
    }
}

#[test]
fn hysteresis_per_slice_and_node() {
    let t0 = Instant::now();
    let mut o = OverloadControl::new(cfg(), 2);
    let mut ch = vec![];
    o.observe(t0, 0, 100, &mut ch);
    assert!(ch.is_empty(), "at the bound is not over it");
    o.observe(t0, 0, 101, &mut ch);
    assert_eq!(
        ch,
        [
            Change::Slice { slice: 0, on: true },
            Change::Node { on: true }
        ]
    );
    ch.clear();
    o.observe(t0, 1, 500, &mut ch);
    assert_eq!(ch, [Change::Slice { slice: 1, on: true }]);
    ch.clear();
    // Between low and high: no change either way.
    o.observe(t0, 0, 50, &mut ch);
    assert!(ch.is_empty());
    o.observe(t0, 0, 5, &mut ch);
    assert_eq!(
        ch,
        [Change::Slice {
            slice: 0,
            on: false
        }]
    );
    ch.clear();
    // Slice 1 relieved before the hold: the node stays overloaded until it passes.
    let t1 = t0 + Duration::from_millis(50);
    o.observe(t1, 1, 0, &mut ch);
    assert_eq!(
        ch,
        [Change::Slice {
            slice: 1,
            on: false
        }]
    );
    ch.clear();
    assert!(o.overloaded());
    o.observe(t0 + Duration::from_millis(120), 1, 0, &mut ch);
    assert_eq!(ch, [Change::Node { on: false }]);
    assert_eq!((o.stats.starts, o.stats.stops), (1, 1));
    assert_eq!(o.stats.slice_congestions, 2);
    assert_eq!(o.stats.peak_backlog, 500);
}

#[test]
fn a_slice_mme_congested_by_its_own_measure_overloads_the_node() {
    let t0 = Instant::now();
    let mut o = OverloadControl::new(cfg(), 2);
    let mut ch = vec![];
    o.mme_congested(1, true);
    o.observe(t0, 0, 0, &mut ch);
    assert_eq!(ch, [Change::Node { on: true }]);
    ch.clear();
    o.mme_congested(1, false);
    o.observe(t0 + Duration::from_millis(150), 0, 0, &mut ch);
    assert_eq!(ch, [Change::Node { on: false }]);
}

#[test]
fn off_when_high_is_zero() {
    let mut o = OverloadControl::new(OverloadConfig { high: 0, ..cfg() }, 1);
    let mut ch = vec![];
    o.observe(Instant::now(), 0, 1 << 30, &mut ch);
    assert!(ch.is_empty() && !o.overloaded());
}
