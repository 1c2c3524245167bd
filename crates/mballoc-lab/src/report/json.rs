//! JSON writer for a metrics record (pretty-printed, newline-terminated).

use super::error::ReportError;
use serde::Serialize;
use std::path::Path;

/// Writes `record` as pretty JSON to `path`.
pub fn write_json<T: Serialize + ?Sized>(record: &T, path: &Path) -> Result<(), ReportError> {
    let mut text = serde_json::to_string_pretty(record)?;
    text.push('\n');
    std::fs::write(path, text).map_err(|e| ReportError::io(path, e))
}
