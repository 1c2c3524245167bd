//! Errors of loading a capture case: each names the file and, for `allocs.jsonl`, the 1-based
//! line, so a bad capture can be found and fixed by hand.

use std::path::PathBuf;

/// Why a capture case could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    /// A required file of the case is not there.
    #[error("{}: missing file", file.display())]
    MissingFile { file: PathBuf },

    /// The file exists but could not be read (or a directory could not be listed).
    #[error("{}: {source}", file.display())]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// Malformed JSON, a missing field, or a field of the wrong type. `line` is 1-based; for
    /// the single-document files it is the line of the document where parsing stopped.
    #[error("{}:{line}: {msg}", file.display())]
    Json {
        file: PathBuf,
        line: usize,
        msg: String,
    },

    /// The line ends before its JSON object does: a capture cut short (usually the last line).
    #[error("{}:{line}: truncated record: {msg}", file.display())]
    Truncated {
        file: PathBuf,
        line: usize,
        msg: String,
    },

    /// A record whose `type` this loader does not know.
    #[error("{}:{line}: unknown record type {kind:?}", file.display())]
    UnknownRecordType {
        file: PathBuf,
        line: usize,
        kind: String,
    },

    /// A record whose `seq` is not its line number (records were dropped, reordered or merged).
    #[error("{}:{line}: record has seq {seq}, expected the line number {line}", file.display())]
    SeqMismatch {
        file: PathBuf,
        line: usize,
        seq: u64,
    },

    /// The data parsed but contradicts itself (bitmap vs free count, totals, record counts).
    #[error("{}: inconsistent: {what}", file.display())]
    Inconsistent { file: PathBuf, what: String },
}

impl CaseError {
    /// Wraps a `serde_json` error of a whole-document file, keeping its line and telling a
    /// truncated document from a malformed one.
    pub(crate) fn from_json(file: PathBuf, line_base: usize, err: &serde_json::Error) -> Self {
        let line = line_base + err.line().saturating_sub(1);
        // serde_json appends "at line L column C"; L is relative to what it parsed (always 1
        // for a JSONL record), so keep only the column.
        let full = err.to_string();
        let suffix = format!(" at line {} column {}", err.line(), err.column());
        let msg = match full.strip_suffix(&suffix) {
            Some(text) => format!("{text} (column {})", err.column()),
            None => full,
        };
        if err.is_eof() {
            CaseError::Truncated { file, line, msg }
        } else {
            CaseError::Json { file, line, msg }
        }
    }

    /// Shorthand for an [`CaseError::Inconsistent`] error.
    pub(crate) fn inconsistent(file: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        CaseError::Inconsistent {
            file: file.into(),
            what: what.into(),
        }
    }
}
