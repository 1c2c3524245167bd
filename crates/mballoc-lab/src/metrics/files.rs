//! The per-file input shared by the file metrics (M5, M6, M9 frag, M10, extent sizes): a file is
//! a list of mapped extents `(logical, physical, len)` in blocks — what FIEMAP returns, what the
//! allocator hands out, or a hand-written example. Validation sorts by logical block and rejects
//! zero-length, overlapping or overflowing extents.

use super::error::MetricsError;

/// A mapped file extent: `(logical_block, physical_block, len_blocks)`.
pub type FileExtent = (u64, u64, u64);

/// Returns `extents` sorted by logical block, after validation (`file` names it in errors).
pub fn sorted_extents(
    file: usize,
    extents: &[FileExtent],
) -> Result<Vec<FileExtent>, MetricsError> {
    let mut v = extents.to_vec();
    v.sort_unstable_by_key(|e| e.0);
    let mut logical_end: Option<u64> = None;
    for &(logical, physical, len) in &v {
        if len == 0 {
            return Err(MetricsError::ZeroLengthFileExtent { file, logical });
        }
        let end = logical.checked_add(len);
        if end.is_none() || physical.checked_add(len).is_none() {
            return Err(MetricsError::FileExtentOverflow { file, logical });
        }
        if logical_end.is_some_and(|e| e > logical) {
            return Err(MetricsError::OverlappingFileExtents { file, logical });
        }
        logical_end = end;
    }
    Ok(v)
}

/// Validates and sorts every file.
pub fn sorted_files(files: &[Vec<FileExtent>]) -> Result<Vec<Vec<FileExtent>>, MetricsError> {
    files
        .iter()
        .enumerate()
        .map(|(i, f)| sorted_extents(i, f))
        .collect()
}

/// Blocks mapped by a file.
pub fn file_blocks(extents: &[FileExtent]) -> u64 {
    extents.iter().map(|e| e.2).sum()
}
