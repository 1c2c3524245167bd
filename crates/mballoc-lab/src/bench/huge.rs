//! A huge aged filesystem: 16 TiB (131,072 groups of 32,768 4 KiB blocks) at ~75 % use with
//! fragmented free space, generated on demand by [`AgedSource`], opened lazily behind a
//! bounded group cache. Measures time to open and to the first allocation, per-criterion
//! latency (p50/p99/max), groups scanned per request, and resident memory.
//!
//! Workload: 64 files appending at once (each request aimed at the end of its file's last
//! extent, 1–256 blocks, normal data flags so streams get inode preallocations); a file is
//! closed and a new one started at a random place every 32 requests on average.

use std::collections::BTreeMap;
use std::time::Instant;

use mballoc::{Allocator, Criterion, Geometry, Policy, Request};
use serde::Serialize;

use super::aged_source::AgedSource;
use super::rng::Rng;
use super::BenchError;
use crate::metrics::latency::{latency_stats, LatencyStats};

#[derive(Debug, Clone, Serialize)]
pub struct HugeConfig {
    pub fs_bytes: u64,
    pub requests: u32,
    pub files: u32,
    /// Most groups kept loaded (`Builder::cache_groups`).
    pub cache_groups: u32,
    pub seed: u64,
    /// Tunables set on top of each policy (`--set name=value`).
    pub settings: Vec<String>,
}

impl HugeConfig {
    pub fn full() -> HugeConfig {
        HugeConfig {
            fs_bytes: 16 << 40,
            requests: 50_000,
            files: 64,
            cache_groups: 1024,
            seed: 0x4147_4544,
            settings: Vec::new(),
        }
    }
    pub fn quick() -> HugeConfig {
        HugeConfig {
            fs_bytes: 1 << 40,
            requests: 2_000,
            cache_groups: 256,
            ..HugeConfig::full()
        }
    }
}

/// Resident memory of this process (`/proc/self/status`), KiB; zeros where unavailable.
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct Memory {
    pub vm_rss_kib: u64,
    pub vm_hwm_kib: u64,
}

pub fn memory() -> Memory {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    Memory {
        vm_rss_kib: field("VmRSS:"),
        vm_hwm_kib: field("VmHWM:"),
    }
}

/// One policy's run.
#[derive(Debug, Clone, Serialize)]
pub struct HugeSystem {
    pub system: String,
    /// Median request latency (the common `ns_per_op` figure).
    pub ns_per_op: f64,
    pub ratio_vs: BTreeMap<String, f64>,
    pub open_ms: f64,
    pub first_alloc_us: f64,
    pub all: LatencyStats,
    /// Latency per criterion that satisfied the request (`Allocation::criterion`).
    pub by_criterion: BTreeMap<String, LatencyStats>,
    pub groups_scanned_mean: f64,
    pub groups_scanned_p99: f64,
    pub groups_scanned_max: u32,
    pub loaded_groups: u32,
    pub cache_groups: u32,
    pub evictions: u64,
    pub bitmap_loads: u64,
    pub fill_pct: f64,
    pub memory_before_open: Memory,
    pub memory_after_open: Memory,
    pub memory_after_run: Memory,
}

#[derive(Debug, Clone, Serialize)]
pub struct HugeReport {
    pub config: HugeConfig,
    pub groups: u32,
    pub systems: Vec<HugeSystem>,
}

/// A file being appended to.
struct Stream {
    owner: u64,
    logical: u32,
    end: u64,
}

fn new_stream(owner: u64, rng: &mut Rng, blocks: u64) -> Stream {
    Stream {
        owner,
        logical: 0,
        end: rng.below(blocks),
    }
}

fn request(s: &Stream, len: u32) -> Request {
    let mut r = Request::new(s.owner, s.logical, len)
        .with_goal(s.end)
        .with_i_size(u64::from(s.logical + len) * 4096);
    if s.logical > 0 {
        r = r.with_left(s.logical - 1, s.end - 1);
    }
    r
}

pub fn run_huge(cfg: &HugeConfig, policies: &[Policy]) -> Result<HugeReport, BenchError> {
    let geo = Geometry::ext4_default(cfg.fs_bytes)?;
    let mut systems = Vec::new();
    for &p in policies {
        systems.push(run_one(cfg, geo, p)?);
    }
    super::fill_ratios(
        &mut systems,
        |s| (&s.system, s.ns_per_op),
        |s| &mut s.ratio_vs,
    );
    Ok(HugeReport {
        config: cfg.clone(),
        groups: geo.group_count(),
        systems,
    })
}

fn run_one(cfg: &HugeConfig, geo: Geometry, p: Policy) -> Result<HugeSystem, BenchError> {
    let memory_before_open = memory();
    let t = Instant::now();
    let a = Allocator::builder(geo)
        .lazy(true)
        .cpus(1)
        .tunables(super::tunables(p, &geo, 1, &cfg.settings)?)
        .cache_groups(cfg.cache_groups)
        .source(Box::new(AgedSource::new(geo, cfg.seed)))
        .build()?;
    let open_ms = t.elapsed().as_secs_f64() * 1e3;
    let memory_after_open = memory();
    let fill_pct = 100.0 * (1.0 - a.free_blocks() as f64 / geo.blocks_count() as f64);
    let mut rng = Rng::new(cfg.seed);
    let mut files: Vec<Stream> = (0..cfg.files)
        .map(|i| new_stream(100 + u64::from(i), &mut rng, geo.blocks_count()))
        .collect();
    let mut next_owner = 100 + u64::from(cfg.files);
    let (mut lat, mut scanned) = (Vec::new(), Vec::new());
    let mut tagged: BTreeMap<Criterion, Vec<u64>> = BTreeMap::new();
    let mut first_alloc_us = 0.0;
    for i in 0..cfg.requests {
        let f = rng.below(files.len() as u64) as usize;
        if rng.below(32) == 0 {
            a.discard_preallocations(files[f].owner);
            files[f] = new_stream(next_owner, &mut rng, geo.blocks_count());
            next_owner += 1;
        }
        let len = rng.range_inclusive(1, 256);
        let req = request(&files[f], len);
        let t = Instant::now();
        let got = a.allocate(&req)?;
        let ns = t.elapsed().as_nanos() as u64;
        if i == 0 {
            first_alloc_us = ns as f64 / 1e3;
        }
        lat.push(ns);
        scanned.push(got.groups_scanned);
        tagged.entry(got.criterion).or_default().push(ns);
        let s = &mut files[f];
        s.logical += got.extent.len;
        s.end = got.extent.end() % geo.blocks_count();
    }
    let memory_after_run = memory();
    let st = a.stats();
    let all = latency_stats(&lat);
    let mut sc: Vec<f64> = scanned.iter().map(|&v| f64::from(v)).collect();
    sc.sort_by(f64::total_cmp);
    Ok(HugeSystem {
        system: format!("mballoc/{}", p.name()),
        ns_per_op: all.ns_p50,
        ratio_vs: BTreeMap::new(),
        open_ms,
        first_alloc_us,
        by_criterion: tagged
            .iter()
            .map(|(c, v)| (c.name().to_string(), latency_stats(v)))
            .collect(),
        all,
        groups_scanned_mean: sc.iter().sum::<f64>() / sc.len().max(1) as f64,
        groups_scanned_p99: crate::metrics::quantile::quantile_r7(&sc, 0.99),
        groups_scanned_max: scanned.iter().copied().max().unwrap_or(0),
        loaded_groups: a.loaded_groups(),
        cache_groups: cfg.cache_groups,
        evictions: st.evictions,
        bitmap_loads: st.bitmap_loads,
        fill_pct,
        memory_before_open,
        memory_after_open,
        memory_after_run,
    })
}
