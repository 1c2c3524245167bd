//! The set of a store's corrupt groups, sized for hostile input.
//!
//! A device whose descriptor table is garbage makes every group corrupt at open. Keeping a
//! reason string per group would cost about a hundred bytes each (gigabytes for a table of
//! millions of zeroed descriptors); a group whose descriptor failed its check costs one bit
//! here instead, and its reason is decoded again from the device when asked for. Groups found
//! corrupt later (a bitmap checksum, an implausible replay) are few and keep their reason.

use std::collections::BTreeMap;

/// Corrupt groups: membership is O(1), listing is ascending, memory is a bit per group plus
/// the later finds.
#[derive(Debug, Clone, Default)]
pub(crate) struct CorruptSet {
    /// Bit `g`: group `g`'s descriptor failed its check when the table was read.
    bad_desc: Vec<u64>,
    /// Everything else, with why.
    other: BTreeMap<u32, String>,
}

/// Why a group is in the set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Why<'a> {
    /// Its descriptor failed its check (decode it again for the details).
    Descriptor,
    Other(&'a str),
}

impl CorruptSet {
    /// An empty set for a store of `groups` groups.
    pub(crate) fn new(groups: u32) -> Self {
        CorruptSet {
            bad_desc: vec![0; (groups as usize).div_ceil(64)],
            other: BTreeMap::new(),
        }
    }

    pub(crate) fn mark_descriptor(&mut self, group: u32) {
        let (word, bit) = (group as usize / 64, group % 64);
        self.bad_desc[word] |= 1 << bit;
    }

    /// Adds `group` with `why`, keeping the first reason if it is already in.
    pub(crate) fn mark(&mut self, group: u32, why: String) {
        if !self.has_bad_desc(group) {
            self.other.entry(group).or_insert(why);
        }
    }

    /// Takes `group` out: its state was rebuilt from the log (a read-only replay in memory).
    pub(crate) fn clear(&mut self, group: u32) {
        if let Some(w) = self.bad_desc.get_mut(group as usize / 64) {
            *w &= !(1 << (group % 64));
        }
        self.other.remove(&group);
    }

    fn has_bad_desc(&self, group: u32) -> bool {
        self.bad_desc
            .get(group as usize / 64)
            .is_some_and(|w| w & (1 << (group % 64)) != 0)
    }

    pub(crate) fn why(&self, group: u32) -> Option<Why<'_>> {
        if self.has_bad_desc(group) {
            return Some(Why::Descriptor);
        }
        self.other.get(&group).map(|s| Why::Other(s))
    }

    pub(crate) fn contains(&self, group: u32) -> bool {
        self.why(group).is_some()
    }

    /// Every corrupt group, ascending.
    pub(crate) fn groups(&self) -> Vec<u32> {
        let mut out: Vec<u32> = self
            .bad_desc
            .iter()
            .enumerate()
            .flat_map(|(i, &w)| set_bits(w).map(move |b| i as u32 * 64 + b))
            .collect();
        out.extend(self.other.keys());
        out.sort_unstable();
        out
    }

    /// Every group of `from`, keeping this set's reasons where both have one.
    pub(crate) fn absorb(&mut self, from: CorruptSet) {
        for (w, f) in self.bad_desc.iter_mut().zip(&from.bad_desc) {
            *w |= f;
        }
        for (g, why) in from.other {
            self.mark(g, why);
        }
    }
}

/// The set bits of `w`, lowest first.
fn set_bits(mut w: u64) -> impl Iterator<Item = u32> {
    std::iter::from_fn(move || {
        (w != 0).then(|| {
            let b = w.trailing_zeros();
            w &= w - 1;
            b
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_list_ascending_with_their_reasons() {
        let mut s = CorruptSet::new(200);
        s.mark_descriptor(130);
        s.mark(5, "bitmap".into());
        s.mark(5, "second reason is dropped".into());
        s.mark_descriptor(64);
        s.mark(130, "a descriptor reason wins".into());
        assert_eq!(s.groups(), vec![5, 64, 130]);
        assert_eq!(s.why(5), Some(Why::Other("bitmap")));
        assert_eq!(s.why(130), Some(Why::Descriptor));
        assert!(!s.contains(6) && !s.contains(199) && !s.contains(100_000));
        s.clear(130);
        s.clear(5);
        assert_eq!(s.groups(), vec![64]);
    }

    #[test]
    fn a_million_bad_descriptors_cost_a_bit_each() {
        let mut s = CorruptSet::new(1 << 20);
        for g in 0..1 << 20 {
            s.mark_descriptor(g);
        }
        assert_eq!(s.bad_desc.len() * 8, (1 << 20) / 8);
        assert_eq!(s.groups().len(), 1 << 20);
    }
}
