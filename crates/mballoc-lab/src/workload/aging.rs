//! W14 — Geriatrix-style aging (Kadekodi et al., ATC'18): create files with sizes drawn from a
//! profile until the file system reaches a target utilisation, then keep churning — delete a
//! file (biased towards young ones), create another — until a churn budget (a multiple of the
//! file system size) has been written. The aged state is the starting point of other workloads
//! (`age=U`) or measured on its own (the `aging` workload: M2, M4, M7, M9).
//!
//! Simplifications, all deterministic for a seed: one task; sizes uniform inside the profile's
//! buckets **\[inferred\]** (the profile gives bucket values and weights only); deletion picks the
//! youngest of three random live files with probability 0.6, else any live file — an age bias
//! without Geriatrix's convergence loop; every file is written with buffered writes, fsynced
//! and closed (placed by delayed allocation).

use super::error::LabError;
use super::rng::Rng;
use super::Progress;
use crate::fs::{File, Fs, FsError, Recorder};

/// Agrawal et al. file-size profile used by Geriatrix: `(bytes, weight)`.
pub const AGRAWAL_SIZES: [(u64, u64); 11] = [
    (8, 1),
    (32, 7),
    (128, 16),
    (512, 40),
    (2048, 50),
    (8192, 46),
    (32768, 35),
    (131_072, 20),
    (524_288, 10),
    (2_097_152, 4),
    (8_388_608, 1),
];

/// What to age to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AgingPlan {
    /// Target used fraction of all blocks.
    pub util: f64,
    /// Bytes to write after the fill, as a multiple of the file system size.
    pub churn: f64,
}

impl AgingPlan {
    /// The pass run before another workload (`age=U`): a quarter of the fs churned at laptop
    /// scale, one full fs at full scale.
    pub fn starting_state(util: f64, quick: bool) -> AgingPlan {
        AgingPlan {
            util,
            churn: if quick { 0.25 } else { 1.0 },
        }
    }
}

/// The aged state.
pub struct Aged {
    pub files: Vec<File>,
    pub rec: Recorder,
    pub created: u64,
    pub deleted: u64,
    pub bytes_written: u64,
}

/// A file size from the profile.
fn draw_size(rng: &mut Rng) -> u64 {
    let weights: Vec<u64> = AGRAWAL_SIZES.iter().map(|s| s.1).collect();
    let i = rng.weighted(&weights);
    let lo = if i == 0 {
        1
    } else {
        AGRAWAL_SIZES[i - 1].0 + 1
    };
    rng.range(lo, AGRAWAL_SIZES[i].0)
}

struct Ager<'a> {
    t: crate::fs::Task<'a>,
    rng: Rng,
    live: Vec<(u64, File)>,
    seq: u64,
    out: (u64, u64, u64),
}

impl Ager<'_> {
    fn used_blocks(&self) -> u64 {
        let a = self.t.fs.allocator();
        a.geometry().blocks_count() - a.free_blocks()
    }

    /// Creates one file; `false` when the file system is full (the partial file is removed).
    fn create(&mut self) -> Result<bool, LabError> {
        let size = draw_size(&mut self.rng);
        let mut f = self.t.fs.create();
        let r = self
            .t
            .write_buffered(&mut f, 0, size)
            .and_then(|_| self.t.fsync(&mut f));
        self.t.close(&mut f);
        match r {
            Ok(()) => {
                self.seq += 1;
                self.out.0 += 1;
                self.out.2 += size;
                self.live.push((self.seq, f));
                Ok(true)
            }
            Err(FsError::NoSpace { .. }) => {
                self.t.unlink(f)?;
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes one live file, biased towards young ones.
    fn delete(&mut self) -> Result<(), LabError> {
        if self.live.is_empty() {
            return Ok(());
        }
        let n = self.live.len() as u64;
        let i = if self.rng.unit() < 0.6 {
            (0..3)
                .map(|_| self.rng.below(n) as usize)
                .max_by_key(|&i| self.live[i].0)
                .unwrap_or(0)
        } else {
            self.rng.below(n) as usize
        };
        let (_, f) = self.live.swap_remove(i);
        self.t.unlink(f)?;
        self.out.1 += 1;
        Ok(())
    }
}

/// Ages `fs` as `plan` says (one task on CPU 0).
pub fn age(
    fs: &Fs,
    plan: &AgingPlan,
    seed: u64,
    progress: &dyn Progress,
) -> Result<Aged, LabError> {
    let geo = *fs.allocator().geometry();
    let target = (plan.util * geo.blocks_count() as f64) as u64;
    let churn_bytes = (plan.churn * geo.bytes() as f64) as u64;
    let mut g = Ager {
        t: fs.task(0),
        rng: Rng::new(seed ^ 0x4147_494e_4700),
        live: Vec::new(),
        seq: 0,
        out: (0, 0, 0),
    };
    let fill_mib = target.saturating_sub(g.used_blocks()) / 256;
    progress.start("aging", fill_mib + (churn_bytes >> 20));
    let mut reported = 0u64;
    let mut report = |bytes: u64| {
        let mib = bytes >> 20;
        if mib > reported {
            progress.inc(mib - reported);
            reported = mib;
        }
    };
    // Fill to the target.
    let mut full_streak = 0;
    while g.used_blocks() < target && full_streak < 8 {
        full_streak = if g.create()? { 0 } else { full_streak + 1 };
        report(g.out.2);
    }
    // Churn at the target.
    let fill_bytes = g.out.2;
    while g.out.2 - fill_bytes < churn_bytes {
        // At the target, or the create found the fs full: make room.
        if g.used_blocks() >= target || !g.create()? {
            g.delete()?;
        }
        report(g.out.2);
        if g.live.is_empty() && g.used_blocks() >= target {
            break; // nothing left to delete and still full: the target is unreachable
        }
    }
    progress.finish();
    Ok(Aged {
        files: g.live.into_iter().map(|(_, f)| f).collect(),
        rec: g.t.rec,
        created: g.out.0,
        deleted: g.out.1,
        bytes_written: g.out.2,
    })
}
