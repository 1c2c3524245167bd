//! The `aging` workload (W14): ages a fresh file system with the Geriatrix-style pass of
//! [`super::aging`] and measures the aged state (M2, M4, M7, M9).

use std::time::Instant;

use serde_json::json;

use super::aging::{age, AgingPlan};
use super::error::LabError;
use super::measure::Output;
use super::setup::{build, Env, FsSpec};
use super::{Progress, RunConfig};
use crate::metrics::xfs::xfs_freesp;

/// The spec of the `aging` workload's file system.
pub const SPEC: FsSpec = FsSpec::sized(2 << 30, 16 << 30);

/// The `aging` workload: age to `age=U` (default 0.8) with 0.5× (laptop) or 4× (full) churn
/// and measure the aged state.
pub fn run(cfg: &RunConfig, progress: &dyn Progress) -> Result<(Env, Output), LabError> {
    let mut plain = cfg.clone();
    let util = super::settings::LabSettings::parse(&cfg.settings)?
        .age
        .unwrap_or(0.8);
    plain
        .settings
        .retain(|s| !s.trim_start().starts_with("age="));
    let env = build(&plain, &SPEC, progress)?;
    let plan = AgingPlan {
        util,
        churn: if cfg.quick { 0.5 } else { 4.0 },
    };
    let t0 = Instant::now();
    let aged = age(&env.fs, &plan, cfg.seed, progress)?;
    env.fs.commit()?;
    let elapsed = t0.elapsed().as_secs_f64();
    let ops = aged.created + aged.deleted;
    let mut out = Output::new(aged.rec, aged.files, ops, 1, elapsed);
    out.scalar("files_created", aged.created as f64);
    out.scalar("files_deleted", aged.deleted as f64);
    out.scalar("bytes_written", aged.bytes_written as f64);
    out.scalar("target_util", util);
    let touched = out.rec.touched.clone();
    let space = super::measure::free_space(&env, &touched)?;
    out.detail.insert(
        "xfs_freesp".into(),
        serde_json::to_value(xfs_freesp(&space)).unwrap_or_default(),
    );
    out.detail
        .insert("plan".into(), json!({"util": util, "churn": plan.churn}));
    Ok((env, out))
}
