//! Typed errors for bad metric input. Metrics never panic on input: a malformed free map, a
//! ragged sample matrix or an impossible geometry is reported here instead.

use thiserror::Error;

/// Why a metric could not be computed from the data it was given.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum MetricsError {
    /// ext4 block sizes are powers of two from 1 KiB to 64 KiB; e2freefrag's KB arithmetic and
    /// the buddy order limits depend on that.
    #[error("block size must be a power of two in 1024..=65536 bytes, got {0}")]
    BadBlockSize(u32),
    /// A group must hold at least one block.
    #[error("blocks_per_group must be > 0")]
    ZeroBlocksPerGroup,
    /// A free extent runs past the end of its group.
    #[error("group {group}: extent {start}+{len} exceeds the group size {blocks_per_group}")]
    ExtentBeyondGroup {
        group: usize,
        start: u32,
        len: u32,
        blocks_per_group: u32,
    },
    /// A free extent of length 0 is meaningless and would distort extent counts.
    #[error("group {group}: zero-length extent at {start}")]
    ZeroLengthExtent { group: usize, start: u32 },
    /// Two free extents of one group share blocks.
    #[error("group {group}: free extents starting at {first} and {second} overlap")]
    OverlappingExtents {
        group: usize,
        first: u32,
        second: u32,
    },
    /// A group bitmap is shorter than `ceil(blocks_per_group / 8)` bytes.
    #[error("group {group}: bitmap has {got} bytes, needs {need}")]
    BitmapTooShort {
        group: usize,
        got: usize,
        need: usize,
    },
    /// e2freefrag rejects chunk sizes that are not powers of two or smaller than a block.
    #[error(
        "chunk size {chunk_bytes} B must be a power of two and >= the block size {block_size} B"
    )]
    BadChunkSize { chunk_bytes: u64, block_size: u32 },
    /// A file extent of length 0.
    #[error("file {file}: zero-length extent at logical block {logical}")]
    ZeroLengthFileExtent { file: usize, logical: u64 },
    /// Two extents of one file map the same logical block.
    #[error("file {file}: extents overlap at logical block {logical}")]
    OverlappingFileExtents { file: usize, logical: u64 },
    /// `start + len` of a file extent does not fit in 64 bits.
    #[error("file {file}: extent at logical block {logical} overflows 64-bit block numbers")]
    FileExtentOverflow { file: usize, logical: u64 },
    /// A sampling interval that is zero, negative or not finite.
    #[error("sampling interval must be positive and finite, got {0}")]
    BadInterval(f64),
    /// Every sample must carry one counter per task.
    #[error("sample {sample} has {got} task counters, expected {expected}")]
    RaggedSamples {
        sample: usize,
        expected: usize,
        got: usize,
    },
    /// A cumulative operation counter decreased.
    #[error("task {task}: cumulative counter went backwards at sample {sample}")]
    CounterWentBackwards { task: usize, sample: usize },
    /// Fewer samples than the warm-up plus one measured sample.
    #[error("need more than {warmup} samples (warm-up) to measure, got {got}")]
    NotEnoughSamples { warmup: usize, got: usize },
    /// A run measured over zero time, or with zero tasks.
    #[error("throughput needs at least one task and a non-zero elapsed time")]
    EmptyRun,
    /// Scalability is relative to the one-task point, which is missing.
    #[error("scalability needs a point with exactly one task")]
    MissingSingleTaskPoint,
    /// Two parallel inputs (e.g. groups and a per-group mask) differ in length.
    #[error("{what}: expected {expected} entries, got {got}")]
    LengthMismatch {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// A group reports more used blocks than it holds.
    #[error("group {group}: {used} used blocks exceed the group size {blocks_per_group}")]
    UsedBeyondGroup {
        group: usize,
        used: u64,
        blocks_per_group: u64,
    },
    /// e4defrag's "best" extent count divides by blocks_per_group * groups_per_flex.
    #[error("groups_per_flex must be a power of two > 0, got {0}")]
    BadGroupsPerFlex(u32),
}
