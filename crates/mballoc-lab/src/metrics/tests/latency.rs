use super::close;
use crate::metrics::latency::{latency_stats, tagged_latency};

#[test]
fn percentiles_of_one_to_hundred() {
    let ns: Vec<u64> = (1..=100).rev().collect();
    let l = latency_stats(&ns);
    assert_eq!((l.calls, l.ns_min, l.ns_max), (100, 1, 100));
    close(l.ns_mean, 50.5);
    // h = 99·q. p50: h = 49.5 -> 50.5; p90: 89.1 -> 90.1; p95: 94.05 -> 95.05;
    // p99: 98.01 -> 99.01; p99.9: 98.901 -> 99.901.
    close(l.ns_p50, 50.5);
    close(l.ns_p90, 90.1);
    close(l.ns_p95, 95.05);
    close(l.ns_p99, 99.01);
    close(l.ns_p999, 99.901);
}

#[test]
fn empty_and_single() {
    let e = latency_stats(&[]);
    assert_eq!((e.calls, e.ns_min, e.ns_max), (0, 0, 0));
    close(e.ns_p99, 0.0);
    let s = latency_stats(&[42]);
    close(s.ns_p50, 42.0);
    close(s.ns_p999, 42.0);
}

#[test]
fn huge_values_do_not_overflow_the_mean() {
    let l = latency_stats(&[u64::MAX, u64::MAX]);
    close(l.ns_mean, u64::MAX as f64);
}

#[test]
fn tagged_by_criterion() {
    let t = tagged_latency(&[("cr0", 10), ("cr1", 20), ("cr0", 30)]);
    assert_eq!(t.all.calls, 3);
    close(t.all.ns_mean, 20.0);
    assert_eq!(t.by_tag["cr0"].calls, 2);
    close(t.by_tag["cr0"].ns_p50, 20.0);
    assert_eq!(t.by_tag["cr1"].ns_max, 20);
}
