//! Replays a kernel capture through the allocator and compares every placement with the
//! kernel's: the proof that mballoc decides like Linux 6.18.

use std::path::Path;

use mballoc::{
    Allocator, Criterion, Error, Extent, Flags, FreeFlags, Geometry, MemSource, PaKind, Request,
    Source, Tunables,
};
use serde::Serialize;

use crate::case::{self, AllocRecord, AllocSource, Case, CaseError, CommitPhase, Record};

/// Possible CPUs of the capture machine (kernel-cases/CAPTURES.md: 2 possible CPUs).
pub const CAPTURE_CPUS: u32 = 2;

/// One allocation whose answer differs from the kernel's.
#[derive(Debug, Clone, Serialize)]
pub struct Mismatch {
    pub seq: u64,
    pub ino: u64,
    pub lblk: u64,
    pub len: u32,
    pub kernel: String,
    pub ours: String,
    /// The first point where our path differed: source, goal, criterion or result.
    pub first_difference: String,
}

/// The outcome of one case.
#[derive(Debug, Clone, Serialize)]
pub struct CaseReport {
    pub name: String,
    pub allocs: u64,
    pub matched: u64,
    pub agreement: f64,
    /// Requests whose path also matched: normalised goal, group-or-file flags, criterion,
    /// extent found, the search's work (groups scanned, extents measured) and new PA.
    pub path_matched: u64,
    /// Frees the allocator refused (only after an earlier divergence).
    pub free_errors: u64,
    /// Blocks whose final on-disk state differs from the kernel's.
    pub final_diff_blocks: u64,
    /// Operations after which the blocks handed back from preallocations differ from the
    /// kernel's `pa_release` records (see `ReleaseCheck`).
    pub release_mismatches: u64,
    /// Groups whose buddy build was compared with the kernel's (fresh-mount captures only,
    /// see `BuildCheck`; 0 elsewhere).
    pub buddy_builds_checked: u64,
    /// Of those, the groups whose buddy we built during another request than the kernel did
    /// (or never).
    pub buddy_build_mismatches: u64,
    pub mismatches: Vec<Mismatch>,
}

/// The outcome of several cases.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayReport {
    pub cases: Vec<CaseReport>,
    pub allocs: u64,
    pub matched: u64,
    pub agreement: f64,
    pub mismatches: Vec<Mismatch>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Case(#[from] CaseError),
    #[error("{case}: the allocator rejected the initial state: {source}")]
    Setup { case: String, source: Error },
    /// Nothing to replay: no path is a case or holds one (a wrong directory would otherwise
    /// report 100 % agreement over zero allocations).
    #[error("no capture cases (directories holding {}) in {}", case::INITIAL_STATE, .paths.join(", "))]
    NoCases { paths: Vec<String> },
}

/// Loads and replays every case under `paths`; finding none is an error.
pub fn replay_paths(paths: &[std::path::PathBuf]) -> Result<ReplayReport, ReplayError> {
    let dirs = case::find_cases(paths)?;
    if dirs.is_empty() {
        let paths = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(ReplayError::NoCases { paths });
    }
    let mut cases = Vec::new();
    for dir in dirs {
        cases.push(replay_dir(&dir)?);
    }
    let allocs = cases.iter().map(|c| c.allocs).sum();
    let matched = cases.iter().map(|c| c.matched).sum();
    let mismatches = cases
        .iter()
        .flat_map(|c| c.mismatches.iter().cloned())
        .collect();
    Ok(ReplayReport {
        agreement: ratio(matched, allocs),
        cases,
        allocs,
        matched,
        mismatches,
    })
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

impl CaseReport {
    /// Whether the case agrees with the kernel in everything the replay compares: every
    /// placement and path, every free, every preallocation release, every traced buddy build
    /// and the final free space.
    pub fn agrees(&self) -> bool {
        self.matched == self.allocs
            && self.path_matched == self.allocs
            && self.free_errors == 0
            && self.final_diff_blocks == 0
            && self.release_mismatches == 0
            && self.buddy_build_mismatches == 0
    }
}

impl ReplayReport {
    /// Whether every case agrees with the kernel ([`CaseReport::agrees`]).
    pub fn agrees(&self) -> bool {
        self.cases.iter().all(CaseReport::agrees)
    }

    /// The cases that do not agree with the kernel, by name.
    pub fn disagreeing(&self) -> Vec<&str> {
        self.cases
            .iter()
            .filter(|c| !c.agrees())
            .map(|c| c.name.as_str())
            .collect()
    }

    /// A Markdown table, one row per case and a total: the table `docs/fidelity.md` carries
    /// (`mballoc replay --markdown`; a test keeps the two equal).
    pub fn markdown(&self) -> String {
        let mut s = String::from(
            "| case | allocations | placements matched | paths matched | PA releases | \
             buddy builds | final free space | agreement |\n\
             |---|---:|---:|---:|---|---|---|---:|\n",
        );
        for c in &self.cases {
            let releases = if c.release_mismatches == 0 {
                "same".to_string()
            } else {
                format!("{} differ", c.release_mismatches)
            };
            let builds = match (c.buddy_builds_checked, c.buddy_build_mismatches) {
                (0, _) => "-".to_string(),
                (n, 0) => format!("{n} same"),
                (n, m) => format!("{m} of {n} differ"),
            };
            let free = if c.final_diff_blocks == 0 {
                "same".to_string()
            } else {
                format!("{} blocks differ", c.final_diff_blocks)
            };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {releases} | {builds} | {free} | {:.2} % |\n",
                c.name,
                c.allocs,
                c.matched,
                c.path_matched,
                100.0 * c.agreement
            ));
        }
        s.push_str(&format!(
            "| **all {} cases** | {} | {} | {} | | | | {:.2} % |\n",
            self.cases.len(),
            self.allocs,
            self.matched,
            self.cases.iter().map(|c| c.path_matched).sum::<u64>(),
            100.0 * self.agreement
        ));
        s
    }
}

/// Builds an allocator configured as the kernel of the capture was.
pub fn allocator_for(case: &Case) -> Result<Allocator, ReplayError> {
    let init = &case.initial;
    let setup = |source| ReplayError::Setup {
        case: case.name.clone(),
        source,
    };
    let geo = init.geometry().map_err(|e| setup(e.into()))?;
    let t = capture_tunables(case, &geo).map_err(setup)?;
    let source = MemSource::new(geo, &init.used_ranges())
        .and_then(|s| s.with_block_uninit(init.block_uninit_groups()))
        .map_err(setup)?;
    // After a fresh mount every buddy is unbuilt; otherwise the capture's `mb_groups` read had
    // built them all. Prefetch reads run inline: placements never depend on when a read
    // completes, only on which groups are built.
    Allocator::builder(geo)
        .tunables(t)
        .cpus(CAPTURE_CPUS)
        .source(Box::new(source))
        .lazy(case.meta.fresh_mount)
        .journal(init.has_journal())
        .prefetch_threads(0)
        .build()
        .map_err(setup)
}

/// The tunables the capture's kernel ran with, for geometry `geo`.
pub fn capture_tunables(case: &Case, geo: &Geometry) -> Result<Tunables, Error> {
    let mut t = Tunables::for_geometry(geo, CAPTURE_CPUS);
    for (name, value) in &case.meta.mballoc_tunables {
        t.set(name, &value.to_string(), geo)?;
    }
    t.mb_optimize_scan = case.meta.optimize_scan;
    // The RAID stripe is not in sysfs: take it from the options the kernel reported.
    if let Some(stripe) = case.meta.mount_option("stripe") {
        t.set("stripe", stripe, geo)?;
    }
    Ok(t)
}

/// The request of record `r`; `extents`: the file is extent-mapped (on a filesystem made
/// without the `extent` feature every file is indirect-mapped). The traced length counts
/// clusters (`ar->len`); the request asks for their blocks (the traced logical block is the
/// first of its cluster already).
pub fn request(r: &AllocRecord, extents: bool, geo: &Geometry) -> Request {
    Request {
        owner: r.ino,
        logical: r.lblk as u32,
        len: geo.c2b(r.len.into()) as u32,
        goal: r.goal,
        lleft: r.lleft as u32,
        pleft: r.pleft,
        lright: r.lright as u32,
        pright: r.pright,
        flags: Flags(r.flags),
        i_size: r.i_size.unwrap_or(0),
        open_for_write: r.wr_open.unwrap_or(true),
        cpu: r.cpu,
        extents,
    }
}

/// Frees `e` as the capture's free record did: in its transaction `tid`, or, for a free made
/// without a journal handle (`tid: null`, a filesystem without a journal), in the running one.
/// An allocator built without a journal ([`mballoc::Builder::journal`]) hands the blocks back
/// at once either way, as `ext4_mb_clear_bb` does without a handle.
///
/// `flags` are the record's `ext4_free_blocks` flags: with bigalloc they keep the partial
/// clusters the file still uses.
pub fn free_as_captured(
    a: &Allocator,
    ino: u64,
    e: Extent,
    flags: FreeFlags,
    tid: Option<u64>,
) -> Result<(), Error> {
    match tid {
        Some(t) => a.free_blocks_in_transaction(ino, e, flags, t),
        None => a.free_with_flags(ino, e, flags),
    }
}

/// Replays one case.
pub fn replay_case(case: &Case) -> Result<CaseReport, ReplayError> {
    let a = allocator_for(case)?;
    let mut rep = CaseReport {
        name: case.name.clone(),
        allocs: 0,
        matched: 0,
        agreement: 1.0,
        path_matched: 0,
        free_errors: 0,
        final_diff_blocks: 0,
        release_mismatches: 0,
        buddy_builds_checked: 0,
        buddy_build_mismatches: 0,
        mismatches: Vec::new(),
    };
    let mut releases = ReleaseCheck::default();
    let mut builds = BuildCheck::new(case, &a);
    let extents = case.initial.features.iter().any(|f| f == "extent");
    for rec in &case.records {
        if ReleaseCheck::settles_at(rec) && !releases.settle(&a) {
            rep.release_mismatches += 1;
        }
        match rec {
            Record::PaRelease(p) => releases.kernel += p.count,
            Record::Alloc(r) => {
                rep.allocs += 1;
                let ours = a.allocate(&request(r, extents, a.geometry()));
                let (ok, path_ok, m) = compare(r, &ours, a.geometry());
                rep.matched += u64::from(ok);
                rep.path_matched += u64::from(ok && path_ok);
                if let Some(m) = m {
                    rep.mismatches.push(m);
                }
            }
            Record::Free(f) => {
                // ext4_free_blocks' own rounding to clusters, kept partial clusters included.
                let e = Extent::new(f.block, f.count as u32);
                // ext4_free_blocks' own rounding to clusters, kept partial clusters included.
                let flags = FreeFlags(f.flags);
                if free_as_captured(&a, f.ino, e, flags, f.tid).is_err() {
                    rep.free_errors += 1;
                }
            }
            Record::Commit(c) if c.phase == CommitPhase::EndCommit => {
                // No store behind a replay, so a commit cannot fail.
                let _ = a.commit_transaction(c.tid);
            }
            Record::DiscardInodePas(d) => {
                a.discard_preallocations(d.ino);
            }
            _ => {}
        }
        if let Some(b) = &mut builds {
            b.note(&a, rec.seq());
        }
    }
    if let Some(b) = &builds {
        (rep.buddy_builds_checked, rep.buddy_build_mismatches) = b.outcome();
    }
    if !releases.settle(&a) {
        rep.release_mismatches += 1;
    }
    rep.agreement = ratio(rep.matched, rep.allocs);
    rep.final_diff_blocks = final_difference(case, &a);
    Ok(rep)
}

/// On a fresh-mount capture (every buddy unbuilt when the trace starts), the record during
/// which each group's buddy was built: the kernel's, traced (`meta.json` →
/// `fresh_mount_loads`), against ours, noted after every record. Which groups a request
/// builds, and when, is the lazy path itself: the first group of a flex group or a
/// `BLOCK_UNINIT` one at the cheap criteria, any at CR_GOAL_LEN_SLOW, and the rest of a
/// prefetch window when the request ends (`ext4_mb_prefetch_fini`).
struct BuildCheck {
    /// Group → `seq` of the allocation (or free) during which the kernel built it.
    kernel: std::collections::BTreeMap<u32, u64>,
    /// Group → `seq` of the record after which ours was first seen built.
    ours: Vec<Option<u64>>,
}

impl BuildCheck {
    /// The check for `case`, if it is a fresh-mount capture whose traced builds all fell
    /// inside records the replay runs ([`case::FreshMountLoads::builds`]).
    fn new(case: &Case, a: &Allocator) -> Option<BuildCheck> {
        if !case.meta.fresh_mount {
            return None;
        }
        let kernel = case.meta.fresh_mount_loads.as_ref()?.builds()?;
        let groups = a.geometry().group_count() as usize;
        Some(BuildCheck {
            kernel,
            ours: vec![None; groups],
        })
    }

    /// Marks the groups first seen built after record `seq`.
    fn note(&mut self, a: &Allocator, seq: u64) {
        for (g, at) in (0u32..).zip(self.ours.iter_mut()) {
            if at.is_none() && a.buddy_built(g).unwrap_or(false) {
                *at = Some(seq);
            }
        }
    }

    /// (groups compared, groups whose build differs).
    fn outcome(&self) -> (u64, u64) {
        let differ = (0u32..)
            .zip(&self.ours)
            .filter(|&(g, ours)| self.kernel.get(&g).copied() != *ours)
            .count();
        (self.ours.len() as u64, differ as u64)
    }
}

/// Blocks handed back from preallocations: the kernel's (`pa_release` records) against ours
/// (the `discarded` counter), compared before each operation that can release some. A
/// truncate or close (`discard_inode_pas`) releases the inode's PAs; a request that runs out
/// of space releases PAs group by group, and its `pa_release` records follow its own. A free
/// should release none (the kernel discards a file's PAs before truncating it).
#[derive(Debug, Default)]
struct ReleaseCheck {
    /// Blocks of the `pa_release` records since the last settlement.
    kernel: u64,
    /// Our `discarded` counter at the last settlement.
    ours_at: u64,
}

impl ReleaseCheck {
    /// Whether `rec` starts an operation of its own, closing the releases of the last one.
    fn settles_at(rec: &Record) -> bool {
        match rec {
            Record::Alloc(_) | Record::Free(_) | Record::DiscardInodePas(_) => true,
            Record::Commit(c) => c.phase == CommitPhase::EndCommit,
            _ => false,
        }
    }

    /// Compares the releases since the last settlement and starts a new count; true if equal.
    fn settle(&mut self, a: &Allocator) -> bool {
        let ours = a.stats().discarded;
        let same = ours - self.ours_at == self.kernel;
        (self.ours_at, self.kernel) = (ours, 0);
        same
    }
}

/// Blocks whose on-disk state after the replay (PAs dropped, as at unmount) differs from the
/// capture's final state.
fn final_difference(case: &Case, a: &Allocator) -> u64 {
    let geo = a.geometry();
    let mut diff = 0;
    for fg in &case.final_state.groups {
        let Ok(disk) = a.disk_bitmap(fg.group) else {
            continue;
        };
        // One bit per cluster; the capture's free extents are blocks, whole clusters.
        let len = geo.group_len(fg.group);
        let mut kernel_free = mballoc::Bitmap::new(len);
        for &(s, l) in &fg.free_extents {
            let off = geo.b2c(s - geo.group_first_block(fg.group)) as u32;
            kernel_free.set_range(off, off + geo.num_b2c(l) as u32);
        }
        // `disk` marks used clusters, `kernel_free` free ones: equal bits mean the views
        // disagree.
        for b in 0..len {
            if disk.get(b) == kernel_free.get(b) {
                diff += geo.c2b(1);
            }
        }
    }
    diff
}

fn fmt_ours(x: &Result<mballoc::Allocation, Error>) -> String {
    match x {
        Ok(a) => format!(
            "{}+{} ({:?}, {})",
            a.extent.start,
            a.extent.len,
            a.source,
            a.criterion.name()
        ),
        Err(e) => format!("error: {e}"),
    }
}

/// (placement matched, path matched, mismatch record).
/// `ext4_allocate_blocks` prints the length in clusters; ours is the blocks given.
fn compare(
    r: &AllocRecord,
    ours: &Result<mballoc::Allocation, Error>,
    geo: &Geometry,
) -> (bool, bool, Option<Mismatch>) {
    let placed = matches!(ours, Ok(a) if a.extent.start == r.result_pstart
        && geo.num_b2c(a.extent.len.into()) == u64::from(r.result_len));
    let path = match ours {
        Ok(a) => first_path_difference(r, a),
        Err(e) => Some(format!("we failed: {e}")),
    };
    let mismatch = (!placed).then(|| Mismatch {
        seq: r.stamp.seq,
        ino: r.ino,
        lblk: r.lblk,
        len: r.len,
        kernel: format!(
            "{}+{} ({:?}, {})",
            r.result_pstart,
            r.result_len,
            r.source.unwrap_or(AllocSource::Scan),
            r.cr.map_or("-".to_string(), |c| c.to_string())
        ),
        ours: fmt_ours(ours),
        first_difference: path.clone().unwrap_or_else(|| "result only".into()),
    });
    (placed, path.is_none(), mismatch)
}

fn first_path_difference(r: &AllocRecord, a: &mballoc::Allocation) -> Option<String> {
    let kernel_source = r.source.unwrap_or(AllocSource::Scan);
    let our_source = match a.source {
        Source::Scan => AllocSource::Scan,
        Source::Prealloc => AllocSource::Prealloc,
    };
    if kernel_source != our_source {
        return Some(format!(
            "source: kernel {kernel_source:?}, ours {our_source:?}"
        ));
    }
    if kernel_source == AllocSource::Scan {
        if let Some(g) = &r.goal_ex {
            let ours = &a.goal;
            if (g.group, g.start, g.len, g.logical)
                != (ours.group, ours.start, ours.len, u64::from(ours.logical))
            {
                return Some(format!(
                    "normalised goal: kernel {}/{}/{}@{}, ours {}/{}/{}@{}",
                    g.group,
                    g.start,
                    g.len,
                    g.logical,
                    ours.group,
                    ours.start,
                    ours.len,
                    ours.logical
                ));
            }
        }
        if let Some(f) = r.ac_flags {
            let mask = (Flags::HINT_GROUP_ALLOC | Flags::STREAM_ALLOC | Flags::HINT_NOPREALLOC).0;
            if f & mask != a.flags.0 & mask {
                return Some(format!(
                    "group-or-file: kernel flags {:?}, ours {:?}",
                    Flags(f & mask),
                    Flags(a.flags.0 & mask)
                ));
            }
        }
        if let Some(cr) = r.cr {
            // 5 (`EXT4_MB_NUM_CRS`): taken by `ext4_mb_try_best_found` after every pass.
            let ours = if a.after_all_passes {
                Criterion::ALL.len()
            } else {
                a.criterion.index()
            };
            if cr as usize != ours {
                return Some(format!(
                    "criterion: kernel {cr}, ours {ours} ({}{})",
                    a.criterion.name(),
                    if a.after_all_passes {
                        ", after all passes"
                    } else {
                        ""
                    }
                ));
            }
        }
        if let Some(x) = &r.result_ex {
            if (x.group, x.start, x.len) != (a.found.group, a.found.start, a.found.len) {
                return Some(format!(
                    "found: kernel {}/{}/{}, ours {}/{}/{}",
                    x.group, x.start, x.len, a.found.group, a.found.start, a.found.len
                ));
            }
        }
        // The work of the search: groups whose buddy was scanned and free extents measured.
        let work = (r.groups_scanned, r.extents_scanned);
        let ours = (a.groups_scanned, u64::from(a.extents_scanned));
        if let (Some(g), Some(e)) = work {
            if (g, e) != ours {
                return Some(format!(
                    "search work: kernel {g} groups / {e} extents, ours {} / {}",
                    ours.0, ours.1
                ));
            }
        }
    }
    let kpa = r
        .new_pa
        .map(|p| (p.kind == case::PaKind::Inode, p.pstart, p.len, p.lstart));
    let opa = a
        .new_pa
        .map(|p| (p.kind == PaKind::Inode, p.pstart, p.len, p.lstart));
    if kpa != opa {
        return Some(format!("new PA: kernel {kpa:?}, ours {opa:?}"));
    }
    None
}

/// Replays one case directory, once its records agree with what `meta.json` counted: a
/// records file cut at a line boundary parses, and its prefix would replay and agree.
pub fn replay_dir(dir: &Path) -> Result<CaseReport, ReplayError> {
    let case = Case::load(dir)?;
    case.check_counts()?;
    replay_case(&case)
}
