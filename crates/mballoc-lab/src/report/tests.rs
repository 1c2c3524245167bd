//! Report tests: table layout and deltas, CSV/JSON round trips, and SVG files that exist, are
//! non-empty and look like SVG. Files go to a per-test directory under the system temp dir.

use super::csv::{quote, record_csv, records_csv};
use super::table::{delta_pct, ComparisonTable};
use super::*;
use crate::metrics::frag_pct::fsperf_frag;
use crate::metrics::freefrag::{e2freefrag, FreeFragOptions};
use crate::metrics::FreeSpace;
use serde::Serialize;
use std::path::PathBuf;

fn out_dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mballoc-report-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn space() -> FreeSpace {
    FreeSpace::from_extents(
        &[
            vec![(0, 1), (3, 2), (8, 8), (32, 32)],
            vec![(0, 4), (10, 3), (20, 20)],
            vec![],
        ],
        64,
        4096,
    )
    .unwrap()
}

#[track_caller]
fn assert_svg(path: &std::path::Path, must_contain: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.len() > 200, "{} is too small", path.display());
    let start = text.trim_start();
    assert!(
        start.starts_with("<svg") || start.starts_with("<?xml"),
        "not SVG: {start:.60}"
    );
    assert!(text.trim_end().ends_with("</svg>"));
    assert!(text.contains(must_contain), "missing {must_contain:?}");
}

#[test]
fn table_is_aligned_with_signed_deltas() {
    // Baokun Li's P80 column: 9636 -> 19628 is +103.7 %; 337597 -> 320885 is −5.0 %.
    let mut t = ComparisonTable::new("fallocate2 ops/s per container", "base", "patched");
    t.row("P80", 9636.0, 19628.0)
        .row("P1", 337_597.0, 320_885.0)
        .row("zero", 0.0, 0.0);
    t.row("from_zero", 0.0, 3.0).row("score", 0.386_363, 0.1);
    let text = t.render();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "fallocate2 ops/s per container");
    let width = lines[1].chars().count();
    assert!(
        lines[1..].iter().all(|l| l.chars().count() == width),
        "{text}"
    );
    assert!(
        lines[1].starts_with("| metric    |   base | patched |   delta |"),
        "{text}"
    );
    assert!(
        text.contains("| P80       |   9636 |   19628 | +103.7% |"),
        "{text}"
    );
    assert!(text.contains("-5.0%"));
    assert!(text.contains("| zero      |      0 |       0 |       = |"));
    assert!(text.contains("n/a"));
    assert!(text.contains("0.3864"));
    assert_eq!(delta_pct(0.0, 1.0), None);
    assert_eq!(delta_pct(-2.0, -1.0), Some(50.0));
}

#[test]
fn table_with_diff_label_and_note_column() {
    let mut t = ComparisonTable::new("", "base", "patched")
        .with_delta_label("diff")
        .with_note_column("published");
    t.row_note("frag_pct_mean", 43.59, 0.0, "43.59 -> 0 (-100.00%)")
        .row("bg_count", 14.0, 15.6);
    let text = t.render();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("| metric"), "no title line: {text}");
    assert!(lines[0].contains(" diff | published"), "{text}");
    assert!(
        lines
            .iter()
            .all(|l| l.chars().count() == lines[0].chars().count()),
        "{text}"
    );
    assert!(
        text.contains("| -100.0% | 43.59 -> 0 (-100.00%) |"),
        "{text}"
    );
}

#[test]
fn table_from_two_records_skips_arrays() {
    let a = fsperf_frag(&space());
    let b = fsperf_frag(&FreeSpace::from_extents(&[vec![(0, 64)]], 64, 4096).unwrap());
    let t = ComparisonTable::from_records("frag", "A", &a, "B", &b).unwrap();
    let names: Vec<&str> = t.rows.iter().map(|r| r.metric.as_str()).collect();
    assert!(names.contains(&"frag_pct_mean") && names.contains(&"fragmented_bg_count"));
    assert!(!names.iter().any(|n| n.starts_with("per_group_frag_pct")));
}

#[derive(Serialize)]
struct Nested {
    name: &'static str,
    inner: Inner,
}

#[derive(Serialize)]
struct Inner {
    values: Vec<u32>,
    ok: bool,
}

#[test]
fn csv_flattens_and_quotes() {
    let r = Nested {
        name: "a,\"b\"",
        inner: Inner {
            values: vec![3, 4],
            ok: true,
        },
    };
    assert_eq!(
        record_csv(&r).unwrap(),
        "key,value\ninner.ok,true\ninner.values.0,3\ninner.values.1,4\nname,\"a,\"\"b\"\"\"\n"
    );
    assert_eq!(quote("plain"), "plain");
    let rows = records_csv(&[
        Inner {
            values: vec![1],
            ok: false,
        },
        Inner {
            values: vec![1, 2],
            ok: true,
        },
    ])
    .unwrap();
    assert_eq!(rows, "ok,values.0,values.1\nfalse,1,\ntrue,1,2\n");
}

#[test]
fn json_and_csv_files_round_trip() {
    let d = out_dir("json");
    let f = e2freefrag(&space(), &FreeFragOptions::default()).unwrap();
    write_json(&f, &d.join("m.json")).unwrap();
    let back: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("m.json")).unwrap()).unwrap();
    assert_eq!(back["num_free_extent"], 6);
    write_csv(&f, &d.join("m.csv")).unwrap();
    let csv = std::fs::read_to_string(d.join("m.csv")).unwrap();
    assert!(csv.contains("num_free_extent,6\n"));
    write_csv_rows(&[&f, &f], &d.join("rows.csv")).unwrap();
    assert_eq!(
        std::fs::read_to_string(d.join("rows.csv"))
            .unwrap()
            .lines()
            .count(),
        3
    );
    let missing = d.join("no-such-dir").join("m.json");
    assert!(matches!(
        write_json(&f, &missing),
        Err(ReportError::Io { .. })
    ));
}

#[test]
fn svg_plots_are_written() {
    let d = out_dir("svg");
    let series = vec![
        Series {
            label: "linear".into(),
            points: vec![(1.0, 300.0), (2.0, 120.0), (4.0, 90.0)],
        },
        Series {
            label: "opt_scan".into(),
            points: vec![(1.0, 290.0), (2.0, 70.0), (4.0, 33.0)],
        },
    ];
    plot_throughput("fallocate2", &series, &d.join("tput.svg")).unwrap();
    assert_svg(&d.join("tput.svg"), "opt_scan");

    plot_frag_pct(&fsperf_frag(&space()), &d.join("frag.svg")).unwrap();
    assert_svg(&d.join("frag.svg"), "frag_pct per group");

    let f = e2freefrag(&space(), &FreeFragOptions::default()).unwrap();
    plot_free_extent_histogram(&f.histogram, &d.join("free.svg")).unwrap();
    assert_svg(&d.join("free.svg"), "4K...8K-");

    let files = vec![vec![(0, 100, 4), (4, 300, 1)], vec![(0, 9, 64)]];
    let sizes = crate::metrics::extent_sizes::extent_sizes(&files, 4096).unwrap();
    plot_extent_sizes(&sizes.histogram, &d.join("sizes.svg")).unwrap();
    assert_svg(&d.join("sizes.svg"), "file extent sizes");
}

/// The text of every `<text>` element of an SVG, in order.
fn svg_texts(path: &std::path::Path) -> Vec<String> {
    let svg = std::fs::read_to_string(path).unwrap();
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().to_string())
        })
        .collect()
}

#[test]
fn one_thread_throughput_plot_has_whole_thread_ticks() {
    let d = out_dir("one-thread");
    let p = d.join("tput.svg");
    let one = vec![Series {
        label: "linux-6.18".into(),
        points: vec![(1.0, 5000.0)],
    }];
    plot_throughput("t", &one, &p).unwrap();
    let texts = svg_texts(&p);
    assert!(texts.iter().any(|t| t == "1"), "no tick 1: {texts:?}");
    let numbers: Vec<f64> = texts.iter().filter_map(|t| t.parse().ok()).collect();
    assert!(
        numbers.len() >= 3
            && numbers
                .iter()
                .all(|n| n.fract() == 0.0 && !texts.contains(&format!("{n:.1}"))),
        "fractional tick: {texts:?}"
    );
    assert!(texts.iter().any(|t| t == "threads"), "{texts:?}");
}

#[test]
fn bar_plots_name_their_x_axis() {
    let d = out_dir("xdesc");
    plot_frag_pct(&fsperf_frag(&space()), &d.join("frag.svg")).unwrap();
    assert!(svg_texts(&d.join("frag.svg")).iter().any(|t| t == "group"));
    let f = e2freefrag(&space(), &FreeFragOptions::default()).unwrap();
    plot_free_extent_histogram(&f.histogram, &d.join("free.svg")).unwrap();
    let texts = svg_texts(&d.join("free.svg"));
    assert!(texts.iter().any(|t| t == "free extent size"), "{texts:?}");
}

#[test]
fn bad_plot_input_is_an_error() {
    let d = out_dir("bad");
    let p = d.join("x.svg");
    assert!(matches!(
        plot_throughput("t", &[], &p),
        Err(ReportError::EmptyData(_))
    ));
    let nan = vec![Series {
        label: "n".into(),
        points: vec![(1.0, f64::NAN)],
    }];
    assert!(matches!(
        plot_throughput("t", &nan, &p),
        Err(ReportError::NonFinite(_))
    ));
    assert!(matches!(
        plot_bars("t", "x", "y", &["a".into()], &[1.0, 2.0], &p),
        Err(ReportError::LabelMismatch {
            labels: 1,
            values: 2
        })
    ));
    assert!(matches!(
        plot_free_extent_histogram(&[], &p),
        Err(ReportError::EmptyData(_))
    ));
    let unwritable = d.join("no-such-dir").join("x.svg");
    let one = vec![Series {
        label: "a".into(),
        points: vec![(1.0, 1.0)],
    }];
    assert!(plot_throughput("t", &one, &unwritable).is_err());
}

#[test]
fn single_bar_chart() {
    let d = out_dir("one");
    plot_bars(
        "one",
        "x",
        "y",
        &["only".into()],
        &[3.0],
        &d.join("one.svg"),
    )
    .unwrap();
    assert_svg(&d.join("one.svg"), "only");
    // Background plus the bar: the single-category case must still draw its bar.
    let text = std::fs::read_to_string(d.join("one.svg")).unwrap();
    assert!(text.matches("<rect").count() >= 2);
    // Many categories: labels are thinned, nothing panics.
    let labels: Vec<String> = (0..500).map(|i| i.to_string()).collect();
    let values: Vec<f64> = (0..500).map(f64::from).collect();
    plot_bars("many", "x", "y", &labels, &values, &d.join("many.svg")).unwrap();
    assert_svg(&d.join("many.svg"), "many");
}

#[test]
fn frag_pct_mean_rows_show_their_group_counts() {
    let mut t = ComparisonTable::new("", "a", "b");
    t.row("w T=1: frag_pct_mean", 43.59, 10.0)
        .row("w T=1: fragmented_bg_count", 6.0, 2.0)
        .row("w T=1: data_bg_count", 14.0, 15.0)
        .row("v T=1: frag_pct_mean", 1.0, 2.0);
    let text = t.render();
    let line = |m: &str| text.lines().find(|l| l.contains(m)).unwrap().to_string();
    let w = line("w T=1: frag_pct_mean");
    assert!(
        w.contains("43.59 [6/14 groups]") && w.contains("10 [2/15 groups]"),
        "{text}"
    );
    assert!(!line("v T=1: frag_pct_mean").contains("groups"), "{text}");
}
