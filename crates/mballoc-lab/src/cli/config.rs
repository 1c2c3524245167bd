//! Turns parsed arguments into validated [`RunConfig`]s. Everything a run could reject for a
//! reason the user controls (filesystem size, tunable names and values) is checked here, before
//! the first run starts, so a typo in the last `--set` does not cost a long sweep.

use mballoc::possible_cpus;
use mballoc::{apply_settings, Geometry, Policy, Tunables};
use mballoc_lab::mkfs::{MAX_BYTES, MIN_BYTES};
use mballoc_lab::workload::{RunConfig, LAB_SETTINGS};

use super::args::Scenario;
use super::error::CliError;
use super::parse::fmt_size;

/// The geometry of a fresh filesystem of `bytes`, as the workloads lay it out (4 KiB blocks,
/// 32768 blocks per group, flex_bg 16); sizes outside what mkfs supports are usage errors.
pub fn geometry(bytes: u64) -> Result<Geometry, CliError> {
    if !(MIN_BYTES..=MAX_BYTES).contains(&bytes) {
        return Err(CliError::Usage(format!(
            "--fs-size {} is outside the supported range {} ..= {}",
            fmt_size(bytes),
            fmt_size(MIN_BYTES),
            fmt_size(MAX_BYTES)
        )));
    }
    Geometry::ext4_default(bytes).map_err(|e| CliError::FsSize {
        bytes,
        source: e.into(),
    })
}

/// Checks `settings` on top of `policy` for a filesystem of `bytes` (`None`: the workload picks
/// the size, so only what is wrong at every size is caught here), one at a time so the error
/// names the offending setting. Lab settings ([`LAB_SETTINGS`]) are the workload's to check.
pub fn validate_settings(
    policy: Policy,
    settings: &[String],
    bytes: Option<u64>,
) -> Result<(), CliError> {
    let geo = geometry(bytes.unwrap_or(MAX_BYTES))?;
    let mut t = policy.tunables(&geo, possible_cpus());
    for s in settings {
        let name = s.split_once('=').map_or(s.as_str(), |(n, _)| n.trim());
        if LAB_SETTINGS.iter().any(|(n, _)| *n == name) {
            continue;
        }
        if !Tunables::NAMES.contains(&name) {
            return Err(CliError::Usage(format!(
                "unknown setting {name:?} in --set {s}; allocator tunables: {}; lab settings: {}",
                Tunables::NAMES.join(", "),
                LAB_SETTINGS
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        apply_settings(&mut t, std::slice::from_ref(s), &geo).map_err(|source| {
            CliError::Setting {
                setting: format!("--set {s}"),
                source,
            }
        })?;
    }
    Ok(())
}

/// One validated configuration per thread count of the scenario.
pub fn run_configs(
    workload: &str,
    policy: Policy,
    extra: &[String],
    sc: &Scenario,
) -> Result<Vec<RunConfig>, CliError> {
    let mut settings = sc.settings.clone();
    settings.extend_from_slice(extra);
    validate_settings(policy, &settings, sc.fs_size)?;
    Ok(sc
        .threads
        .0
        .iter()
        .map(|&threads| RunConfig {
            workload: workload.to_string(),
            policy,
            settings: settings.clone(),
            threads,
            fs_size: sc.fs_size.unwrap_or(0),
            seed: sc.seed,
            quick: sc.quick,
            load_cost_ns: sc.load_cost,
            image: sc.image.clone().map(|i| mballoc_lab::workload::ImageRun {
                allow_mounted: sc.allow_mounted,
                ..i
            }),
        })
        .collect())
}

/// A short label for a policy with settings: `linux-6.18 +size_classes=1`.
pub fn label(policy: Policy, settings: &[String]) -> String {
    label_parts(policy.name(), settings)
}

/// The label of a finished run (its policy and settings as recorded).
pub fn label_of(r: &mballoc_lab::workload::RunResult) -> String {
    label_parts(&r.policy, &r.settings)
}

fn label_parts(policy: &str, settings: &[String]) -> String {
    let mut s = policy.to_string();
    for kv in settings {
        s.push_str(" +");
        s.push_str(kv);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_bad_settings_name_the_choices() {
        let g = Some(1 << 30);
        let e = validate_settings(Policy::Linux618, &["nosuch=1".into()], g).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("nosuch") && m.contains("mb_group_prealloc"),
            "{m}"
        );
        assert!(
            m.contains(LAB_SETTINGS[0].0),
            "lab settings are listed too: {m}"
        );
        assert_eq!(e.exit_code(), 2);
        let e = validate_settings(Policy::Linux618, &["mb_group_prealloc=x".into()], g)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mb_group_prealloc") && e.contains("unsigned"),
            "{e}"
        );
        validate_settings(Policy::Linux618, &["size_classes=1".into()], g).unwrap();
        let lab = format!("{}=1", LAB_SETTINGS[0].0);
        validate_settings(Policy::Linux618, &[lab], None).unwrap();
        // 8 groups at 1 GiB: 9 stream goals is too many there, fine when the size is open.
        assert!(validate_settings(Policy::Linux618, &["nr_global_goals=9".into()], g).is_err());
        validate_settings(Policy::Linux618, &["nr_global_goals=9".into()], None).unwrap();
    }

    #[test]
    fn sizes_outside_mkfs_range_are_usage_errors() {
        let e = geometry(1 << 20).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("64M"), "{e}");
        assert!(geometry(17 << 40).is_err());
        assert_eq!(geometry(16 << 40).unwrap().group_count(), 131072);
    }

    #[test]
    fn labels_show_settings() {
        assert_eq!(
            label(Policy::Proposed, &["a=1".into(), "b=2".into()]),
            "proposed +a=1 +b=2"
        );
    }
}
