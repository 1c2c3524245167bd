//! What one fio I/O costs on simulated time: measured, not chosen.
//!
//! * A `falloc` I/O of a job measured inside its test costs a latency drawn (seeded) from that
//!   job's distribution: fio's clat percentile table in the test as a multiple of its mean
//!   (`kernel-frag/service-times/in-test-shape.json`), times the job's mean latency there
//!   carried to the reference runs' pace (`in-test.json`; by the appenders' runtime, or by the
//!   test's wall time in a test without appenders); the draw keeps that mean.
//!   `falloc_spread=0` charges the mean itself.
//! * A `falloc` I/O of a job not measured in its test costs fio's mean latency (`lat_ns`) for its
//!   call size run alone, and a loop boundary
//!   (close, unlink, create: fio times none of them) the per-loop overhead, both from
//!   `kernel-frag/service-times/falloc-latency.json`: each call size run alone by fio on a fresh
//!   8 GiB ext4 loop image (`kernel-frag/service-times/measure.py`). Sizes between two measured
//!   ones are interpolated linearly in bytes.
//! * A buffered append's `write` costs a latency drawn (seeded) from the distribution fio
//!   measured for the 32 appenders of the same test on real ext4: fio's percentile table
//!   (1st … 99.99th), each point the median over the reference runs
//!   (`kernel-frag/reference.json`). Its `fdatasync` returns when the jbd2 commit holding its
//!   changes ends ([`super::CommitClock`]): appenders that sync during one commit all return
//!   together, as real ones do. A commit's duration is drawn from fio's fdatasync distribution
//!   of the same runs, scaled by [`COMMIT_PER_FDATASYNC`]. One mean per I/O instead runs 32
//!   appenders in lockstep; independent draws per fdatasync let them drift apart at once;
//!   real ones stay grouped by the commits.
//!
//! Only the order in which jobs' I/Os interleave depends on these figures; none of them was
//! chosen by looking at the fragmentation they lead to.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::super::error::LabError;
use super::jobfile::{Engine, JobSpec};
use crate::metrics::quantile::median;

const FALLOC_LATENCY: &str =
    include_str!("../../../../../kernel-frag/service-times/falloc-latency.json");
const IN_TEST: &str = include_str!("../../../../../kernel-frag/service-times/in-test.json");
const IN_TEST_SHAPE: &str =
    include_str!("../../../../../kernel-frag/service-times/in-test-shape.json");
pub(crate) const REFERENCE: &str = include_str!("../../../../../kernel-frag/reference.json");

/// The light traces of real runs (`kernel-frag/timelines/<test>.json`): when each fallocate
/// job made its first call.
const TIMELINES: &[(&str, &str)] = &[
    (
        "bufferedappendvsfallocate",
        include_str!("../../../../../kernel-frag/timelines/bufferedappendvsfallocate.json"),
    ),
    (
        "mixedlifetimes",
        include_str!("../../../../../kernel-frag/timelines/mixedlifetimes.json"),
    ),
    (
        "foursizes",
        include_str!("../../../../../kernel-frag/timelines/foursizes.json"),
    ),
    (
        "funnysizeshigh",
        include_str!("../../../../../kernel-frag/timelines/funnysizeshigh.json"),
    ),
    (
        "funnysizeslow",
        include_str!("../../../../../kernel-frag/timelines/funnysizeslow.json"),
    ),
];

/// A jbd2 commit's duration per fdatasync latency. Set so that the lab's mean fdatasync
/// latency (`sim_fdatasync_mean_us`) matches fio's measured mean (seed 1, 8 GiB, scale 0.5):
/// 0.50 gives 0.87–0.98 of it over the five appender tests, 0.55 gives 0.97–1.08, 0.60 gives
/// 1.06–1.19. Chosen by that latency match alone (the fragmentation at 0.50 and 0.67 had been
/// seen too, and varied with the seed more than between the two).
pub const COMMIT_PER_FDATASYNC: f64 = 0.55;

#[derive(Deserialize)]
struct FallocRow {
    bs_bytes: u64,
    lat_ns_mean: f64,
    loop_overhead_ns: f64,
}

#[derive(Deserialize)]
struct FallocMeasurement {
    jobs: Vec<FallocRow>,
}

/// The service times of one test.
#[derive(Debug, Clone, PartialEq)]
pub struct Costs {
    /// `(bs, lat µs, loop overhead µs)`, sorted by `bs`.
    falloc: Vec<(u64, f64, f64)>,
    /// Mean latency of each fallocate job of this test measured inside the test (scale 0.5):
    /// job name → (call size, µs).
    in_test: BTreeMap<String, (u64, f64)>,
    /// The shape of each of those jobs' latency distribution inside the test: `(cumulative
    /// fraction, latency / mean)`, each point the median over the measurement's repetitions.
    in_test_shape: BTreeMap<String, Latency>,
    /// write and fdatasync latency of an append (`None`: the test has no appenders).
    append: Option<(Latency, Latency)>,
    /// When each fallocate job of this test makes its first call, measured in real runs
    /// (scale 0.5): call size → µs after the start.
    first_call: BTreeMap<u64, f64>,
}

/// A latency distribution: `(cumulative fraction, µs)` points, sorted; sampled by linear
/// interpolation of the inverse CDF (clamped to the outermost points).
#[derive(Debug, Clone, PartialEq)]
pub struct Latency {
    points: Vec<(f64, f64)>,
}

impl Latency {
    /// Always `us`.
    pub fn fixed(us: u64) -> Latency {
        Latency {
            points: vec![(0.0, us as f64), (1.0, us as f64)],
        }
    }

    /// From fio's `percentile` table (`"50.000000": ns`).
    fn from_fio(table: &serde_json::Value) -> Option<Latency> {
        let mut points: Vec<(f64, f64)> = table
            .as_object()?
            .iter()
            .map(|(p, ns)| Some((p.parse::<f64>().ok()? / 100.0, ns.as_f64()? / 1e3)))
            .collect::<Option<_>>()?;
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        (points.len() >= 2).then_some(Latency { points })
    }

    /// The mean of the distribution [`Self::at`] samples: the inverse CDF is piecewise linear
    /// between the points and flat beyond the outermost ones.
    pub fn mean(&self) -> f64 {
        let p = &self.points;
        let (first, last) = (p[0], p[p.len() - 1]);
        let inner: f64 = p
            .windows(2)
            .map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0)
            .sum();
        first.0 * first.1 + inner + (1.0 - last.0) * last.1
    }

    /// This shape stretched so that its mean is `mean_us`.
    pub fn with_mean(&self, mean_us: f64) -> Latency {
        let k = mean_us / self.mean().max(f64::MIN_POSITIVE);
        Latency {
            points: self.points.iter().map(|&(q, v)| (q, v * k)).collect(),
        }
    }

    /// The latency at cumulative fraction `u` in [0, 1), µs.
    pub fn at(&self, u: f64) -> u64 {
        let p = &self.points;
        let i = p.partition_point(|q| q.0 < u).clamp(1, p.len() - 1);
        let (a, b) = (p[i - 1], p[i]);
        let t = if b.0 > a.0 {
            ((u - a.0) / (b.0 - a.0)).clamp(0.0, 1.0)
        } else {
            0.0
        };
        (a.1 + t * (b.1 - a.1)).round() as u64
    }
}

/// Per repetition of the in-test measurement, how much faster the reference runs' appenders
/// went than that repetition's: the reference appenders' runtime (median of the reference
/// runs) over the repetition's appender runtime. `None` for a test without appenders or
/// without both figures.
fn appender_pace(
    jobs: &[JobSpec],
    measured: &serde_json::Value,
    reference_ms: Option<f64>,
) -> Option<Vec<f64>> {
    let appender = jobs.iter().find(|j| j.engine == Engine::Sync)?;
    let reference_ms = reference_ms.filter(|&r| r > 0.0)?;
    measured[&appender.name]["runtime_ms_per_rep"]
        .as_array()?
        .iter()
        .map(|ms| ms.as_f64().filter(|&m| m > 0.0).map(|m| reference_ms / m))
        .collect()
}

/// For a test without appenders, the same carry by the one runtime both sides have: the test's
/// wall time. Per repetition, the reference runs' fio wall time (median of the runs the lab
/// takes its inputs from, `input_reps`) over that repetition's longest job runtime. `None`
/// without both figures.
fn wall_pace(measured: &serde_json::Value, ext4: &serde_json::Value) -> Option<Vec<f64>> {
    let inputs: Vec<u64> = ext4["input_reps"]
        .as_array()?
        .iter()
        .filter_map(serde_json::Value::as_u64)
        .collect();
    let mut walls: Vec<f64> = ext4["reps"]
        .as_array()?
        .iter()
        .zip(ext4["runs"].as_array()?)
        .filter(|(rep, _)| rep.as_u64().is_some_and(|r| inputs.contains(&r)))
        .filter_map(|(_, run)| run["wall_s"].as_f64())
        .collect();
    if walls.is_empty() {
        return None;
    }
    walls.sort_by(f64::total_cmp);
    let reference_ms = median(&walls) * 1e3;
    let jobs = measured.as_object()?;
    let reps = jobs
        .values()
        .filter_map(|j| j["runtime_ms_per_rep"].as_array().map(Vec::len))
        .max()?;
    (0..reps)
        .map(|i| {
            let longest = jobs
                .values()
                .filter_map(|j| j["runtime_ms_per_rep"][i].as_f64())
                .fold(0.0, f64::max);
            (longest > 0.0).then(|| reference_ms / longest)
        })
        .collect()
}

/// A fallocate job's mean latency inside its test, µs: with `pace`, each repetition's latency
/// carried to the reference runs' pace and the median of them taken; without, the stored
/// median as measured.
fn in_test_us(job: &serde_json::Value, pace: Option<&[f64]>) -> Option<f64> {
    let per_rep = job["lat_ns_mean_per_rep"].as_array();
    match (pace, per_rep) {
        (Some(p), Some(lat)) if lat.len() == p.len() && !p.is_empty() => {
            let mut us: Vec<f64> = lat
                .iter()
                .zip(p)
                .map(|(ns, f)| Some(ns.as_f64()? / 1e3 * f))
                .collect::<Option<_>>()?;
            us.sort_by(f64::total_cmp);
            Some(median(&us))
        }
        _ => Some(job["lat_ns_mean"].as_f64()? / 1e3),
    }
}

/// When the fallocate jobs of a traced test made their first call, by call size, µs after the
/// appenders' first fdatasync: each run's time carried to the reference runs' pace (the
/// reference appenders' runtime over that run's, as [`in_test_us`] does for latencies; as
/// measured without a reference runtime), then the median over the runs. The first call comes
/// later the larger the call (fio sets up a job's `bs`-sized I/O buffer before its first I/O):
/// real foursizes' 1 GiB job starts seconds after the others. A call size shared by several
/// jobs gives them all its first call.
fn first_calls(timeline: &serde_json::Value, reference_ms: Option<f64>) -> BTreeMap<u64, f64> {
    let runs = timeline["runs"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let mut per_bs: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for run in runs {
        let pace = reference_ms
            .zip(run["appender_runtime_ms"][0].as_f64())
            .filter(|&(r, m)| r > 0.0 && m > 0.0)
            .map_or(1.0, |(r, m)| r / m);
        let Some(jobs) = run["falloc_by_call_bytes"].as_object() else {
            continue;
        };
        for (bs, job) in jobs {
            if let (Ok(bs), Some(s)) = (bs.parse::<u64>(), job["first_s"].as_f64()) {
                per_bs.entry(bs).or_default().push(s.max(0.0) * 1e6 * pace);
            }
        }
    }
    per_bs
        .into_iter()
        .map(|(bs, mut us)| {
            us.sort_by(f64::total_cmp);
            (bs, median(&us))
        })
        .collect()
}

/// A job's latency shape from its repetitions (`clat_over_mean_per_rep`: one fio percentile
/// table per repetition, each point a multiple of that repetition's mean): per percentile the
/// median over the repetitions that have it.
fn median_shape(per_rep: &serde_json::Value) -> Option<Latency> {
    let reps: Vec<&serde_json::Map<String, serde_json::Value>> = per_rep
        .as_array()?
        .iter()
        .filter_map(serde_json::Value::as_object)
        .collect();
    let mut points: Vec<(f64, f64)> = reps
        .first()?
        .keys()
        .map(|p| {
            let mut v: Vec<f64> = reps.iter().filter_map(|r| r.get(p)?.as_f64()).collect();
            v.sort_by(f64::total_cmp);
            Some((p.parse::<f64>().ok()? / 100.0, median(&v)))
        })
        .collect::<Option<_>>()?;
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let monotone = points.windows(2).all(|w| w[0].1 <= w[1].1);
    (points.len() >= 2 && monotone && points.iter().all(|p| p.1 > 0.0))
        .then_some(Latency { points })
}

fn parse_err(what: &str, e: impl ToString) -> LabError {
    LabError::bad(what, "", e)
}

impl Costs {
    /// The stored measurements for `test`.
    pub fn measured(test: &str) -> Result<Costs, LabError> {
        let m: FallocMeasurement = serde_json::from_str(FALLOC_LATENCY)
            .map_err(|e| parse_err("falloc-latency.json", e))?;
        let mut falloc: Vec<(u64, f64, f64)> = m
            .jobs
            .iter()
            .map(|r| (r.bs_bytes, r.lat_ns_mean / 1e3, r.loop_overhead_ns / 1e3))
            .collect();
        falloc.sort_by_key(|r| r.0);
        if falloc.len() < 2 {
            return Err(parse_err(
                "falloc-latency.json",
                "needs at least two call sizes",
            ));
        }
        let reference: serde_json::Value =
            serde_json::from_str(REFERENCE).map_err(|e| parse_err("reference.json", e))?;
        let med = &reference["tests"][test]["ext4"]["median"];
        let append = Latency::from_fio(&med["append_write_clat_ns_pct"])
            .zip(Latency::from_fio(&med["append_sync_lat_ns_pct"]));
        let in_test_json: serde_json::Value =
            serde_json::from_str(IN_TEST).map_err(|e| parse_err("in-test.json", e))?;
        let half = super::jobs_of(test, 0.5)?;
        let measured = &in_test_json["tests"][test];
        let pace = appender_pace(&half.jobs, measured, med["append_runtime_ms"].as_f64())
            .or_else(|| wall_pace(measured, &reference["tests"][test]["ext4"]));
        let in_test = half
            .jobs
            .iter()
            .filter(|j| j.engine == Engine::Falloc)
            .filter_map(|j| {
                let us = in_test_us(&measured[&j.name], pace.as_deref())?;
                Some((j.name.clone(), (j.bs, us)))
            })
            .collect();
        let shapes: serde_json::Value =
            serde_json::from_str(IN_TEST_SHAPE).map_err(|e| parse_err("in-test-shape.json", e))?;
        let in_test_shape = half
            .jobs
            .iter()
            .filter(|j| j.engine == Engine::Falloc)
            .filter_map(|j| {
                let per_rep = &shapes["tests"][test][&j.name]["clat_over_mean_per_rep"];
                Some((j.name.clone(), median_shape(per_rep)?))
            })
            .collect();
        let first_call = match TIMELINES.iter().find(|t| t.0 == test) {
            Some((_, text)) => first_calls(
                &serde_json::from_str(text).map_err(|e| parse_err("timelines", e))?,
                med["append_runtime_ms"].as_f64(),
            ),
            None => BTreeMap::new(),
        };
        Ok(Costs {
            falloc,
            in_test,
            in_test_shape,
            append,
            first_call,
        })
    }

    /// Given figures: `(bs, lat µs, loop overhead µs)` rows and `(write, fdatasync)` µs.
    #[cfg(test)]
    pub(crate) fn fixed(falloc: &[(u64, f64, f64)], append_us: Option<(u64, u64)>) -> Costs {
        Costs {
            falloc: falloc.to_vec(),
            in_test: BTreeMap::new(),
            in_test_shape: BTreeMap::new(),
            append: append_us.map(|(w, s)| (Latency::fixed(w), Latency::fixed(s))),
            first_call: BTreeMap::new(),
        }
    }

    /// Linear interpolation of column `col` at `bs` (extrapolated from the two nearest sizes).
    fn interpolate(&self, bs: u64, col: fn(&(u64, f64, f64)) -> f64) -> f64 {
        let i = self
            .falloc
            .partition_point(|r| r.0 < bs)
            .clamp(1, self.falloc.len() - 1);
        let (a, b) = (&self.falloc[i - 1], &self.falloc[i]);
        let t = (bs as f64 - a.0 as f64) / (b.0 as f64 - a.0 as f64);
        (col(a) + t * (col(b) - col(a))).max(0.0)
    }

    /// One `fallocate` of `bs` bytes, µs, measured alone.
    pub fn falloc_us(&self, bs: u64) -> u64 {
        self.interpolate(bs, |r| r.1).round() as u64
    }

    /// One `fallocate` of `bs` bytes by job `job` of this test, µs: as measured inside the
    /// test when it was measured there with that call size (the job then shares the CPUs
    /// with the others), else [`Self::falloc_us`].
    pub fn falloc_job_us(&self, job: &str, bs: u64) -> u64 {
        match self.in_test.get(job) {
            Some(&(b, us)) if b == bs => us.round() as u64,
            _ => self.falloc_us(bs),
        }
    }

    /// What one `fallocate` of `bs` bytes by job `job` costs: with `spread`, drawn from the
    /// job's distribution measured inside the test, stretched to the mean of
    /// [`Self::falloc_job_us`]; else (or where no distribution was measured) that mean.
    pub fn falloc_job(&self, job: &str, bs: u64, spread: bool) -> Latency {
        let mean = self.falloc_job_us(job, bs);
        match self.in_test_shape.get(job) {
            Some(shape) if spread && self.in_test.get(job).is_some_and(|m| m.0 == bs) => {
                shape.with_mean(mean as f64)
            }
            _ => Latency::fixed(mean),
        }
    }

    /// When a fallocate job whose calls are `bs` bytes makes its first call, µs after the
    /// start: as measured in real runs of this test when they had that call size, else 0
    /// (every job starting at once).
    pub fn falloc_start_us(&self, bs: u64) -> u64 {
        self.first_call.get(&bs).map_or(0, |us| us.round() as u64)
    }

    /// A loop boundary of a job whose calls are `bs` bytes, µs.
    pub fn loop_us(&self, bs: u64) -> u64 {
        self.interpolate(bs, |r| r.2).round() as u64
    }

    /// One buffered append: the write and the fdatasync latency; an error for a test whose
    /// reference runs had no appenders.
    pub fn append(&self, test: &str) -> Result<(Latency, Latency), LabError> {
        self.append.clone().ok_or_else(|| {
            LabError::bad(
                "workload",
                test,
                "no measured append latency in kernel-frag/reference.json",
            )
        })
    }

    /// How long one jbd2 commit takes. Under group commit an fdatasync waits for the rest of
    /// the commit in progress and then a whole one, so a commit lasts about half an
    /// fdatasync: fio's measured fdatasync distribution × [`COMMIT_PER_FDATASYNC`]
    /// (0 without appenders).
    pub fn commit(&self) -> Latency {
        match &self.append {
            Some((_, sync)) => Latency {
                points: sync
                    .points
                    .iter()
                    .map(|&(q, us)| (q, us * COMMIT_PER_FDATASYNC))
                    .collect(),
            },
            None => Latency::fixed(0),
        }
    }

    /// For the run's detail output.
    pub fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "falloc_lat_us_by_bs": self.falloc.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(),
            "falloc_lat_us_in_test": self.in_test,
            "falloc_lat_shape_in_test": self.in_test_shape.iter()
                .map(|(k, l)| (k.clone(), l.points.clone()))
                .collect::<BTreeMap<_, _>>(),
            "falloc_first_call_us_by_bs": self.first_call,
            "loop_overhead_us_by_bs": self.falloc.iter().map(|r| (r.0, r.2)).collect::<Vec<_>>(),
            "append_write_us_by_fraction": self.append.as_ref().map(|a| &a.0.points),
            "append_fdatasync_us_by_fraction": self.append.as_ref().map(|a| &a.1.points),
            "sources": [
                "kernel-frag/service-times/falloc-latency.json",
                "kernel-frag/service-times/in-test.json",
                "kernel-frag/service-times/in-test-shape.json",
                "kernel-frag/reference.json",
                "kernel-frag/timelines/",
            ],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolation_is_linear_between_measured_sizes() {
        let c = Costs {
            falloc: vec![(1 << 20, 10.0, 100.0), (3 << 20, 30.0, 300.0)],
            in_test: BTreeMap::new(),
            in_test_shape: BTreeMap::new(),
            append: None,
            first_call: BTreeMap::new(),
        };
        assert_eq!(c.falloc_us(1 << 20), 10);
        assert_eq!(c.falloc_us(2 << 20), 20);
        assert_eq!(c.loop_us(2 << 20), 200);
        assert_eq!(c.falloc_us(5 << 20), 50); // extrapolated
        assert!(c.append("x").is_err());
        let l = Latency {
            points: vec![(0.1, 10.0), (0.5, 20.0), (0.9, 100.0)],
        };
        assert_eq!(
            (l.at(0.0), l.at(0.3), l.at(0.7), l.at(0.99)),
            (10, 15, 60, 100)
        );
        assert_eq!(Latency::fixed(7).at(0.42), 7);
    }

    /// Each repetition's fallocate latency is carried to the reference appenders' pace by the
    /// ratio of the appenders' runtimes, then the median is taken.
    #[test]
    fn in_test_latencies_follow_the_appenders_pace() {
        let job = serde_json::json!({
            "lat_ns_mean": 20_000_000.0,
            "lat_ns_mean_per_rep": [25_000_000.0, 20_000_000.0, 10_000_000.0],
        });
        // Appenders 4x, 4x and 2x slower than in the reference runs.
        let pace = [0.25, 0.25, 0.5];
        assert_eq!(in_test_us(&job, Some(&pace)), Some(5000.0));
        assert_eq!(in_test_us(&job, None), Some(20_000.0));
        assert_eq!(in_test_us(&job, Some(&pace[..2])), Some(20_000.0));
        let jobs = super::super::jobs_of("funnysizeslow", 0.5).unwrap().jobs;
        let measured = serde_json::json!({"small": {"runtime_ms_per_rep": [2000, 4000]}});
        assert_eq!(
            appender_pace(&jobs, &measured, Some(1000.0)),
            Some(vec![0.5, 0.25])
        );
        assert_eq!(appender_pace(&jobs, &measured, None), None);
        let falloc_only = super::super::jobs_of("correlatedlifetimes", 0.5)
            .unwrap()
            .jobs;
        assert_eq!(appender_pace(&falloc_only, &measured, Some(1000.0)), None);
        // funnysizeslow's stored figures: the 127 MiB calls at the reference pace.
        let c = Costs::measured("funnysizeslow").unwrap();
        let large = c.falloc_job_us("large", 127 << 20);
        assert!((7000..8500).contains(&large), "{large}");
    }

    /// A test without appenders is carried to the reference pace by its wall time: the
    /// reference input runs' median wall over each repetition's longest job.
    #[test]
    fn a_test_without_appenders_follows_its_wall_time() {
        let ext4 = serde_json::json!({
            "reps": [0, 1, 2, 3], "input_reps": [0, 1, 2],
            "runs": [{"wall_s": 4.0}, {"wall_s": 5.0}, {"wall_s": 9.0}, {"wall_s": 100.0}],
        });
        let measured = serde_json::json!({
            "a": {"runtime_ms_per_rep": [2500, 10000]},
            "b": {"runtime_ms_per_rep": [10000, 4000]},
        });
        assert_eq!(wall_pace(&measured, &ext4), Some(vec![0.5, 0.5]));
        assert_eq!(wall_pace(&measured, &serde_json::json!({})), None);
        // correlatedlifetimes' stored figures: its reference runs went about twice as fast as
        // the measurement runs, and the lab's run lasts as long as theirs.
        let c = Costs::measured("correlatedlifetimes").unwrap();
        let small = c.falloc_job_us("small-short", 128 << 10);
        assert!((8..13).contains(&small), "{small}");
    }

    /// Each run's first call is carried to the reference pace, then the median is taken per
    /// call size; foursizes' stored runs put its 1 GiB job seconds after the others.
    #[test]
    fn first_calls_follow_the_appenders_pace() {
        let run = |ms: f64, first_s: f64| {
            serde_json::json!({"appender_runtime_ms": [ms],
                "falloc_by_call_bytes": {"1024": {"first_s": first_s}}})
        };
        let timeline = serde_json::json!({"runs": [run(2000.0, 4.0), run(1000.0, 1.0),
            run(4000.0, 2.0)]});
        let at_pace = first_calls(&timeline, Some(1000.0));
        assert_eq!(at_pace.get(&1024), Some(&1e6));
        assert_eq!(first_calls(&timeline, None).get(&1024), Some(&2e6));
        let c = Costs::measured("foursizes").unwrap();
        let (huge, medium) = (c.falloc_start_us(1 << 30), c.falloc_start_us(8 << 20));
        assert!(huge > 1_000_000 && medium < 100_000, "{huge} {medium}");
        assert_eq!(c.falloc_start_us(12345), 0);
        assert!(Costs::measured("correlatedlifetimes")
            .unwrap()
            .first_call
            .is_empty());
    }

    /// A measured shape is stretched to the job's mean: the draws keep the mean that sets the
    /// job's pace, and spread around it as fio saw.
    #[test]
    fn fallocate_latencies_spread_around_the_measured_mean() {
        let l = Latency {
            points: vec![(0.0, 1.0), (0.5, 1.0), (1.0, 3.0)],
        };
        assert!((l.mean() - 1.5).abs() < 1e-12);
        assert!((l.with_mean(300.0).mean() - 300.0).abs() < 1e-9);
        let per_rep = serde_json::json!([
            {"1.000000": 0.5, "50.000000": 0.9, "99.000000": 3.0},
            {"1.000000": 0.7, "50.000000": 1.0, "99.000000": 2.0},
            null,
            {"1.000000": 0.6, "50.000000": 1.1, "99.000000": 4.0},
        ]);
        let shape = median_shape(&per_rep).unwrap();
        assert_eq!(shape.points, vec![(0.01, 0.6), (0.5, 1.0), (0.99, 3.0)]);
        assert!(median_shape(&serde_json::json!([{"1.0": 2.0, "50.0": 1.0}])).is_none());
        // Every fallocate job of every test has a stored shape; its draws average its mean.
        for t in &super::super::TESTS {
            let c = Costs::measured(t.name).unwrap();
            let half = super::super::jobs_of(t.name, 0.5).unwrap();
            for j in half.jobs.iter().filter(|j| j.engine == Engine::Falloc) {
                let mean = c.falloc_job_us(&j.name, j.bs) as f64;
                let spread = c.falloc_job(&j.name, j.bs, true);
                assert!(spread.points.len() > 2, "{} {}", t.name, j.name);
                let n = 100_000;
                let avg = (0..n)
                    .map(|i| spread.at((f64::from(i) + 0.5) / f64::from(n)) as f64)
                    .sum::<f64>()
                    / f64::from(n);
                assert!(
                    (avg / mean - 1.0).abs() < 0.01,
                    "{} {} {avg} {mean}",
                    t.name,
                    j.name
                );
                assert_eq!(
                    c.falloc_job(&j.name, j.bs, false),
                    Latency::fixed(mean as u64)
                );
            }
        }
    }

    #[test]
    fn every_fsperf_test_has_its_measurements() {
        for t in &super::super::TESTS {
            let c = Costs::measured(t.name).unwrap();
            assert!(c.falloc_us(128 << 10) > 0);
            assert!(c.falloc_us(128 << 20) > c.falloc_us(128 << 10));
            if t.name != "correlatedlifetimes" {
                let (w, s) = c.append(t.name).unwrap();
                assert!(w.at(0.5) > 0 && s.at(0.5) > w.at(0.01), "{}", t.name);
            }
        }
    }
}
