//! The lab's fsperf workloads against real ext4: every test at 8 GiB, scale 0.5 (the job files
//! the reference runs used), Linux 6.18 policy, one thread (deterministic), the **mean** of
//! seeds 1–30 checked against the mean of the 9 real Linux 6.18 ext4 runs stored in
//! `kernel-frag/reference.json`: `frag_pct_mean` and extents per file within ±25 %.
//!
//! Why means of many seeds: single runs vary widely on both sides (real
//! bufferedappendvsfallocate: 14.3 … 38.8 over the nine), and correlatedlifetimes is bimodal on
//! both: 5 of the 9 real runs leave no fragmented group, 4 leave one at 10–21 %; the lab, with
//! its fallocate latencies drawn from fio's measured distributions, leaves none on 11 of seeds
//! 1–30 and one at 0.10–25.78 % on the others. A median of such a sample picks a mode by chance
//! (lab seeds 1–9: 6.45 against a real median of 0); the mean estimates the expected
//! fragmentation. A lab run costs milliseconds, so its side takes 30 seeds and its sampling
//! error stays well inside the tolerance. (This test compared medians of seeds 1–9 until the fallocate latency spread was
//! modelled; the medians are printed beside the means.)
//!
//! A figure the lab does not reach is listed in [`KNOWN_MISSES`] with its measured value and
//! the reason found; the test then checks that it still misses on the same side, so a fix (or a
//! regression past the other bound) shows up here and the list cannot go stale.

mod fsperf_support;

use fsperf_support::{lab, mean, median, reference, TESTS};
use mballoc::Policy;

const TOLERANCE: f64 = 0.25;

/// The lab's seeds.
const SEEDS: std::ops::RangeInclusive<u64> = 1..=30;

/// `(test, metric, lab / kernel − 1 when recorded)`. None at present: the last one, foursizes
/// `frag_pct_mean` (+27 % on medians of nine, +19 % on means), came inside with the fallocate
/// latency spread, the wall-time pace of a test without appenders and inode-number reuse
/// (`docs/fsperf.md`, "Against real ext4").
const KNOWN_MISSES: &[(&str, &str, f64)] = &[];

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
        let real = reference["tests"][test]["ext4"]["runs"].as_array().unwrap();
        assert_eq!(real.len(), 9, "{test}: the stored real ext4 runs");
        for metric in ["frag_pct_mean", "extents_per_file"] {
            let k = mean(real.iter().map(|r| r[metric].as_f64().unwrap()));
            let l = mean(runs.iter().map(|r| r.scalars[metric]));
            let (lm, km) = (
                median(runs.iter().map(|r| r.scalars[metric])),
                median(real.iter().map(|r| r[metric].as_f64().unwrap())),
            );
            let line = format!(
                "{test} {metric}: lab mean {l:.2} kernel mean {k:.2} ({:+.1} %); medians {lm:.2} / {km:.2}",
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
