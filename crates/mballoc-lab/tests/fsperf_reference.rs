//! The lab's fsperf workloads against real ext4: every test at 8 GiB, scale 0.5 (the job files
//! the reference runs used), Linux 6.18 policy, one thread (deterministic), the median of seeds
//! 1–9 checked against the median of the 9 real Linux 6.18 ext4 runs stored in
//! `kernel-frag/reference.json`: `frag_pct_mean` and extents per file within ±25 %. Single runs
//! vary on both sides (real bufferedappendvsfallocate: 14.3 … 38.8 over the nine), so like is
//! compared with like: a median of nine against a median of nine. The seed count was set to
//! the real run count before either side's figures were looked at.
//!
//! A figure the lab does not reach is listed in [`KNOWN_MISSES`] with its measured value and
//! the reason found; the test then checks that it still misses on the same side, so a fix (or a
//! regression past the other bound) shows up here and the list cannot go stale.

mod fsperf_support;

use fsperf_support::{lab, median, reference, SEEDS, TESTS};
use mballoc::Policy;

const TOLERANCE: f64 = 0.25;

/// `(test, metric, lab / kernel − 1 when recorded)`.
///
/// foursizes: seeds 1–9 give 31.48 / 27.30 / 28.10 / 30.03 / 26.14 / 29.76 / 20.05 / 19.15 /
/// 30.10 (median 28.10) against real 14.60 / 20.31 / 26.85 / 22.06 / 12.83 / 30.08 / 22.97 /
/// 26.47 / 13.26 (median 22.06): +27 %. Seven of the nine seeds lie between 26 and 32, above all
/// but one real run. Over seeds 1–30 the lab's mean is 24.97 (sd 4.06) against a real mean of
/// 21.05 over the nine (+19 %). The lab leaves more data groups than real ext4 (median 36
/// against 31) and more fragmented groups holding a lone appender window: its windows land in
/// groups holding fallocated data 30–48 times per run against 6 in a traced real run, the
/// fallocate jobs' stream-goal chunks taking the windows' goal ranges (`docs/fsperf.md`, "The
/// foursizes gap"); why is not found yet.
const KNOWN_MISSES: &[(&str, &str, f64)] = &[("foursizes", "frag_pct_mean", 0.27)];

/// `within` when `|lab − kernel| ≤ 25 % of kernel` (a kernel 0 needs a lab 0).
fn within(lab: f64, kernel: f64) -> bool {
    (lab - kernel).abs() <= TOLERANCE * kernel.abs()
}

#[test]
fn fsperf_tests_land_within_25_percent_of_real_ext4() {
    let reference = reference();
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for test in TESTS {
        let runs: Vec<_> = SEEDS
            .map(|seed| lab(test, Policy::Linux618, seed, &[]))
            .collect();
        let kernel = &reference["tests"][test]["ext4"]["median"];
        for metric in ["frag_pct_mean", "extents_per_file"] {
            let k = kernel[metric].as_f64().unwrap();
            let l = median(runs.iter().map(|r| r.scalars[metric]));
            let line = format!(
                "{test} {metric}: lab {l:.2} kernel {k:.2} ({:+.1} %)",
                if k == 0.0 { 0.0 } else { (l / k - 1.0) * 100.0 }
            );
            let seeds: Vec<String> = runs
                .iter()
                .map(|r| format!("{:.2}", r.scalars[metric]))
                .collect();
            report.push(format!("{line}; seeds {}", seeds.join(" / ")));
            let known = KNOWN_MISSES.iter().find(|m| m.0 == test && m.1 == metric);
            match known {
                None if !within(l, k) => failures.push(format!("{line}: outside ±25 %")),
                Some(_) if within(l, k) => failures.push(format!(
                    "{line}: within ±25 % now; remove it from KNOWN_MISSES"
                )),
                Some(m) if (l - k).signum() != m.2.signum() => {
                    failures.push(format!("{line}: misses on the other side than recorded"))
                }
                _ => {}
            }
        }
        let groups = |key: &str| median(runs.iter().map(|r| r.scalars[key]));
        report.push(format!(
            "{test} groups (median): {}/{} fragmented/data",
            groups("fragmented_bg_count"),
            groups("data_bg_count")
        ));
        // Every run reports the fsperf group counts the comparison rests on.
        for r in &runs {
            assert!(r.scalars["data_bg_count"] >= r.scalars["fragmented_bg_count"]);
        }
    }
    println!("{}", report.join("\n"));
    assert!(
        failures.is_empty(),
        "{}\n\nall:\n{}",
        failures.join("\n"),
        report.join("\n")
    );
}

#[test]
fn the_check_can_fail() {
    assert!(within(20.0, 20.31) && within(0.0, 0.0));
    assert!(!within(14.47, 22.62) && !within(0.1, 0.0) && !within(10.62, 8.12));
}
