//! Runs one case's two sides, alternating base and improved `reps` times (A B A B …), and
//! summarises each metric by its median over the repetitions.
//!
//! Alternating spreads slow phases of a shared machine (other builds, turbo, page cache) over
//! both sides instead of letting one side absorb them; the median then drops the odd run out.

use mballoc_lab::workload::RunResult;

use super::seeds::Case;
use super::sides::config;
use crate::cli::error::CliError;
use crate::cli::progress::Bar;
use crate::cli::run::run_one;

/// The runs of both sides, in the order they ran.
#[derive(Debug, Default)]
pub struct Pairs {
    pub base: Vec<RunResult>,
    pub improved: Vec<RunResult>,
}

impl Pairs {
    /// Median of `metric` over the base runs and over the improved runs (NaN where absent).
    pub fn medians(&self, metric: &str) -> (f64, f64) {
        (
            median_of(&self.base, metric),
            median_of(&self.improved, metric),
        )
    }

    /// How far the runs of either side spread around their median, in % of it: half the
    /// range, the larger of the two sides (0 with one run per side, or no value).
    pub fn spread(&self, metric: &str) -> f64 {
        spread_of(&self.base, metric).max(spread_of(&self.improved, metric))
    }

    /// Every run, base and improved interleaved as they ran.
    pub fn into_runs(self) -> Vec<RunResult> {
        let mut out = Vec::with_capacity(self.base.len() * 2);
        for (b, i) in self.base.into_iter().zip(self.improved) {
            out.push(b);
            out.push(i);
        }
        out
    }
}

/// Runs `c` with `base` and `improved` alternately, `c.reps` times each (at least once).
pub fn run_pairs(
    c: &Case,
    base: &str,
    improved: &str,
    quick: bool,
    bar: &Bar,
) -> Result<Pairs, CliError> {
    let mut p = Pairs::default();
    for _ in 0..c.reps.max(1) {
        p.base.push(run_one(&config(c, base, quick), bar)?);
        p.improved.push(run_one(&config(c, improved, quick), bar)?);
    }
    Ok(p)
}

/// Half the range of a scalar over `runs`, in % of its median; 0 with fewer than two values
/// or a zero median.
pub fn spread_of(runs: &[RunResult], metric: &str) -> f64 {
    let v: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.scalars.get(metric).copied())
        .filter(|x| x.is_finite())
        .collect();
    spread_pct(&v, median_of(runs, metric))
}

/// Half the range of the finite values `v`, in % of `median`; 0 with fewer than two values
/// or a zero or non-finite median.
pub fn spread_pct(v: &[f64], median: f64) -> f64 {
    let v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.len() < 2 || median == 0.0 || !median.is_finite() {
        return 0.0;
    }
    let (lo, hi) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| {
            (l.min(x), h.max(x))
        });
    (hi - lo) / 2.0 / median.abs() * 100.0
}

/// The median of a scalar over runs that have it; NaN when none has.
pub fn median_of(runs: &[RunResult], metric: &str) -> f64 {
    let mut v: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.scalars.get(metric).copied())
        .filter(|x| !x.is_nan())
        .collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::output::tests::sample;

    #[test]
    fn medians_ignore_the_odd_run_out() {
        let runs: Vec<RunResult> = [100.0, 5.0, 110.0]
            .iter()
            .map(|&ops| sample("a", 1, ops))
            .collect();
        assert_eq!(median_of(&runs, "ops_per_sec"), 100.0);
        assert_eq!(median_of(&runs[..2], "ops_per_sec"), 52.5);
        assert!(median_of(&runs, "nosuch").is_nan());
        let p = Pairs {
            base: runs.clone(),
            improved: runs,
        };
        assert_eq!(p.medians("ops_per_sec"), (100.0, 100.0));
        assert_eq!(spread_of(&p.base, "ops_per_sec"), 52.5); // (110 - 5) / 2 / 100
        assert_eq!(spread_of(&p.base[..1], "ops_per_sec"), 0.0);
        assert_eq!(p.spread("nosuch"), 0.0);
        assert_eq!(p.into_runs().len(), 6);
    }
}
