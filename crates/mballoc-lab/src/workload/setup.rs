//! Builds the file system a workload runs on: a fresh mkfs.ext4 layout of the requested size,
//! the policy's tunables with the run's settings on top, optionally a synthetic pre-fill, the
//! allocator (lazy on big file systems), the file layer, and optionally a Geriatrix-style aging
//! pass whose files stay behind.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use mballoc::{apply_settings, Allocator, Geometry};

use super::error::LabError;
use super::prefill::{free_runs, prefill_ranges, union, Holes};
use super::settings::LabSettings;
use super::{aging, Progress, RunConfig};
use crate::fs::{File, Fs, Recorder};
use crate::mkfs;

/// Most threads a run may ask for.
pub const MAX_THREADS: u32 = 1024;
/// Above this many groups the allocator starts lazy (nothing read until needed).
const LAZY_ABOVE_GROUPS: u32 = 4096;

/// What a workload needs from the file system.
#[derive(Debug, Clone, Copy)]
pub struct FsSpec {
    /// Size when the config says 0, at laptop and at full scale.
    pub quick_bytes: u64,
    pub full_bytes: u64,
    /// Start with group bitmaps unread (a fresh mount), whatever the size.
    pub lazy: bool,
    /// Pre-fill applied when the settings do not ask for one: `(utilisation, holes)`.
    pub prefill: Option<(f64, Holes)>,
    /// Hole shape of a `prefill=` setting.
    pub prefill_holes: Holes,
}

impl FsSpec {
    pub const fn sized(quick_bytes: u64, full_bytes: u64) -> FsSpec {
        FsSpec {
            quick_bytes,
            full_bytes,
            lazy: false,
            prefill: None,
            prefill_holes: Holes::Random,
        }
    }
}

/// The prepared file system and everything the measurement needs about its start.
pub struct Env {
    pub cfg: RunConfig,
    pub lab: LabSettings,
    pub geo: Geometry,
    pub fs_size: u64,
    pub cpus: u32,
    /// Used ranges before the workload (layout and pre-fill), sorted and merged: groups the
    /// workload never touched are measured from these without reading them.
    pub base_used: Vec<(u64, u64)>,
    /// Blocks mkfs used in each group (metadata, journal): a group holds data when more of it
    /// is in use.
    pub meta_used: Vec<u32>,
    pub fs: Fs,
    /// What ran before the workload and touched groups that `base_used` does not describe.
    pub pre: Recorder,
    /// Files the aging pass left.
    pub aged_files: Vec<File>,
}

/// Builds the environment for `cfg`.
pub fn build(cfg: &RunConfig, spec: &FsSpec, progress: &dyn Progress) -> Result<Env, LabError> {
    let lab = LabSettings::parse(&cfg.settings)?;
    if cfg.threads == 0 || cfg.threads > MAX_THREADS {
        return Err(LabError::bad(
            "threads",
            cfg.threads,
            format!("must be in 1 ..= {MAX_THREADS}"),
        ));
    }
    let fs_size = match cfg.fs_size {
        0 if cfg.quick => spec.quick_bytes,
        0 => spec.full_bytes,
        n => n,
    };
    let layout = mkfs::layout(fs_size)?;
    let geo = Geometry::new(
        4096,
        layout.blocks_per_group,
        layout.blocks_count,
        0,
        layout.flex_bg_size,
    )?;
    let cpus = lab.cpus.unwrap_or(cfg.threads.max(2));
    let mut tun = cfg.policy.tunables(&geo, cpus);
    apply_settings(&mut tun, &lab.tunables, &geo)?;
    let prefill = match lab.prefill {
        Some(u) => Some((u, spec.prefill_holes)),
        None if lab.age.is_none() => spec.prefill,
        None => None,
    };
    let base_used = match prefill {
        Some((u, holes)) => union(&layout.used, &prefill_ranges(&geo, u, holes, cfg.seed)),
        None => union(&layout.used, &[]),
    };
    let lazy = lab
        .lazy
        .unwrap_or(spec.lazy || geo.group_count() > LAZY_ABOVE_GROUPS);
    let alloc = Allocator::builder(geo)
        .used(&base_used)
        .tunables(tun)
        .cpus(cpus)
        .lazy(lazy)
        .load_cost(Duration::from_nanos(cfg.load_cost_ns))
        .build()?;
    let fs = Fs::new(Arc::new(alloc), layout.inodes_per_group, lab.commit_ops)?;
    let meta_used = free_runs(&geo, &union(&layout.used, &[]))
        .iter()
        .enumerate()
        .map(|(g, runs)| geo.group_len(g as u32) - runs.iter().map(|r| r.1).sum::<u32>())
        .collect();
    let mut env = Env {
        meta_used,
        cfg: cfg.clone(),
        lab,
        geo,
        fs_size,
        cpus,
        base_used,
        fs,
        pre: Recorder::default(),
        aged_files: Vec::new(),
    };
    if let Some(u) = env.lab.age {
        let plan = aging::AgingPlan::starting_state(u, env.cfg.quick);
        let aged = aging::age(&env.fs, &plan, env.cfg.seed, progress)?;
        env.aged_files = aged.files;
        env.fs.commit()?;
        env.remount(&aged.rec.touched, lazy)?;
    }
    Ok(env)
}

impl Env {
    /// Unmount and mount again: the on-disk state becomes the new start state (groups in
    /// `touched` are read back from the allocator, the rest kept), preallocations vanish and,
    /// when `lazy`, no bitmap is read until needed.
    fn remount(&mut self, touched: &HashSet<u32>, lazy: bool) -> Result<(), LabError> {
        let old = self.fs.allocator();
        let mut groups: Vec<u32> = touched.iter().copied().collect();
        groups.sort_unstable();
        // Untouched groups keep their start state, split at group boundaries.
        let mut used: Vec<(u64, u64)> = Vec::new();
        for &(s, n) in &self.base_used {
            let mut at = s.max(self.geo.first_data_block());
            while at < s + n {
                let (g, off) = self.geo.locate(at);
                let len = (s + n - at).min(u64::from(self.geo.group_len(g) - off));
                if !touched.contains(&g) {
                    used.push((at, len));
                }
                at += len;
            }
        }
        for g in groups {
            let base = self.geo.group_first_block(g);
            let disk = old.disk_bitmap(g)?;
            used.extend(
                disk.one_runs(0, self.geo.group_len(g))
                    .map(|(s, n)| (base + u64::from(s), u64::from(n))),
            );
        }
        self.base_used = union(&used, &[]);
        let alloc = Allocator::builder(self.geo)
            .used(&self.base_used)
            .tunables(old.tunables())
            .cpus(self.cpus)
            .lazy(lazy)
            .load_cost(Duration::from_nanos(self.cfg.load_cost_ns))
            .build()?;
        debug_assert_eq!(
            alloc.free_blocks(),
            old.free_blocks(),
            "remount lost blocks"
        );
        self.fs = self.fs.remounted(Arc::new(alloc));
        Ok(())
    }
}

impl Env {
    /// Free blocks now (what a workload may still use).
    pub fn free_bytes(&self) -> u64 {
        self.fs.allocator().free_blocks() * 4096
    }

    /// Fails with `TooSmall` when the workload's footprint does not fit.
    pub fn require(&self, bytes: u64) -> Result<(), LabError> {
        let available = self.free_bytes();
        if bytes > available {
            return Err(LabError::TooSmall {
                workload: self.cfg.workload.clone(),
                needed: bytes,
                available,
            });
        }
        Ok(())
    }

    /// The CPU of task `i` (tasks are spread over the possible CPUs).
    pub fn cpu_of(&self, i: usize) -> u32 {
        (i % self.cpus as usize) as u32
    }
}
