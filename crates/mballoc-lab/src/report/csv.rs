//! CSV writers for metrics records, via [`flatten`](super::flatten): one record as `key,value`
//! lines, or many records as a table whose header is the union of their keys (first-seen
//! order; keys within an object are alphabetical). Quoting follows RFC 4180: fields with `,`, `"` or line breaks are quoted, `"` doubled.

use super::error::ReportError;
use super::flatten::flatten;
use serde::Serialize;
use serde_json::Value;
use std::path::Path;

/// `key,value` lines for one record.
pub fn record_csv<T: Serialize + ?Sized>(record: &T) -> Result<String, ReportError> {
    let mut s = String::from("key,value\n");
    for (k, v) in flatten(record)? {
        s.push_str(&format!("{},{}\n", quote(&k), quote(&cell(&v))));
    }
    Ok(s)
}

/// A table with one row per record.
pub fn records_csv<T: Serialize>(records: &[T]) -> Result<String, ReportError> {
    let rows = records.iter().map(flatten).collect::<Result<Vec<_>, _>>()?;
    let mut header: Vec<String> = Vec::new();
    for row in &rows {
        for (k, _) in row {
            if !header.contains(k) {
                header.push(k.clone());
            }
        }
    }
    let mut s = line(header.iter().map(|h| quote(h)));
    for row in &rows {
        s.push_str(&line(header.iter().map(|h| {
            row.iter()
                .find(|(k, _)| k == h)
                .map_or(String::new(), |(_, v)| quote(&cell(v)))
        })));
    }
    Ok(s)
}

/// Writes one record as `key,value` CSV.
pub fn write_csv<T: Serialize + ?Sized>(record: &T, path: &Path) -> Result<(), ReportError> {
    std::fs::write(path, record_csv(record)?).map_err(|e| ReportError::io(path, e))
}

/// Writes records as a CSV table.
pub fn write_csv_rows<T: Serialize>(records: &[T], path: &Path) -> Result<(), ReportError> {
    std::fs::write(path, records_csv(records)?).map_err(|e| ReportError::io(path, e))
}

fn line(cells: impl Iterator<Item = String>) -> String {
    let mut s = cells.collect::<Vec<_>>().join(",");
    s.push('\n');
    s
}

fn cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// RFC 4180 quoting.
pub fn quote(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}
