//! `mballoc bench`: mballoc side by side with the allocators a user would pick instead, thread
//! scaling, and a huge aged filesystem (figures: docs/performance.md).
//!
//! * [`churn`] — the churn benchmark on mballoc (linux-6.18, proposed), offset-allocator,
//!   xalloc, a first-fit bitmap and libext2fs (where built), with M4/M8 at the end.
//! * [`threads`] — W1 (will-it-scale fallocate2) on 1, 2 … threads, linux-6.16, linux-6.18 and
//!   proposed, with ext4's own fallocate2 requests and with normalised appenders.
//! * [`huge`] — a 16 TiB filesystem aged to 75 % by a procedural bitmap source, lazily loaded
//!   behind a bounded group cache.
//!
//! Timings are medians of several runs taken in one process; compare them only within one run.

pub mod aged_source;
pub mod churn;
pub mod cli;
mod error;
pub mod frag;
pub mod huge;
pub mod peer;
pub mod peers;
pub mod report;
pub mod rng;
pub mod threads;

use std::collections::BTreeMap;

pub use error::BenchError;

/// `p`'s tunables for `geo` and `cpus` with the bench's `--set name=value` settings on top,
/// so that one switch can be measured inside a preset (`--set prefetch_test_before_set=1`).
pub fn tunables(
    p: mballoc::Policy,
    geo: &mballoc::Geometry,
    cpus: u32,
    settings: &[String],
) -> Result<mballoc::Tunables, BenchError> {
    let mut t = p.tunables(geo, cpus);
    mballoc::apply_settings(&mut t, settings, geo).map_err(|source| BenchError::Setting {
        setting: format!("--set {}", settings.join(" --set ")),
        source,
    })?;
    Ok(t)
}

/// Median of a non-empty sample (mean of the two middle values for even sizes).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// For each entry, its figure divided by every other entry's: `ratio_vs[peer] = mine / peer's`
/// (below 1 = faster than that peer, for times).
pub fn ratios(named: &[(String, f64)]) -> Vec<BTreeMap<String, f64>> {
    named
        .iter()
        .map(|(me, v)| {
            named
                .iter()
                .filter(|(other, o)| other != me && *o > 0.0)
                .map(|(other, o)| (other.clone(), v / o))
                .collect()
        })
        .collect()
}

pub(crate) fn fill_ratios<T>(
    items: &mut [T],
    key: impl Fn(&T) -> (&String, f64),
    slot: impl Fn(&mut T) -> &mut BTreeMap<String, f64>,
) {
    let named: Vec<(String, f64)> = items
        .iter()
        .map(|t| {
            let (n, v) = key(t);
            (n.clone(), v)
        })
        .collect();
    for (t, r) in items.iter_mut().zip(ratios(&named)) {
        *slot(t) = r;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_ratios() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        let r = ratios(&[("a".into(), 100.0), ("b".into(), 50.0)]);
        assert_eq!(r[0]["b"], 2.0);
        assert_eq!(r[1]["a"], 0.5);
        assert!(!r[0].contains_key("a"));
    }

    #[test]
    fn settings_go_on_top_of_the_policy() {
        let geo = mballoc::Geometry::ext4_default(1 << 30).unwrap();
        let p = mballoc::Policy::Linux618;
        let plain = tunables(p, &geo, 2, &[]).unwrap();
        assert!(!plain.prefetch_test_before_set);
        let set = tunables(p, &geo, 2, &["prefetch_test_before_set=1".into()]).unwrap();
        assert!(set.prefetch_test_before_set);
        assert_eq!(
            set.nr_global_goals, plain.nr_global_goals,
            "the rest is the policy's"
        );
        let bad = tunables(p, &geo, 2, &["nr_global_goals=0".into()]);
        assert!(matches!(bad, Err(BenchError::Setting { .. })), "{bad:?}");
    }
}
