//! The churn benchmark: a space of 2^24 units; 50,000 live allocations
//! of uniform 1–256 units; then 200,000 pairs of (free a random live allocation, allocate a
//! new one). Timed: the pairs only, RNG and bookkeeping included, no warm-up.

use std::time::Instant;

use serde::Serialize;

use super::frag::{complement, summarise, FragSummary};
use super::peer::{RangeAlloc, Run};
use super::peers::{Driver, System};
use super::rng::Rng;
use super::BenchError;

/// Parameters of one churn run.
#[derive(Debug, Clone, Serialize)]
pub struct ChurnConfig {
    /// Units in the space (2^24; blocks of 4 KiB for mballoc and libext2fs).
    pub size: u64,
    /// Units per ext4 group (mballoc, libext2fs, and the fragmentation report).
    pub per_group: u32,
    pub prefill: u32,
    pub pairs: u32,
    pub max_len: u32,
    pub seed: u64,
    /// mballoc commits after this many frees (a journal commit).
    pub commit_every: u32,
    /// Tunables set on top of each mballoc policy (`--set name=value`).
    pub settings: Vec<String>,
}

impl ChurnConfig {
    /// The specification's sizes.
    pub fn full() -> ChurnConfig {
        ChurnConfig {
            size: 1 << 24,
            per_group: 32768,
            prefill: 50_000,
            pairs: 200_000,
            max_len: 256,
            seed: 0x006d_6261_6c6c_6f63,
            commit_every: 64,
            settings: Vec::new(),
        }
    }
    /// A variant that runs in well under a second, even unoptimised (tests).
    pub fn quick() -> ChurnConfig {
        ChurnConfig {
            size: 1 << 20,
            prefill: 3_000,
            pairs: 5_000,
            ..ChurnConfig::full()
        }
    }
}

/// What one run of one system measured.
#[derive(Debug, Clone)]
pub struct ChurnRun {
    pub ns_per_pair: f64,
    pub allocations: u64,
    pub extents: u64,
    /// Free runs at the end (the system's own view, or the live set's complement).
    pub free: Vec<Run>,
}

/// Runs the churn once on `p`.
pub fn churn_once<P: RangeAlloc>(p: &mut P, cfg: &ChurnConfig) -> Result<ChurnRun, BenchError> {
    let mut rng = Rng::new(cfg.seed);
    let mut live: Vec<P::Handle> = Vec::with_capacity(cfg.prefill as usize + 1);
    let (mut goal, mut extents) = (0u64, 0u64);
    for _ in 0..cfg.prefill {
        let len = rng.range_inclusive(1, cfg.max_len);
        let h = alloc(p, len, goal, live.len())?;
        (goal, extents) = account(p, &h, extents);
        live.push(h);
    }
    let t = Instant::now();
    for _ in 0..cfg.pairs {
        let i = rng.below(live.len() as u64) as usize;
        p.free(live.swap_remove(i))?;
        let len = rng.range_inclusive(1, cfg.max_len);
        let h = alloc(p, len, goal, live.len())?;
        (goal, extents) = account(p, &h, extents);
        live.push(h);
    }
    let ns_per_pair = t.elapsed().as_nanos() as f64 / f64::from(cfg.pairs.max(1));
    p.settle();
    let used: Vec<Run> = live
        .iter()
        .flat_map(|h| p.runs(h).iter().collect::<Vec<_>>())
        .collect();
    check_disjoint(&p.name(), &used, cfg.size)?;
    let free = match p.free_runs() {
        Some(f) => f,
        None => complement(used, cfg.size),
    };
    Ok(ChurnRun {
        ns_per_pair,
        allocations: u64::from(cfg.prefill) + u64::from(cfg.pairs),
        extents,
        free,
    })
}

fn alloc<P: RangeAlloc>(
    p: &mut P,
    len: u32,
    goal: u64,
    live: usize,
) -> Result<P::Handle, BenchError> {
    p.alloc(len, goal)?.ok_or_else(|| BenchError::NoSpace {
        system: p.name(),
        len,
        live,
    })
}

/// The next goal (end of this allocation's last run) and the running extent count.
#[inline]
fn account<P: RangeAlloc>(p: &P, h: &P::Handle, extents: u64) -> (u64, u64) {
    let r = p.runs(h);
    let last = r.more.last().copied().unwrap_or(r.first);
    (last.0 + u64::from(last.1), extents + r.count() as u64)
}

/// Every live run lies inside the space and no two overlap (the harness's own safety check).
pub fn check_disjoint(system: &str, used: &[Run], size: u64) -> Result<(), BenchError> {
    let mut v = used.to_vec();
    v.sort_unstable();
    let bad = |a: Run, b: Run| BenchError::Overlap {
        system: system.to_string(),
        a,
        b,
        size,
    };
    for w in v.windows(2) {
        if w[0].0 + u64::from(w[0].1) > w[1].0 {
            return Err(bad(w[0], w[1]));
        }
    }
    match v.last() {
        Some(&l) if l.0 + u64::from(l.1) > size || l.1 == 0 => Err(bad(l, l)),
        _ => Ok(()),
    }
}

/// One system's churn result over all runs.
#[derive(Debug, Clone, Serialize)]
pub struct ChurnSystem {
    pub system: String,
    /// Median ns per free+allocate pair.
    pub ns_per_op: f64,
    pub runs_ns: Vec<f64>,
    /// This system's median divided by each other system's (below 1 = faster).
    pub ratio_vs: std::collections::BTreeMap<String, f64>,
    pub extents_per_alloc: f64,
    pub fragmentation: FragSummary,
}

/// The churn benchmark's report.
#[derive(Debug, Clone, Serialize)]
pub struct ChurnReport {
    pub config: ChurnConfig,
    pub runs: u32,
    pub systems: Vec<ChurnSystem>,
    /// Systems not run, with the reason.
    pub skipped: std::collections::BTreeMap<String, String>,
}

struct Once<'a>(&'a ChurnConfig);

impl Driver<ChurnRun> for Once<'_> {
    fn drive<P: RangeAlloc>(&mut self, p: &mut P) -> Result<ChurnRun, BenchError> {
        churn_once(p, self.0)
    }
}

/// Runs every available system `runs` times, interleaved (run 1 of each, then run 2 …) so that
/// slow drifts of the machine hit every system alike.
pub fn run_churn(
    cfg: &ChurnConfig,
    systems: &[System],
    runs: u32,
) -> Result<ChurnReport, BenchError> {
    let mut skipped = std::collections::BTreeMap::new();
    let live: Vec<System> = systems
        .iter()
        .copied()
        .filter(|s| match s.unavailable() {
            Some(why) => {
                skipped.insert(s.name(), why.to_string());
                false
            }
            None => true,
        })
        .collect();
    let mut all: Vec<Vec<ChurnRun>> = vec![Vec::new(); live.len()];
    for _ in 0..runs.max(1) {
        for (i, s) in live.iter().enumerate() {
            let r = s.with(
                cfg.size,
                cfg.per_group,
                cfg.commit_every,
                &cfg.settings,
                &mut Once(cfg),
            )?;
            all[i].push(r);
        }
    }
    let mut out = Vec::new();
    for (s, rs) in live.iter().zip(&all) {
        let last = rs.last().expect("at least one run");
        out.push(ChurnSystem {
            system: s.name(),
            ns_per_op: super::median(&rs.iter().map(|r| r.ns_per_pair).collect::<Vec<_>>()),
            runs_ns: rs.iter().map(|r| r.ns_per_pair.round()).collect(),
            ratio_vs: Default::default(),
            extents_per_alloc: last.extents as f64 / last.allocations.max(1) as f64,
            fragmentation: summarise(&last.free, cfg.size, cfg.per_group, 4096)?,
        });
    }
    super::fill_ratios(&mut out, |s| (&s.system, s.ns_per_op), |s| &mut s.ratio_vs);
    Ok(ChurnReport {
        config: cfg.clone(),
        runs: runs.max(1),
        systems: out,
        skipped,
    })
}
