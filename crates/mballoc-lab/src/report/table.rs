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
    /// Free text for the optional note column (e.g. a published figure to set beside ours).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Printed after A's and B's values, e.g. [`frag_groups`] beside a `frag_pct_mean`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<(String, String)>,
}

/// `[fragmented/data groups]`, printed beside an fsperf `frag_pct_mean`: the mean is over the
/// fragmented data groups only, so it reads right only with how many groups it covers.
pub fn frag_groups(fragmented: f64, data: f64) -> String {
    format!("[{}/{} groups]", fmt_num(fragmented), fmt_num(data))
}

/// [`frag_groups`] from a run's scalars (`fragmented_bg_count`, `data_bg_count`).
pub fn frag_groups_of(scalars: &std::collections::BTreeMap<String, f64>) -> Option<String> {
    Some(frag_groups(
        *scalars.get("fragmented_bg_count")?,
        *scalars.get("data_bg_count")?,
    ))
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
    /// Header of the change column: "delta", or "diff" as in the fsperf tables.
    pub delta_label: String,
    /// Header of a text column after the change, shown when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note_label: Option<String>,
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
            delta_label: "delta".to_string(),
            note_label: None,
        }
    }

    /// Renames the change column.
    pub fn with_delta_label(mut self, label: &str) -> Self {
        self.delta_label = label.to_string();
        self
    }

    /// Adds a text column after the change, headed `label`, filled by [`Self::row_note`].
    pub fn with_note_column(mut self, label: &str) -> Self {
        self.note_label = Some(label.to_string());
        self
    }

    /// Appends a row.
    pub fn row(&mut self, metric: &str, a: f64, b: f64) -> &mut Self {
        self.rows.push(ComparisonRow {
            metric: metric.to_string(),
            a,
            b,
            note: None,
            context: None,
        });
        self
    }

    /// Appends a row whose values are followed by context, e.g. `21.89 [10/36 groups]`.
    pub fn row_with_context(
        &mut self,
        metric: &str,
        a: f64,
        b: f64,
        context_a: &str,
        context_b: &str,
    ) -> &mut Self {
        self.row(metric, a, b);
        if let Some(r) = self.rows.last_mut() {
            r.context = Some((context_a.to_string(), context_b.to_string()));
        }
        self
    }

    /// Appends a row with text in the note column.
    pub fn row_note(&mut self, metric: &str, a: f64, b: f64, note: &str) -> &mut Self {
        self.row(metric, a, b);
        if let Some(r) = self.rows.last_mut() {
            r.note = Some(note.to_string());
        }
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

    /// For a `…frag_pct_mean` row without context: [`frag_groups`] from the table's own
    /// `…fragmented_bg_count` and `…data_bg_count` rows of the same prefix, when it has both.
    fn implied_frag_groups(&self, metric: &str) -> Option<(String, String)> {
        let prefix = metric.strip_suffix("frag_pct_mean")?;
        let find = |name: &str| {
            let want = format!("{prefix}{name}");
            self.rows.iter().find(|r| r.metric == want)
        };
        let (f, d) = (find("fragmented_bg_count")?, find("data_bg_count")?);
        Some((frag_groups(f.a, d.a), frag_groups(f.b, d.b)))
    }

    /// The table as aligned text.
    pub fn render(&self) -> String {
        let mut header = vec![
            "metric".to_string(),
            self.label_a.clone(),
            self.label_b.clone(),
            self.delta_label.clone(),
        ];
        header.extend(self.note_label.clone());
        let cells: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                let with = |v: f64, ctx: Option<&String>| match ctx {
                    Some(c) => format!("{} {c}", fmt_num(v)),
                    None => fmt_num(v),
                };
                let implied = self.implied_frag_groups(&r.metric);
                let ctx = r.context.as_ref().or(implied.as_ref());
                let mut c = vec![
                    r.metric.clone(),
                    with(r.a, ctx.map(|c| &c.0)),
                    with(r.b, ctx.map(|c| &c.1)),
                    fmt_delta(r.a, r.b),
                ];
                if self.note_label.is_some() {
                    c.push(r.note.clone().unwrap_or_default());
                }
                c
            })
            .collect();
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

fn column_widths(header: &[String], cells: &[Vec<String>]) -> Vec<usize> {
    let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in cells {
        for (wi, c) in w.iter_mut().zip(row) {
            *wi = (*wi).max(c.chars().count());
        }
    }
    w
}

/// `| metric | a | b | delta | note |`: the name and the note left-aligned, numbers right.
fn format_line(cells: &[String], w: &[usize]) -> String {
    let mut s = String::from("|");
    for (i, (c, &wi)) in cells.iter().zip(w).enumerate() {
        let pad = wi.saturating_sub(c.chars().count());
        if i == 0 || i == 4 {
            let _ = write!(s, " {c}{} |", " ".repeat(pad));
        } else {
            let _ = write!(s, " {}{c} |", " ".repeat(pad));
        }
    }
    s.push('\n');
    s
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
