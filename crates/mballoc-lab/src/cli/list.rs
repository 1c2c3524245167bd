//! `mballoc list`: what can be run and measured, one line each — workloads, metrics M1–M12,
//! policy presets, and every tunable with its default on a 16 GiB filesystem.

use std::fmt::Write as _;

use mballoc::possible_cpus;
use mballoc::{Geometry, Policy, Tunables};
use mballoc_lab::workload;

/// The metrics M1–M12, each with the run output's names (docs/lab.md defines every one).
pub const METRICS: [(&str, &str); 12] = [
    ("M1", "throughput: ops/s total and per task, will-it-scale sampling (ops_per_sec)"),
    ("M2", "fsperf per-group fragmentation: frag_pct_{mean,min,p50,p95,p99,max}, fragmented_bg_count, bg_count"),
    ("M3", "allocator call latency: mean, min, p50, p95, p99, max ns and calls"),
    ("M4", "e2freefrag free-extent histogram: buckets, min/max/avg free extent, free 1 MiB chunks"),
    ("M5", "filefrag: extents per file (extents_per_file) and average extent size"),
    ("M6", "e4defrag -c score: (now - best) * 100 / blocks, mapped to 0..100"),
    ("M7", "mb_groups dump and mb_stats counters (groups scanned/considered, useless loops)"),
    ("M8", "BlueStore fragmentation score and (E-1)/(F-1)"),
    ("M9", "XFS frag factor (A - I) / A (xfs_frag_factor_pct) and freesp power-of-two bins (xfs_freesp_avg_blocks)"),
    ("M10", "static layout score: blocks placed right after their logical predecessor (layout_score)"),
    ("M11", "buddy-order indices at 2 MiB: unusable free space and fragmentation index (unusable_index_2m, extfrag_index_2m)"),
    ("M12", "size-class diagnostics: group classes, allocations per stage, forced wrong-class"),
];

/// One line per tunable of [`Tunables::NAMES`], from the library's table of tunables.
pub fn tunable_doc(name: &str) -> Option<&'static str> {
    Tunables::summary(name)
}

/// The whole listing as text.
pub fn render() -> String {
    let mut s = String::from("Workloads (mballoc run WORKLOAD):\n");
    let cat = workload::catalog();
    let w = cat.iter().map(|w| w.name.len()).max().unwrap_or(0);
    for item in cat {
        let _ = writeln!(s, "  {:<w$}  {}", item.name, item.description);
    }
    s.push_str("\nMetrics:\n");
    for (id, what) in METRICS {
        let _ = writeln!(s, "  {id:<4} {what}");
    }
    s.push_str("\nPolicies (--policy):\n");
    for p in Policy::ALL {
        let _ = writeln!(s, "  {:<11} {}", p.name(), p.describe());
    }
    s.push_str(&tunables());
    s.push_str("\nLab settings (--set NAME=VALUE, read by the workloads):\n");
    let w = workload::LAB_SETTINGS
        .iter()
        .map(|(n, _)| n.len())
        .max()
        .unwrap_or(0);
    for (name, doc) in workload::LAB_SETTINGS {
        let _ = writeln!(s, "  {name:<w$}  {doc}");
    }
    s
}

fn tunables() -> String {
    let cpus = possible_cpus();
    let mut s = format!(
        "\nTunables (--set NAME=VALUE; default on a 16 GiB filesystem, {cpus} CPUs, linux-6.18):\n"
    );
    let t = Geometry::ext4_default(16 << 30)
        .ok()
        .map(|g| Policy::Linux618.tunables(&g, cpus));
    let w = Tunables::NAMES.iter().map(|n| n.len()).max().unwrap_or(0);
    for name in Tunables::NAMES {
        let default = t.as_ref().and_then(|t| t.get(name)).unwrap_or_default();
        let doc = tunable_doc(name).unwrap_or("");
        let _ = writeln!(s, "  {name:<w$}  {default:>6}  {doc}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tunable_and_preset_is_listed_with_a_line() {
        for n in Tunables::NAMES {
            assert!(tunable_doc(n).is_some(), "no description for {n}");
        }
        let s = render();
        for n in Tunables::NAMES {
            assert!(s.contains(n), "{n}");
        }
        for p in Policy::ALL {
            assert!(s.contains(p.name()) && s.contains(p.describe()));
        }
        assert!(s.contains("M12"));
        assert!(
            s.contains("mb_max_prealloc_kb") && s.contains("  8192  "),
            "{s}"
        );
    }
}
