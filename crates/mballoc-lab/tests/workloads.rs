//! Every workload in a small configuration, determinism of single-task runs, and the run's
//! metrics checked against a simple independent computation on the allocator's final bitmap.

use mballoc::{Allocator, Policy};
use mballoc_lab::workload::{
    catalog, default_fs_size, run, run_detailed, LabError, NoProgress, RunConfig, RunResult,
};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

fn cfg(workload: &str, fs_size: u64, settings: &[&str]) -> RunConfig {
    RunConfig {
        workload: workload.to_string(),
        policy: Policy::Linux618,
        settings: settings.iter().map(|s| s.to_string()).collect(),
        threads: 1,
        fs_size,
        seed: 42,
        quick: true,
        load_cost_ns: 0,
        image: None,
    }
}

fn go(c: &RunConfig) -> RunResult {
    run(c, &NoProgress).unwrap_or_else(|e| panic!("{}: {e}", c.workload))
}

fn s(r: &RunResult, k: &str) -> f64 {
    *r.scalars
        .get(k)
        .unwrap_or_else(|| panic!("{}: no scalar {k}", r.workload))
}

/// A small configuration of every workload in the catalog.
fn small(workload: &str) -> RunConfig {
    let (size, set): (u64, &[&str]) = match workload {
        "fallocate2" => (GIB, &["ops=300"]),
        "fallocate3" => (GIB, &["ops=3"]),
        "seed003" => (8 * GIB, &["ops=2"]),
        "foursizes" => (8 * GIB, &["ops=20"]),
        "bufferedappendvsfallocate" | "funnysizeshigh" | "funnysizeslow" => (4 * GIB, &["ops=20"]),
        "correlatedlifetimes" | "mixedlifetimes" => (4 * GIB, &["ops=50"]),
        "fragscan" => (4 * GIB, &[]),
        "appenders" | "seed004" => (GIB, &["ops=64"]),
        "aging" => (256 * MIB, &[]),
        "imageappend" => {
            return RunConfig {
                image: Some(mballoc_lab::workload::ImageRun {
                    path: stored_image(),
                    allow_mounted: false,
                }),
                ..cfg(workload, 0, &["ops=2"])
            }
        }
        other => panic!("no small configuration for {other}"),
    };
    cfg(workload, size, set)
}

/// The stored 96 MiB test image (4 KiB blocks, 40 files), decompressed once under the
/// target's temporary folder, sparsely.
fn stored_image() -> std::path::PathBuf {
    static PATH: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
        image_support::materialise(
            dir,
            "workloads-frag4k.img",
            image_support::bytes("frag4k"),
            &[],
        )
    })
    .clone()
}

mod image_support;

/// The metric names (docs/lab.md) that every run reports.
const NAMES: &[&str] = &[
    "ops_per_sec",
    "ops_per_sec_per_task",
    "frag_pct_mean",
    "frag_pct_min",
    "frag_pct_p50",
    "frag_pct_p95",
    "frag_pct_p99",
    "frag_pct_max",
    "fragmented_bg_count",
    "bg_count",
    "extents_per_file",
    "avg_extent_kb",
    "latency_mean_ns",
    "latency_p50_ns",
    "latency_p95_ns",
    "latency_p99_ns",
    "latency_max_ns",
    "free_extents",
    "avg_free_extent_kb",
    "free_pct_in_8m_extents",
    "bluestore_score",
    "bitmap_loads",
    "prefetch_loads",
    "groups_scanned_per_op",
    "e4defrag_score",
    "xfs_frag_factor_pct",
    "xfs_freesp_avg_blocks",
    "layout_score",
    "unusable_index_2m",
];

#[test]
fn every_workload_runs_small_and_reports_the_metrics() {
    let names: Vec<&str> = catalog().iter().map(|w| w.name).collect();
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "duplicate workload names");
    for w in names {
        let r = go(&small(w));
        assert_eq!(r.workload, w);
        for k in NAMES {
            let v = s(&r, k);
            assert!(v.is_finite() && v >= 0.0, "{w}: {k} = {v}");
        }
        assert!(s(&r, "ops") > 0.0, "{w}: no operations");
        assert!(s(&r, "alloc_calls") > 0.0, "{w}: no allocation");
        assert!(s(&r, "bg_count") >= 2.0, "{w}");
        for series in [
            "frag_pct_per_group",
            "free_extent_histogram",
            "extent_size_distribution",
        ] {
            assert!(r.series.contains_key(series), "{w}: no series {series}");
        }
        assert!(r.detail.get("e2freefrag_text").is_some(), "{w}");
        assert!(r.detail.get("mb_stats_text").is_some(), "{w}");
        assert_eq!(r.settings, small(w).settings);
    }
}

/// The figures a deterministic run must reproduce.
fn layout_figures(r: &RunResult) -> Vec<(String, f64)> {
    r.scalars
        .iter()
        .filter(|(k, _)| {
            k.starts_with("frag_pct")
                || k.contains("free")
                || k.contains("extent")
                || k.starts_with("blocks_")
                || *k == "alloc_calls"
                || *k == "bluestore_score"
                || *k == "files"
        })
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

#[test]
fn single_task_runs_are_deterministic_for_a_seed() {
    for w in [
        "fallocate2",
        "correlatedlifetimes",
        "bufferedappendvsfallocate",
        "appenders",
        "seed004",
        "aging",
    ] {
        let c = small(w);
        let a = go(&c);
        let b = go(&c);
        assert_eq!(layout_figures(&a), layout_figures(&b), "{w}");
    }
    // The seed matters where the workload draws from it.
    let mut c = small("aging");
    let a = go(&c);
    c.seed = 43;
    let b = go(&c);
    assert_ne!(layout_figures(&a), layout_figures(&b));
}

/// Per group, the free runs of the on-disk bitmap, by reading bit after bit.
fn bitmap_free_runs(a: &Allocator) -> Vec<Vec<(u64, u64)>> {
    let geo = *a.geometry();
    (0..geo.group_count())
        .map(|g| {
            let bits = a.disk_bitmap(g).unwrap();
            let mut runs = Vec::new();
            let mut start = None;
            for b in 0..geo.group_len(g) {
                match (bits.get(b), start) {
                    (false, None) => start = Some(b),
                    (true, Some(s0)) => {
                        runs.push((u64::from(s0), u64::from(b - s0)));
                        start = None;
                    }
                    _ => {}
                }
            }
            if let Some(s0) = start {
                runs.push((u64::from(s0), u64::from(geo.group_len(g) - s0)));
            }
            runs
        })
        .collect()
}

#[test]
fn metrics_match_a_simple_computation_on_the_final_bitmap() {
    for w in ["correlatedlifetimes", "aging"] {
        let out = run_detailed(&small(w), &NoProgress).unwrap();
        let r = &out.result;
        let geo = *out.allocator.geometry();
        let runs = bitmap_free_runs(&out.allocator);

        // fsperf frag_pct over data groups (holding a block of a surviving file) with frag > 0.
        let mut data = vec![false; runs.len()];
        for f in &out.files {
            for m in f.map.iter() {
                let (first, last) = (geo.locate(m.physical).0, geo.locate(m.physical_end() - 1).0);
                for g in first..=last {
                    data[g as usize] = true;
                }
            }
        }
        let mut pcts: Vec<f64> = Vec::new();
        for (g, rs) in runs.iter().enumerate() {
            let free: u64 = rs.iter().map(|r| r.1).sum();
            let max = rs.iter().map(|r| r.1).max().unwrap_or(0);
            if free > 0 && data[g] && max < free {
                pcts.push(100.0 * (1.0 - max as f64 / free as f64));
            }
        }
        let n_data = data.iter().filter(|&&d| d).count();
        assert_eq!(s(r, "data_bg_count"), n_data as f64, "{w}");
        assert_eq!(s(r, "fragmented_bg_count"), pcts.len() as f64, "{w}");
        let mean = if pcts.is_empty() {
            0.0
        } else {
            pcts.iter().sum::<f64>() / pcts.len() as f64
        };
        assert!((s(r, "frag_pct_mean") - mean).abs() < 1e-9, "{w}");
        let max = pcts.iter().copied().fold(0.0, f64::max);
        assert!((s(r, "frag_pct_max") - max).abs() < 1e-9, "{w}");

        // e2freefrag: runs merged across group boundaries, bucket floor(log2 n) + 1.
        let mut dev: Vec<u64> = Vec::new();
        let mut last_end = u64::MAX;
        for (g, rs) in runs.iter().enumerate() {
            let base = geo.group_first_block(g as u32);
            for &(st, n) in rs {
                if base + st == last_end {
                    *dev.last_mut().unwrap() += n;
                } else {
                    dev.push(n);
                }
                last_end = base + st + n;
            }
        }
        assert_eq!(s(r, "free_extents"), dev.len() as f64, "{w}");
        let total: u64 = dev.iter().sum();
        assert_eq!(s(r, "free_blocks"), total as f64, "{w}");
        assert_eq!(
            s(r, "avg_free_extent_kb"),
            (total / dev.len() as u64 * 4) as f64,
            "{w}"
        );
        let mut buckets = std::collections::BTreeMap::<u32, u64>::new();
        for &n in &dev {
            *buckets.entry(n.ilog2() + 1).or_default() += 1;
        }
        let want: Vec<(f64, f64)> = buckets
            .iter()
            .map(|(&b, &c)| ((1u64 << (b - 1)) as f64 * 4.0, c as f64))
            .collect();
        assert_eq!(r.series["free_extent_histogram"], want, "{w}");

        // filefrag: physically discontiguous runs per file.
        let mut extents = 0u64;
        for f in &out.files {
            let mut prev_end = None;
            for m in f.map.iter() {
                if prev_end != Some(m.physical) {
                    extents += 1;
                }
                prev_end = Some(m.physical_end());
            }
        }
        let epf = extents as f64 / out.files.len().max(1) as f64;
        assert!((s(r, "extents_per_file") - epf).abs() < 1e-9, "{w}");
        out.allocator.check_consistency().unwrap();
    }
}

#[test]
fn threads_share_one_allocator_and_report_throughput() {
    let mut c = cfg(
        "fallocate2",
        GIB,
        &["duration_s=0.4", "warmup_s=0.2", "commit_ops=64"],
    );
    c.threads = 2;
    let r = go(&c);
    assert!(s(&r, "ops_per_sec") > 0.0);
    let per = s(&r, "ops_per_sec_per_task");
    assert!((per * 2.0 - s(&r, "ops_per_sec")).abs() < 1e-6);
    assert_eq!(r.detail["throughput"]["tasks"], 2);
    // A concurrent fsperf run on 2 threads.
    let mut c = small("mixedlifetimes");
    c.threads = 2;
    let r = go(&c);
    assert!(s(&r, "alloc_calls") > 0.0);
}

#[test]
fn aging_as_a_starting_state() {
    let r = go(&cfg("fallocate2", 256 * MIB, &["age=0.6", "ops=50"]));
    assert!(s(&r, "aged_files") > 100.0);
    assert!(s(&r, "free_pct") < 45.0, "{}", s(&r, "free_pct"));
    let fresh = go(&cfg("fallocate2", 256 * MIB, &["ops=50"]));
    assert_eq!(s(&fresh, "aged_files"), 0.0);
    assert!(s(&fresh, "free_pct") > 80.0, "{}", s(&fresh, "free_pct"));
}

#[test]
fn a_bigger_prealloc_window_gives_bigger_extents() {
    // Seed 004: two interleaved 128 KiB direct-I/O streams of 64 MiB each.
    let base = go(&cfg("seed004", GIB, &["ops=512"]));
    let big = go(&cfg(
        "seed004",
        GIB,
        &["ops=512", "mb_max_prealloc_kb=32768"],
    ));
    assert!(
        s(&big, "avg_extent_kb") > s(&base, "avg_extent_kb"),
        "{} vs {}",
        s(&big, "avg_extent_kb"),
        s(&base, "avg_extent_kb")
    );
}

#[test]
fn bad_input_is_a_clear_error() {
    let e = run(&cfg("fallocate9", GIB, &[]), &NoProgress).unwrap_err();
    assert!(matches!(e, LabError::UnknownWorkload { .. }));
    let msg = e.to_string();
    assert!(msg.contains("fallocate9") && msg.contains("fallocate2") && msg.contains("seed004"));

    let e = run(&cfg("fallocate2", GIB, &["colour=red"]), &NoProgress).unwrap_err();
    assert!(e.to_string().contains("colour"), "{e}");
    let e = run(
        &cfg("fallocate2", GIB, &["mb_group_prealloc=x"]),
        &NoProgress,
    )
    .unwrap_err();
    assert!(e.to_string().contains("mb_group_prealloc"), "{e}");
    let e = run(&cfg("fallocate2", GIB, &["age=7"]), &NoProgress).unwrap_err();
    assert!(e.to_string().contains("age"), "{e}");

    let mut c = cfg("fallocate2", GIB, &["ops=1"]);
    c.threads = 0;
    assert!(matches!(
        run(&c, &NoProgress),
        Err(LabError::BadParameter { .. })
    ));
    assert!(matches!(
        run(&cfg("fallocate2", 1 << 20, &[]), &NoProgress),
        Err(LabError::Mkfs(_))
    ));
    let e = run(&cfg("foursizes", 256 * MIB, &["ops=1"]), &NoProgress).unwrap_err();
    assert!(matches!(e, LabError::TooSmall { .. }), "{e}");
}

#[test]
fn zero_size_means_the_workload_default() {
    assert_eq!(default_fs_size("fallocate2", true).unwrap(), 4 * GIB);
    assert_eq!(default_fs_size("appenders", false).unwrap(), 200 * GIB);
    assert!(default_fs_size("nope", true).is_err());
    let r = go(&cfg("fallocate2", 0, &["ops=10"]));
    assert_eq!(r.fs_size, 4 * GIB);
}
