//! `mballoc bench`: the quick JSON report parses and names every system; the first-fit peer
//! agrees with a per-unit model. No timing is asserted.

use std::process::Command;

use mballoc_lab::bench::peer::RangeAlloc;
use mballoc_lab::bench::peers::first_fit::FirstFit;
use mballoc_lab::bench::rng::Rng;
use serde_json::Value;

fn bench_json(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_mballoc"))
        .arg("bench")
        .args(args)
        .output()
        .expect("run mballoc");
    assert!(
        out.status.success(),
        "mballoc bench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

#[test]
fn quick_churn_json_has_every_system() {
    let v = bench_json(&["churn", "--quick", "--json", "--runs", "1"]);
    let churn = &v["churn"];
    let names: Vec<&str> = churn["systems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["system"].as_str().unwrap())
        .collect();
    for want in [
        "mballoc/linux-6.18",
        "mballoc/proposed",
        "offset-allocator",
        "xalloc",
        "first-fit-bitmap",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    // libext2fs either ran or says why it was skipped.
    let ran = names.contains(&"libext2fs");
    let skipped = churn["skipped"]["libext2fs"].as_str().is_some();
    assert!(ran ^ skipped, "libext2fs neither ran nor was skipped");
    for s in churn["systems"].as_array().unwrap() {
        assert!(s["ns_per_op"].as_f64().unwrap() > 0.0);
        assert_eq!(
            s["extents_per_alloc"].as_f64().unwrap(),
            1.0,
            "{}",
            s["system"]
        );
        let ratios = s["ratio_vs"].as_object().unwrap();
        assert_eq!(ratios.len(), names.len() - 1);
        let f = &s["fragmentation"];
        assert!(f["free_extents"].as_u64().unwrap() > 0);
        let score = f["bluestore_score"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&score));
    }
}

#[test]
fn quick_threads_and_huge_report_their_figures() {
    let v = bench_json(&[
        "all", "--quick", "--json", "--runs", "1", "--only", "offset",
    ]);
    check_threads(&v["threads"]);
    for h in v["huge"]["systems"].as_array().unwrap() {
        assert!(h["all"]["calls"].as_u64().unwrap() > 0);
        let loaded = h["loaded_groups"].as_u64().unwrap();
        assert!(
            loaded <= h["cache_groups"].as_u64().unwrap() + 64,
            "{loaded}"
        );
        let fill = h["fill_pct"].as_f64().unwrap();
        assert!((70.0..80.0).contains(&fill), "{fill}");
    }
}

/// Every pattern has a positive figure for every policy and thread count, and a one-run
/// ceiling for every thread count above 1.
fn check_threads(t: &Value) {
    let counts: Vec<u64> = t["config"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect();
    let positive = |v: &Value, what: &str| {
        let x = v.as_f64().unwrap_or_else(|| panic!("{what} missing"));
        assert!(x > 0.0, "{what} = {x}");
    };
    let points = t["points"].as_array().unwrap();
    for pat in ["fallocate2", "appenders"] {
        for pol in ["linux-6.16", "linux-6.18", "proposed"] {
            let of: Vec<&Value> = points
                .iter()
                .filter(|p| p["pattern"] == pat && p["policy"] == pol)
                .collect();
            assert_eq!(of.len(), counts.len(), "{pat} {pol}");
            for p in of {
                positive(&p["ops_per_s"], &format!("{pat} {pol} ops_per_s"));
            }
            positive(
                &t["two_vs_one"][pat][pol],
                &format!("{pat} two_vs_one {pol}"),
            );
        }
        for n in &counts {
            let n = n.to_string();
            positive(
                &t["v618_vs_v616"][pat][&n],
                &format!("{pat} v618_vs_v616 {n}"),
            );
            positive(
                &t["proposed_vs_v618"][pat][&n],
                &format!("{pat} proposed {n}"),
            );
        }
        for n in counts.iter().filter(|&&n| n > 1).map(u64::to_string) {
            positive(&t["ceiling"][pat][&n], &format!("{pat} ceiling {n}"));
            let runs = t["ceiling_runs_ops_per_s"][pat][&n].as_array().unwrap();
            assert_eq!(runs.len(), 1, "{pat} ceiling runs at {n} threads");
        }
    }
}

#[test]
fn unknown_benchmark_is_an_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_mballoc"))
        .args(["bench", "nosuch"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("churn"));
}

/// An `--only` that names no churn system is an error naming them all, not an empty table;
/// so is one of several that matches none.
#[test]
fn only_with_no_such_system_is_an_error() {
    for only in ["nosuch", "offset,nosuch"] {
        let out = Command::new(env!("CARGO_BIN_EXE_mballoc"))
            .args(["bench", "churn", "--quick", "--runs", "1", "--only", only])
            .output()
            .unwrap();
        assert!(!out.status.success(), "--only {only} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        for needle in ["--only nosuch", "offset-allocator", "mballoc/linux-6.18"] {
            assert!(
                err.contains(needle),
                "--only {only}: {needle:?} missing from {err}"
            );
        }
    }
}

/// The first-fit bitmap against a model that tries every start from 0.
#[test]
fn first_fit_matches_a_model() {
    const SIZE: u64 = 5000;
    let mut ff = FirstFit::new(SIZE);
    let mut model = vec![false; SIZE as usize];
    let mut live: Vec<(u64, u32)> = Vec::new();
    let mut rng = Rng::new(42);
    for _ in 0..3000 {
        if live.is_empty() || rng.below(3) > 0 {
            let len = rng.range_inclusive(1, 64);
            let want = (0..=SIZE - u64::from(len))
                .find(|&s| (s..s + u64::from(len)).all(|u| !model[u as usize]));
            let got = ff.alloc(len, 0).unwrap();
            assert_eq!(got.map(|h| h.0), want, "len {len}");
            if let Some(h) = got {
                for u in h.0..h.0 + u64::from(h.1) {
                    model[u as usize] = true;
                }
                live.push(h);
            }
        } else {
            let h = live.swap_remove(rng.below(live.len() as u64) as usize);
            ff.free(h).unwrap();
            for u in h.0..h.0 + u64::from(h.1) {
                model[u as usize] = false;
            }
        }
    }
    // Its own free-run view matches the model too, and a double free is an error.
    let runs = ff.free_runs().unwrap();
    let free: u64 = runs.iter().map(|r| u64::from(r.1)).sum();
    assert_eq!(free, model.iter().filter(|&&u| !u).count() as u64);
    if let Some(&h) = live.first() {
        ff.free(h).unwrap();
        assert!(ff.free(h).is_err());
    }
}

/// `--set` reaches every mballoc policy (recorded in the report), and a bad setting is a usage
/// error (exit code 2) that lists the valid names.
#[test]
fn bench_set_applies_tunables_and_rejects_bad_ones() {
    let v = bench_json(&[
        "churn",
        "--quick",
        "--json",
        "--runs",
        "1",
        "--only",
        "mballoc",
        "--set",
        "prefetch_test_before_set=1",
    ]);
    let settings = v["churn"]["config"]["settings"].as_array().unwrap();
    assert_eq!(settings.len(), 1);
    assert_eq!(settings[0], "prefetch_test_before_set=1");
    let out = Command::new(env!("CARGO_BIN_EXE_mballoc"))
        .args([
            "bench", "churn", "--quick", "--runs", "1", "--set", "bogus=1",
        ])
        .output()
        .expect("run mballoc");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bogus") && err.contains("try_lock_groups"),
        "{err}"
    );
}
