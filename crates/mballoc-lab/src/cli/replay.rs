//! `mballoc replay` and `mballoc groups`: the kernel-trace fidelity proof and the mb_groups dump
//! of a fresh filesystem.

use std::fmt::Write as _;
use std::path::PathBuf;

use mballoc::{Allocator, Geometry};
use mballoc_lab::replay::{self, ReplayReport};

use super::args::{GroupsArgs, ReplayArgs};
use super::emit::{out, outln};
use super::error::CliError;

/// `mballoc groups`.
pub fn cmd_groups(a: &GroupsArgs) -> Result<(), CliError> {
    if let Some(image) = &a.image {
        return super::image::cmd_groups_image(image, a.allow_mounted);
    }
    let other = |e: &dyn std::fmt::Display| CliError::Other(e.to_string());
    let lab = mballoc_lab::workload::settings::LabSettings::parse(&a.settings)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    if let Some(kv) = a.settings.iter().find(|kv| !kv.starts_with("cluster_kib=")) {
        return Err(CliError::Usage(format!(
            "groups takes only the layout setting cluster_kib, not {kv:?}"
        )));
    }
    let bits = lab.cluster_bits;
    let layout = mballoc_lab::mkfs::layout_clustered(a.fs_size, bits)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let geo = Geometry::with_clusters(
        4096,
        bits,
        layout.blocks_per_group >> bits,
        layout.blocks_count,
        0,
        layout.flex_bg_size,
    )
    .map_err(|e| other(&e))?;
    let alloc = Allocator::new(geo, &layout.used).map_err(|e| other(&e))?;
    out(&alloc.mb_groups().map_err(|e| other(&e))?)
}

/// `mballoc replay`: prints the report, then fails (exit code 1) unless every case agrees
/// with the kernel, so that a script or CI job cannot miss a divergence.
pub fn cmd_replay(a: &ReplayArgs) -> Result<(), CliError> {
    if let Some(image) = &a.image {
        return super::image::cmd_replay_image(a, image);
    }
    let rep = replay::replay_paths(&a.cases)?;
    if a.json {
        outln(&to_json(&rep)?)?;
    } else if a.markdown {
        out(&rep.markdown())?;
    } else {
        out(&render(&rep, a.show))?;
    }
    if rep.agrees() {
        Ok(())
    } else {
        Err(CliError::Disagreement {
            matched: rep.matched,
            allocs: rep.allocs,
            cases: rep.disagreeing().join(", "),
        })
    }
}

/// Pretty JSON of a replay report.
pub fn to_json(rep: &ReplayReport) -> Result<String, CliError> {
    serde_json::to_string_pretty(rep).map_err(|e| CliError::Other(e.to_string()))
}

/// `ok`, or how many operations released other PA blocks than the kernel.
fn release_cell(mismatches: u64) -> String {
    if mismatches == 0 {
        "ok".into()
    } else {
        format!("{mismatches} diff")
    }
}

/// `-` where the case has no traced buddy builds, `ok`, or how many groups were built in
/// another request than the kernel's.
fn builds_cell(checked: u64, mismatches: u64) -> String {
    match (checked, mismatches) {
        (0, _) => "-".into(),
        (_, 0) => "ok".into(),
        (_, m) => format!("{m} diff"),
    }
}

/// One row per case, a total, then up to `show` mismatches per case.
pub fn render(rep: &ReplayReport, show: usize) -> String {
    let mut s = format!(
        "{:<22} {:>7} {:>7} {:>9} {:>6} {:>10} {:>9} {:>8}\n",
        "case", "allocs", "matched", "agreement", "path", "final_diff", "pa_release", "buddies"
    );
    for c in &rep.cases {
        let _ = writeln!(
            s,
            "{:<22} {:>7} {:>7} {:>8.2}% {:>6} {:>10} {:>9} {:>8}",
            c.name,
            c.allocs,
            c.matched,
            100.0 * c.agreement,
            c.path_matched,
            c.final_diff_blocks,
            release_cell(c.release_mismatches),
            builds_cell(c.buddy_builds_checked, c.buddy_build_mismatches)
        );
    }
    let _ = writeln!(
        s,
        "{:<22} {:>7} {:>7} {:>8.2}%",
        "all",
        rep.allocs,
        rep.matched,
        100.0 * rep.agreement
    );
    for c in &rep.cases {
        for m in c.mismatches.iter().take(show) {
            let _ = writeln!(
                s,
                "{}: seq {} ino {} lblk {} len {}: kernel {} ours {} — {}",
                c.name, m.seq, m.ino, m.lblk, m.len, m.kernel, m.ours, m.first_difference
            );
        }
    }
    s
}

/// The captures stored in the repository (`kernel-cases/`), else `shared/kernel-traces` beside it.
pub fn default_traces() -> PathBuf {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    [
        repo.join("kernel-cases"),
        repo.join("../shared/kernel-traces"),
        repo.join("shared/kernel-traces"),
        PathBuf::from("../shared/kernel-traces"),
    ]
    .into_iter()
    .find(|c| c.is_dir())
    .unwrap_or_else(|| PathBuf::from("../shared/kernel-traces"))
}
