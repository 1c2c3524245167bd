//! Flattens any serialisable record into `(dotted.key, value)` leaves, the common ground of the
//! CSV writer and the comparison table: `{"a": {"b": [1, 2]}}` becomes `a.b.0 = 1`, `a.b.1 = 2`.

use super::error::ReportError;
use serde::Serialize;
use serde_json::Value;

/// Leaves of `record`: object keys in alphabetical order at every level (serde_json's map
/// order), array elements in order. A scalar record is one leaf with an empty key.
pub fn flatten<T: Serialize + ?Sized>(record: &T) -> Result<Vec<(String, Value)>, ReportError> {
    let mut out = Vec::new();
    walk(String::new(), serde_json::to_value(record)?, &mut out);
    Ok(out)
}

fn walk(prefix: String, v: Value, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                walk(join(&prefix, &k), child, out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.into_iter().enumerate() {
                walk(join(&prefix, &i.to_string()), child, out);
            }
        }
        leaf => out.push((prefix, leaf)),
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Whether a flattened key went through an array (per-group or per-file detail).
pub fn is_array_key(key: &str) -> bool {
    key.split('.').any(|part| part.parse::<usize>().is_ok())
}
