//! The `mballoc bench` report: one JSON object (`--json`) or readable tables.

use std::fmt::Write as _;

use serde::Serialize;

use super::churn::ChurnReport;
use super::huge::HugeReport;
use super::threads::{Pattern, ThreadsReport};

/// Everything one `mballoc bench` invocation measured.
#[derive(Debug, Clone, Serialize, Default)]
pub struct BenchReport {
    pub quick: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub churn: Option<ChurnReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<ThreadsReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub huge: Option<HugeReport>,
}

impl BenchReport {
    /// Human-readable tables.
    pub fn render(&self) -> String {
        let mut s = String::new();
        if let Some(c) = &self.churn {
            render_churn(&mut s, c);
        }
        if let Some(t) = &self.threads {
            render_threads(&mut s, t);
        }
        if let Some(h) = &self.huge {
            render_huge(&mut s, h);
        }
        s
    }
}

/// The `--set` tunables every mballoc policy ran with, if any.
fn render_settings(s: &mut String, settings: &[String]) {
    if !settings.is_empty() {
        let _ = writeln!(s, "mballoc policies with: {}", settings.join(", "));
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
    render_settings(s, &cfg.settings);
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

fn render_threads(s: &mut String, t: &ThreadsReport) {
    let _ = writeln!(
        s,
        "\nthreads: W1 (will-it-scale fallocate2 loop: private {}-block files, {} blocks per \
         request), {:.2} s per point, median of {} runs",
        t.config.file_blocks, t.config.chunk, t.config.seconds, t.runs
    );
    render_settings(s, &t.config.settings);
    for pat in Pattern::ALL {
        render_threads_pattern(s, t, pat);
    }
}

/// One pattern's table, then its ratios: 2 vs 1 thread per policy, the machine's ceiling,
/// linux-6.18 / linux-6.16 and proposed / linux-6.18 per thread count.
fn render_threads_pattern(s: &mut String, t: &ThreadsReport, pat: Pattern) {
    let _ = writeln!(s, "\n{}: {}", pat.name(), pat.describe());
    let _ = writeln!(
        s,
        "{:<26} {:>8} {:>14} {:>14} {:>12}",
        "system", "threads", "ops/s", "ops/s/thread", "scalability"
    );
    for p in t.points.iter().filter(|p| p.pattern == pat) {
        let _ = writeln!(
            s,
            "{:<26} {:>8} {:>14.0} {:>14.0} {:>12.2}",
            p.system, p.threads, p.ops_per_s, p.ops_per_s_per_thread, p.scalability
        );
    }
    let name = pat.name();
    for (pol, r) in t.two_vs_one.get(&pat).into_iter().flatten() {
        let _ = writeln!(
            s,
            "{name} {pol}: 2 threads vs 1, per-thread rate ratio {r:.2} (total {:.2}x)",
            2.0 * r
        );
    }
    for (n, c) in t.ceiling.get(&pat).into_iter().flatten() {
        let _ = writeln!(
            s,
            "{name} machine ceiling, {n} threads on allocators of their own (linux-6.18): \
             per-thread rate ratio {c:.2} (total {:.2}x)",
            f64::from(*n) * c
        );
    }
    for (n, r) in t.v618_vs_v616.get(&pat).into_iter().flatten() {
        let _ = writeln!(
            s,
            "{name} {n} thread(s): linux-6.18 / linux-6.16 per-thread rate {r:.2}"
        );
    }
    for (n, r) in t.proposed_vs_v618.get(&pat).into_iter().flatten() {
        let _ = writeln!(
            s,
            "{name} {n} thread(s): proposed / linux-6.18 per-thread rate {r:.2}"
        );
    }
}

fn render_huge(s: &mut String, h: &HugeReport) {
    let c = &h.config;
    let _ = writeln!(
        s,
        "\nhuge: {} GiB ({} groups) aged by a procedural source, lazy, cache of {} groups; \
         {} appends by {} files",
        c.fs_bytes >> 30,
        h.groups,
        c.cache_groups,
        c.requests,
        c.files
    );
    render_settings(s, &c.settings);
    for r in &h.systems {
        let _ = writeln!(
            s,
            "{}: fill {:.1} %, open {:.0} ms, first allocation {:.0} us, groups scanned mean {:.2} \
             p99 {:.0} max {}, loaded {} (evictions {}, bitmap loads {}), RSS {} MiB (HWM {} MiB)",
            r.system,
            r.fill_pct,
            r.open_ms,
            r.first_alloc_us,
            r.groups_scanned_mean,
            r.groups_scanned_p99,
            r.groups_scanned_max,
            r.loaded_groups,
            r.evictions,
            r.bitmap_loads,
            r.memory_after_run.vm_rss_kib >> 10,
            r.memory_after_run.vm_hwm_kib >> 10
        );
        let _ = writeln!(
            s,
            "  {:<20} {:>8} {:>10} {:>10} {:>12}",
            "criterion", "calls", "p50 us", "p99 us", "max us"
        );
        let rows = std::iter::once(("all", &r.all))
            .chain(r.by_criterion.iter().map(|(k, v)| (k.as_str(), v)));
        for (name, l) in rows {
            let _ = writeln!(
                s,
                "  {:<20} {:>8} {:>10.1} {:>10.1} {:>12.1}",
                name,
                l.calls,
                l.ns_p50 / 1e3,
                l.ns_p99 / 1e3,
                l.ns_max as f64 / 1e3
            );
        }
    }
}
