//! The free runs of one group: a sorted list of `[start, end)` pairs.
//!
//! Why a flat list: groups hold tens to a few hundred runs (an aged ext4 group of 32768 blocks
//! at 75 % use has about 55), and a scan that skips the runs shorter than its goal walks 8-byte
//! pairs in address order, which costs less than keeping any index over them up to date (we
//! measured a max-length tree over 64-cluster buckets: 20 % more instructions on the churn
//! benchmark, as every allocation and free paid for its upkeep).

/// A maximal run of free clusters `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub start: u32,
    pub end: u32,
}

impl Run {
    #[inline]
    pub fn len(self) -> u32 {
        self.end - self.start
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FreeRuns {
    /// In address order, never adjacent, never empty.
    runs: Vec<Run>,
}

impl FreeRuns {
    /// The runs of a group (sorted, disjoint, non-adjacent).
    pub fn new(runs: Vec<Run>) -> FreeRuns {
        FreeRuns { runs }
    }

    #[inline]
    pub fn as_slice(&self) -> &[Run] {
        &self.runs
    }
    #[inline]
    pub fn len(&self) -> usize {
        self.runs.len()
    }
    #[inline]
    pub fn get(&self, i: usize) -> Option<Run> {
        self.runs.get(i).copied()
    }

    /// Index of the first run ending after `c` (the run holding `c`, or the next one).
    #[inline]
    pub fn run_from(&self, c: u32) -> usize {
        self.runs.partition_point(|r| r.end <= c)
    }

    /// Index of the first run starting at or after `c`.
    #[inline]
    pub fn run_starting_from(&self, c: u32) -> usize {
        self.runs.partition_point(|r| r.start < c)
    }

    /// Replaces run `i` by `r` (between the same neighbours).
    #[inline]
    pub fn set(&mut self, i: usize, r: Run) {
        self.runs[i] = r;
    }

    /// Inserts `r` as run `i`.
    #[inline]
    pub fn insert(&mut self, i: usize, r: Run) {
        self.runs.insert(i, r);
    }

    /// Removes run `i`.
    #[inline]
    pub fn remove(&mut self, i: usize) {
        self.runs.remove(i);
    }

    /// Index of the first run at or after index `i` with at least `min_len` clusters.
    #[inline]
    pub fn next_long(&self, i: usize, min_len: u32) -> Option<usize> {
        let rest = self.runs.get(i..)?;
        rest.iter().position(|r| r.len() >= min_len).map(|k| i + k)
    }
}
