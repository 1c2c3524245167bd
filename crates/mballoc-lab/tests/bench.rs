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
    let t = &v["threads"];
    assert!(t["two_vs_one"]["linux-6.18"].as_f64().unwrap() > 0.0);
    assert!(t["v618_vs_v616"]["1"].as_f64().unwrap() > 0.0);
    assert!(t["ceiling"]["2"].as_f64().unwrap() > 0.0);
    assert_eq!(
        t["ceiling_runs_ops_per_s"]["2"].as_array().unwrap().len(),
        1
    );
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

#[test]
fn unknown_benchmark_is_an_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_mballoc"))
        .args(["bench", "nosuch"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("churn"));
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
