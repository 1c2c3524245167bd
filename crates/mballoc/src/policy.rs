//! Named presets of the policy switches, so one workload can be run "before" and "after".
//!
//! A preset is a starting point: every switch can still be set on its own afterwards
//! ([`Tunables::set`](crate::tunables::Tunables::set)). The presets differ only in the seeds' switches; the kernel knobs
//! keep the defaults of the geometry.

use crate::error::Error;
use crate::geometry::Geometry;
use crate::tunables::Tunables;

/// One named policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Before the 6.17 scalability series: one stream goal, groups locked with a waiting lock,
    /// prefetch sets the "read" flag without testing it first.
    Linux616,
    /// The kernel on this machine (6.18): `min(CPUs, ceil(groups/4))` stream goals, busy groups
    /// skipped with a try-lock below CR_ANY_FREE.
    Linux618,
    /// 6.18 plus the seeds not (yet) in the kernel: the cheap prefetch test (seed 003), a
    /// 32 MiB preallocation window (seed 004) and btrfs-style size classes (seed 002).
    Proposed,
}

impl Policy {
    /// Every preset, in the order "before" to "after".
    pub const ALL: [Policy; 3] = [Policy::Linux616, Policy::Linux618, Policy::Proposed];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Linux616 => "linux-6.16",
            Policy::Linux618 => "linux-6.18",
            Policy::Proposed => "proposed",
        }
    }

    /// One line saying what the preset is.
    pub fn describe(self) -> &'static str {
        match self {
            Policy::Linux616 => {
                "one stream goal under s_md_lock, waiting group locks, order lists, prefetch without test"
            }
            Policy::Linux618 => "kernel default: per-CPU stream goals, busy groups skipped",
            Policy::Proposed => {
                "6.18 + cheap prefetch test + 32 MiB prealloc window + size classes"
            }
        }
    }

    /// Looks a preset up by name; an unknown name is an error listing the valid ones.
    pub fn from_name(name: &str) -> Result<Policy, Error> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == name.trim())
            .ok_or_else(|| Error::UnknownPolicy {
                name: name.to_string(),
                valid: Policy::ALL.map(Policy::name).join(", "),
            })
    }

    /// The tunables of this preset for a filesystem of this geometry and CPU count.
    pub fn tunables(self, geo: &Geometry, cpus: u32) -> Tunables {
        let mut t = Tunables::for_geometry(geo, cpus);
        match self {
            Policy::Linux616 => {
                t.nr_global_goals = 1;
                t.try_lock_groups = false;
                t.goal_md_lock = true;
                t.order_lists = true;
                t.free_insert_then_merge = true;
                t.prefetch_test_before_set = false;
            }
            Policy::Linux618 => {}
            Policy::Proposed => {
                t.prefetch_test_before_set = true;
                t.mb_max_prealloc_kb = 32768;
                t.size_classes = true;
                t.size_class_per_cpu = true;
                t.size_class_stream_groups = true;
                t.size_class_largest_first = true;
                t.size_class_inherit = true;
            }
        }
        t
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Policy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Policy, Error> {
        Policy::from_name(s)
    }
}

/// Applies `name=value` settings in order, on top of a preset. A malformed pair, unknown name or
/// bad value is an error naming what is valid, and leaves `t` unchanged.
pub fn apply_settings(t: &mut Tunables, settings: &[String], geo: &Geometry) -> Result<(), Error> {
    let mut next = *t;
    for kv in settings {
        let (name, value) = kv.split_once('=').ok_or_else(|| Error::InvalidTunable {
            name: kv.clone(),
            value: String::new(),
            allowed: "name=value".into(),
        })?;
        next.set(name.trim(), value.trim(), geo)?;
    }
    *t = next;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_differ_only_in_their_switches() {
        let g = Geometry::ext4_default(16 << 30).unwrap();
        let old = Policy::Linux616.tunables(&g, 8);
        let now = Policy::Linux618.tunables(&g, 8);
        let new = Policy::Proposed.tunables(&g, 8);
        assert_eq!(now, Tunables::for_geometry(&g, 8));
        assert_eq!((old.nr_global_goals, old.try_lock_groups), (1, false));
        assert_eq!((now.nr_global_goals, now.try_lock_groups), (8, true));
        assert!(new.size_classes && new.prefetch_test_before_set);
        assert_eq!(new.mb_max_prealloc_kb, 32768);
        assert_eq!(old.mb_prefetch, now.mb_prefetch);
    }

    #[test]
    fn names_round_trip_and_errors_list_choices() {
        for p in Policy::ALL {
            assert_eq!(Policy::from_name(p.name()).unwrap(), p);
        }
        let e = Policy::from_name("linux-5.10").unwrap_err().to_string();
        assert!(e.contains("linux-6.16") && e.contains("proposed"), "{e}");
    }

    #[test]
    fn settings_apply_atomically() {
        let g = Geometry::ext4_default(1 << 30).unwrap();
        let mut t = Policy::Linux618.tunables(&g, 2);
        let before = t;
        let bad = [
            "nr_global_goals=1".to_string(),
            "size_classes=maybe".to_string(),
        ];
        let e = apply_settings(&mut t, &bad, &g).unwrap_err().to_string();
        assert!(e.contains("size_classes") && e.contains("0 or 1"), "{e}");
        assert_eq!(t, before);
        let e = apply_settings(&mut t, &["novalue".into()], &g)
            .unwrap_err()
            .to_string();
        assert!(e.contains("name=value"), "{e}");
        apply_settings(&mut t, &["nr_global_goals = 1".into()], &g).unwrap();
        assert_eq!(t.nr_global_goals, 1);
    }
}
