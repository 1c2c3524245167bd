//! Kernel capture cases (`kernel-cases/<case>/`): a typed model of one capture, for
//! the replay command to drive the allocator with and check it against.
//!
//! A case is a directory with `initial_state.json` (geometry and per-group bitmaps),
//! `meta.json` (how it was made), `allocs.jsonl` (the records, one per line) and
//! `final_state.json` (free space at the end). [`Case::load`] reads and cross-checks all four;
//! every problem is a [`CaseError`] naming the file (and line), never a panic.

mod bitmap;
mod error;
mod final_state;
mod initial;
mod meta;
mod records;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

pub use error::CaseError;
pub use final_state::{FinalGroup, FinalState};
pub use initial::{GroupState, InitialState, InodeInfo, KernelMbGroup};
pub use meta::{Counts, FreshMountLoads, Meta, MetaGeometry};
pub use records::{
    AllocCtx, AllocExtent, AllocRecord, AllocSource, CommitPhase, CommitRecord, ContextKind,
    ContextRecord, DiscardAllPasEnospcRecord, DiscardInodePasRecord, FreeRecord, GroupExtent,
    NewPa, PaKind, PaReleaseRecord, PaTypeUsed, Record, Stamp,
};

/// The file whose presence makes a directory a case.
pub const INITIAL_STATE: &str = "initial_state.json";
/// Capture metadata.
pub const META: &str = "meta.json";
/// The records.
pub const RECORDS: &str = "allocs.jsonl";
/// Free space at the end.
pub const FINAL_STATE: &str = "final_state.json";

/// One capture, fully loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The directory's name (e.g. `falloc-1g-mixed`).
    pub name: String,
    pub dir: PathBuf,
    pub initial: InitialState,
    pub meta: Meta,
    /// Every record of `allocs.jsonl`, in file order (`records[i].seq() == i + 1`).
    pub records: Vec<Record>,
    pub final_state: FinalState,
}

impl Case {
    /// Loads the case in `dir` and checks each file on its own (bitmaps against free counts,
    /// `seq` against line numbers, totals). See [`Case::check_counts`] for the cross-check
    /// against `meta.json`.
    pub fn load(dir: impl AsRef<Path>) -> Result<Case, CaseError> {
        let dir = dir.as_ref();
        let initial = InitialState::load(&dir.join(INITIAL_STATE))?;
        let meta: Meta = read_json(&dir.join(META))?;
        let records_file = dir.join(RECORDS);
        let records = records::parse_records(&records_file, &read_text(&records_file)?)?;
        let final_file = dir.join(FINAL_STATE);
        let final_state = FinalState::load(&final_file)?;
        final_state
            .check_against(&initial)
            .map_err(|what| CaseError::inconsistent(&final_file, what))?;
        let name = dir.file_name().map_or_else(
            || dir.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        Ok(Case {
            name,
            dir: dir.to_path_buf(),
            initial,
            meta,
            records,
            final_state,
        })
    }

    /// Records by `type`, as `meta.json` → `counts.by_type` counts them.
    pub fn counts_by_type(&self) -> BTreeMap<&'static str, u64> {
        let mut counts = BTreeMap::new();
        for r in &self.records {
            *counts.entry(r.type_name()).or_insert(0) += 1;
        }
        counts
    }

    /// Checks the loaded records against `meta.json` → `counts` (where present): the total and
    /// the count of every type. A mismatch means the records file and the metadata are not
    /// from the same capture, or lines were lost.
    pub fn check_counts(&self) -> Result<(), CaseError> {
        let Some(counts) = &self.meta.counts else {
            return Ok(());
        };
        let file = self.dir.join(RECORDS);
        if let Some(total) = counts.records {
            if total != self.records.len() as u64 {
                let what = format!(
                    "meta.json counts {total} records, file has {}",
                    self.records.len()
                );
                return Err(CaseError::inconsistent(file, what));
            }
        }
        let ours = self.counts_by_type();
        let names = counts
            .by_type
            .keys()
            .map(String::as_str)
            .chain(ours.keys().copied());
        for name in names {
            let want = counts.by_type.get(name).copied().unwrap_or(0);
            let have = ours.get(name).copied().unwrap_or(0);
            if want != have {
                let what = format!("meta.json counts {want} `{name}` records, file has {have}");
                return Err(CaseError::inconsistent(file, what));
            }
        }
        Ok(())
    }
}

/// The case directories among `paths`: a path holding `initial_state.json` is a case;
/// otherwise each of its sub-directories that holds one is (sorted by name). Paths that are
/// neither give nothing; a path that cannot be read is an error.
pub fn find_cases(paths: &[PathBuf]) -> Result<Vec<PathBuf>, CaseError> {
    let mut found = Vec::new();
    for path in paths {
        if is_case(path) {
            found.push(path.clone());
        } else {
            found.extend(sub_cases(path)?);
        }
    }
    Ok(found)
}

fn is_case(dir: &Path) -> bool {
    dir.join(INITIAL_STATE).is_file()
}

fn sub_cases(dir: &Path) -> Result<Vec<PathBuf>, CaseError> {
    let io = |source| CaseError::Io {
        file: dir.to_path_buf(),
        source,
    };
    let mut cases = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.is_dir() && is_case(&path) {
            cases.push(path);
        }
    }
    cases.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(cases)
}

/// Reads a whole file; a missing file is [`CaseError::MissingFile`].
fn read_text(file: &Path) -> Result<String, CaseError> {
    std::fs::read_to_string(file).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => CaseError::MissingFile {
            file: file.to_path_buf(),
        },
        _ => CaseError::Io {
            file: file.to_path_buf(),
            source,
        },
    })
}

/// Reads a single-document JSON file into `T`.
fn read_json<T: DeserializeOwned>(file: &Path) -> Result<T, CaseError> {
    let text = read_text(file)?;
    serde_json::from_str(&text).map_err(|e| CaseError::from_json(file.to_path_buf(), 1, &e))
}
