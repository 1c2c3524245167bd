//! Side-by-side comparison tables (policy A vs B with the change in %), in the style of the
//! kernel patch cover letters the seeds quote: `metric | base | patched | delta`, columns
//! aligned, delta as `(b − a) / |a| · 100` with a sign.

use super::error::ReportError;
use super::flatten::{flatten, is_array_key};
use serde::Serialize;
use std::fmt::Write as _;

/// One compared metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparisonRow {
    /// Metric name.
    pub metric: String,
    /// Value under policy A (the baseline).
    pub a: f64,
    /// Value under policy B.
    pub b: f64,
}

/// A titled A-vs-B table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparisonTable {
    /// Printed above the table.
    pub title: String,
    /// Column header of A.
    pub label_a: String,
    /// Column header of B.
    pub label_b: String,
    /// Rows in insertion order.
    pub rows: Vec<ComparisonRow>,
}

/// `(b − a) / |a| · 100`, `None` when `a` is 0 (no meaningful relative change) or either is not
/// finite.
pub fn delta_pct(a: f64, b: f64) -> Option<f64> {
    if a == 0.0 || !a.is_finite() || !b.is_finite() {
        None
    } else {
        Some((b - a) / a.abs() * 100.0)
    }
}

impl ComparisonTable {
    /// An empty table.
    pub fn new(title: &str, label_a: &str, label_b: &str) -> Self {
        Self {
            title: title.to_string(),
            label_a: label_a.to_string(),
            label_b: label_b.to_string(),
            rows: Vec::new(),
        }
    }

    /// Appends a row.
    pub fn row(&mut self, metric: &str, a: f64, b: f64) -> &mut Self {
        self.rows.push(ComparisonRow {
            metric: metric.to_string(),
            a,
            b,
        });
        self
    }

    /// Compares two records of the same type field by field: every numeric scalar leaf present
    /// in both (array elements such as per-group detail are skipped to keep the table short).
    pub fn from_records<T: Serialize>(
        title: &str,
        label_a: &str,
        a: &T,
        label_b: &str,
        b: &T,
    ) -> Result<Self, ReportError> {
        let fa = flatten(a)?;
        let fb = flatten(b)?;
        let mut t = Self::new(title, label_a, label_b);
        for (k, va) in fa.iter().filter(|(k, _)| !is_array_key(k)) {
            let vb = fb.iter().find(|(kb, _)| kb == k).map(|(_, v)| v);
            if let (Some(x), Some(y)) = (number(va), vb.and_then(number)) {
                t.row(k, x, y);
            }
        }
        Ok(t)
    }

    /// The table as aligned text.
    pub fn render(&self) -> String {
        let cells: Vec<[String; 4]> = self
            .rows
            .iter()
            .map(|r| {
                [
                    r.metric.clone(),
                    fmt_num(r.a),
                    fmt_num(r.b),
                    fmt_delta(r.a, r.b),
                ]
            })
            .collect();
        let header = [
            "metric".to_string(),
            self.label_a.clone(),
            self.label_b.clone(),
            "delta".to_string(),
        ];
        let widths = column_widths(&header, &cells);
        let mut s = String::new();
        if !self.title.is_empty() {
            let _ = writeln!(s, "{}", self.title);
        }
        s.push_str(&format_line(&header, &widths));
        let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
        let _ = writeln!(s, "|-{}-|", rule.join("-|-"));
        for c in &cells {
            s.push_str(&format_line(c, &widths));
        }
        s
    }
}

fn number(v: &serde_json::Value) -> Option<f64> {
    match v {
        serde_json::Value::Bool(b) => Some(f64::from(u8::from(*b))),
        other => other.as_f64(),
    }
}

fn column_widths(header: &[String; 4], cells: &[[String; 4]]) -> [usize; 4] {
    let mut w = header.clone().map(|h| h.chars().count());
    for row in cells {
        for (wi, c) in w.iter_mut().zip(row) {
            *wi = (*wi).max(c.chars().count());
        }
    }
    w
}

/// `| metric | a | b | delta |` with the name left-aligned and numbers right-aligned.
fn format_line(cells: &[String; 4], w: &[usize; 4]) -> String {
    format!(
        "| {:<w0$} | {:>w1$} | {:>w2$} | {:>w3$} |\n",
        cells[0],
        cells[1],
        cells[2],
        cells[3],
        w0 = w[0],
        w1 = w[1],
        w2 = w[2],
        w3 = w[3]
    )
}

/// Integers print without decimals, magnitudes below 1 with 4, others with 2.
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        format!("{v}")
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() < 1.0 {
        format!("{v:.4}")
    } else {
        format!("{v:.2}")
    }
}

fn fmt_delta(a: f64, b: f64) -> String {
    match delta_pct(a, b) {
        Some(d) => format!("{d:+.1}%"),
        None if a == b => "=".to_string(),
        None => "n/a".to_string(),
    }
}
