//! The `bb_state` bits of every group (`EXT4_GROUP_INFO_*_BIT`), kept apart from the groups.
//!
//! Why apart: every request's prefetch walk reads the state of up to a flex group of groups,
//! and 6.18 also sets each one's "bitmap read" mark with an atomic read-modify-write (seed 003).
//! Inside [`Group`](crate::group::info::Group) those reads and writes would land on sixteen cache
//! lines that other CPUs are busy locking and updating for their own groups; packed here they
//! are one or two lines, rarely written (the read marks, written on every walk, have a bitset
//! of their own).

use crate::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use crate::sync::percpu::Isolated;

/// Buddy not generated yet (`EXT4_GROUP_INFO_NEED_INIT_BIT`).
pub const NEED_INIT: u32 = 1 << 0;
/// `EXT4_GROUP_INFO_WAS_TRIMMED_BIT`.
pub const WAS_TRIMMED: u32 = 1 << 1;
/// Block bitmap inconsistent: never allocated from, frees ignored.
pub const BBITMAP_CORRUPT: u32 = 1 << 2;
/// The descriptor's `EXT4_BG_BLOCK_UNINIT` (with group descriptor checksums), read from the
/// source at build: the bitmap is computed, not read. Only looked at while `NEED_INIT` is set
/// (the kernel clears the descriptor flag at the group's first allocation, which needs the
/// buddy built), and cleared with it.
pub const BLOCK_UNINIT: u32 = 1 << 3;

/// `EXT4_GROUP_INFO_BBITMAP_READ_BIT` of every group: prefetch already issued once, never
/// cleared. A bitset of its own, apart from the other state bits, because 6.18 sets it with an
/// atomic read-modify-write on every prefetch walk (seed 003): those writes bounce the one
/// line they hit between CPUs, and that line should hold nothing else that requests read.
pub struct ReadMarks(Isolated<AtomicU64>);

impl ReadMarks {
    pub fn new(groups: u32) -> ReadMarks {
        ReadMarks(Isolated::new(groups.div_ceil(64) as usize, || {
            AtomicU64::new(0)
        }))
    }
    /// The word holding `g`'s mark, and the mark's bit in it.
    #[inline]
    pub fn word(&self, g: u32) -> (&AtomicU64, u64) {
        (self.0.get((g / 64) as usize), 1 << (g % 64))
    }
    /// Whether the marks of `[g, g + nr)` are all set, read from one word (false whenever the
    /// window does not fit in `g`'s word: the caller then walks it group by group).
    #[inline]
    pub fn all_set(&self, g: u32, nr: u32) -> bool {
        let bit = g % 64;
        if nr == 0 || bit + nr > 64 {
            return false;
        }
        let mask = (u64::MAX >> (64 - nr)) << bit;
        self.0.get((g / 64) as usize).load(Ordering::Relaxed) & mask == mask
    }
}

/// Every group's `bb_state` bits, packed and isolated from other allocations.
pub struct GroupStates(Isolated<StateBits>);

impl GroupStates {
    /// `groups` groups, each with `bits` set.
    pub fn new(groups: u32, bits: u32) -> GroupStates {
        GroupStates(Isolated::new(groups as usize, || StateBits::new(bits)))
    }
    #[inline]
    pub fn get(&self, g: u32) -> &StateBits {
        self.0.get(g as usize)
    }
}

/// One group's `bb_state` bits.
#[derive(Debug)]
pub struct StateBits(AtomicU32);

impl StateBits {
    pub fn new(bits: u32) -> StateBits {
        StateBits(AtomicU32::new(bits))
    }
    #[inline]
    pub fn has(&self, f: u32) -> bool {
        self.0.load(Ordering::Relaxed) & f != 0
    }
    #[inline]
    pub fn set(&self, f: u32) {
        self.0.fetch_or(f, Ordering::Relaxed);
    }
    /// Clears `f`; a plain load when none of it is set (no write to a shared line).
    #[inline]
    pub fn clear(&self, f: u32) {
        if self.has(f) {
            self.0.fetch_and(!f, Ordering::Relaxed);
        }
    }
    #[inline]
    pub fn is_corrupt(&self) -> bool {
        self.has(BBITMAP_CORRUPT)
    }
    #[inline]
    pub fn need_init(&self) -> bool {
        self.has(NEED_INIT)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn all_set_reads_one_word_window() {
        let m = ReadMarks::new(200);
        for g in 64..80 {
            let (w, b) = m.word(g);
            w.fetch_or(b, Ordering::Relaxed);
        }
        assert!(m.all_set(64, 16) && m.all_set(70, 10) && m.all_set(79, 1));
        assert!(!m.all_set(64, 17) && !m.all_set(63, 2) && !m.all_set(64, 0));
        // A window crossing a word boundary is never answered from one word.
        for g in 120..136 {
            let (w, b) = m.word(g);
            w.fetch_or(b, Ordering::Relaxed);
        }
        assert!(!m.all_set(120, 16) && m.all_set(128, 8));
        let (w, b) = m.word(75);
        w.fetch_and(!b, Ordering::Relaxed);
        assert!(!m.all_set(64, 16) && m.all_set(76, 4));
    }
}
