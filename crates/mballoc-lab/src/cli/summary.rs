//! The readable summary of one run: the heading, then every scalar metric grouped by what it
//! measures (M1–M11), three to a line, so seventy metrics fit on one screen.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use mballoc_lab::report::table::{fmt_num, frag_groups_of};
use mballoc_lab::workload::RunResult;

use super::output::heading;

/// Whether a metric name belongs to a group.
type Member = fn(&str) -> bool;

/// Groups in print order: a title and its membership test.
const GROUPS: [(&str, Member); 6] = [
    ("throughput (M1)", |k| k.starts_with("ops")),
    ("fragmentation (M2)", |k| {
        k.starts_with("frag_pct") || k.ends_with("bg_count")
    }),
    ("latency (M3)", |k| {
        k.starts_with("latency") || k.contains("_latency") || k == "alloc_calls"
    }),
    ("free space (M4, M8, M9, M11)", |k| {
        k.starts_with("free")
            || k.ends_with("free_extent_kb")
            || k.starts_with("bluestore")
            || k.starts_with("xfs_freesp")
            || k.ends_with("_index_2m")
    }),
    ("files (M5, M6, M9, M10)", |k| {
        k.contains("extent_kb")
            || k.starts_with("extents_per_file")
            || k.contains("file")
            || k.starts_with("e4defrag")
            || k.starts_with("xfs_frag")
            || k.starts_with("layout")
    }),
    ("allocator (M7)", |k| {
        k.starts_with("mb_")
            || k.starts_with("groups_")
            || k.contains("bitmap")
            || k.contains("prefetch")
            || k.contains("buddies")
            || k == "useless_loops"
    }),
];

/// Which group a metric is printed in (`None`: the workload's own, printed last).
fn group_of(name: &str) -> Option<usize> {
    GROUPS.iter().position(|(_, belongs)| belongs(name))
}

/// The summary text (see the module doc).
pub fn summary(r: &RunResult) -> String {
    let mut groups: BTreeMap<usize, Vec<(&str, String)>> = BTreeMap::new();
    for (k, &v) in &r.scalars {
        let value = match (k.as_str(), frag_groups_of(&r.scalars)) {
            ("frag_pct_mean", Some(ctx)) => format!("{} {ctx}", fmt_num(v)),
            _ => fmt_num(v),
        };
        groups
            .entry(group_of(k).unwrap_or(GROUPS.len()))
            .or_default()
            .push((k, value));
    }
    let mut s = heading(r);
    s.push('\n');
    for (g, items) in groups {
        let title = GROUPS.get(g).map_or("workload", |(t, _)| t);
        let _ = writeln!(s, "  {title}");
        s.push_str(&grid(&items));
    }
    if !r.series.is_empty() {
        let names: Vec<String> = r
            .series
            .iter()
            .map(|(k, v)| format!("{k} ({})", v.len()))
            .collect();
        let _ = writeln!(
            s,
            "  series (points; --out plots them): {}",
            names.join(", ")
        );
    }
    s
}

/// `name value` cells, three per line, columns aligned.
fn grid(items: &[(&str, String)]) -> String {
    let name_w = items.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let cells: Vec<String> = items
        .iter()
        .map(|(k, v)| format!("{k:<name_w$} {v:>12}"))
        .collect();
    let mut s = String::new();
    for line in cells.chunks(3) {
        let _ = writeln!(s, "    {}", line.join("   "));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::output::tests::sample;
    use super::*;

    #[test]
    fn metrics_land_in_their_groups() {
        assert_eq!(group_of("ops_per_sec_per_task"), Some(0));
        assert_eq!(group_of("fragmented_bg_count"), Some(1));
        assert_eq!(group_of("latency_p99_ns"), Some(2));
        assert_eq!(group_of("avg_free_extent_kb"), Some(3));
        assert_eq!(group_of("extents_per_file"), Some(4));
        assert_eq!(group_of("median_extent_kb"), Some(4));
        assert_eq!(group_of("mb_cr0_hits"), Some(5));
        assert_eq!(group_of("write_mib_per_sec"), None);
    }

    #[test]
    fn every_metric_is_printed_once() {
        let mut r = sample("linux-6.18", 1, 100.0);
        r.scalars.insert("write_mib_per_sec".into(), 3.5);
        let s = summary(&r);
        for k in r.scalars.keys() {
            assert_eq!(s.matches(k.as_str()).count(), 1, "{k}: {s}");
        }
        assert!(s.contains("  workload\n"), "{s}");
        assert!(s.contains("12.50"), "{s}");
        r.scalars.insert("fragmented_bg_count".into(), 4.0);
        r.scalars.insert("data_bg_count".into(), 31.0);
        assert!(
            summary(&r).contains("12.50 [4/31 groups]"),
            "{}",
            summary(&r)
        );
    }
}
