//! Metric tests: hand-computed values (worked out in comments), naive re-implementations, and
//! property tests comparing the fast code against the naive one on random bitmaps.

mod bluestore;
mod e4defrag;
mod extfrag;
mod filefrag;
mod frag_pct;
mod free_space;
mod freefrag;
mod latency;
mod layout;
mod mb_groups;
mod naive;
mod props;
mod quantile;
mod size_class;
mod throughput;
mod xfs;

/// Asserts two floats agree to 1e-9 (relative for large values).
#[track_caller]
pub fn close(a: f64, b: f64) {
    let tol = 1e-9 * a.abs().max(b.abs()).max(1.0);
    assert!((a - b).abs() <= tol, "{a} != {b}");
}
