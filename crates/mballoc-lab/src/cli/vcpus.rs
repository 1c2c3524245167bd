//! `mballoc bench threads --vcpus N,...`: fallocate2 on virtual CPUs in virtual time
//! (`mballoc_lab::vcpus`), and `--calibrate`, the measurement behind its work costs.

#[cfg(feature = "vcpus")]
use std::fmt::Write;

use mballoc::Policy;
#[cfg(feature = "vcpus")]
use mballoc_lab::vcpus::cost::{Machine, Seg};
#[cfg(feature = "vcpus")]
use mballoc_lab::vcpus::{calibrate, run_curve, VcpuConfig, VcpuCurve};

use super::CliError;

#[cfg_attr(not(feature = "vcpus"), allow(dead_code))]
pub struct VcpuArgs {
    pub vcpus: Vec<u32>,
    /// `server` or `local`.
    pub machine: String,
    pub policies: Vec<Policy>,
    pub settings: Vec<String>,
    pub calibrate: bool,
    pub seeds: bool,
    /// Seed 003's filesystems to run alone (`all` = every one).
    pub seed003: Vec<String>,
    pub svg: Option<std::path::PathBuf>,
    pub json: bool,
}

#[cfg(feature = "vcpus")]
fn other(e: impl std::fmt::Display) -> CliError {
    CliError::Other(e.to_string())
}

/// The default binary has no simulator: its library is built without the hooks.
#[cfg(not(feature = "vcpus"))]
pub fn cmd_bench_vcpus(_: &VcpuArgs) -> Result<(), CliError> {
    Err(CliError::Other(
        "--vcpus and --calibrate need the simulator build: cargo build --release -p \
         mballoc-lab --features vcpus"
            .into(),
    ))
}

#[cfg(feature = "vcpus")]
pub fn cmd_bench_vcpus(a: &VcpuArgs) -> Result<(), CliError> {
    let machine = if a.machine == "local" {
        Machine::Local
    } else {
        Machine::Server
    };
    if a.calibrate {
        let c = calibrate(200_000).map_err(other)?;
        let mut t = format!(
            "call {:.1} ns (no hook), timing overhead {:.1} ns per point\n{:<22} {:>10} {:>10}\n",
            c.call_ns, c.overhead_ns, "segment ending at", "ns", "per call"
        );
        for ((s, ns), k) in Seg::all().iter().zip(&c.seg_ns).zip(&c.per_call) {
            let _ = writeln!(t, "{:<22} {ns:>10.1} {k:>10.2}", format!("{s:?}"));
        }
        return super::emit::out(&t);
    }
    if let Some(d) = a.svg.as_ref().filter(|_| a.seeds || !a.seed003.is_empty()) {
        std::fs::create_dir_all(d).map_err(other)?;
    }
    if !a.seed003.is_empty() {
        return seed003(&a.seed003, &a.vcpus, a.svg.as_deref(), a.json);
    }
    if a.seeds {
        let rows = mballoc_lab::vcpus::seeds::run(
            &["", "prefetch_test_before_set=1"],
            &a.vcpus,
            a.svg.as_deref(),
        )
        .map_err(other)?;
        if a.json {
            return super::emit::outln(&serde_json::to_string(&rows).map_err(other)?);
        }
        super::emit::out(&mballoc_lab::vcpus::seeds::render(&rows))?;
        return seed003(&["all".into()], &a.vcpus, a.svg.as_deref(), false);
    }
    let policies = if a.policies.is_empty() {
        vec![Policy::Linux616, Policy::Linux618, Policy::Proposed]
    } else {
        a.policies.clone()
    };
    let curves: Vec<VcpuCurve> = policies
        .iter()
        .map(|&p| run_curve(&VcpuConfig::fallocate2(p, &a.settings, machine), &a.vcpus))
        .collect::<Result<_, _>>()
        .map_err(other)?;
    if a.json {
        let text = serde_json::to_string(&curves).map_err(other)?;
        return super::emit::outln(&text);
    }
    super::emit::out(&render(&curves))
}

/// Seed 003's fallocate3 curves on the filesystems `ids` (`all`: every one), at `vcpus`
/// (judged where they are published task counts), one SVG each into `svg`.
#[cfg(feature = "vcpus")]
fn seed003(
    ids: &[String],
    vcpus: &[u32],
    svg: Option<&std::path::Path>,
    json: bool,
) -> Result<(), CliError> {
    use mballoc_lab::vcpus::fallocate3::{self as f3, Config, FILESYSTEMS};
    let all = ids.iter().any(|i| i == "all");
    let chosen: Vec<f3::Fs> = if all {
        FILESYSTEMS.to_vec()
    } else {
        ids.iter()
            .map(|i| f3::filesystem(i.trim()))
            .collect::<Result<_, _>>()
            .map_err(other)?
    };
    let mut ns: Vec<u32> = vcpus.to_vec();
    ns.sort_unstable();
    ns.dedup();
    let mut curves = Vec::new();
    for fs in chosen {
        let c = f3::run_curve(fs, &ns, &Config::new(fs, false)).map_err(other)?;
        if let Some(dir) = svg {
            f3::plot(&c, &dir.join(format!("seed003-{}.svg", fs.id))).map_err(other)?;
        }
        if !json {
            super::emit::out(&f3::render(std::slice::from_ref(&c)))?;
        }
        curves.push(c);
    }
    if json {
        return super::emit::outln(&serde_json::to_string(&curves).map_err(other)?);
    }
    Ok(())
}

/// One table per curve: the prediction, then what explains it, per call.
#[cfg(feature = "vcpus")]
pub fn render(curves: &[VcpuCurve]) -> String {
    let mut t = String::new();
    for c in curves {
        let _ = writeln!(
            t,
            "fallocate2 on virtual CPUs: {} {} ({:?} interaction costs), {} µs virtual per CPU",
            c.config.policy,
            c.config.settings.join(" "),
            c.config.machine,
            c.config.horizon_ns / 1000
        );
        let _ = writeln!(
            t,
            "{:>5} {:>12} {:>12} {:>8} {:>9} {:>10} {:>9} {:>9} {:>9} {:>8} {:>7}",
            "vcpus",
            "ops/s/cpu",
            "ops/s",
            "waiting",
            "grp waits",
            "grp wait ns",
            "busy skip",
            "groups",
            "collide",
            "lines",
            "real s"
        );
        for p in &c.points {
            let k = mballoc_lab::vcpus::sched::LockKind::Group;
            let get = |m: &std::collections::BTreeMap<_, f64>| m.get(&k).copied().unwrap_or(0.0);
            let _ = writeln!(
                t,
                "{:>5} {:>12.0} {:>12.0} {:>7.1}% {:>9.3} {:>10.0} {:>9.3} {:>9.2} {:>9.3} {:>8.2} {:>7.1}",
                p.vcpus,
                p.ops_per_s_per_cpu,
                p.ops_per_s,
                100.0 * p.waiting_share,
                get(&p.per_call.lock_waits),
                get(&p.per_call.lock_wait_ns),
                get(&p.per_call.busy),
                p.per_call.groups_scanned,
                p.per_call.goal_collisions,
                p.per_call.line_transfers,
                p.real_s
            );
        }
        t.push('\n');
    }
    t
}
