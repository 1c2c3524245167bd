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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn runs_of(starts: &[(u32, u32)]) -> Vec<Run> {
        let mut v: Vec<Run> = Vec::new();
        let mut at = 0;
        for &(gap, len) in starts {
            let start = at + gap + 1;
            v.push(Run {
                start,
                end: start + len,
            });
            at = start + len;
        }
        v
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn next_long_matches_linear_search(
            spec in proptest::collection::vec((0u32..200, 1u32..300), 0..60),
            edits in proptest::collection::vec((0usize..60, 0u8..4, 1u32..40), 0..20),
            probes in proptest::collection::vec((0usize..70, 1u32..400), 1..30),
        ) {
            let mut model = runs_of(&spec);
            let mut fr = FreeRuns::new(model.clone());
            for (i, op, n) in edits {
                if model.is_empty() {
                    break;
                }
                let i = i % model.len();
                let r = model[i];
                match op {
                    // Shrink from the left or the right, split, or drop the run.
                    0 if r.len() > n => {
                        let nr = Run { start: r.start + n, ..r };
                        model[i] = nr;
                        fr.set(i, nr);
                    }
                    1 if r.len() > n => {
                        let nr = Run { end: r.end - n, ..r };
                        model[i] = nr;
                        fr.set(i, nr);
                    }
                    2 if r.len() > n + 1 => {
                        let (a, b) = (Run { end: r.start + n, ..r }, Run { start: r.start + n + 1, ..r });
                        model[i] = a;
                        model.insert(i + 1, b);
                        fr.set(i, a);
                        fr.insert(i + 1, b);
                    }
                    _ => {
                        model.remove(i);
                        fr.remove(i);
                    }
                }
            }
            prop_assert_eq!(fr.len(), model.len());
            prop_assert_eq!(&fr, &FreeRuns::new(model.clone()), "runs after edits");
            for (i, min_len) in probes {
                let want = (i..model.len()).find(|&k| model[k].len() >= min_len);
                prop_assert_eq!(fr.next_long(i, min_len), want, "from {} len {}", i, min_len);
            }
        }
    }
}
