//! `--out DIR`: every run's results as files, for spreadsheets and papers.
//!
//! | file | contents |
//! |---|---|
//! | `runs.json` | every [`RunResult`], complete |
//! | `scalars.csv` | one row per run: identity columns then every scalar metric |
//! | `runNN_<workload>_<policy>_t<T>.<series>.csv` | one CSV per series of each run (`x,y`) |
//! | `throughput.svg` | ops/s against threads, one line per policy label |
//! | `runNN_….<series>.svg` | frag_pct per group, free-extent histogram, extent-size distribution |
//!
//! File names start with the run's index so two runs of the same policy with different settings
//! never overwrite each other.
//!
//! `run`/`compare --vcpus` write their own three (`write_vcpus`, simulator build):
//! `vcpu_runs.json` (every point, complete), `vcpu_scalars.csv` (one row per point: side,
//! vCPUs, every figure) and, with two counts or more, `vcpu_throughput.svg` (each side's ops/s
//! against vCPUs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mballoc_lab::report::csv::quote;
use mballoc_lab::report::{self, ReportError, Series};
use mballoc_lab::workload::RunResult;
use serde::Serialize;

use super::error::CliError;
use super::output::IDENTITY;

/// Makes sure `dir` exists (created if missing) and takes files, before a long run starts:
/// a bad `--out` is then a usage error at once, not a failure after minutes of work.
pub fn check_writable(dir: &Path) -> Result<(), CliError> {
    let bad = |source: std::io::Error| CliError::OutDir {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(bad)?;
    let probe = dir.join(".mballoc-write-probe");
    std::fs::write(&probe, b"").map_err(bad)?;
    std::fs::remove_file(&probe).map_err(bad)
}

/// Writes every file of the table above into `dir` (created if missing); returns the paths.
pub fn write_all(dir: &Path, runs: &[RunResult]) -> Result<Vec<PathBuf>, CliError> {
    std::fs::create_dir_all(dir).map_err(|source| CliError::OutDir {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut written = Vec::new();
    let p = dir.join("runs.json");
    report::write_json(runs, &p)?;
    written.push(p);
    let p = dir.join("scalars.csv");
    std::fs::write(&p, scalars_csv(runs)).map_err(|e| ReportError::io(&p, e))?;
    written.push(p);
    for (i, r) in runs.iter().enumerate() {
        written.extend(write_series(dir, &stem(i, r), r)?);
    }
    if let Some(p) = write_throughput(dir, runs)? {
        written.push(p);
    }
    Ok(written)
}

/// `run03_fallocate2_linux-6.18_t2`, with anything unusual in names replaced by `-`.
pub fn stem(index: usize, r: &RunResult) -> String {
    format!(
        "run{index:02}_{}_{}_t{}",
        clean(&r.workload),
        clean(&r.policy),
        r.threads
    )
}

fn clean(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// `scalars.csv`: one row per run — the file stem, the run's identity, then every scalar
/// metric any run has (alphabetical; empty where a run lacks it).
fn scalars_csv(runs: &[RunResult]) -> String {
    let ident: Vec<&str> = std::iter::once("run").chain(IDENTITY).collect();
    // A scalar named like an identity column would make the header ambiguous; identity wins.
    let mut names: Vec<&str> = runs
        .iter()
        .flat_map(|r| r.scalars.keys().map(String::as_str))
        .filter(|n| !ident.contains(n))
        .collect();
    names.sort_unstable();
    names.dedup();
    let mut out = csv_line(
        ident
            .iter()
            .copied()
            .chain(names.iter().copied())
            .map(str::to_string),
    );
    for (i, r) in runs.iter().enumerate() {
        let mut cells = vec![
            stem(i, r),
            r.workload.clone(),
            r.policy.clone(),
            r.settings.join(" "),
            r.threads.to_string(),
            r.fs_size.to_string(),
            r.seed.to_string(),
            r.elapsed_s.to_string(),
        ];
        cells.extend(
            names
                .iter()
                .map(|n| r.scalars.get(*n).map_or(String::new(), f64::to_string)),
        );
        out.push_str(&csv_line(cells.into_iter()));
    }
    out
}

#[cfg(feature = "vcpus")]
/// One point of `run`/`compare --vcpus` for [`write_vcpus`].
pub struct VcpuRow {
    /// The side's label (policy and settings).
    pub label: String,
    pub vcpus: u32,
    /// Every figure of the point under one flat name; `rate` among them is plotted.
    pub scalars: BTreeMap<String, f64>,
    /// The whole point as `--json` prints it.
    pub json: serde_json::Value,
}

#[cfg(feature = "vcpus")]
/// `--out DIR` of `run`/`compare --vcpus` on `workload` (the files in the module's table):
/// `rate` is the figure plotted against vCPUs.
pub fn write_vcpus(
    dir: &Path,
    workload: &str,
    rate: &str,
    rows: &[VcpuRow],
) -> Result<Vec<PathBuf>, CliError> {
    check_writable(dir)?;
    let mut written = Vec::new();
    let p = dir.join("vcpu_runs.json");
    let all: Vec<&serde_json::Value> = rows.iter().map(|r| &r.json).collect();
    report::write_json(&all, &p)?;
    written.push(p);
    let p = dir.join("vcpu_scalars.csv");
    std::fs::write(&p, vcpu_scalars_csv(rows)).map_err(|e| ReportError::io(&p, e))?;
    written.push(p);
    let mut lines: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for r in rows {
        if let Some(&v) = r.scalars.get(rate).filter(|v| v.is_finite()) {
            lines
                .entry(&r.label)
                .or_default()
                .push((f64::from(r.vcpus), v));
        }
    }
    if lines.values().any(|pts| pts.len() > 1) {
        let series: Vec<Series> = lines
            .into_iter()
            .map(|(label, mut points)| {
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                Series {
                    label: label.to_string(),
                    points,
                }
            })
            .collect();
        let p = dir.join("vcpu_throughput.svg");
        let title = format!("{workload} on virtual CPUs: {rate} against vCPUs");
        report::plot_throughput(&title, &series, &p)?;
        written.push(p);
    }
    Ok(written)
}

#[cfg(feature = "vcpus")]
/// `vcpu_scalars.csv`: side and vCPUs, then every figure any point has (alphabetical; empty
/// where a point lacks it).
fn vcpu_scalars_csv(rows: &[VcpuRow]) -> String {
    let mut names: Vec<&str> = rows
        .iter()
        .flat_map(|r| r.scalars.keys().map(String::as_str))
        .collect();
    names.sort_unstable();
    names.dedup();
    let head = ["side", "vcpus"].into_iter().chain(names.iter().copied());
    let mut out = csv_line(head.map(str::to_string));
    for r in rows {
        let cells = [r.label.clone(), r.vcpus.to_string()].into_iter().chain(
            names
                .iter()
                .map(|n| r.scalars.get(*n).map_or(String::new(), f64::to_string)),
        );
        out.push_str(&csv_line(cells));
    }
    out
}

fn csv_line(cells: impl Iterator<Item = String>) -> String {
    let mut s = cells.map(|c| quote(&c)).collect::<Vec<_>>().join(",");
    s.push('\n');
    s
}

/// One `x,y` point of a series, for its CSV.
#[derive(Serialize)]
struct Point {
    x: f64,
    y: f64,
}

fn write_series(dir: &Path, stem: &str, r: &RunResult) -> Result<Vec<PathBuf>, CliError> {
    let mut written = Vec::new();
    for (name, pts) in &r.series {
        let rows: Vec<Point> = pts.iter().map(|&(x, y)| Point { x, y }).collect();
        let p = dir.join(format!("{stem}.{}.csv", clean(name)));
        report::write_csv_rows(&rows, &p)?;
        written.push(p);
        if pts.is_empty() || pts.iter().any(|&(x, y)| !x.is_finite() || !y.is_finite()) {
            continue; // nothing a bar chart could show; the CSV still records it
        }
        let p = dir.join(format!("{stem}.{}.svg", clean(name)));
        let labels: Vec<String> = pts.iter().map(|&(x, _)| bar_label(name, x)).collect();
        let values: Vec<f64> = pts.iter().map(|&(_, y)| y).collect();
        // Policy and settings: the two sides of an A/B pair differ only in a setting.
        let title = format!(
            "{name} — {} {} T={}",
            r.workload,
            super::config::label_of(r),
            r.threads
        );
        let (x_axis, y_axis) = axes(name);
        report::plot_bars(&title, x_axis, y_axis, &labels, &values, &p)?;
        written.push(p);
    }
    Ok(written)
}

/// Bar labels: group numbers for per-group series, `p99` for percentiles, and sizes for the
/// histograms (whose x is the bucket's smallest extent in KiB).
fn bar_label(series: &str, x: f64) -> String {
    if series.contains("per_group") {
        format!("{x:.0}")
    } else if series.contains("percentile") {
        format!("p{x}")
    } else if series.contains("histogram") || series.contains("distribution") {
        kib_label(x)
    } else {
        report::table::fmt_num(x)
    }
}

/// `4K`, `512K`, `8M`, `2G` for a size in KiB (e2freefrag's style).
fn kib_label(kib: f64) -> String {
    let mut v = kib;
    for unit in ["K", "M", "G"] {
        if v < 1024.0 {
            return format!("{}{unit}", report::table::fmt_num(v));
        }
        v /= 1024.0;
    }
    format!("{}T", report::table::fmt_num(v))
}

/// The axis names of a series' bar chart: what the bars stand for (x) and what they measure (y).
fn axes(series: &str) -> (&'static str, &'static str) {
    if series.starts_with("frag_pct") {
        ("group", "frag_pct")
    } else if series.contains("percentile") {
        ("percentile", "ns")
    } else if series.contains("free_extent") {
        ("free extent size (at least)", "extents")
    } else if series.contains("histogram") || series.contains("distribution") {
        ("extent size (at least)", "extents")
    } else {
        ("x", "value")
    }
}

/// `throughput.svg`: ops/s against threads, one line per distinct policy label.
fn write_throughput(dir: &Path, runs: &[RunResult]) -> Result<Option<PathBuf>, CliError> {
    let mut lines: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in runs {
        if let Some(&ops) = r.scalars.get("ops_per_sec").filter(|v| v.is_finite()) {
            let label = super::config::label_of(r);
            lines
                .entry(label)
                .or_default()
                .push((f64::from(r.threads), ops));
        }
    }
    if lines.is_empty() {
        return Ok(None);
    }
    let series: Vec<Series> = lines
        .into_iter()
        .map(|(label, mut points)| {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series { label, points }
        })
        .collect();
    let p = dir.join("throughput.svg");
    let workload = &runs[0].workload;
    report::plot_throughput(&format!("{workload}: ops/s against threads"), &series, &p)?;
    Ok(Some(p))
}

#[cfg(test)]
mod tests {
    use super::super::output::tests::sample;
    use super::*;

    #[test]
    fn histogram_labels_are_sizes() {
        assert_eq!(bar_label("free_extent_histogram", 4.0), "4K");
        assert_eq!(bar_label("extent_size_distribution", 8192.0), "8M");
        assert_eq!(bar_label("frag_pct_per_group", 12.0), "12");
        assert_eq!(bar_label("latency_percentiles", 99.9), "p99.9");
    }

    /// The two sides of a seed's A/B pair share the policy and differ in one setting; their
    /// plots must say which is which.
    #[test]
    fn ab_plots_name_their_settings() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = sample("linux-6.18", 1, 100.0);
        a.settings = vec!["size_classes=0".into()];
        let mut b = a.clone();
        b.settings = vec!["size_classes=1".into()];
        write_all(dir.path(), &[a, b]).unwrap();
        let svg = |i: usize| {
            let p = dir.path().join(format!(
                "run0{i}_fallocate2_linux-6.18_t1.frag_pct_per_group.svg"
            ));
            std::fs::read_to_string(p).unwrap()
        };
        let (sa, sb) = (svg(0), svg(1));
        assert!(sa.contains("size_classes=0"), "{sa}");
        assert!(sb.contains("size_classes=1"), "{sb}");
        assert!(!sa.contains("size_classes=1"));
    }

    #[test]
    fn an_unwritable_out_is_refused_up_front() {
        let dir = tempfile::tempdir().unwrap();
        check_writable(&dir.path().join("new/sub")).unwrap();
        assert!(dir.path().join("new/sub").is_dir());
        let file = dir.path().join("plain-file");
        std::fs::write(&file, b"x").unwrap();
        let err = check_writable(&file.join("sub")).unwrap_err();
        assert!(matches!(err, CliError::OutDir { .. }), "{err}");
        assert!(err.to_string().contains("plain-file"), "{err}");
    }

    #[test]
    fn writes_json_csv_and_svg() {
        let dir = tempfile::tempdir().unwrap();
        let runs = vec![
            sample("linux-6.16", 1, 100.0),
            sample("linux-6.16", 2, 150.0),
            sample("proposed", 1, 110.0),
        ];
        let files = write_all(dir.path(), &runs).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for want in [
            "runs.json",
            "scalars.csv",
            "throughput.svg",
            "run00_fallocate2_linux-6.16_t1.frag_pct_per_group.csv",
            "run02_fallocate2_proposed_t1.free_extent_histogram.svg",
        ] {
            assert!(
                names.iter().any(|n| n == want),
                "{want} missing from {names:?}"
            );
        }
        let csv = std::fs::read_to_string(dir.path().join("scalars.csv")).unwrap();
        assert_eq!(csv.lines().count(), 4, "{csv}");
        let header = csv.lines().next().unwrap();
        assert!(
            header.starts_with("run,workload,policy,settings,threads"),
            "{csv}"
        );
        assert!(
            header.ends_with(",elapsed_s,frag_pct_mean,ops_per_sec"),
            "{csv}"
        );
        assert!(
            csv.lines()
                .nth(3)
                .unwrap()
                .starts_with("run02_fallocate2_proposed_t1,"),
            "{csv}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("runs.json")).unwrap())
                .unwrap();
        assert_eq!(json.as_array().unwrap().len(), 3);
        let svg = std::fs::read_to_string(dir.path().join("throughput.svg")).unwrap();
        assert!(
            svg.contains("<svg") && svg.contains("proposed"),
            "legend names the policy"
        );
    }
}
