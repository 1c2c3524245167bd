//! The floor of the comparison: a plain first-fit bitmap. Every allocation scans from unit 0
//! for the first run of `len` clear bits, a word at a time; no goal, no index.

use crate::bench::peer::{RangeAlloc, Run, Runs};
use crate::bench::BenchError;

pub struct FirstFit {
    words: Vec<u64>,
    size: u64,
}

impl FirstFit {
    pub fn new(size: u64) -> FirstFit {
        let mut words = vec![0u64; size.div_ceil(64) as usize];
        if !size.is_multiple_of(64) {
            *words.last_mut().expect("size > 0") = !0u64 << (size % 64);
        }
        FirstFit { words, size }
    }

    fn bit(&self, i: u64) -> bool {
        self.words[(i / 64) as usize] >> (i % 64) & 1 == 1
    }

    /// First unit `>= from` whose bit equals `set`, or `size`.
    fn next(&self, from: u64, set: bool) -> u64 {
        if from >= self.size {
            return self.size;
        }
        let flip = if set { 0 } else { !0 };
        let mut w = (from / 64) as usize;
        let mut word = (self.words[w] ^ flip) & (!0u64 << (from % 64));
        while word == 0 {
            w += 1;
            if w == self.words.len() {
                return self.size;
            }
            word = self.words[w] ^ flip;
        }
        (w as u64 * 64 + u64::from(word.trailing_zeros())).min(self.size)
    }

    fn mark(&mut self, start: u64, len: u32, used: bool) {
        for i in start..start + u64::from(len) {
            let (w, b) = ((i / 64) as usize, i % 64);
            if used {
                self.words[w] |= 1 << b;
            } else {
                self.words[w] &= !(1 << b);
            }
        }
    }

    /// Whether every unit of `[start, start + len)` is in use (the model checks frees).
    pub fn all_used(&self, start: u64, len: u32) -> bool {
        (start..start + u64::from(len)).all(|i| self.bit(i))
    }
}

impl RangeAlloc for FirstFit {
    type Handle = Run;
    fn name(&self) -> String {
        "first-fit-bitmap".into()
    }
    fn alloc(&mut self, len: u32, _goal: u64) -> Result<Option<Run>, BenchError> {
        let mut at = 0;
        loop {
            let s = self.next(at, false);
            if s + u64::from(len) > self.size {
                return Ok(None);
            }
            let e = self.next(s, true);
            if e - s >= u64::from(len) {
                self.mark(s, len, true);
                return Ok(Some((s, len)));
            }
            at = e;
        }
    }
    fn runs(&self, h: &Run) -> Runs {
        Runs::one(h.0, h.1)
    }
    fn free(&mut self, h: Run) -> Result<(), BenchError> {
        if !self.all_used(h.0, h.1) {
            return Err(BenchError::Peer(format!("first-fit: double free of {h:?}")));
        }
        self.mark(h.0, h.1, false);
        Ok(())
    }
    fn free_runs(&mut self) -> Option<Vec<Run>> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < self.size {
            let s = self.next(at, false);
            if s >= self.size {
                break;
            }
            let e = self.next(s, true);
            out.push((s, (e - s) as u32));
            at = e;
        }
        Some(out)
    }
}
