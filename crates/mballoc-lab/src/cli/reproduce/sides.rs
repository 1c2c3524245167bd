//! The two sides of a case: the preset both start from, the switch each sets, and the run
//! configuration each side runs with.

use mballoc::possible_cpus;
use mballoc::{Geometry, Policy};
use mballoc_lab::workload::RunConfig;

use super::seeds::{Case, Experiment};

/// The preset both sides start from.
pub const PRESET: Policy = Policy::Linux618;

/// `switch=value` for each side; the improved default is read from the preset at this size.
pub fn sides(e: &Experiment, fs_size: u64) -> (String, String) {
    let base = format!("{}={}", e.switch, e.base);
    let improved = match e.improved {
        Some(v) => v.to_string(),
        None => Geometry::ext4_default(fs_size)
            .ok()
            .and_then(|g| PRESET.tunables(&g, possible_cpus()).get(e.switch))
            .unwrap_or_else(|| "default".into()),
    };
    (base, format!("{}={improved}", e.switch))
}

/// The run configuration of one side of a case.
pub fn config(c: &Case, switch: &str, quick: bool) -> RunConfig {
    let mut settings: Vec<String> = c.settings.iter().map(|s| s.to_string()).collect();
    if quick {
        settings.extend(c.quick_settings.iter().map(|s| s.to_string()));
    }
    settings.push(switch.to_string());
    RunConfig {
        workload: c.workload.to_string(),
        policy: PRESET,
        settings,
        threads: c.threads,
        fs_size: if quick { c.quick_size } else { c.full_size },
        seed: 1,
        quick,
        load_cost_ns: c.load_cost_ns,
        image: None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::seeds::EXPERIMENTS;
    use super::*;

    #[test]
    fn sides_differ_only_in_the_switch() {
        for e in &EXPERIMENTS {
            let (b, i) = sides(e, 4 << 30);
            assert!(
                b.starts_with(e.switch) && i.starts_with(e.switch),
                "{b} {i}"
            );
            assert_ne!(b, i, "seed {}: base and improved must differ", e.seed);
            for c in e.cases {
                let cb = config(c, &b, true);
                let ci = config(c, &i, true);
                assert_eq!(
                    cb.settings[..cb.settings.len() - 1],
                    ci.settings[..ci.settings.len() - 1]
                );
                assert_eq!(
                    (cb.policy, cb.threads, cb.fs_size),
                    (ci.policy, ci.threads, ci.fs_size)
                );
            }
        }
    }
}
