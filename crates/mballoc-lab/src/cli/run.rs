//! `mballoc run` and `mballoc compare`: run a workload once per thread count (and per policy),
//! print summaries, JSON lines or a side-by-side table, and write `--out` files.

use mballoc_lab::report::table::frag_groups_of;
use mballoc_lab::report::ComparisonTable;
use mballoc_lab::workload::{self, RunConfig, RunResult};

use super::args::{CompareArgs, Output, RunArgs, Scenario};
use super::config::{label, run_configs};
use super::emit::outln;
use super::error::CliError;
use super::outdir;
use super::output::{json_line, sweep_table};
use super::progress::Bar;
use super::summary::summary;
use super::vcpus::VcpuSide;

/// Runs one configuration with a progress bar.
pub fn run_one(cfg: &RunConfig, bar: &Bar) -> Result<RunResult, CliError> {
    workload::run(cfg, bar).map_err(|source| CliError::Workload {
        workload: cfg.workload.clone(),
        source,
    })
}

/// `mballoc run`.
pub fn cmd_run(a: &RunArgs) -> Result<(), CliError> {
    if let Some(counts) = &a.scenario.vcpus {
        let side = vcpu_side(&a.workload, a.policy, &[], &a.scenario);
        #[cfg(feature = "vcpus")]
        if super::vcpus_fallocate3::drives(&a.workload) {
            return super::vcpus_fallocate3::cmd_run(&side, &counts.0, &a.output);
        }
        return super::vcpus::cmd_run_vcpus(&side, &counts.0, &a.output);
    }
    let cfgs = run_configs(&a.workload, a.policy, &[], &a.scenario)?;
    let bar = Bar::for_terminal(a.output.quiet);
    let mut results = Vec::with_capacity(cfgs.len());
    for cfg in &cfgs {
        let r = run_one(cfg, &bar)?;
        if a.output.json {
            outln(&json_line(&r))?;
        } else {
            outln(&summary(&r))?;
        }
        results.push(r);
    }
    if !a.output.json {
        if let Some(t) = sweep_table(&results.iter().collect::<Vec<_>>()) {
            outln(&t)?;
        }
    }
    write_out(&a.output, &results)
}

/// `mballoc compare`: A and B at every thread count, one table per thread count.
pub fn cmd_compare(a: &CompareArgs) -> Result<(), CliError> {
    let (pa, pb) = sides(a)?;
    if let Some(counts) = &a.scenario.vcpus {
        let sa = vcpu_side(&a.workload, pa, &a.set_a, &a.scenario);
        let sb = vcpu_side(&a.workload, pb, &a.set_b, &a.scenario);
        #[cfg(feature = "vcpus")]
        if super::vcpus_fallocate3::drives(&a.workload) {
            return super::vcpus_fallocate3::cmd_compare(&sa, &sb, &counts.0, &a.output);
        }
        return super::vcpus::cmd_compare_vcpus(&sa, &sb, &counts.0, &a.output);
    }
    let side_a = run_configs(&a.workload, pa, &a.set_a, &a.scenario)?;
    let side_b = run_configs(&a.workload, pb, &a.set_b, &a.scenario)?;
    let (la, lb) = labels(pa, pb, a);
    let bar = Bar::for_terminal(a.output.quiet);
    let mut results = Vec::new();
    for (ca, cb) in side_a.iter().zip(&side_b) {
        let ra = run_one(ca, &bar)?;
        let rb = run_one(cb, &bar)?;
        if a.output.json {
            outln(&json_line(&ra))?;
            outln(&json_line(&rb))?;
        } else {
            outln(&comparison(&ra, &rb, &la, &lb).render())?;
        }
        results.push(ra);
        results.push(rb);
    }
    write_out(&a.output, &results)
}

/// The two sides' policies: `--policy A --policy B`, or one policy for both when
/// `--set-a`/`--set-b` tell the sides apart (one switch within a preset).
fn sides(a: &CompareArgs) -> Result<(mballoc::Policy, mballoc::Policy), CliError> {
    let own = !a.set_a.is_empty() || !a.set_b.is_empty();
    match a.policies[..] {
        [pa, pb] => Ok((pa, pb)),
        [p] if own => Ok((p, p)),
        _ => Err(CliError::Usage(format!(
            "compare needs two policies (--policy A --policy B), or one with --set-a/--set-b \
             to tell the sides apart; got {} --policy and {} --set-a/--set-b",
            a.policies.len(),
            a.set_a.len() + a.set_b.len(),
        ))),
    }
}

/// One side of a `--vcpus` run: `--set`, then the side's own settings.
fn vcpu_side<'a>(
    workload: &'a str,
    policy: mballoc::Policy,
    own: &[String],
    sc: &Scenario,
) -> VcpuSide<'a> {
    VcpuSide {
        workload,
        policy,
        settings: sc.settings.iter().chain(own).cloned().collect(),
        fs_size: sc.fs_size,
        quick: sc.quick,
        machine: sc.machine.clone(),
    }
}

/// Column labels: the policies with their own settings; `A:`/`B:` prefixes if they would read
/// the same.
fn labels(pa: mballoc::Policy, pb: mballoc::Policy, a: &CompareArgs) -> (String, String) {
    let la = label(pa, &a.set_a);
    let lb = label(pb, &a.set_b);
    if la == lb {
        (format!("A: {la}"), format!("B: {lb}"))
    } else {
        (la, lb)
    }
}

/// Metric by metric, A against B, with the change in %: every scalar either side has, then
/// the wall time.
pub fn comparison(ra: &RunResult, rb: &RunResult, la: &str, lb: &str) -> ComparisonTable {
    let title = format!(
        "{} · {} thread{} · {} · seed {}",
        ra.workload,
        ra.threads,
        if ra.threads == 1 { "" } else { "s" },
        super::output::fs_label(ra),
        ra.seed
    );
    let mut t = ComparisonTable::new(&title, la, lb).with_delta_label("diff");
    let mut keys: Vec<&String> = ra.scalars.keys().chain(rb.scalars.keys()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        let va = ra.scalars.get(k).copied().unwrap_or(f64::NAN);
        let vb = rb.scalars.get(k).copied().unwrap_or(f64::NAN);
        match (
            k.as_str(),
            frag_groups_of(&ra.scalars),
            frag_groups_of(&rb.scalars),
        ) {
            ("frag_pct_mean", Some(ca), Some(cb)) => t.row_with_context(k, va, vb, &ca, &cb),
            _ => t.row(k, va, vb),
        };
    }
    t.row("elapsed_s", ra.elapsed_s, rb.elapsed_s);
    t
}

/// `--out DIR`, announced on stderr so stdout stays the results only.
pub fn write_out(out: &Output, results: &[RunResult]) -> Result<(), CliError> {
    if let Some(dir) = &out.out {
        let files = outdir::write_all(dir, results)?;
        if !out.quiet {
            eprintln!("wrote {} files to {}", files.len(), dir.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::output::tests::sample;
    use super::*;

    #[test]
    fn comparison_lists_both_sides_and_diffs() {
        let a = sample("linux-6.16", 2, 100.0);
        let mut b = sample("linux-6.18", 2, 150.0);
        b.scalars.insert("only_b".into(), 3.0);
        let text = comparison(&a, &b, "linux-6.16", "linux-6.18").render();
        let header = text.lines().nth(1).unwrap();
        assert!(
            header.contains("linux-6.16")
                && header.contains("linux-6.18")
                && header.contains("diff"),
            "{text}"
        );
        assert!(text.contains("+50.0%"), "{text}");
        assert!(text.contains("only_b") && text.contains("NaN"), "{text}");
        let mut a = a.clone();
        let mut b = b.clone();
        for (r, n) in [(&mut a, 3.0), (&mut b, 5.0)] {
            r.scalars.insert("fragmented_bg_count".into(), n);
            r.scalars.insert("data_bg_count".into(), 30.0);
        }
        let text = comparison(&a, &b, "A", "B").render();
        let row = text
            .lines()
            .find(|l| l.contains("| frag_pct_mean"))
            .unwrap();
        assert!(
            row.contains("[3/30 groups]") && row.contains("[5/30 groups]"),
            "{text}"
        );
    }
}
