//! One group's block bitmap as stored: bit `i` set = block `i` of the group is in use.
//!
//! Bit order is ext4's (`ext4_test_bit`): bit `i` lives in byte `i / 8` at position `i % 8`.
//! A bitmap always holds `blocks_per_group` bits; the bits past `group_len` (a short last group)
//! are padding and always set, as `ext4_mark_bitmap_end` does, so that no scan can ever hand
//! them out and a whole-bitmap checksum has one canonical input.

use crate::geometry::Geometry;

/// A group's bitmap, as [`Store::read_bitmap`](super::Store::read_bitmap) returns it.
#[derive(Clone, PartialEq, Eq)]
pub struct BitmapBytes {
    bytes: Box<[u8]>,
    group_len: u32,
}

impl BitmapBytes {
    /// The bitmap of a group with every block free (only the padding set).
    pub fn all_free(geometry: &Geometry, group: u32) -> Self {
        let bpg = geometry.clusters_per_group();
        let group_len = geometry.group_len(group).min(bpg);
        let mut bytes = vec![0u8; bitmap_len(geometry)].into_boxed_slice();
        set_range(&mut bytes, group_len, bpg - group_len);
        BitmapBytes { bytes, group_len }
    }

    /// Wraps raw bytes; the caller guarantees `bytes.len() * 8 >= group_len`.
    pub(crate) fn from_raw(bytes: Box<[u8]>, group_len: u32) -> Self {
        BitmapBytes { bytes, group_len }
    }

    /// Blocks that belong to the group (the bits after it are padding).
    pub fn group_len(&self) -> u32 {
        self.group_len
    }

    /// Whether block `offset` of the group is in use; padding and out-of-range offsets read as
    /// in use, the safe answer for an allocator.
    pub fn is_used(&self, offset: u32) -> bool {
        if offset >= self.group_len {
            return true;
        }
        match self.bytes.get((offset / 8) as usize) {
            Some(b) => b & (1 << (offset % 8)) != 0,
            None => true,
        }
    }

    /// Free blocks in the group (padding excluded).
    pub fn count_free(&self) -> u32 {
        self.group_len - count_set(&self.bytes, 0, self.group_len)
    }

    /// The raw little-endian bit array, `blocks_per_group / 8` bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes, one bit per block (set: in use).
    pub fn into_bytes(self) -> Box<[u8]> {
        self.bytes
    }

    /// The first padding bit that is clear, if any (a sign of corruption).
    pub fn first_clear_padding(&self) -> Option<u32> {
        let total = (self.bytes.len() * 8) as u32;
        first_clear(&self.bytes, self.group_len, total - self.group_len)
    }
}

impl std::fmt::Debug for BitmapBytes {
    /// A summary: dumping 4 KiB of bits helps nobody.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BitmapBytes")
            .field("group_len", &self.group_len)
            .field("free", &self.count_free())
            .finish()
    }
}

/// Bytes in one group's bitmap.
pub(crate) fn bitmap_len(geometry: &Geometry) -> usize {
    (geometry.clusters_per_group() / 8) as usize
}

/// The bytes covering bits `[start, start + len)` and, for each, the mask of those bits.
/// Bytes beyond `limit` bytes are skipped, so a bad range can never index out of bounds.
fn masks(start: u32, len: u32, limit: usize) -> impl Iterator<Item = (usize, u8)> {
    let start = u64::from(start);
    let end = start + u64::from(len);
    let first = start / 8;
    let last = end.div_ceil(8).min(limit as u64);
    (first..last).map(move |b| {
        let lo = start.max(b * 8) - b * 8;
        let hi = end.min(b * 8 + 8) - b * 8;
        let mask = ((1u16 << hi) - 1) ^ ((1u16 << lo) - 1);
        (b as usize, mask as u8)
    })
}

pub(crate) fn set_range(bytes: &mut [u8], start: u32, len: u32) {
    let limit = bytes.len();
    for (i, m) in masks(start, len, limit) {
        bytes[i] |= m;
    }
}

pub(crate) fn clear_range(bytes: &mut [u8], start: u32, len: u32) {
    let limit = bytes.len();
    for (i, m) in masks(start, len, limit) {
        bytes[i] &= !m;
    }
}

/// The first set bit in `[start, start + len)`.
pub(crate) fn first_set(bytes: &[u8], start: u32, len: u32) -> Option<u32> {
    masks(start, len, bytes.len())
        .find(|&(i, m)| bytes[i] & m != 0)
        .map(|(i, m)| i as u32 * 8 + (bytes[i] & m).trailing_zeros())
}

/// The first clear bit in `[start, start + len)`.
pub(crate) fn first_clear(bytes: &[u8], start: u32, len: u32) -> Option<u32> {
    masks(start, len, bytes.len())
        .find(|&(i, m)| !bytes[i] & m != 0)
        .map(|(i, m)| i as u32 * 8 + (!bytes[i] & m).trailing_zeros())
}

/// Set bits in `[start, start + len)`: the partial bytes at either end through their masks,
/// the whole bytes between eight at a time (a store commit recounts every bitmap it changes).
pub(crate) fn count_set(bytes: &[u8], start: u32, len: u32) -> u32 {
    let (s, e) = (u64::from(start), u64::from(start) + u64::from(len));
    let limit = bytes.len() as u64;
    let lo = s.div_ceil(8).min(limit);
    let hi = (e / 8).min(limit).max(lo);
    let edge = |from: u64, to: u64| -> u32 {
        if to <= from {
            return 0;
        }
        masks(from as u32, (to - from) as u32, bytes.len())
            .map(|(i, m)| (bytes[i] & m).count_ones())
            .sum()
    };
    let whole: u32 = bytes[lo as usize..hi as usize]
        .chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w).count_ones()
        })
        .sum();
    edge(s, (lo * 8).min(e)) + whole + edge((hi * 8).max(s), e)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every range of a 24-byte bitmap (and ranges running past its end) counts like a
    /// bit-by-bit walk.
    #[test]
    fn count_set_agrees_with_bit_by_bit_on_every_range() {
        let bytes: Vec<u8> = (0u32..24)
            .map(|i| (i.wrapping_mul(0x9d) ^ 0x5a) as u8)
            .collect();
        let bit = |i: u32| i < 192 && bytes[(i / 8) as usize] & (1 << (i % 8)) != 0;
        for start in 0..200u32 {
            for len in 0..(210 - start) {
                let want = (start..start + len).filter(|&i| bit(i)).count() as u32;
                assert_eq!(count_set(&bytes, start, len), want, "[{start}, +{len})");
            }
        }
    }

    #[test]
    fn range_ops_agree_with_bit_by_bit() {
        let mut bytes = vec![0u8; 8];
        set_range(&mut bytes, 3, 17);
        for i in 0..64u32 {
            let set = bytes[(i / 8) as usize] & (1 << (i % 8)) != 0;
            assert_eq!(set, (3..20).contains(&i), "bit {i}");
        }
        assert_eq!(count_set(&bytes, 0, 64), 17);
        assert_eq!(first_set(&bytes, 0, 64), Some(3));
        assert_eq!(first_clear(&bytes, 3, 30), Some(20));
        clear_range(&mut bytes, 5, 2);
        assert_eq!(first_clear(&bytes, 3, 30), Some(5));
        assert_eq!(count_set(&bytes, 0, 64), 15);
        assert_eq!(first_set(&bytes, 20, 44), None);
    }

    #[test]
    fn out_of_range_is_ignored_not_a_panic() {
        let mut bytes = vec![0u8; 2];
        set_range(&mut bytes, 10, 1000);
        assert_eq!(bytes, [0, 0xfc]);
        assert_eq!(first_set(&bytes, 100, 10), None);
    }

    #[test]
    fn short_last_group_has_padding_set() {
        let g = Geometry::new(1024, 64, 64 + 10, 0, 1).unwrap();
        let b = BitmapBytes::all_free(&g, 1);
        assert_eq!(b.count_free(), 10);
        assert!(!b.is_used(9));
        assert!(b.is_used(10));
        assert_eq!(b.first_clear_padding(), None);
    }
}
