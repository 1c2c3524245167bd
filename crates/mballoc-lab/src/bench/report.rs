//! The `mballoc bench` report: one JSON object (`--json`) or readable tables.

use std::fmt::Write as _;

use serde::Serialize;

use super::churn::ChurnReport;

/// Everything one `mballoc bench` invocation measured.
#[derive(Debug, Clone, Serialize, Default)]
pub struct BenchReport {
    pub quick: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub churn: Option<ChurnReport>,
}

impl BenchReport {
    /// Human-readable tables.
    pub fn render(&self) -> String {
        let mut s = String::new();
        if let Some(c) = &self.churn {
            render_churn(&mut s, c);
        }
        s
    }
}

fn render_churn(s: &mut String, c: &ChurnReport) {
    let cfg = &c.config;
    let _ = writeln!(
        s,
        "churn: {} units, {} live of 1..={} units, {} free+alloc pairs; median of {} runs; \
         mballoc commits every {} frees",
        cfg.size, cfg.prefill, cfg.max_len, cfg.pairs, c.runs, cfg.commit_every
    );
    let _ = writeln!(
        s,
        "{:<22} {:>10} {:>12} {:>10} {:>12} {:>10} {:>9}",
        "system", "ns/pair", "vs offset", "ext/alloc", "free ext", "avg KB", "BS score"
    );
    for r in &c.systems {
        let vs = r
            .ratio_vs
            .get("offset-allocator")
            .map_or("-".to_string(), |v| format!("{v:.2}x"));
        let f = &r.fragmentation;
        let _ = writeln!(
            s,
            "{:<22} {:>10.0} {:>12} {:>10.3} {:>12} {:>10} {:>9.3}",
            r.system,
            r.ns_per_op,
            vs,
            r.extents_per_alloc,
            f.free_extents,
            f.avg_free_extent_kb,
            f.bluestore_score
        );
    }
    for (name, why) in &c.skipped {
        let _ = writeln!(s, "{name}: skipped — {why}");
    }
}
