//! A fixed-size bitset with the word-at-a-time searches the buddy and the scans need.

/// Bits stored LSB-first in 64-bit words, like the kernel's `unsigned long` bitmaps.
#[derive(Clone, PartialEq, Eq)]
pub struct Bitmap {
    words: Vec<u64>,
    len: u32,
}

impl std::fmt::Debug for Bitmap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Bitmap({} bits, {} set)",
            self.len,
            self.count_ones(0, self.len)
        )
    }
}

#[inline]
fn mask_from(bit: u32) -> u64 {
    !0u64 << (bit % 64)
}

impl Bitmap {
    /// A bitmap of `len` bits, all clear.
    pub fn new(len: u32) -> Self {
        Bitmap {
            words: vec![0; (len as usize).div_ceil(64)],
            len,
        }
    }

    /// A bitmap of `len` bits, all set.
    pub fn full(len: u32) -> Self {
        let mut b = Bitmap {
            words: vec![!0; (len as usize).div_ceil(64)],
            len,
        };
        b.trim_tail();
        b
    }

    /// Builds from on-disk bytes (bit *i* = byte i/8, bit i%8, LSB first). Missing bytes read
    /// as set (in use), which is how a bitmap shorter than the group must be treated.
    pub fn from_bytes(bytes: &[u8], len: u32) -> Self {
        let mut b = Bitmap::full(len);
        for (w, word) in b.words.iter_mut().enumerate() {
            let mut v = 0u64;
            for k in 0..8 {
                let byte = bytes.get(w * 8 + k).copied().unwrap_or(0xff);
                v |= u64::from(byte) << (8 * k);
            }
            *word = v;
        }
        b.trim_tail();
        b
    }

    /// The on-disk byte form of [`Bitmap::from_bytes`].
    pub fn to_bytes(&self) -> Vec<u8> {
        let n = (self.len as usize).div_ceil(8);
        self.words
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .take(n)
            .collect()
    }

    fn trim_tail(&mut self) {
        if !self.len.is_multiple_of(64) {
            if let Some(last) = self.words.last_mut() {
                *last &= !mask_from(self.len);
            }
        }
    }

    /// Bits.
    pub fn len(&self) -> u32 {
        self.len
    }
    /// Whether it has no bits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The 64-bit word holding bits `[64 * w, 64 * w + 64)`.
    #[inline]
    pub fn word(&self, w: u32) -> u64 {
        self.words[w as usize]
    }

    #[inline]
    /// Whether `bit` is set.
    pub fn get(&self, bit: u32) -> bool {
        debug_assert!(bit < self.len);
        self.words[(bit / 64) as usize] >> (bit % 64) & 1 == 1
    }
    #[inline]
    /// Sets `bit`.
    pub fn set(&mut self, bit: u32) {
        self.words[(bit / 64) as usize] |= 1 << (bit % 64);
    }
    #[inline]
    /// Clears `bit`.
    pub fn clear(&mut self, bit: u32) {
        self.words[(bit / 64) as usize] &= !(1 << (bit % 64));
    }

    /// Applies `f(word, mask)` to every word overlapping `[start, end)`.
    #[inline]
    fn for_range(&mut self, start: u32, end: u32, f: impl Fn(&mut u64, u64)) {
        if start >= end {
            return;
        }
        let (first, last) = ((start / 64) as usize, ((end - 1) / 64) as usize);
        for w in first..=last {
            let mut m = !0u64;
            if w == first {
                m &= mask_from(start);
            }
            if w == last && !end.is_multiple_of(64) {
                m &= !mask_from(end);
            }
            f(&mut self.words[w], m);
        }
    }

    /// Sets the bits of `[start, end)`.
    pub fn set_range(&mut self, start: u32, end: u32) {
        self.for_range(start, end, |w, m| *w |= m);
    }
    /// Clears the bits of `[start, end)`.
    pub fn clear_range(&mut self, start: u32, end: u32) {
        self.for_range(start, end, |w, m| *w &= !m);
    }

    /// Number of set bits in `[start, end)`.
    pub fn count_ones(&self, start: u32, end: u32) -> u32 {
        if start >= end {
            return 0;
        }
        let (first, last) = ((start / 64) as usize, ((end - 1) / 64) as usize);
        (first..=last)
            .map(|w| {
                let mut m = !0u64;
                if w == first {
                    m &= mask_from(start);
                }
                if w == last && !end.is_multiple_of(64) {
                    m &= !mask_from(end);
                }
                (self.words[w] & m).count_ones()
            })
            .sum()
    }

    /// Whether every bit of `[start, end)` is set.
    pub fn all_set(&self, start: u32, end: u32) -> bool {
        self.find_next_zero(start, end).is_none()
    }
    /// Whether every bit of `[start, end)` is clear.
    pub fn all_clear(&self, start: u32, end: u32) -> bool {
        self.find_next_set(start, end).is_none()
    }

    /// First bit `>= from` and `< end` whose value is `want` (the kernel's
    /// `mb_find_next_zero_bit` / `mb_find_next_bit`).
    #[inline]
    fn find_next(&self, from: u32, end: u32, want: bool) -> Option<u32> {
        let end = end.min(self.len);
        if from >= end {
            return None;
        }
        let mut w = (from / 64) as usize;
        let flip = if want { 0 } else { !0u64 };
        let mut word = (self.words[w] ^ flip) & mask_from(from);
        loop {
            if word != 0 {
                let bit = w as u32 * 64 + word.trailing_zeros();
                return (bit < end).then_some(bit);
            }
            w += 1;
            if w as u32 * 64 >= end {
                return None;
            }
            word = self.words[w] ^ flip;
        }
    }

    /// The first clear bit of `[from, end)`.
    pub fn find_next_zero(&self, from: u32, end: u32) -> Option<u32> {
        self.find_next(from, end, false)
    }
    /// The first set bit of `[from, end)`.
    pub fn find_next_set(&self, from: u32, end: u32) -> Option<u32> {
        self.find_next(from, end, true)
    }

    /// Last bit `< before` whose value is `want`.
    fn find_prev(&self, before: u32, want: bool) -> Option<u32> {
        if before == 0 {
            return None;
        }
        let last = before - 1;
        let mut w = (last / 64) as usize;
        let flip = if want { 0 } else { !0u64 };
        let keep = if last % 64 == 63 {
            !0
        } else {
            !mask_from(last + 1)
        };
        let mut word = (self.words[w] ^ flip) & keep;
        loop {
            if word != 0 {
                return Some(w as u32 * 64 + 63 - word.leading_zeros());
            }
            if w == 0 {
                return None;
            }
            w -= 1;
            word = self.words[w] ^ flip;
        }
    }

    /// The last set bit below `before`.
    pub fn find_prev_set(&self, before: u32) -> Option<u32> {
        self.find_prev(before, true)
    }
    /// The last clear bit below `before`.
    pub fn find_prev_zero(&self, before: u32) -> Option<u32> {
        self.find_prev(before, false)
    }

    /// Maximal runs of clear bits in `[start, end)`, as `(start, len)`.
    pub fn zero_runs(&self, start: u32, end: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
        let mut at = start;
        std::iter::from_fn(move || {
            let s = self.find_next_zero(at, end)?;
            let e = self.find_next_set(s, end).unwrap_or(end);
            at = e;
            Some((s, e - s))
        })
    }

    /// Maximal runs of set bits in `[start, end)`, as `(start, len)`.
    pub fn one_runs(&self, start: u32, end: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
        let mut at = start;
        std::iter::from_fn(move || {
            let s = self.find_next_set(at, end)?;
            let e = self.find_next_zero(s, end).unwrap_or(end);
            at = e;
            Some((s, e - s))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ranges_and_searches() {
        let mut b = Bitmap::new(200);
        b.set_range(3, 130);
        assert_eq!(b.count_ones(0, 200), 127);
        assert_eq!(b.find_next_set(0, 200), Some(3));
        assert_eq!(b.find_next_zero(3, 200), Some(130));
        assert_eq!(b.find_prev_set(200), Some(129));
        assert_eq!(b.find_prev_zero(130), Some(2));
        assert_eq!(b.find_prev_zero(3), Some(2));
        assert_eq!(b.find_prev_set(3), None);
        b.clear_range(64, 65);
        assert_eq!(
            b.zero_runs(0, 200).collect::<Vec<_>>(),
            vec![(0, 3), (64, 1), (130, 70)]
        );
        assert!(Bitmap::full(70).all_set(0, 70));
    }

    #[test]
    fn bytes_round_trip() {
        let mut b = Bitmap::new(100);
        b.set(0);
        b.set(9);
        b.set(99);
        let bytes = b.to_bytes();
        assert_eq!(bytes.len(), 13);
        assert_eq!(bytes[0], 1);
        assert_eq!(bytes[1], 2);
        assert_eq!(Bitmap::from_bytes(&bytes, 100), b);
        // Missing bytes read as in use.
        assert!(Bitmap::from_bytes(&[0], 16).all_set(8, 16));
    }

    proptest! {
        #[test]
        fn searches_match_naive(bits in proptest::collection::vec(any::<bool>(), 1..300), from in 0u32..300) {
            let len = bits.len() as u32;
            let mut b = Bitmap::new(len);
            for (i, &v) in bits.iter().enumerate() { if v { b.set(i as u32) } }
            let from = from.min(len);
            let naive_next = |want: bool| (from..len).find(|&i| bits[i as usize] == want);
            let naive_prev = |want: bool| (0..from).rev().find(|&i| bits[i as usize] == want);
            prop_assert_eq!(b.find_next_set(from, len), naive_next(true));
            prop_assert_eq!(b.find_next_zero(from, len), naive_next(false));
            prop_assert_eq!(b.find_prev_set(from), naive_prev(true));
            prop_assert_eq!(b.find_prev_zero(from), naive_prev(false));
            prop_assert_eq!(b.count_ones(from, len), bits[from as usize..].iter().filter(|&&v| v).count() as u32);
        }
    }
}
