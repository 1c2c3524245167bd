//! The seeds' experiments as data: which switch each seed flips, on which workloads and thread
//! counts, which metrics to set side by side, and the seed's own published figure for a row
//! where its text gives one (quoted from `shared/seeds/<id>_*.txt`, never made up).
//!
//! Base and improved differ only in the seed's switch, on top of the `linux-6.18` preset.
//! Sizes are laptop scale: `--quick` must finish everything in under five minutes on 2 cores.

/// One row of a seed's table: a scalar metric of the run and, maybe, the seed's figure.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub metric: &'static str,
    /// Quoted from the seed; a ratio where the seed gives base and patched numbers.
    pub published: Option<&'static str>,
}

/// A workload run twice (base, improved) at one thread count.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub workload: &'static str,
    pub threads: u32,
    /// Filesystem size with `--quick`, and without (0: the workload's default).
    pub quick_size: u64,
    pub full_size: u64,
    /// Lab settings of the workload (both sides), e.g. a pre-fill.
    pub settings: &'static [&'static str],
    /// Extra lab settings with `--quick` (shorter measuring windows).
    pub quick_settings: &'static [&'static str],
    /// Simulated bitmap-load cost, ns.
    pub load_cost_ns: u64,
    /// Runs per side, alternating; the table shows medians (throughput is noisy).
    pub reps: u32,
    pub rows: &'static [Row],
}

/// One seed's experiment.
#[derive(Debug, Clone, Copy)]
pub struct Experiment {
    /// Seed id, the file name's prefix in `shared/seeds/`.
    pub seed: &'static str,
    pub title: &'static str,
    /// The tunable the seed adds or changes.
    pub switch: &'static str,
    /// Its value before the seed's change.
    pub base: &'static str,
    /// Its value with the change; `None`: the preset's default for the geometry.
    pub improved: Option<&'static str>,
    pub cases: &'static [Case],
    /// What the seed says in words where it gives no figure, or how to read ours.
    pub notes: &'static [&'static str],
}

const G: u64 = 1 << 30;

/// will-it-scale windows shortened for `--quick`.
const WIS_QUICK: &[&str] = &["warmup_s=1", "duration_s=2"];

const fn row(metric: &'static str) -> Row {
    Row {
        metric,
        published: None,
    }
}

const fn quoted(metric: &'static str, published: &'static str) -> Row {
    Row {
        metric,
        published: Some(published),
    }
}

const fn case(workload: &'static str, threads: u32, rows: &'static [Row]) -> Case {
    Case {
        workload,
        threads,
        quick_size: 4 * G,
        full_size: 16 * G,
        settings: &[],
        quick_settings: &[],
        load_cost_ns: 0,
        reps: 1,
        rows,
    }
}

/// A case on the workload's own filesystem size and shape (`fs_size` 0).
const fn sized(workload: &'static str, threads: u32, rows: &'static [Row]) -> Case {
    Case {
        quick_size: 0,
        full_size: 0,
        ..case(workload, threads, rows)
    }
}

/// Seed 000: multiple stream goals (Baokun Li).
const SEED_000: Experiment = Experiment {
    seed: "000",
    title: "multiple global goals for stream allocation (Baokun Li)",
    switch: "nr_global_goals",
    base: "1",
    improved: None,
    cases: &[
        Case {
            quick_settings: WIS_QUICK,
            reps: 3,
            ..case(
                "fallocate2",
                1,
                &[quoted(
                    "ops_per_sec_per_task",
                    "-5.9% (P1 341440 -> 321275, Kunpeng 920, mb_optimize_scan=1)",
                )],
            )
        },
        Case {
            quick_settings: WIS_QUICK,
            reps: 3,
            ..case(
                "fallocate2",
                2,
                &[
                    quoted(
                        "ops_per_sec_per_task",
                        "+47.4% (P80 4834 -> 7129, Kunpeng 920, mb_optimize_scan=1)",
                    ),
                    row("extents_per_file"),
                ],
            )
        },
    ],
    notes: &["The seed's multi-task figures are for 80 and 96 containers; ours run 2 tasks."],
};

/// Seed 001: skip busy groups with a try-lock (Baokun Li).
const SEED_001: Experiment = Experiment {
    seed: "001",
    title: "ext4_try_lock_groups: skip groups locked by another task (Baokun Li)",
    switch: "try_lock_groups",
    base: "0",
    improved: Some("1"),
    cases: &[
        Case {
            quick_settings: WIS_QUICK,
            reps: 3,
            ..case(
                "fallocate2",
                2,
                &[quoted(
                    "ops_per_sec_per_task",
                    "+81.0% (P80 2643 -> 4784, Kunpeng 920, mb_optimize_scan=1)",
                )],
            )
        },
        Case {
            quick_settings: WIS_QUICK,
            reps: 3,
            ..case("fallocate3", 2, &[row("ops_per_sec_per_task")])
        },
    ],
    notes: &["The seed's figures are for 80 and 96 containers; ours run 2 tasks."],
};

const FSPERF_ROWS: &[Row] = &[
    row("frag_pct_mean"),
    row("frag_pct_max"),
    row("fragmented_bg_count"),
];

/// Seed 002: btrfs size classes (Boris Burkov), on the fsperf fragmentation suite.
const SEED_002: Experiment = Experiment {
    seed: "002",
    title: "btrfs-style size classes (Boris Burkov), fsperf fragmentation tests",
    switch: "size_classes",
    base: "0",
    improved: Some("1"),
    cases: &[
        sized(
            "bufferedappendvsfallocate",
            1,
            &[
                quoted("frag_pct_mean", "43.59 -> 0 (-100.00%)"),
                quoted("frag_pct_max", "61.67 -> 0 (-100.00%)"),
                quoted("frag_pct_p50", "42.53 -> 0 (-100.00%)"),
                quoted("fragmented_bg_count", "6.10 -> 0 (-100.00%)"),
                quoted("bg_count", "14 -> 15.60 (+11.43%)"),
                quoted(
                    "latency_mean_ns",
                    "3607.19 -> 3672.11 (+1.80%) find_free_extent_ns_mean",
                ),
                quoted(
                    "latency_p99_ns",
                    "20734.49 -> 20920.48 (+0.90%) find_free_extent_ns_p99",
                ),
            ],
        ),
        sized("correlatedlifetimes", 1, FSPERF_ROWS),
        sized("mixedlifetimes", 1, FSPERF_ROWS),
        sized("foursizes", 1, FSPERF_ROWS),
        sized("funnysizeshigh", 1, FSPERF_ROWS),
        sized("funnysizeslow", 1, FSPERF_ROWS),
    ],
    notes: &[
        "Seed 002 gives figures for bufferedappendvsfallocate only; in words it reports \
         fragmentation \"completely eliminated\" where size and lifetime correlate, \"significant \
         improvement\" just above the class borders, a regression \"a hair under the borders\" \
         and \"neutral\" results on mixed lifetimes.",
        "Latency (latency_*_ns) is wall time per allocation call here, find_free_extent there.",
    ],
};

/// Seed 003: prefetch tests the "read" flag before the atomic set (Bohdan Trach).
const SEED_003: Experiment = Experiment {
    seed: "003",
    title: "cheap prefetch test before the atomic set (Bohdan Trach), large filled fs",
    switch: "prefetch_test_before_set",
    base: "0",
    improved: Some("1"),
    cases: &[
        Case {
            load_cost_ns: 20_000,
            reps: 3,
            ..sized(
                "seed003",
                1,
                &[quoted(
                    "ops_per_sec",
                    "+0.74% (1 thread 1613 -> 1625, Kunpeng 920b, 802G fs 68% used)",
                )],
            )
        },
        Case {
            load_cost_ns: 20_000,
            reps: 3,
            ..sized(
                "seed003",
                2,
                &[quoted(
                    "ops_per_sec",
                    "+60.67% (2 threads 1620 -> 2603, Kunpeng 920b, 802G fs 68% used)",
                )],
            )
        },
    ],
    notes: &[
        "The seed's gain is contention on group flag cache lines across many cores; \
              a 2-core run can show the prefetch work saved, not that contention.",
    ],
};

/// Seed 004: a larger stream preallocation window (Guzebing).
const SEED_004: Experiment = Experiment {
    seed: "004",
    title: "mb_max_prealloc_kb: 8 MiB against 32 MiB stream windows (Guzebing)",
    switch: "mb_max_prealloc_kb",
    base: "8192",
    improved: Some("32768"),
    // One task writing both streams in strict turns: the two files interleave chunk by chunk as
    // the seed's concurrent dd runs do, deterministically (with 2 threads on 2 busy cores the
    // streams hardly overlap in time).
    cases: &[sized(
        "seed004",
        1,
        &[
            quoted("median_extent_kb", "8 MiB -> 32 MiB extents"),
            row("avg_extent_kb"),
            row("extents_per_file"),
        ],
    )],
    notes: &["The seed's read throughput (455 -> 702 MB/s with dd) is not modelled here."],
};

/// Every experiment, in seed order.
pub const EXPERIMENTS: [Experiment; 5] = [SEED_000, SEED_001, SEED_002, SEED_003, SEED_004];
