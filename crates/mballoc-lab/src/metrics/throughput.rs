//! M1 — throughput with will-it-scale semantics.
//!
//! will-it-scale (`main.c`) samples every task's operation counter once per ~1 s interval,
//! discards the first six samples (`WARMUP_ITERATIONS = 5`, a sample counts only when its index
//! `k > 5`), and prints `average = Σ_measured Σ_tasks ops / S` — total ops per interval across all
//! tasks. Intel LKP's parser divides that by the task count (`per_process_ops` /
//! `per_thread_ops`, here `per_task_ops`), and `runtest.py` reports `linear = T · average(1)`,
//! hence `scalability = average(T) / (T · average(1))`. Baokun Li's container runs report the
//! mean per-instance rate, which is `per_task_ops` again.

use super::error::MetricsError;
use serde::Serialize;

/// will-it-scale's six warm-up samples (indices 0..=5 are dropped).
pub const WIS_WARMUP_SAMPLES: usize = 6;

/// Sampling parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WisConfig {
    /// Leading samples to drop (will-it-scale: 6).
    pub warmup_samples: usize,
    /// Seconds per sample; will-it-scale assumes exactly 1 and so does its `average`.
    pub interval_secs: f64,
}

impl Default for WisConfig {
    fn default() -> Self {
        Self {
            warmup_samples: WIS_WARMUP_SAMPLES,
            interval_secs: 1.0,
        }
    }
}

/// Throughput of one run with `tasks` tasks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Throughput {
    /// Number of tasks (threads).
    pub tasks: usize,
    /// Measured samples `S` (0 for a run given as totals).
    pub samples_measured: usize,
    /// Aggregate rate: will-it-scale's `average`, ops/s summed over tasks.
    pub ops_per_sec: f64,
    /// `ops_per_sec / tasks` — LKP's `per_thread_ops`, Baokun's "ops/s per container".
    pub per_task_ops: f64,
    /// Each task's own mean rate over the measured window.
    pub per_task_ops_per_sec: Vec<f64>,
    /// Slowest task's rate.
    pub min_task_ops_per_sec: f64,
    /// Fastest task's rate.
    pub max_task_ops_per_sec: f64,
}

/// Throughput from per-interval operation counts: `ops[k][t]` = operations task `t` completed
/// during interval `k` (will-it-scale's per-task `diff`).
pub fn wis_throughput(ops: &[Vec<u64>], cfg: &WisConfig) -> Result<Throughput, MetricsError> {
    if !(cfg.interval_secs.is_finite() && cfg.interval_secs > 0.0) {
        return Err(MetricsError::BadInterval(cfg.interval_secs));
    }
    if ops.len() <= cfg.warmup_samples {
        return Err(MetricsError::NotEnoughSamples {
            warmup: cfg.warmup_samples,
            got: ops.len(),
        });
    }
    let tasks = check_rectangular(ops)?;
    let measured = &ops[cfg.warmup_samples..];
    let secs = measured.len() as f64 * cfg.interval_secs;
    let per_task: Vec<f64> = (0..tasks)
        .map(|t| measured.iter().map(|s| s[t] as f64).sum::<f64>() / secs)
        .collect();
    Ok(summarise(tasks, measured.len(), per_task))
}

/// Converts cumulative counter readings (`counters[k][t]`, as will-it-scale reads its shared
/// counters; the reading before sample 0 is 0) into per-interval counts.
pub fn intervals_from_cumulative(counters: &[Vec<u64>]) -> Result<Vec<Vec<u64>>, MetricsError> {
    let tasks = check_rectangular(counters)?;
    let mut prev = vec![0u64; tasks];
    let mut out = Vec::with_capacity(counters.len());
    for (k, row) in counters.iter().enumerate() {
        let mut diffs = Vec::with_capacity(tasks);
        for (t, (&now, before)) in row.iter().zip(prev.iter_mut()).enumerate() {
            let d = now
                .checked_sub(*before)
                .ok_or(MetricsError::CounterWentBackwards { task: t, sample: k })?;
            diffs.push(d);
            *before = now;
        }
        out.push(diffs);
    }
    Ok(out)
}

/// Throughput of a run known only by per-task totals over `elapsed_ns` (no warm-up handling).
pub fn throughput_from_totals(
    ops_per_task: &[u64],
    elapsed_ns: u64,
) -> Result<Throughput, MetricsError> {
    if ops_per_task.is_empty() || elapsed_ns == 0 {
        return Err(MetricsError::EmptyRun);
    }
    let secs = elapsed_ns as f64 / 1e9;
    let per_task = ops_per_task.iter().map(|&o| o as f64 / secs).collect();
    Ok(summarise(ops_per_task.len(), 0, per_task))
}

fn check_rectangular(rows: &[Vec<u64>]) -> Result<usize, MetricsError> {
    let tasks = rows.first().map_or(0, Vec::len);
    if tasks == 0 {
        return Err(MetricsError::EmptyRun);
    }
    for (k, row) in rows.iter().enumerate() {
        if row.len() != tasks {
            return Err(MetricsError::RaggedSamples {
                sample: k,
                expected: tasks,
                got: row.len(),
            });
        }
    }
    Ok(tasks)
}

fn summarise(tasks: usize, samples: usize, per_task: Vec<f64>) -> Throughput {
    let ops_per_sec: f64 = per_task.iter().sum();
    let min = per_task.iter().copied().fold(f64::INFINITY, f64::min);
    let max = per_task.iter().copied().fold(0.0, f64::max);
    Throughput {
        tasks,
        samples_measured: samples,
        ops_per_sec,
        per_task_ops: ops_per_sec / tasks as f64,
        per_task_ops_per_sec: per_task,
        min_task_ops_per_sec: min,
        max_task_ops_per_sec: max,
    }
}

/// One point of a task-count sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScalingPoint {
    /// Task count `T`.
    pub tasks: usize,
    /// will-it-scale `average` at `T`.
    pub ops_per_sec: f64,
    /// `ops_per_sec / T`.
    pub per_task_ops: f64,
    /// `runtest.py`'s `linear = T · average(1)`.
    pub linear: f64,
    /// `average(T) / linear`; 1.0 is perfect scaling.
    pub scalability: f64,
}

/// A sweep over task counts (runtest.py / LKP).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scaling {
    /// Points sorted by task count.
    pub points: Vec<ScalingPoint>,
    /// LKP: mean of `per_task_ops` over all task counts.
    pub per_task_ops_mean: f64,
    /// LKP `workload`: Σ of the totals.
    pub workload: f64,
}

/// Builds the sweep from `(tasks, ops_per_sec)` pairs; one point must have `tasks == 1`.
pub fn scaling(points: &[(usize, f64)]) -> Result<Scaling, MetricsError> {
    let base = points
        .iter()
        .find(|p| p.0 == 1)
        .map(|p| p.1)
        .ok_or(MetricsError::MissingSingleTaskPoint)?;
    let mut sorted = points.to_vec();
    sorted.sort_by_key(|p| p.0);
    let out: Vec<ScalingPoint> = sorted
        .iter()
        .filter(|p| p.0 > 0)
        .map(|&(tasks, ops)| scaling_point(tasks, ops, base))
        .collect();
    let per_task_ops_mean =
        out.iter().map(|p| p.per_task_ops).sum::<f64>() / out.len().max(1) as f64;
    let workload = out.iter().map(|p| p.ops_per_sec).sum();
    Ok(Scaling {
        points: out,
        per_task_ops_mean,
        workload,
    })
}

fn scaling_point(tasks: usize, ops_per_sec: f64, base: f64) -> ScalingPoint {
    let linear = tasks as f64 * base;
    ScalingPoint {
        tasks,
        ops_per_sec,
        per_task_ops: ops_per_sec / tasks as f64,
        linear,
        scalability: if linear > 0.0 {
            ops_per_sec / linear
        } else {
            0.0
        },
    }
}
