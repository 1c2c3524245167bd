//! Every mballoc tunable, with the names and defaults of `/sys/fs/ext4/<dev>/` (plus the
//! `mb_optimize_scan` mount option), validated as the kernel validates them, and the policy
//! switches this crate adds on top (the seeds' improvements).

use crate::error::Error;
use crate::geometry::Geometry;

/// How the kernel version behaves where 6.18 and its stable series (6.18.y) differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelFlavor {
    /// Mainline v6.18.
    V6_18,
    /// 6.18.y with the three post-6.18 backports (optimised scan for non-extent inodes,
    /// group-count clamping, start-group clamp).
    V6_18Stable,
}

/// The knobs of one allocator. Field names follow sysfs where the kernel has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunables {
    /// Files with at most this many blocks share per-CPU locality-group preallocations.
    pub mb_stream_req: u32,
    /// Size of a locality-group preallocation in clusters; 0 disables group preallocation.
    pub mb_group_prealloc: u32,
    /// Power-of-two requests with `fls(len) >= mb_order2_req` start at CR_POWER2_ALIGNED.
    pub mb_order2_req: u32,
    /// Stop searching once more than this many extents were measured.
    pub mb_max_to_scan: u32,
    /// Use a sufficient best extent once more than this many were measured.
    pub mb_min_to_scan: u32,
    /// Groups scanned linearly before the optimised indexes (4 on rotational devices, 0 else).
    pub mb_max_linear_groups: u32,
    /// How many orders CR_BEST_AVAIL_LEN may trim the goal length.
    pub mb_best_avail_max_trim_order: u32,
    /// Block-bitmap prefetch window in groups.
    pub mb_prefetch: u32,
    /// Prefetch I/O budget at the cheap criteria.
    pub mb_prefetch_limit: u32,
    /// Use the largest-order and average-fragment indexes (mount option).
    pub mb_optimize_scan: bool,
    /// RAID stripe in blocks (0 = none).
    pub stripe: u32,
    /// Collect per-criterion statistics (the counters are always kept; this mirrors sysfs).
    pub mb_stats: bool,
    /// Mainline 6.18 or 6.18.y behaviour.
    pub flavor: KernelFlavor,

    // ---- policy switches (the seeds) ----
    /// Number of stream goals (seed 000). 1 = the pre-6.17 single goal.
    pub nr_global_goals: u32,
    /// Skip groups whose lock is held below CR_ANY_FREE (seed 001).
    pub try_lock_groups: bool,
    /// Test the "already read" flag before the atomic set in prefetch (seed 003).
    pub prefetch_test_before_set: bool,
    /// Upper bound of the stream preallocation window in KiB (seed 004); ≥ 8192, power of two.
    pub mb_max_prealloc_kb: u32,
    /// btrfs-style size classes per group (seed 002).
    pub size_classes: bool,
    /// With size classes: a group claimed for a class is that CPU's (the requester's
    /// `cpu`), and requests look in their own CPU's groups of their class first, then in
    /// unclaimed ones, and only then in other CPUs' (ours; keeps threads out of each other's
    /// group locks, as per-CPU locality groups do).
    pub size_class_per_cpu: bool,
    /// With size classes: the goal try refuses a goal inside a group of another class, so a
    /// chain of goals (a file's next window, a fallocate's next piece) cannot carry one class
    /// into another's group (ours; btrfs hints are filtered by class from the first pass).
    pub size_class_strict_goal: bool,
    /// With size classes: a stream window (an inode preallocation) that misses its goal opens
    /// a group that holds no data before it joins a group of its class, so every growing file
    /// has room to grow in place and its unused window tail rejoins the group's free space
    /// when it is discarded (ours).
    pub size_class_stream_groups: bool,
    /// With size classes: a class stage takes the start of the group's largest free extent
    /// (btrfs `btrfs_find_space_for_alloc` with `use_bytes_index` in a block group that is
    /// not the hinted one), not the buddy's lowest aligned chunk, so a fresh group fills
    /// front to back with no alignment gap behind its metadata (ours).
    pub size_class_largest_first: bool,
    /// With size classes: a request that extends a file (it has a mapped neighbour on the
    /// left) takes the class of the group holding that neighbour, when that group has one. A
    /// class then describes a file's run, not the piece a preallocation window happened to
    /// leave over (a 129 KiB append split at a window's end is a medium write, not a 13-block
    /// small one) (ours).
    pub size_class_inherit: bool,
}

/// Most stream goals an allocator keeps (each takes a padded slot).
pub const MAX_GLOBAL_GOALS: u32 = 1024;

/// Most stream goals for `geo`: one per group, at most [`MAX_GLOBAL_GOALS`].
pub fn max_global_goals(geo: &Geometry) -> u32 {
    geo.group_count().clamp(1, MAX_GLOBAL_GOALS)
}

/// Number of possible CPUs, the kernel's `num_possible_cpus()` for stream goals and
/// locality groups.
pub fn possible_cpus() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

impl Tunables {
    /// The kernel's defaults for a filesystem of this geometry, as mounted on a rotational
    /// device (`mb_max_linear_groups = 4`, like the loop devices of the captures).
    pub fn for_geometry(geo: &Geometry, cpus: u32) -> Tunables {
        let groups = geo.group_count();
        let flex = geo.flex_bg_size();
        // ext4_mb_init_backend: 8 * min(groups per flex, BLK_MAX_SEGMENT_SIZE >> (bsbits - 9)).
        let prefetch = if flex > 1 {
            8 * flex.min(65536 >> (geo.bsbits() - 9))
        } else {
            32
        }
        .min(groups);
        Tunables {
            mb_stream_req: 16,
            // ext4_mb_init: 512 clusters (2 MiB of 4 KiB blocks), shrunk for bigalloc to keep
            // about 2 MiB up to 64 KiB clusters, but never below 32 clusters.
            mb_group_prealloc: (512 >> geo.cluster_bits())
                .max(32)
                .min(geo.clusters_per_group()),
            mb_order2_req: 2,
            mb_max_to_scan: 200,
            mb_min_to_scan: 10,
            mb_max_linear_groups: 4,
            mb_best_avail_max_trim_order: 3,
            mb_prefetch: prefetch,
            mb_prefetch_limit: (4 * prefetch).min(groups),
            mb_optimize_scan: groups >= 16,
            stripe: 0,
            mb_stats: false,
            flavor: KernelFlavor::V6_18,
            nr_global_goals: cpus
                .max(1)
                .min(groups.div_ceil(4))
                .clamp(1, MAX_GLOBAL_GOALS),
            try_lock_groups: true,
            prefetch_test_before_set: false,
            mb_max_prealloc_kb: 8192,
            size_classes: false,
            size_class_per_cpu: false,
            size_class_strict_goal: false,
            size_class_stream_groups: false,
            size_class_largest_first: false,
            size_class_inherit: false,
        }
    }

    /// Names accepted by [`Tunables::set`].
    pub const NAMES: &'static [&'static str] = &[
        "mb_stream_req",
        "mb_group_prealloc",
        "mb_order2_req",
        "mb_max_to_scan",
        "mb_min_to_scan",
        "mb_max_linear_groups",
        "mb_best_avail_max_trim_order",
        "mb_prefetch",
        "mb_prefetch_limit",
        "mb_optimize_scan",
        "stripe",
        "mb_stats",
        "flavor",
        "nr_global_goals",
        "try_lock_groups",
        "prefetch_test_before_set",
        "mb_max_prealloc_kb",
        "size_classes",
        "size_class_per_cpu",
        "size_class_strict_goal",
        "size_class_stream_groups",
        "size_class_largest_first",
        "size_class_inherit",
    ];

    /// Sets one tunable by its sysfs name from text, validating like the kernel's
    /// `ext4_attr_store`: a bad value is an error naming the allowed range, and nothing changes.
    pub fn set(&mut self, name: &str, value: &str, geo: &Geometry) -> Result<(), Error> {
        let bad = |allowed: String| Error::InvalidTunable {
            name: name.to_string(),
            value: value.to_string(),
            allowed,
        };
        let uint = || -> Result<u32, Error> {
            parse_uint(value).ok_or_else(|| bad("an unsigned 32-bit integer".into()))
        };
        let boolean = || -> Result<bool, Error> {
            match value.trim() {
                "1" | "on" | "true" => Ok(true),
                "0" | "off" | "false" => Ok(false),
                _ => Err(bad("0 or 1 (also on/off, true/false)".into())),
            }
        };
        match name {
            "mb_stream_req" => self.mb_stream_req = uint()?,
            "mb_group_prealloc" => {
                let v = uint()?;
                if v > geo.clusters_per_group() {
                    return Err(bad(format!(
                        "0 ..= {} (clusters per group)",
                        geo.clusters_per_group()
                    )));
                }
                self.mb_group_prealloc = v;
            }
            "mb_order2_req" => self.mb_order2_req = uint()?,
            "mb_max_to_scan" => self.mb_max_to_scan = uint()?,
            "mb_min_to_scan" => self.mb_min_to_scan = uint()?,
            "mb_max_linear_groups" => self.mb_max_linear_groups = uint()?,
            "mb_best_avail_max_trim_order" => {
                let v = uint()?;
                if v > 64 {
                    return Err(bad("0 ..= 64".into()));
                }
                self.mb_best_avail_max_trim_order = v;
            }
            "mb_prefetch" => self.mb_prefetch = uint()?,
            "mb_prefetch_limit" => self.mb_prefetch_limit = uint()?,
            "mb_optimize_scan" => self.mb_optimize_scan = boolean()?,
            "stripe" => {
                let v = uint()?;
                if v > 0 && geo.cluster_bits() > 0 {
                    // The stripe-aligned scan is modelled in blocks only.
                    return Err(bad(
                        "0 with bigalloc (stripe allocation is not modelled in clusters)".into(),
                    ));
                }
                self.stripe = v;
            }
            "mb_stats" => self.mb_stats = boolean()?,
            "flavor" => {
                self.flavor = match value.trim() {
                    "6.18" | "v6.18" => KernelFlavor::V6_18,
                    "6.18.y" | "stable" => KernelFlavor::V6_18Stable,
                    _ => return Err(bad("6.18 or 6.18.y".into())),
                }
            }
            "nr_global_goals" => {
                let v = uint()?;
                let max = max_global_goals(geo);
                if v == 0 || v > max {
                    return Err(bad(format!(
                        "1 ..= {max} (the group count, at most {MAX_GLOBAL_GOALS})"
                    )));
                }
                self.nr_global_goals = v;
            }
            "try_lock_groups" => self.try_lock_groups = boolean()?,
            "prefetch_test_before_set" => self.prefetch_test_before_set = boolean()?,
            "mb_max_prealloc_kb" => {
                // The seed's mb_max_prealloc_kb_store: at least 8192, rounded up to a power of 2.
                let v = uint()?.max(8192);
                self.mb_max_prealloc_kb = v.checked_next_power_of_two().ok_or_else(|| {
                    bad("8192 ..= 2^31 KiB (rounded up to a power of two)".into())
                })?;
            }
            "size_classes" => self.size_classes = boolean()?,
            "size_class_per_cpu" => self.size_class_per_cpu = boolean()?,
            "size_class_strict_goal" => self.size_class_strict_goal = boolean()?,
            "size_class_stream_groups" => self.size_class_stream_groups = boolean()?,
            "size_class_largest_first" => self.size_class_largest_first = boolean()?,
            "size_class_inherit" => self.size_class_inherit = boolean()?,
            _ => {
                return Err(Error::UnknownTunable {
                    name: name.to_string(),
                    valid: Self::NAMES.join(", "),
                })
            }
        }
        Ok(())
    }

    /// The current value of a tunable, as text (the sysfs read side).
    pub fn get(&self, name: &str) -> Option<String> {
        let b = |v: bool| u32::from(v).to_string();
        Some(match name {
            "mb_stream_req" => self.mb_stream_req.to_string(),
            "mb_group_prealloc" => self.mb_group_prealloc.to_string(),
            "mb_order2_req" => self.mb_order2_req.to_string(),
            "mb_max_to_scan" => self.mb_max_to_scan.to_string(),
            "mb_min_to_scan" => self.mb_min_to_scan.to_string(),
            "mb_max_linear_groups" => self.mb_max_linear_groups.to_string(),
            "mb_best_avail_max_trim_order" => self.mb_best_avail_max_trim_order.to_string(),
            "mb_prefetch" => self.mb_prefetch.to_string(),
            "mb_prefetch_limit" => self.mb_prefetch_limit.to_string(),
            "mb_optimize_scan" => b(self.mb_optimize_scan),
            "stripe" => self.stripe.to_string(),
            "mb_stats" => b(self.mb_stats),
            "flavor" => match self.flavor {
                KernelFlavor::V6_18 => "6.18".into(),
                KernelFlavor::V6_18Stable => "6.18.y".into(),
            },
            "nr_global_goals" => self.nr_global_goals.to_string(),
            "try_lock_groups" => b(self.try_lock_groups),
            "prefetch_test_before_set" => b(self.prefetch_test_before_set),
            "mb_max_prealloc_kb" => self.mb_max_prealloc_kb.to_string(),
            "size_classes" => b(self.size_classes),
            "size_class_per_cpu" => b(self.size_class_per_cpu),
            "size_class_strict_goal" => b(self.size_class_strict_goal),
            "size_class_stream_groups" => b(self.size_class_stream_groups),
            "size_class_largest_first" => b(self.size_class_largest_first),
            "size_class_inherit" => b(self.size_class_inherit),
            _ => return None,
        })
    }
}

/// `kstrtouint(…, 0, …)`: decimal, `0x` hex or leading-`0` octal.
fn parse_uint(s: &str) -> Option<u32> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u32::from_str_radix(h, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u32::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_defaults() {
        let g1 = Geometry::ext4_default(1 << 30).unwrap();
        let t = Tunables::for_geometry(&g1, 2);
        assert_eq!((t.mb_prefetch, t.mb_prefetch_limit), (8, 8));
        assert!(!t.mb_optimize_scan);
        assert_eq!(t.nr_global_goals, 2);
        let g8 = Geometry::ext4_default(8 << 30).unwrap();
        let t = Tunables::for_geometry(&g8, 2);
        assert_eq!((t.mb_prefetch, t.mb_prefetch_limit), (64, 64));
        assert!(t.mb_optimize_scan);
        let g16t = Geometry::ext4_default(16 << 40).unwrap();
        let t = Tunables::for_geometry(&g16t, 64);
        assert_eq!((t.mb_prefetch, t.mb_prefetch_limit), (128, 512));
        assert_eq!(t.nr_global_goals, 64);
    }

    #[test]
    fn validation_like_sysfs() {
        let g = Geometry::ext4_default(1 << 30).unwrap();
        let mut t = Tunables::for_geometry(&g, 2);
        assert!(t.set("mb_group_prealloc", "40000", &g).is_err());
        assert!(t.set("mb_group_prealloc", "32768", &g).is_ok());
        assert!(t.set("mb_group_prealloc", "0", &g).is_ok());
        assert!(t.set("mb_best_avail_max_trim_order", "65", &g).is_err());
        assert!(t.set("mb_max_to_scan", "-1", &g).is_err());
        assert!(t.set("mb_order2_req", "100", &g).is_ok());
        assert!(t.set("mb_stream_req", "0x20", &g).is_ok());
        assert_eq!(t.mb_stream_req, 32);
        let before = t;
        let err = t.set("no_such_knob", "1", &g).unwrap_err();
        assert!(err.to_string().contains("mb_stream_req"), "{err}");
        assert_eq!(t, before, "a rejected set changes nothing");
        t.set("mb_max_prealloc_kb", "20000", &g).unwrap();
        assert_eq!(t.mb_max_prealloc_kb, 32768);
        t.set("mb_max_prealloc_kb", "100", &g).unwrap();
        assert_eq!(t.mb_max_prealloc_kb, 8192);
        for n in Tunables::NAMES {
            assert!(t.get(n).is_some(), "{n}");
            let v = t.get(n).unwrap();
            t.set(n, &v, &g).unwrap_or_else(|e| panic!("{n}={v}: {e}"));
        }
    }
}
