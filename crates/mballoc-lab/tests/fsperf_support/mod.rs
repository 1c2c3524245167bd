//! What the fsperf comparisons share: the six tests, the stored real-kernel runs and one lab
//! run as the reference runs were made (8 GiB, scale 0.5, one thread).
#![allow(dead_code)] // each test binary uses its own part

use mballoc::Policy;
use mballoc_lab::workload::{run, NoProgress, RunConfig, RunResult};
use serde_json::Value;

pub const TESTS: [&str; 6] = [
    "bufferedappendvsfallocate",
    "correlatedlifetimes",
    "mixedlifetimes",
    "foursizes",
    "funnysizeshigh",
    "funnysizeslow",
];

/// The size-class goal's seeds: as many as the real ext4 runs, so that like is compared with
/// like (medians of nine).
pub const SEEDS: std::ops::RangeInclusive<u64> = 1..=9;

/// `kernel-frag/reference.json`.
pub fn reference() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../kernel-frag/reference.json"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap()
}

/// One run of `test` at 8 GiB, scale 0.5, with `extra` settings.
pub fn lab(test: &str, policy: Policy, seed: u64, extra: &[&str]) -> RunResult {
    let mut settings = vec!["scale=0.5".to_string()];
    settings.extend(extra.iter().map(|s| s.to_string()));
    let cfg = RunConfig {
        workload: test.to_string(),
        policy,
        settings,
        threads: 1,
        fs_size: 8 << 30,
        seed,
        quick: false,
        load_cost_ns: 0,
        image: None,
    };
    run(&cfg, &NoProgress).unwrap_or_else(|e| panic!("{test} seed {seed}: {e}"))
}

/// Arithmetic mean of a non-empty sample (`metrics::quantile::mean`).
pub fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = v.collect();
    assert!(!v.is_empty());
    mballoc_lab::metrics::quantile::mean(&v)
}

/// Median of a non-empty sample, the mean of the two middle values for an even count
/// (`bench::median`).
pub fn median(v: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = v.collect();
    assert!(!v.is_empty());
    mballoc_lab::bench::median(&v)
}
