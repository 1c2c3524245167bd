//! Builds the file system a workload runs on: a fresh mkfs.ext4 layout of the requested size,
//! the policy's tunables with the run's settings on top, optionally a synthetic pre-fill, the
//! allocator (lazy on big file systems), the file layer, and optionally a Geriatrix-style aging
//! pass whose files stay behind.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use mballoc::{apply_settings, Allocator, Geometry, MemSource};

use super::error::LabError;
use super::prefill::{free_runs, prefill_ranges, union, Holes};
use super::settings::LabSettings;
use super::{aging, ImageRun, Progress, RunConfig};
use crate::fs::{File, Fs, Recorder};
use crate::image::{Image, ImageStart, OpenOptions};
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
    /// Files the aging pass left, or the image's files.
    pub aged_files: Vec<File>,
    /// Groups still as mkfs left them, `BLOCK_UNINIT` ([`mkfs::Layout::block_uninit_groups`]
    /// less the groups a pre-fill or the aging wrote): a lazily loaded allocator computes their
    /// bitmaps, and its cheap criteria build them instead of passing them over.
    pub block_uninit: Vec<u32>,
}

/// Blocks in use per group.
fn used_per_group(geo: &Geometry, used: &[(u64, u64)]) -> Vec<u32> {
    free_runs(geo, &union(used, &[]))
        .iter()
        .enumerate()
        .map(|(g, runs)| geo.group_len(g as u32) - runs.iter().map(|r| r.1).sum::<u32>())
        .collect()
}

/// The in-memory device the allocator reads bitmaps from: `used` in use, `block_uninit`
/// groups marked so in their descriptors, each read charged `load_cost_ns`.
fn device(
    geo: &Geometry,
    used: &[(u64, u64)],
    block_uninit: &[u32],
    load_cost_ns: u64,
) -> Result<MemSource, LabError> {
    Ok(MemSource::new(*geo, used)?
        .with_load_cost(Duration::from_nanos(load_cost_ns))
        .with_block_uninit(block_uninit.iter().copied())?)
}

/// Builds the environment for `cfg`.
pub fn build(cfg: &RunConfig, spec: &FsSpec, progress: &dyn Progress) -> Result<Env, LabError> {
    let lab = LabSettings::parse(&cfg.settings)?;
    if lab.cluster_bits > 0 {
        // The file layer maps block by block: it has no implied cluster allocation
        // (`get_implied_cluster_alloc`) and no partial-cluster frees on truncate
        // (`ext4_ext_remove_space`), so a bigalloc run would free clusters a file still uses.
        return Err(LabError::Unsupported {
            what: format!(
                "cluster_kib={} in runs (the file layer does not map blocks inside clusters; \
                 bigalloc is supported by the allocator, `groups` and replays)",
                4u64 << lab.cluster_bits
            ),
        });
    }
    if cfg.threads == 0 || cfg.threads > MAX_THREADS {
        return Err(LabError::bad(
            "threads",
            cfg.threads,
            format!("must be in 1 ..= {MAX_THREADS}"),
        ));
    }
    if let Some(image) = &cfg.image {
        return from_image(cfg, lab, image);
    }
    let fs_size = match cfg.fs_size {
        0 if cfg.quick => spec.quick_bytes,
        0 => spec.full_bytes,
        n => n,
    };
    // `journal=0`: made without one (`mkfs.ext4 -O ^has_journal`), so no journal blocks either.
    let layout = mkfs::layout_with(fs_size, lab.journal.unwrap_or(true))?;
    let geo = Geometry::new(
        4096,
        layout.blocks_per_group,
        layout.blocks_count,
        0,
        layout.flex_bg_size,
    )?;
    let cpus = lab.cpus.unwrap_or(cfg.threads.max(2));
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
    let meta_used = used_per_group(&geo, &layout.used);
    let block_uninit: Vec<u32> = {
        let now = used_per_group(&geo, &base_used);
        layout
            .block_uninit_groups()
            .into_iter()
            .filter(|&g| now[g as usize] == meta_used[g as usize])
            .collect()
    };
    let dev = device(&geo, &base_used, &block_uninit, cfg.load_cost_ns)?;
    let alloc = allocator(cfg, &lab, geo, cpus, Box::new(dev), lazy, true)?;
    let mut fs = Fs::new(Arc::new(alloc), layout.inodes_per_group, lab.commit_ops)?;
    fs.set_extent_tree_blocks(lab.extent_tree);
    fs.set_reuse_inos(lab.ino_reuse);
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
        block_uninit,
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

/// The allocator of a run: the policy's tunables with the settings on top, over `source`;
/// with a journal unless `journal=0` or (`journal`: the image's feature) the image has none.
fn allocator(
    cfg: &RunConfig,
    lab: &LabSettings,
    geo: Geometry,
    cpus: u32,
    source: Box<dyn mballoc::BitmapSource>,
    lazy: bool,
    journal: bool,
) -> Result<Allocator, LabError> {
    let mut tun = cfg.policy.tunables(&geo, cpus);
    apply_settings(&mut tun, &lab.tunables, &geo)?;
    let mut b = Allocator::builder(geo)
        .source(source)
        .tunables(tun)
        .cpus(cpus)
        .lazy(lazy)
        .journal(lab.journal.unwrap_or(journal));
    if let Some(p) = lab.page_size {
        b = b.page_size(p);
    }
    Ok(b.build()?)
}

/// The environment of a run that starts from an ext4 image: as a fresh mount of it (bitmaps
/// read when first needed, `BLOCK_UNINIT` groups computed, groups whose bitmap fails left
/// out), with the image's files under their own inode numbers; new files are numbered after
/// the highest one. The image is only read.
fn from_image(cfg: &RunConfig, lab: LabSettings, run: &ImageRun) -> Result<Env, LabError> {
    if lab.prefill.is_some() || lab.age.is_some() {
        return Err(LabError::bad(
            if lab.age.is_some() { "age" } else { "prefill" },
            run.path.display(),
            "not with an image: the image is the starting state (the aging workload ages it further)",
        ));
    }
    let img = Image::open(
        &run.path,
        OpenOptions {
            allow_mounted: run.allow_mounted,
        },
    )?;
    let start = ImageStart::load(&img)?;
    let geo = start.geo;
    let cpus = lab.cpus.unwrap_or(cfg.threads.max(2));
    let source = start
        .source()?
        .with_load_cost(Duration::from_nanos(cfg.load_cost_ns));
    // ext4 reads no bitmap at mount.
    let lazy = lab.lazy.unwrap_or(true);
    let journal = img.superblock().has_journal();
    let alloc = allocator(cfg, &lab, geo, cpus, Box::new(source), lazy, journal)?;
    let mut fs = Fs::new(Arc::new(alloc), start.inodes_per_group, lab.commit_ops)?;
    fs.set_extent_tree_blocks(lab.extent_tree);
    fs.set_reuse_inos(lab.ino_reuse);
    let files = start
        .files
        .iter()
        .map(|f| {
            let mut file = fs.create_with_ino(f.ino);
            for e in &f.extents {
                file.map.insert(e.logical, e.physical, e.len);
            }
            file.size = f.size;
            file.open = false;
            file
        })
        .collect();
    Ok(Env {
        cfg: cfg.clone(),
        lab,
        geo,
        fs_size: geo.blocks_count() * u64::from(geo.block_size()),
        cpus,
        base_used: union(&start.used, &[]),
        meta_used: start.meta_used,
        fs,
        pre: Recorder::default(),
        aged_files: files,
        block_uninit: start.block_uninit,
    })
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
        // The aging wrote these groups' bitmaps.
        self.block_uninit.retain(|g| !touched.contains(g));
        let device = device(
            &self.geo,
            &self.base_used,
            &self.block_uninit,
            self.cfg.load_cost_ns,
        )?;
        let alloc = Allocator::builder(self.geo)
            .source(Box::new(device))
            .tunables(old.tunables())
            .cpus(self.cpus)
            .lazy(lazy)
            .journal(old.journal())
            .page_size(old.page_size())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::NoProgress;

    fn env(settings: &[&str]) -> Env {
        let cfg = RunConfig {
            workload: "fallocate3".into(),
            policy: mballoc::Policy::Linux618,
            settings: settings.iter().map(|s| s.to_string()).collect(),
            threads: 1,
            fs_size: 4 << 30,
            seed: 1,
            quick: true,
            load_cost_ns: 0,
            image: None,
        };
        let spec = FsSpec {
            lazy: true,
            ..FsSpec::sized(4 << 30, 4 << 30)
        };
        build(&cfg, &spec, &NoProgress).unwrap()
    }

    /// A fresh lab filesystem starts with mkfs's `BLOCK_UNINIT` groups (28 of 32 at 4 GiB, as
    /// in the fresh 4 GiB capture), and the lazily loaded allocator knows them: its cheap
    /// criteria build such a group where they pass over one whose bitmap needs a read. A
    /// pre-fill writes every group, and then none is left.
    #[test]
    fn fresh_groups_start_block_uninit_until_written() {
        let fresh = env(&[]);
        let expected = mkfs::layout(4 << 30).unwrap().block_uninit_groups();
        assert_eq!(fresh.block_uninit.len(), 28);
        assert_eq!(fresh.block_uninit, expected);
        let a = fresh.fs.allocator();
        assert!(expected.iter().all(|&g| !a.buddy_built(g).unwrap()));
        // Group 1 is BLOCK_UNINIT and not a flex group's first: CR_POWER2_ALIGNED builds it.
        let goal = fresh.geo.group_first_block(1) + 100;
        let req = mballoc::Request::new(20, 0, 256)
            .with_goal(goal)
            .with_flags(mballoc::Flags::HINT_DATA | mballoc::Flags::HINT_NOPREALLOC)
            .with_i_size(256 * 4096)
            .with_open_for_write(false);
        let got = a.allocate(&req).unwrap();
        assert_eq!(got.criterion, mballoc::Criterion::Power2Aligned);
        assert_eq!(fresh.geo.locate(got.extent.start).0, 1);
        assert!(env(&["prefill=0.5"]).block_uninit.is_empty());
    }
}
