//! M3 — allocator call latency, as fsperf's `LatencyTracing` summarises `find_free_extent`.
//!
//! fsperf expands the bpftrace `(delay, count)` map into a list and reports `ns_mean`, `ns_min`,
//! `ns_max`, `ns_p50/p95/p99` via `numpy.percentile` (linear interpolation, R-7) and `calls`.
//! We compute the same exactly on the sorted samples (no HDR histogram: exactness makes the
//! numbers testable), and add p90 and p99.9. Samples may be tagged (e.g. by the criterion that
//! satisfied the request) to get one summary per tag.

use super::quantile::quantile_r7;
use serde::Serialize;
use std::collections::BTreeMap;

/// Latency summary of one set of calls, in nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyStats {
    /// Number of calls.
    pub calls: u64,
    /// Arithmetic mean.
    pub ns_mean: f64,
    /// Fastest call.
    pub ns_min: u64,
    /// R-7 median.
    pub ns_p50: f64,
    /// R-7 90th percentile.
    pub ns_p90: f64,
    /// R-7 95th percentile.
    pub ns_p95: f64,
    /// R-7 99th percentile.
    pub ns_p99: f64,
    /// R-7 99.9th percentile.
    pub ns_p999: f64,
    /// Slowest call.
    pub ns_max: u64,
}

/// Summarises latencies in ns. No samples gives `calls = 0` and zeros everywhere (as fsperf
/// reports an untraced function).
pub fn latency_stats(ns: &[u64]) -> LatencyStats {
    let mut sorted: Vec<u64> = ns.to_vec();
    sorted.sort_unstable();
    let as_f64: Vec<f64> = sorted.iter().map(|&v| v as f64).collect();
    let sum: u128 = sorted.iter().map(|&v| u128::from(v)).sum();
    let calls = sorted.len() as u64;
    LatencyStats {
        calls,
        ns_mean: if calls == 0 {
            0.0
        } else {
            sum as f64 / calls as f64
        },
        ns_min: sorted.first().copied().unwrap_or(0),
        ns_p50: quantile_r7(&as_f64, 0.50),
        ns_p90: quantile_r7(&as_f64, 0.90),
        ns_p95: quantile_r7(&as_f64, 0.95),
        ns_p99: quantile_r7(&as_f64, 0.99),
        ns_p999: quantile_r7(&as_f64, 0.999),
        ns_max: sorted.last().copied().unwrap_or(0),
    }
}

/// Latency over all calls and per tag (e.g. `"cr0"`, `"CR_GOAL_LEN_FAST"`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaggedLatency {
    /// All samples together.
    pub all: LatencyStats,
    /// One summary per tag, keyed by the tag's display form.
    pub by_tag: BTreeMap<String, LatencyStats>,
}

/// Summarises `(tag, ns)` samples overall and per tag.
pub fn tagged_latency<T: std::fmt::Display>(samples: &[(T, u64)]) -> TaggedLatency {
    let mut groups: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (tag, ns) in samples {
        groups.entry(tag.to_string()).or_default().push(*ns);
    }
    let all: Vec<u64> = samples.iter().map(|&(_, ns)| ns).collect();
    TaggedLatency {
        all: latency_stats(&all),
        by_tag: groups
            .iter()
            .map(|(k, v)| (k.clone(), latency_stats(v)))
            .collect(),
    }
}
