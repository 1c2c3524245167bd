//! The `bb_state` bits of every group (`EXT4_GROUP_INFO_*_BIT`), kept apart from the groups.
//!
//! Why apart: every request's prefetch walk reads the state of up to a flex group of groups,
//! and sets each one's "bitmap read" mark ([`BBITMAP_READ`]) with an atomic read-modify-write
//! in 6.18 (seed 003 tests it first). Inside [`Group`](crate::group::info::Group) those reads
//! and writes would land on sixteen cache lines that other CPUs are busy locking and updating
//! for their own groups; packed here they are one or two lines.
//!
//! The mark is a bit of each group's own word, as in the kernel's `bb_state`, not a bitset of
//! its own: in a bitset one word holds 64 groups' marks, and every 6.18 walk anywhere in those
//! 64 groups writes it, a sharing the kernel does not have. (Sixteen words still share a
//! 64-byte line here, where the kernel has one `ext4_group_info` per group; the many-CPU
//! simulation counts one line per atomic, so it sees the kernel's layout.)

use crate::sync::atomic::{AtomicU32, Ordering};
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

/// `EXT4_GROUP_INFO_BBITMAP_READ_BIT`: prefetch already issued once, never cleared. In the
/// group's own state word, as in the kernel's `bb_state`: 6.18 sets it with an atomic
/// read-modify-write on every prefetch walk (seed 003 tests it first), so each walk writes the
/// state words of its window, one per group, and no two groups' marks share a word.
pub const BBITMAP_READ: u32 = 1 << 4;

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
    /// Sets `f` and tells whether it was set before (`test_and_set_bit`): always an atomic
    /// read-modify-write, a write to the word even when the bit is set.
    #[inline]
    pub fn test_and_set(&self, f: u32) -> bool {
        self.0.fetch_or(f, Ordering::Relaxed) & f != 0
    }
    /// `ext4_mb_prefetch`'s step for this group, seed 003's way: a load of the mark (true:
    /// set long ago, the walk goes on). Reported to a virtual-CPU hook as one step of the walk
    /// ([`crate::sync::walk_step`]), which a simulator prices apart from other work.
    #[inline]
    pub fn walk_test(&self, f: u32) -> bool {
        crate::sync::walk_step(self.addr(), false, || self.has(f))
    }
    /// `ext4_mb_prefetch`'s step for this group, linux-6.18's way (and seed 003's when the
    /// test found the mark clear): `EXT4_MB_GRP_TEST_AND_SET_READ`, an atomic read-modify-write
    /// whatever the mark was. Reported as [`Self::walk_test`] is.
    #[inline]
    pub fn walk_test_and_set(&self, f: u32) -> bool {
        crate::sync::walk_step(self.addr(), true, || self.test_and_set(f))
    }
    /// The word's address: what a virtual-CPU hook knows the line by.
    #[inline]
    fn addr(&self) -> usize {
        &self.0 as *const AtomicU32 as usize
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
    fn read_mark_is_one_bit_of_each_groups_own_word() {
        let st = GroupStates::new(200, NEED_INIT);
        assert!(!st.get(70).test_and_set(BBITMAP_READ));
        assert!(st.get(70).test_and_set(BBITMAP_READ));
        // Only group 70's word holds the mark; its other bits are untouched.
        assert!(st.get(70).has(BBITMAP_READ) && st.get(70).need_init());
        assert!(!st.get(69).has(BBITMAP_READ) && !st.get(71).has(BBITMAP_READ));
        for f in [NEED_INIT, WAS_TRIMMED, BBITMAP_CORRUPT, BLOCK_UNINIT] {
            assert_eq!(f & BBITMAP_READ, 0);
        }
    }
}
