//! The `mballoc` binary end to end: bad arguments fail with a clear message naming the valid
//! choices, `list` names everything, and `run` / `compare` / `--out` produce what they promise.
//! Every run is small (`--quick`, a small filesystem, short measuring windows).

use std::process::{Command, Output};

use serde_json::Value;

/// A cheap workload and settings that keep one run well under a second of work.
const WORKLOAD: &str = "fallocate2";
const SMALL: &[&str] = &[
    "--quick",
    "--fs-size",
    "256M",
    "--set",
    "warmup_s=0.1",
    "--set",
    "duration_s=0.2",
];

fn mballoc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mballoc"))
        .args(args)
        .output()
        .expect("the mballoc binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `args`, expects a usage failure (exit code 2) whose message contains every `needle`.
fn fails_with(args: &[&str], needles: &[&str]) {
    let o = mballoc(args);
    let err = stderr(&o);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{args:?} should be a usage error: {err}"
    );
    for n in needles {
        assert!(err.contains(n), "{args:?}: {n:?} missing from: {err}");
    }
}

#[test]
fn bad_arguments_name_the_valid_choices() {
    fails_with(&["run", "nosuch"], &["unknown workload", WORKLOAD]);
    fails_with(
        &["run", WORKLOAD, "--policy", "linux-5.10"],
        &["linux-6.16", "linux-6.18", "proposed"],
    );
    fails_with(
        &["run", WORKLOAD, "--set", "nosuch=1"],
        &["nosuch", "mb_group_prealloc", "size_classes"],
    );
    fails_with(
        &["run", WORKLOAD, "--set", "mb_group_prealloc=x"],
        &["mb_group_prealloc", "\"x\"", "unsigned"],
    );
    fails_with(&["run", WORKLOAD, "--set", "novalue"], &["name=value"]);
    fails_with(&["run", WORKLOAD, "--fs-size", "12Q"], &["K, M, G or T"]);
    fails_with(&["run", WORKLOAD, "--fs-size", "1M"], &["64M", "16T"]);
    fails_with(&["run", WORKLOAD, "--threads", "1,0"], &["1..="]);
    fails_with(&["run", WORKLOAD, "--threads", "two"], &["1,2,4"]);
    fails_with(
        &["run", WORKLOAD, "--load-cost", "5parsecs"],
        &["ns, us, ms or s"],
    );
    fails_with(
        &["compare", WORKLOAD, "--policy", "linux-6.18"],
        &["two policies", "got 1 --policy and 0 --set-a/--set-b"],
    );
    fails_with(
        &[
            "compare",
            WORKLOAD,
            "--policy",
            "linux-6.18",
            "--policy",
            "proposed",
            "--policy",
            "linux-6.16",
        ],
        &["got 3 --policy"],
    );
    fails_with(&["reproduce", "--only", "999"], &["000", "004"]);
}

#[test]
fn list_names_every_preset_tunable_and_metric() {
    let o = mballoc(&["list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for p in mballoc::Policy::ALL {
        assert!(out.contains(p.name()), "{} missing", p.name());
    }
    for t in mballoc::Tunables::NAMES {
        assert!(out.contains(t), "{t} missing");
    }
    for m in ["M1", "M2", "M5", "M12", WORKLOAD] {
        assert!(out.contains(m), "{m} missing");
    }
}

#[test]
fn run_json_has_the_design_metric_names() {
    let mut args = vec!["run", WORKLOAD, "--json", "--threads", "1,2"];
    args.extend_from_slice(SMALL);
    let o = mballoc(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let runs: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(runs.len(), 2, "one object per thread count: {out}");
    for (r, t) in runs.iter().zip([1, 2]) {
        assert_eq!(r["threads"], t);
        assert_eq!(r["workload"], WORKLOAD);
        assert_eq!(r["policy"], "linux-6.18");
        for key in [
            "ops_per_sec",
            "frag_pct_mean",
            "fragmented_bg_count",
            "series",
        ] {
            assert!(r.get(key).is_some(), "{key} missing from {r}");
        }
    }
}

#[test]
fn out_writes_json_csv_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let mut args = vec!["run", WORKLOAD, "--threads", "1,2", "--out", d];
    args.extend_from_slice(SMALL);
    let o = mballoc(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for want in ["runs.json", "scalars.csv", "throughput.svg"] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    for series in ["frag_pct_per_group", "free_extent_histogram"] {
        for ext in ["csv", "svg"] {
            let suffix = format!(".{series}.{ext}");
            assert!(
                names.iter().any(|n| n.ends_with(&suffix)),
                "*{suffix} not in {names:?}"
            );
        }
    }
    let runs: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("runs.json")).unwrap())
            .unwrap();
    assert_eq!(runs.as_array().map(Vec::len), Some(2));
}

/// `compare WORKLOAD SIDES… SMALL…`: its whole output, once the table header has every column.
fn compare_table(sides: &[&str], columns: &[&str]) -> String {
    let mut args = vec!["compare", WORKLOAD];
    args.extend_from_slice(sides);
    args.extend_from_slice(SMALL);
    let o = mballoc(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let header = out
        .lines()
        .find(|l| l.starts_with("| metric"))
        .unwrap_or_else(|| panic!("no table: {out}"));
    for col in columns.iter().chain(&["diff"]) {
        assert!(header.contains(col), "{col} not in {header}");
    }
    out
}

#[test]
fn compare_prints_both_policies_and_a_diff_column() {
    let out = compare_table(
        &["--policy", "linux-6.16", "--policy", "proposed"],
        &["linux-6.16", "proposed"],
    );
    assert!(out.contains("| ops_per_sec "), "{out}");
    assert!(out.contains('%'), "a change in %: {out}");
}

#[test]
fn one_policy_with_side_settings_compares_a_switch_within_it() {
    compare_table(
        &["--policy", "linux-6.18", "--set-a", "try_lock_groups=0"],
        &["linux-6.18 +try_lock_groups=0", "linux-6.18"],
    );
}

#[test]
fn a_closed_stdout_is_a_quiet_exit_not_a_panic() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader); // every write the child makes now fails with EPIPE
    let o = Command::new(env!("CARGO_BIN_EXE_mballoc"))
        .arg("list")
        .stdout(writer)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(o.status.code(), Some(141), "{err}");
}

/// The stored capture with the fewest allocations (20), copied where a test may change it.
fn small_case() -> tempfile::TempDir {
    let src =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernel-cases/fallocate3-4g");
    let dir = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(&src).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), dir.path().join(f.file_name())).unwrap();
    }
    dir
}

#[test]
fn replay_exits_non_zero_unless_every_case_agrees() {
    let case = small_case();
    let d = case.path().to_str().unwrap();
    let o = mballoc(&["replay", d]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("100.00%"), "{}", stdout(&o));

    // The kernel's first placement moved by one block: the replay still reports, then fails.
    let allocs = case.path().join("allocs.jsonl");
    let text = std::fs::read_to_string(&allocs).unwrap();
    let changed = text.replacen("\"result_pstart\":8743", "\"result_pstart\":8744", 1);
    assert_ne!(text, changed, "the capture's first placement moved");
    std::fs::write(&allocs, changed).unwrap();
    let o = mballoc(&["replay", d]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        stdout(&o).contains("19 "),
        "the report is still printed: {}",
        stdout(&o)
    );
    assert!(err.starts_with("error: the replay disagrees"), "{err}");
    assert!(err.contains("19 of 20"), "{err}");
}

#[test]
fn replay_markdown_is_the_library_table() {
    let case = small_case();
    let o = mballoc(&["replay", "--markdown", case.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rep = mballoc_lab::replay::replay_paths(&[case.path().to_path_buf()]).unwrap();
    assert_eq!(stdout(&o), rep.markdown());
    assert!(stdout(&o).starts_with("| case |"), "{}", stdout(&o));
}

#[test]
fn every_error_has_the_same_prefix() {
    // A usage error found by clap, one found by the lab, and a failure while running.
    for args in [
        &["run", "nosuch"][..],
        &["run", WORKLOAD, "--set", "mb_group_prealloc=x"],
        &["replay", "/nonexistent-capture-folder"],
    ] {
        let o = mballoc(args);
        assert!(!o.status.success(), "{args:?}");
        let err = stderr(&o);
        assert!(err.starts_with("error: "), "{args:?}: {err}");
    }
}

#[test]
fn every_metric_list_names_is_in_the_run_output() {
    let list = stdout(&mballoc(&["list"]));
    let metrics: Vec<&str> = list
        .lines()
        .skip_while(|l| !l.starts_with("Metrics:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(metrics.len(), 12, "{list}");
    // Names in parentheses that look like output keys (`(ops_per_sec)`, `(a, b)`).
    let mut names = Vec::new();
    for line in &metrics {
        for part in line.split('(').skip(1) {
            let inner = part.split(')').next().unwrap_or("");
            for n in inner.split(", ") {
                if n.contains('_') && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    names.push(n.to_string());
                }
            }
        }
    }
    for want in ["layout_score", "xfs_frag_factor_pct", "unusable_index_2m"] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    let mut args = vec!["run", WORKLOAD, "--json"];
    args.extend_from_slice(SMALL);
    let o = mballoc(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let run: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    for n in &names {
        assert!(
            run.get(n).is_some(),
            "`list` names {n}, the run has no such key"
        );
    }
}

#[test]
fn reproduce_help_names_the_default_captures() {
    let o = mballoc(&["reproduce", "--help"]);
    let help = stdout(&o);
    assert!(help.contains("kernel-cases"), "{help}");
    assert!(!help.contains("shared/kernel-traces"), "{help}");
}

/// Seed 004's experiment alone: deterministic and well under a second.
const REPRODUCE_004: &[&str] = &[
    "reproduce",
    "--quick",
    "--no-fidelity",
    "--only",
    "004",
    "-q",
];

/// `reproduce` judges: every seed table ends with a verdict, a summary closes the output, the
/// legends explain the columns and `--out DIR` is mentioned. Seed 004 only (deterministic, well
/// under a second).
#[test]
fn reproduce_prints_verdicts_and_a_summary() {
    let o = mballoc(REPRODUCE_004);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for want in [
        "Seed tables:",
        "criteria:",
        "verdict: reproduced",
        "Summary",
        "| seed | published",
        "| 004  |",
        "--out DIR",
    ] {
        assert!(out.contains(want), "{want:?} missing from:\n{out}");
    }
    let summary = out.split("Summary").nth(1).unwrap_or_default();
    assert!(summary.contains("reproduced"), "{summary}");
}

/// A bad `--out` fails before any experiment runs, naming the path.
#[test]
fn reproduce_refuses_a_bad_out_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let bad = file.join("results");
    let mut args = REPRODUCE_004.to_vec();
    args.extend(["--out", bad.to_str().unwrap()]);
    let o = mballoc(&args);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("a-file"), "{}", stderr(&o));
    assert!(
        !stdout(&o).contains("seed 004"),
        "ran anyway: {}",
        stdout(&o)
    );
}

// bigalloc: `groups --set cluster_kib=N` prints what the kernel's `/proc/fs/ext4/<dev>/mb_groups`
// printed for the same `mkfs.ext4 -O bigalloc -C` (stored under `tests/data/bigalloc`, each
// with the command that made it), and what stays unsupported is refused with the value.

fn reference(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/data/bigalloc/{name}.mb_groups"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// 64 KiB clusters on 4 GiB (two groups; the journal right after group 1's backup
/// superblock), 16 KiB clusters on 4 GiB (eight groups, the journal in group 4) and 64 KiB
/// clusters on 1 GiB (one short group of 16384 clusters, a size no replayed capture has).
#[test]
fn groups_with_clusters_are_the_kernels_mb_groups() {
    for (size, kib, name) in [
        ("4G", "64", "bigalloc64k-4g"),
        ("4G", "16", "bigalloc16k-4g"),
        ("1G", "64", "bigalloc64k-1g"),
    ] {
        let o = mballoc(&[
            "groups",
            "--fs-size",
            size,
            "--set",
            &format!("cluster_kib={kib}"),
        ]);
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(stdout(&o), reference(name), "{name}");
    }
}

#[test]
fn unsupported_cluster_settings_are_refused_with_the_value() {
    for (args, needle) in [
        (&["groups", "--set", "cluster_kib=48"][..], "48"),
        (&["groups", "--set", "cluster_kib=4"][..], "cluster_kib"),
        (&["groups", "--set", "cluster_kib=524288"][..], "524288"),
        (&["groups", "--set", "mb_stream_req=8"][..], "mb_stream_req"),
        (
            &["run", "fallocate2", "--quick", "--set", "cluster_kib=64"][..],
            "cluster_kib=64",
        ),
    ] {
        let o = mballoc(args);
        let err = stderr(&o);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(
            err.contains(needle),
            "{args:?}: {needle:?} missing from {err}"
        );
    }
}

/// `compare WORKLOAD --policy linux-6.16 --policy linux-6.18 --vcpus 2`.
fn compare_on_2_vcpus(workload: &str) -> [&str; 8] {
    let p = "--policy";
    [
        "compare",
        workload,
        p,
        "linux-6.16",
        p,
        "linux-6.18",
        "--vcpus",
        "2",
    ]
}

/// `--vcpus` on `run` and `compare`: what every build checks before it runs anything.
#[test]
fn vcpus_runs_only_the_wired_workloads_on_1_to_128_cpus() {
    let wired = "fallocate2, appenders, fallocate3, seed003";
    fails_with(
        &["run", "aging", "--vcpus", "4"],
        &["--vcpus", "aging", wired],
    );
    fails_with(&compare_on_2_vcpus("foursizes"), &["foursizes", wired]);
    fails_with(&["run", WORKLOAD, "--vcpus", "0"], &["--vcpus", "count 0"]);
    fails_with(
        &["run", WORKLOAD, "--vcpus", "4,129"],
        &["--vcpus 129", "between 1 and 128"],
    );
    fails_with(
        &["run", WORKLOAD, "--vcpus", "4", "--threads", "2"],
        &["--threads"],
    );
    fails_with(
        &["run", WORKLOAD, "--vcpus", "4", "--load-cost", "50us"],
        &["--load-cost"],
    );
}

/// The default binary has no simulator: a valid `--vcpus` request says how to get one.
#[cfg(not(feature = "vcpus"))]
#[test]
fn vcpus_without_the_simulator_names_the_build() {
    let build = "cargo build --release -p mballoc-lab --features vcpus";
    fails_with(&["run", WORKLOAD, "--vcpus", "2"], &[build]);
    fails_with(&compare_on_2_vcpus(WORKLOAD), &[build]);
    fails_with(&["reproduce", "--quick", "--vcpus", "1,4"], &[build]);
}

/// `reproduce --vcpus` (the curves' counts) is checked before anything runs, in every build.
#[test]
fn reproduce_vcpus_takes_1_to_128() {
    fails_with(
        &["reproduce", "--quick", "--vcpus", "4,129"],
        &["--vcpus 129", "between 1 and 128"],
    );
}

/// A virtual-CPU run that fills its file system says which knob to turn.
#[cfg(feature = "vcpus")]
#[test]
fn vcpus_a_run_that_fills_its_file_system_names_the_size() {
    let o = mballoc(&["run", "appenders", "--vcpus", "128", "--fs-size", "64M"]);
    // A run that went wrong, not a usage error: exit status 1.
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    for n in ["filled up on virtual CPUs", "no space", "raise --fs-size"] {
        assert!(err.contains(n), "{n:?} missing from: {err}");
    }
}

/// A successful run's stdout, one JSON object a line.
#[cfg(feature = "vcpus")]
fn json_lines(o: &Output) -> Vec<Value> {
    assert!(o.status.success(), "{}", stderr(o));
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// A small simulated run: the per-call counters and the placement of every point, as JSON.
#[cfg(feature = "vcpus")]
#[test]
fn vcpus_run_and_compare_report_counters_and_placement() {
    let run = json_lines(&mballoc(&[
        "run", WORKLOAD, "--vcpus", "1,4", "--quick", "--json",
    ]));
    assert_eq!(run.len(), 2);
    for (v, n) in run.iter().zip([1u64, 4]) {
        assert_eq!(v["point"]["vcpus"], n, "{v}");
        assert_eq!(v["placement"]["files"], n, "{v}");
        assert!(v["point"]["calls"].as_u64().unwrap() > 0, "{v}");
        assert!(
            v["point"]["per_call"]["lock_hold_ns"]["group"]
                .as_f64()
                .unwrap()
                > 0.0,
            "{v}"
        );
    }
    let set = ["--set-a", "try_lock_groups=0", "--set", "nr_global_goals=1"];
    let mut args = vec![
        "compare",
        WORKLOAD,
        "--policy",
        "linux-6.18",
        "--policy",
        "linux-6.18",
    ];
    args.extend(set);
    args.extend(["--vcpus", "8", "--quick", "--json"]);
    let cmp = json_lines(&mballoc(&args));
    assert_eq!(cmp.len(), 2);
    let waits = |v: &Value| {
        v["point"]["per_call"]["lock_waits"]["group"]
            .as_f64()
            .unwrap()
    };
    // Waiting group locks (A) queue; skipping busy groups (B) hardly ever does.
    assert!(
        waits(&cmp[0]) > 10.0 * waits(&cmp[1]),
        "{} vs {}",
        cmp[0],
        cmp[1]
    );
    let text = stdout(&mballoc(&["run", WORKLOAD, "--vcpus", "2", "--quick"]));
    assert!(
        text.contains("grp waits") && text.contains("extents/file"),
        "{text}"
    );
}

/// fallocate3's loop on the workload's own filesystem: `seed003` on its 75 % fill, each
/// point's counters as JSON; seed 003's switch on one side moves fewer lines.
#[cfg(feature = "vcpus")]
#[test]
fn vcpus_run_and_compare_fallocate3_on_the_workloads_filesystem() {
    let run = json_lines(&mballoc(&[
        "run", "seed003", "--vcpus", "1,2", "--quick", "--json",
    ]));
    assert_eq!(run.len(), 2);
    for (v, n) in run.iter().zip([1u64, 2]) {
        assert_eq!(v["point"]["vcpus"], n, "{v}");
        assert_eq!(v["config"]["fs"]["used"], 0.75, "{v}");
        assert!(v["point"]["ops_per_s"].as_f64().unwrap() > 0.0, "{v}");
    }
    let cmp = json_lines(&mballoc(&[
        "compare",
        "seed003",
        "--policy",
        "linux-6.18",
        "--policy",
        "linux-6.18",
        "--set-b",
        "prefetch_test_before_set=1",
        "--vcpus",
        "4",
        "--quick",
        "--json",
    ]));
    assert_eq!(cmp.len(), 2);
    let moved = |v: &Value| v["point"]["line_transfers_per_op"].as_f64().unwrap();
    assert!(moved(&cmp[1]) < moved(&cmp[0]), "{} vs {}", cmp[0], cmp[1]);
    let text = stdout(&mballoc(&["run", "fallocate3", "--vcpus", "2", "--quick"]));
    assert!(
        text.contains("0 % used") && text.contains("groups/op"),
        "{text}"
    );
    // --out: every point as JSON, a CSV row per point, each side's rate against vCPUs.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = mballoc(&[
        "compare",
        "fallocate3",
        "--policy",
        "linux-6.16",
        "--policy",
        "linux-6.18",
        "--vcpus",
        "1,2",
        "--quick",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let runs: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("vcpu_runs.json")).unwrap())
            .unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 4, "{runs}");
    let csv = std::fs::read_to_string(out.join("vcpu_scalars.csv")).unwrap();
    assert_eq!(csv.lines().count(), 5, "{csv}");
    assert!(csv.starts_with("side,vcpus,"), "{csv}");
    assert!(out.join("vcpu_throughput.svg").exists());
}

/// fallocate3 on a stored layout as the kernel script runs it (`--seed003-image`, a short
/// counted time); what is neither an image nor a layout file, and a bad setting, are refused.
#[cfg(feature = "vcpus")]
#[test]
fn vcpus_fallocate3_runs_on_a_stored_layout() {
    let layout = format!(
        "{}/../../docs/measurements/aged-842g-31.layout.gz",
        env!("CARGO_MANIFEST_DIR")
    );
    let args = |extra: &[&'static str]| {
        let mut a = vec![
            "bench",
            "threads",
            "--vcpus",
            "1",
            "--seed003-image",
            layout.as_str(),
            "--machine",
            "xeon16",
            "--counted-s",
            "1",
        ];
        a.extend_from_slice(extra);
        a
    };
    let o = mballoc(&args(&["--json"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let points: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let p = &points[0];
    assert_eq!(p["vcpus"], 1, "{p}");
    assert!(p["ops_per_s"].as_f64().unwrap() > 0.0, "{p}");
    assert!(p["window_alloc_us_per_op"].as_f64().unwrap() > 0.0, "{p}");
    assert!(p["window_groups_per_op"].as_f64().unwrap() > 0.0, "{p}");
    let refused = |args: &[&str], needle: &str| {
        let o = mballoc(args);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    };
    refused(&args(&["--set", "line_overlap=2"]), "line_overlap");
    // The allocator's tunables reach the image's mount (a bad value is the mount's error),
    // and a lab setting the image fixes is refused, not ignored.
    refused(&args(&["--set", "mb_optimize_scan=x"]), "mb_optimize_scan");
    refused(&args(&["--set", "prefill=0.5"]), "--set prefill=0.5");
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.img");
    std::fs::write(&junk, vec![7u8; 8192]).unwrap();
    let junk = junk.to_str().unwrap().to_string();
    let at_junk = ["bench", "threads", "--vcpus", "1", "--seed003-image", &junk];
    refused(&at_junk, &junk);
}

/// Seed 003's points take the run's `--set` on both sides and say so: the allocator's
/// tunables (a bad value is the mount's error) and the lab's line costs; a fill setting,
/// which the seed's filesystem fixes, is refused, not ignored.
#[cfg(feature = "vcpus")]
#[test]
fn vcpus_seed003_takes_the_runs_settings_on_both_sides() {
    let args = |set: &'static str| {
        [
            "bench",
            "threads",
            "--vcpus",
            "1",
            "--seed003",
            "133g-50-kunpeng",
            "--set",
            set,
        ]
    };
    let o = mballoc(&args("line_ns=100"));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("both sides: line_ns=100"),
        "{}",
        stdout(&o)
    );
    let o = mballoc(&args("mb_optimize_scan=x"));
    assert!(!o.status.success() && stderr(&o).contains("mb_optimize_scan"));
    fails_with(&args("age=0.5"), &["--set age=0.5"]);
}
