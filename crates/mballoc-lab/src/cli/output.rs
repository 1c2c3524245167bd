//! What `run` and `compare` print: a readable summary per run, or one JSON object per line.
//!
//! The JSON object is flat where it matters for scripts: the run's identity (`workload`,
//! `policy`, `settings`, `threads`, `fs_size`, `seed`, `elapsed_s`), then every scalar metric
//! under its design-document name at the top level (`ops_per_sec`, `frag_pct_mean`,
//! `fragmented_bg_count`, `extents_per_file`, …), then `series` and `detail` as the workload
//! produced them. `jq .ops_per_sec` works without knowing the nesting.

use std::fmt::Write as _;

use mballoc_lab::report::table::fmt_num;
use mballoc_lab::workload::RunResult;
use std::collections::BTreeMap;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::Value;

use super::parse::fmt_size;

/// The run as one flat JSON object (see the module doc), serialised in that order.
pub struct JsonRun<'a>(pub &'a RunResult);

/// The identity keys, which a same-named scalar may not shadow.
pub(crate) const IDENTITY: [&str; 7] = [
    "workload",
    "policy",
    "settings",
    "threads",
    "fs_size",
    "seed",
    "elapsed_s",
];

impl Serialize for JsonRun<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let r = self.0;
        let mut m = ser.serialize_map(None)?;
        m.serialize_entry("workload", &r.workload)?;
        m.serialize_entry("policy", &r.policy)?;
        m.serialize_entry("settings", &r.settings)?;
        m.serialize_entry("threads", &r.threads)?;
        m.serialize_entry("fs_size", &r.fs_size)?;
        if let Some(image) = &r.image {
            m.serialize_entry("image", image)?;
        }
        m.serialize_entry("seed", &r.seed)?;
        m.serialize_entry("elapsed_s", &number(r.elapsed_s))?;
        for (k, &v) in r
            .scalars
            .iter()
            .filter(|(k, _)| !IDENTITY.contains(&k.as_str()))
        {
            m.serialize_entry(k, &number(v))?;
        }
        let series: BTreeMap<&str, Vec<[Value; 2]>> = r
            .series
            .iter()
            .map(|(k, pts)| {
                (
                    k.as_str(),
                    pts.iter().map(|&(x, y)| [number(x), number(y)]).collect(),
                )
            })
            .collect();
        m.serialize_entry("series", &series)?;
        m.serialize_entry("detail", &r.detail)?;
        m.end()
    }
}

/// JSON has no NaN or infinity: those become `null`.
fn number(v: f64) -> Value {
    serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
}

/// One line of JSON for the run, identity first.
pub fn json_line(r: &RunResult) -> String {
    serde_json::to_string(&JsonRun(r)).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// The run's heading: `fallocate2 · linux-6.18 +x=1 · 2 threads · 16G · seed 1 · 5.02 s`.
pub fn heading(r: &RunResult) -> String {
    let policy = super::config::label_of(r);
    format!(
        "{} · {} · {} thread{} · {} · seed {} · {:.2} s",
        r.workload,
        policy,
        r.threads,
        if r.threads == 1 { "" } else { "s" },
        fs_label(r),
        r.seed,
        r.elapsed_s
    )
}

/// The file system of a run: its size, and the image it started from if any.
pub fn fs_label(r: &RunResult) -> String {
    match &r.image {
        Some(image) => format!("{} image {image}", fmt_size(r.fs_size)),
        None => fmt_size(r.fs_size),
    }
}

/// Throughput against threads for one policy's sweep (printed when a sweep has several points):
/// total ops/s, ops/s per task and will-it-scale's scalability `avg(T) / (T · avg(1))`.
pub fn sweep_table(runs: &[&RunResult]) -> Option<String> {
    let points: Vec<(u32, f64)> = runs
        .iter()
        .filter_map(|r| r.scalars.get("ops_per_sec").map(|&v| (r.threads, v)))
        .collect();
    if points.len() < 2 {
        return None;
    }
    let base = points
        .iter()
        .find(|p| p.0 == 1)
        .map(|p| p.1)
        .filter(|&v| v > 0.0);
    let mut s = format!(
        "{:>7}  {:>14}  {:>14}  {:>11}\n",
        "threads", "ops_per_sec", "per task", "scalability"
    );
    for (t, ops) in points {
        let scal = base.map_or("-".to_string(), |b| {
            format!("{:.2}", ops / (f64::from(t) * b))
        });
        let _ = writeln!(
            s,
            "{t:>7}  {:>14}  {:>14}  {scal:>11}",
            fmt_num(ops),
            fmt_num(ops / f64::from(t))
        );
    }
    Some(s)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A small hand-made result for the writers' tests.
    pub fn sample(policy: &str, threads: u32, ops: f64) -> RunResult {
        let mut scalars = BTreeMap::new();
        scalars.insert("ops_per_sec".to_string(), ops);
        scalars.insert("frag_pct_mean".to_string(), 12.5);
        scalars.insert("threads".to_string(), 99.0);
        let mut series = BTreeMap::new();
        series.insert(
            "frag_pct_per_group".to_string(),
            vec![(0.0, 0.0), (1.0, 25.0), (2.0, 12.5)],
        );
        series.insert(
            "free_extent_histogram".to_string(),
            vec![(1.0, 10.0), (512.0, 90.0)],
        );
        RunResult {
            workload: "fallocate2".into(),
            policy: policy.into(),
            settings: vec!["size_classes=1".into()],
            threads,
            fs_size: 1 << 30,
            image: None,
            seed: 7,
            elapsed_s: 0.5,
            scalars,
            series,
            detail: serde_json::json!({"note": "sample"}),
        }
    }

    #[test]
    fn json_is_flat_with_identity_first() {
        let line = json_line(&sample("linux-6.18", 2, 10.0));
        assert!(
            line.starts_with(r#"{"workload":"fallocate2","policy":"linux-6.18","#),
            "{line}"
        );
        assert_eq!(line.matches("\"threads\"").count(), 1, "{line}");
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["ops_per_sec"], 10.0);
        assert_eq!(v["frag_pct_mean"], 12.5);
        assert_eq!(
            v["threads"], 2,
            "identity fields win over same-named scalars"
        );
        assert_eq!(v["series"]["frag_pct_per_group"][1][1], 25.0);
        assert_eq!(v["detail"]["note"], "sample");
    }

    #[test]
    fn non_finite_values_become_null() {
        let mut r = sample("a", 1, f64::NAN);
        r.elapsed_s = f64::INFINITY;
        let v: Value = serde_json::from_str(&json_line(&r)).unwrap();
        assert!(v["ops_per_sec"].is_null() && v["elapsed_s"].is_null());
    }

    #[test]
    fn heading_and_sweep() {
        let a = sample("linux-6.18", 1, 100.0);
        let b = sample("linux-6.18", 2, 150.0);
        let h = heading(&a);
        assert!(
            h.starts_with("fallocate2 · linux-6.18 +size_classes=1 · 1 thread · 1G"),
            "{h}"
        );
        let t = sweep_table(&[&a, &b]).unwrap();
        assert!(t.contains("0.75"), "scalability 150 / (2 · 100): {t}");
        assert!(sweep_table(&[&a]).is_none());
    }
}
