//! A kernel capture's request stream replayed on an image: "what would these requests do on
//! that file system, under this policy?". The capture's blocks mean nothing on the image, so
//! the stream is carried over by identity, not by address: each allocation keeps its inode,
//! logical block, length, flags, size and CPU; a goal or neighbour that points into (or just
//! past) an extent the capture's kernel allocated earlier in the stream is moved to where our
//! allocator put that extent, and any other goal is clamped into the image
//! (`ext4_mb_initialize_context`). Frees release our placement of the blocks the kernel freed;
//! frees of blocks the stream never allocated (the captured file system's older files) are
//! skipped and counted. Commits follow the capture's transactions.

use std::collections::BTreeMap;

use mballoc::{Allocator, Extent, Policy};
use serde::Serialize;

use super::{Image, ImageError, ImageStart};
use crate::case::{Case, CommitPhase, Record};
use crate::fs::clamp_goal;
use crate::metrics::frag_pct::{fsperf_frag, FragPct};
use crate::metrics::freefrag::FreeFrag;
use crate::metrics::FreeSpace;
use crate::replay::{capture_tunables, free_as_captured, request, CAPTURE_CPUS};

/// What the stream did on the image.
#[derive(Debug, Serialize)]
pub struct ImageReplayReport {
    pub case: String,
    pub image: String,
    /// The policy whose tunables ran, or the capture's own tunables.
    pub tunables: String,
    #[serde(flatten)]
    pub counts: Counts,
    /// Free blocks before and after.
    pub free_before: u64,
    pub free_after: u64,
    pub frag_pct: FragPct,
    pub free_extents: FreeFrag,
    /// The end state as `/proc/fs/ext4/<dev>/mb_groups` would print it.
    pub mb_groups: String,
}

/// Counts over the stream.
#[derive(Debug, Default, Serialize)]
pub struct Counts {
    pub allocs: u64,
    /// Allocations that got blocks.
    pub placed: u64,
    /// Allocations that failed (ENOSPC on the image, or a typed error), with the reason.
    pub failed: u64,
    pub first_failure: Option<String>,
    pub blocks_allocated: u64,
    /// Goals moved onto our placement of an extent the stream allocated before.
    pub goals_followed: u64,
    /// Allocations that started exactly at their goal.
    pub goal_hits: u64,
    pub frees_applied: u64,
    /// Frees of blocks the stream never allocated here.
    pub frees_skipped: u64,
    pub free_errors: u64,
}

/// Kernel extents of the stream (start → length) and where ours went (start, length).
#[derive(Default)]
struct Placements(BTreeMap<u64, (u64, u64, u64)>);

impl Placements {
    /// Records that the kernel's `[k, k + klen)` is our `[ours, ours + olen)`, dropping older
    /// records it overlaps (the kernel reused those blocks).
    fn insert(&mut self, k: u64, klen: u64, ours: u64, olen: u64) {
        let stale: Vec<u64> = self
            .0
            .range(..k + klen)
            .filter(|(&s, &(l, _, _))| s + l > k)
            .map(|(&s, _)| s)
            .collect();
        for s in stale {
            self.0.remove(&s);
        }
        self.0.insert(k, (klen, ours, olen));
    }

    /// Our block for kernel block `b`: inside a recorded extent, or just past its end (an
    /// append's goal).
    fn translate(&self, b: u64) -> Option<u64> {
        let (&s, &(klen, ours, olen)) = self.0.range(..=b).next_back()?;
        let off = b - s;
        (off < klen.min(olen) || off == klen).then(|| ours + off.min(olen))
    }

    /// Our pieces of kernel range `[b, b + n)`.
    fn pieces(&self, b: u64, n: u64) -> Vec<(u64, u64)> {
        let lo = self.0.range(..=b).next_back().map_or(b, |(&s, _)| s);
        self.0
            .range(lo..b + n)
            .filter_map(|(&s, &(klen, ours, olen))| {
                let (from, to) = (b.max(s), (b + n).min(s + klen.min(olen)));
                (from < to).then(|| (ours + (from - s), to - from))
            })
            .collect()
    }
}

/// Replays `case`'s stream on `img` under `policy` (or the capture's tunables).
pub fn replay_on_image(
    case: &Case,
    img: &Image,
    policy: Option<Policy>,
) -> Result<ImageReplayReport, ImageError> {
    let start = ImageStart::load(img)?;
    let geo = start.geo;
    let alloc_err = |e: mballoc::Error| ImageError::Unsupported {
        what: format!("allocator: {e}"),
    };
    let tun = match policy {
        Some(p) => p.tunables(&geo, CAPTURE_CPUS),
        None => capture_tunables(case, &geo).map_err(alloc_err)?,
    };
    let a = Allocator::builder(geo)
        .tunables(tun)
        .cpus(CAPTURE_CPUS)
        .source(Box::new(start.source().map_err(alloc_err)?))
        .lazy(true)
        .journal(img.superblock().has_journal())
        .prefetch_threads(0)
        .build()
        .map_err(alloc_err)?;
    let free_before = a.free_blocks();
    let mut rep = Counts::default();
    let extents = case.initial.features.iter().any(|f| f == "extent");
    let mut placed = Placements::default();
    for rec in &case.records {
        match rec {
            Record::Alloc(r) => {
                rep.allocs += 1;
                let mut req = request(r, extents, &geo);
                req.goal = match placed.translate(r.goal) {
                    Some(g) => {
                        rep.goals_followed += 1;
                        g
                    }
                    None => clamp_goal(&geo, r.goal),
                };
                req.pleft = placed.translate(r.pleft).unwrap_or(0);
                req.pright = placed.translate(r.pright).unwrap_or(0);
                if req.pleft == 0 {
                    req.lleft = 0;
                }
                if req.pright == 0 {
                    req.lright = 0;
                }
                match a.allocate(&req) {
                    Ok(got) => {
                        rep.placed += 1;
                        rep.blocks_allocated += u64::from(got.extent.len);
                        rep.goal_hits += u64::from(got.extent.start == req.goal);
                        if r.ok && r.result_len > 0 {
                            placed.insert(
                                r.result_pstart,
                                u64::from(r.result_len),
                                got.extent.start,
                                u64::from(got.extent.len),
                            );
                        }
                    }
                    Err(e) => {
                        rep.failed += 1;
                        rep.first_failure
                            .get_or_insert_with(|| format!("seq {}: {e}", r.stamp.seq));
                    }
                }
            }
            Record::Free(f) => {
                let pieces = placed.pieces(f.block, f.count);
                if pieces.is_empty() {
                    rep.frees_skipped += 1;
                }
                for (s, n) in pieces {
                    match free_as_captured(
                        &a,
                        f.ino,
                        Extent::new(s, n as u32),
                        mballoc::FreeFlags(f.flags),
                        f.tid,
                    ) {
                        Ok(()) => rep.frees_applied += 1,
                        Err(_) => rep.free_errors += 1,
                    }
                }
            }
            Record::Commit(c) if c.phase == CommitPhase::EndCommit => {
                let _ = a.commit_transaction(c.tid);
            }
            Record::DiscardInodePas(d) => {
                a.discard_preallocations(d.ino);
            }
            _ => {}
        }
    }
    a.commit().map_err(alloc_err)?;
    let space = end_state(&a)?;
    Ok(ImageReplayReport {
        case: case.name.clone(),
        image: img.path().display().to_string(),
        tunables: policy.map_or_else(|| "the capture's".into(), |p| p.name().to_string()),
        counts: rep,
        free_before,
        free_after: a.free_blocks(),
        frag_pct: fsperf_frag(&space),
        free_extents: super::view::free_extents(&space, None)?,
        mb_groups: a.mb_groups().map_err(alloc_err)?,
    })
}

/// The committed bitmaps after the stream; a group that failed to load counts as full.
fn end_state(a: &Allocator) -> Result<FreeSpace, ImageError> {
    let geo = a.geometry();
    let groups: Vec<Vec<(u32, u32)>> = (0..geo.group_count())
        .map(|g| match a.disk_bitmap(g) {
            Ok(b) => b.zero_runs(0, geo.group_len(g)).collect(),
            Err(_) => Vec::new(),
        })
        .collect();
    Ok(FreeSpace::from_extents(
        &groups,
        geo.clusters_per_group(),
        geo.block_size(),
    )?)
}
