//! Shared by the store integration tests: a deterministic generator, a reference model of the
//! on-disk state (one bool per block), and a random-commit generator that only produces valid
//! commits for the model's current state.

#![allow(dead_code)]

use mballoc::store::{Commit, Extent, Store};
use mballoc::Geometry;

/// SplitMix64: reproducible from a seed, no dependencies.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The reference: which blocks are in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    pub geometry: Geometry,
    pub used: Vec<bool>,
}

impl Model {
    pub fn new(geometry: Geometry, used: &[Extent]) -> Self {
        let mut m = Model {
            geometry,
            used: vec![false; geometry.blocks_count() as usize],
        };
        for e in used {
            m.set(e, true);
        }
        m
    }

    /// The state a store holds now.
    pub fn from_store(s: &dyn Store) -> Self {
        let geometry = s.geometry();
        let mut m = Model::new(geometry, &[]);
        for g in 0..geometry.group_count() {
            let b = s.read_bitmap(g).expect("read bitmap");
            for off in 0..geometry.group_len(g) {
                m.used[geometry.block_of(g, off) as usize] = b.is_used(off);
            }
        }
        m
    }

    fn set(&mut self, e: &Extent, used: bool) {
        for b in e.start..e.start + e.len {
            self.used[b as usize] = used;
        }
    }

    /// Allocations first, then frees: the store's order.
    pub fn apply(&mut self, c: &Commit) {
        c.allocated.iter().for_each(|e| self.set(e, true));
        c.freed.iter().for_each(|e| self.set(e, false));
    }

    /// The bitmap bytes a store must hold for group `g`, padding included.
    pub fn bitmap(&self, g: u32) -> Vec<u8> {
        let bpg = self.geometry.clusters_per_group();
        let len = self.geometry.group_len(g);
        let mut bytes = vec![0u8; (bpg / 8) as usize];
        for off in 0..bpg {
            if off >= len || self.used[self.geometry.block_of(g, off) as usize] {
                bytes[(off / 8) as usize] |= 1 << (off % 8);
            }
        }
        bytes
    }

    pub fn bitmaps(&self) -> Vec<Vec<u8>> {
        (0..self.geometry.group_count())
            .map(|g| self.bitmap(g))
            .collect()
    }

    pub fn free_in(&self, g: u32) -> u32 {
        let first = self.geometry.block_of(g, 0) as usize;
        let len = self.geometry.group_len(g) as usize;
        self.used[first..first + len]
            .iter()
            .filter(|&&u| !u)
            .count() as u32
    }
}

/// The bitmaps a store holds, group by group.
pub fn store_bitmaps(s: &dyn Store) -> Vec<Vec<u8>> {
    (0..s.geometry().group_count())
        .map(|g| s.read_bitmap(g).expect("read bitmap").as_bytes().to_vec())
        .collect()
}

/// Checks descriptors against bitmaps `want` (already known to match the store's).
pub fn check_descriptors(s: &dyn Store, m: &Model) -> Result<(), String> {
    for (g, d) in s.descriptors().iter().enumerate() {
        let want = m.free_in(g as u32);
        if d.free != want {
            return Err(format!(
                "group {g}: descriptor free {} but model {want}",
                d.free
            ));
        }
    }
    Ok(())
}

/// A length: mostly small, sometimes a few hundred blocks, sometimes more than a group.
fn random_len(rng: &mut Rng, bpg: u64) -> u64 {
    match rng.below(8) {
        0 => 1 + rng.below(2 * bpg),
        1..=3 => 1 + rng.below(256),
        _ => 1 + rng.below(16),
    }
}

/// The run of blocks in state `want` from a random start (searching forward a little), at
/// most `len` long.
fn find_run(rng: &mut Rng, used: &[bool], first: u64, want: bool, len: u64) -> Option<(u64, u64)> {
    let n = used.len() as u64;
    let mut start = first + rng.below(n - first);
    let limit = (start + 4096).min(n);
    while start < limit && used[start as usize] != want {
        start += 1;
    }
    let mut end = start;
    while end < n && end - start < len && used[end as usize] == want {
        end += 1;
    }
    (end > start).then_some((start, end - start))
}

/// A valid random commit for `m` (up to 3 allocations and 3 frees; frees may release blocks
/// allocated in the same commit).
pub fn random_commit(rng: &mut Rng, m: &Model) -> Commit {
    let mut scratch = m.used.clone();
    let first = m.geometry.first_data_block();
    let bpg = u64::from(m.geometry.clusters_per_group());
    let mut c = Commit::default();
    while c.is_empty() {
        for _ in 0..rng.below(4) {
            let len = random_len(rng, bpg);
            if let Some((s, l)) = find_run(rng, &scratch, first, false, len) {
                scratch[s as usize..(s + l) as usize]
                    .iter_mut()
                    .for_each(|b| *b = true);
                c.allocated.push(Extent::new(s, l));
            }
        }
        for _ in 0..rng.below(4) {
            let len = random_len(rng, bpg);
            if let Some((s, l)) = find_run(rng, &scratch, first, true, len) {
                scratch[s as usize..(s + l) as usize]
                    .iter_mut()
                    .for_each(|b| *b = false);
                c.freed.push(Extent::new(s, l));
            }
        }
    }
    c
}

/// A few random used ranges for a fresh store.
pub fn random_used(rng: &mut Rng, geometry: &Geometry) -> Vec<Extent> {
    let first = geometry.first_data_block();
    let n = geometry.blocks_count();
    (0..rng.below(5))
        .map(|_| {
            let s = first + rng.below(n - first);
            Extent::new(s, 1 + rng.below(3000).min(n - s - 1))
        })
        .collect()
}

/// Blocks in use on `s`, over every group.
pub fn used_blocks(s: &dyn Store) -> u64 {
    let g = s.geometry();
    (0..g.group_count())
        .map(|grp| u64::from(g.group_len(grp) - s.read_bitmap(grp).unwrap().count_free()))
        .sum()
}

/// This test binary run again as a child process: only its test `entry`, on one thread,
/// with `env` set to `path` (the entry does nothing without it).
pub fn child_command(entry: &str, env: &str, path: &std::path::Path) -> std::process::Command {
    let mut c = std::process::Command::new(std::env::current_exe().unwrap());
    c.args([entry, "--exact", "--nocapture", "--test-threads=1"])
        .env(env, path);
    c
}
