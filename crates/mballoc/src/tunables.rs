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

/// The table of tunables: every row gives a tunable's field (its sysfs name), its rustdoc,
/// its type, its default (an expression over the [`Defaults`] bound to `d`), the one-line
/// summary that listings print, and, where the kernel limits it further than its type does,
/// the check that the value must pass (it may also round the value, as sysfs stores do).
///
/// From the one table it builds the struct, the defaults, [`Tunables::NAMES`], the parsing by
/// name ([`Tunables::set`]), the reading by name ([`Tunables::get`]) and the summaries
/// ([`Tunables::summary`]), so that no tunable is spelled twice.
macro_rules! tunables {
    (
        defaults($d:ident);
        $(
            $(#[$attr:meta])*
            $name:ident: $ty:ty = $default:expr, $summary:literal $(, check $check:expr)?;
        )*
    ) => {
        /// The knobs of one allocator. Field names follow sysfs where the kernel has one.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Tunables {
            $( $(#[$attr])* pub $name: $ty, )*
        }

        impl Tunables {
            /// Names accepted by [`Tunables::set`], in table order.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            fn from_defaults($d: &Defaults) -> Tunables {
                Tunables { $( $name: $default, )* }
            }

            /// Sets one tunable by its sysfs name from text, validating like the kernel's
            /// `ext4_attr_store`: a bad value is an error naming the allowed range, and nothing
            /// changes.
            pub fn set(&mut self, name: &str, value: &str, geo: &Geometry) -> Result<(), Error> {
                let bad = |allowed: String| Error::InvalidTunable {
                    name: name.to_string(),
                    value: value.to_string(),
                    allowed,
                };
                match name {
                    $(
                        stringify!($name) => {
                            let v = <$ty as Value>::parse(value).map_err(bad)?;
                            $( let v = ($check)(v, geo).map_err(bad)?; )?
                            self.$name = v;
                        }
                    )*
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
                match name {
                    $( stringify!($name) => Some(Value::show(self.$name)), )*
                    _ => None,
                }
            }

            /// One line on what a tunable does, for listings.
            pub fn summary(name: &str) -> Option<&'static str> {
                match name {
                    $( stringify!($name) => Some($summary), )*
                    _ => None,
                }
            }
        }
    };
}

/// What the defaults of the tunables depend on.
struct Defaults<'a> {
    geo: &'a Geometry,
    cpus: u32,
    groups: u32,
    /// `ext4_mb_init_backend`'s prefetch window.
    prefetch: u32,
}

/// A tunable's value as sysfs text: parsed (an error names what is allowed) and shown.
trait Value: Copy {
    fn parse(s: &str) -> Result<Self, String>;
    fn show(self) -> String;
}

impl Value for u32 {
    fn parse(s: &str) -> Result<u32, String> {
        parse_uint(s).ok_or_else(|| "an unsigned 32-bit integer".into())
    }
    fn show(self) -> String {
        self.to_string()
    }
}

impl Value for bool {
    fn parse(s: &str) -> Result<bool, String> {
        match s.trim() {
            "1" | "on" | "true" => Ok(true),
            "0" | "off" | "false" => Ok(false),
            _ => Err("0 or 1 (also on/off, true/false)".into()),
        }
    }
    fn show(self) -> String {
        u32::from(self).to_string()
    }
}

impl Value for KernelFlavor {
    fn parse(s: &str) -> Result<KernelFlavor, String> {
        match s.trim() {
            "6.18" | "v6.18" => Ok(KernelFlavor::V6_18),
            "6.18.y" | "stable" => Ok(KernelFlavor::V6_18Stable),
            _ => Err("6.18 or 6.18.y".into()),
        }
    }
    fn show(self) -> String {
        match self {
            KernelFlavor::V6_18 => "6.18".into(),
            KernelFlavor::V6_18Stable => "6.18.y".into(),
        }
    }
}

tunables! {
    defaults(d);

    /// Files with at most this many blocks share per-CPU locality-group preallocations.
    mb_stream_req: u32 = 16,
        "files of at most this many blocks share per-CPU locality-group preallocations";
    /// Size of a locality-group preallocation in clusters; 0 disables group preallocation.
    /// (`ext4_mb_init`: 512 clusters, 2 MiB of 4 KiB blocks, shrunk for bigalloc to keep about
    /// 2 MiB up to 64 KiB clusters, never below 32 clusters.)
    mb_group_prealloc: u32 = (512 >> d.geo.cluster_bits()).max(32).min(d.geo.clusters_per_group()),
        "size of a locality-group preallocation in clusters (0 disables)",
        check |v: u32, geo: &Geometry| {
            if v > geo.clusters_per_group() {
                Err(format!("0 ..= {} (clusters per group)", geo.clusters_per_group()))
            } else {
                Ok(v)
            }
        };
    /// Power-of-two requests with `fls(len) >= mb_order2_req` start at CR_POWER2_ALIGNED.
    mb_order2_req: u32 = 2,
        "power-of-two requests of at least 2^this blocks start at CR_POWER2_ALIGNED";
    /// Stop searching once more than this many extents were measured.
    mb_max_to_scan: u32 = 200,
        "stop searching after measuring this many free extents";
    /// Use a sufficient best extent once more than this many were measured.
    mb_min_to_scan: u32 = 10,
        "take a good-enough extent after measuring this many";
    /// Groups scanned linearly before the optimised indexes (4 on rotational devices, 0 else).
    mb_max_linear_groups: u32 = 4,
        "groups scanned linearly before the optimised indexes";
    /// How many orders CR_BEST_AVAIL_LEN may trim the goal length.
    mb_best_avail_max_trim_order: u32 = 3,
        "orders CR_BEST_AVAIL_LEN may trim the goal length by",
        check |v: u32, _: &Geometry| if v > 64 { Err("0 ..= 64".to_string()) } else { Ok(v) };
    /// Block-bitmap prefetch window in groups.
    mb_prefetch: u32 = d.prefetch,
        "block-bitmap prefetch window in groups";
    /// Prefetch I/O budget at the cheap criteria.
    mb_prefetch_limit: u32 = (4 * d.prefetch).min(d.groups),
        "prefetch I/O budget at the cheap criteria";
    /// Use the largest-order and average-fragment indexes (mount option).
    mb_optimize_scan: bool = d.groups >= 16,
        "use the largest-order and average-fragment group indexes (mount option)";
    /// RAID stripe in blocks (0 = none).
    stripe: u32 = 0,
        "RAID stripe in blocks (0 = none)",
        check |v: u32, geo: &Geometry| {
            if v > 0 && geo.cluster_bits() > 0 {
                // The stripe-aligned scan is modelled in blocks only.
                Err("0 with bigalloc (stripe allocation is not modelled in clusters)".to_string())
            } else {
                Ok(v)
            }
        };
    /// Collect per-criterion statistics (the counters are always kept; this mirrors sysfs).
    mb_stats: bool = false,
        "collect per-criterion statistics (as sysfs mb_stats)";
    /// Mainline 6.18 or 6.18.y behaviour.
    flavor: KernelFlavor = KernelFlavor::V6_18,
        "6.18 (mainline) or 6.18.y (with the three stable backports)";

    // ---- policy switches (the seeds) ----

    /// Number of stream goals (seed 000). 1 = the pre-6.17 single goal.
    nr_global_goals: u32 = d.cpus.max(1).min(d.groups.div_ceil(4)).clamp(1, MAX_GLOBAL_GOALS),
        "seed 000: number of stream goals (1 = the pre-6.17 single goal)",
        check |v: u32, geo: &Geometry| {
            let max = max_global_goals(geo);
            if v == 0 || v > max {
                Err(format!("1 ..= {max} (the group count, at most {MAX_GLOBAL_GOALS})"))
            } else {
                Ok(v)
            }
        };
    /// Skip groups whose lock is held below CR_ANY_FREE (seed 001).
    try_lock_groups: bool = true,
        "seed 001: skip groups locked by another task below CR_ANY_FREE";
    /// Read and write the stream goal under the file system's one `s_md_lock`, as kernels
    /// before 6.17 did (`ext4_mb_regular_allocator`, `ext4_mb_use_best_found`) until
    /// `ext4: remove unnecessary s_md_lock on update s_mb_last_group`: seed 001's kernels.
    goal_md_lock: bool = false,
        "kernels before 6.17: the stream goal read and written under the global s_md_lock";
    /// Choose groups for `mb_optimize_scan` from per-order lists in the order the groups
    /// joined them, as kernels before 6.17 did (`ext4_mb_choose_next_group_p2_aligned`,
    /// `_goal_fast`, `_best_avail` over `s_mb_largest_free_orders[]` and
    /// `s_mb_avg_fragment_size[]`, each list under an rwlock, the goal group visited first
    /// and the lists' first good group before every further visit), a group that fills up
    /// left in the average-fragment list of its last order (the "zombie groups" 6.17 fixed;
    /// walks pass over them); off, as 6.17 on (the xarrays walked from the goal group, a full
    /// group in no index). The seeds' kernels (000, 001) had the lists.
    order_lists: bool = false,
        "kernels before 6.17: mb_optimize_scan picks the first good group of per-order lists";
    /// Take the file system's one `s_md_lock` for every freed extent that does not merge
    /// into a pending free of its transaction, as `ext4_mb_free_metadata` does to put it on
    /// the transaction's freed list (every kernel); off, a free takes no global lock.
    free_md_lock: bool = true,
        "every kernel: a freed extent that merges with no pending one takes the global s_md_lock";
    /// Put a freed extent in its group's pending tree first and merge it with its neighbours
    /// after, each merge and the insertion taking `s_md_lock` (`ext4_try_merge_freed_extent`'s
    /// `list_del`, then `list_add_tail`: 1 to 3 takes a freed extent), as kernels before 6.17
    /// did, the seeds' included; off, as `ext4: merge freed extent with existing extents
    /// before insertion` made it: a merge into one neighbour takes nothing, into two once.
    /// Only with `free_md_lock`.
    free_insert_then_merge: bool = false,
        "kernels before 6.17: a freed extent takes s_md_lock once, plus once per merge";
    /// Test the "already read" flag before the atomic set in prefetch (seed 003).
    prefetch_test_before_set: bool = false,
        "seed 003: test the bitmap-read flag before the atomic set in prefetch";
    /// Upper bound of the stream preallocation window in KiB (seed 004); ≥ 8192, power of two.
    mb_max_prealloc_kb: u32 = 8192,
        "seed 004: largest stream preallocation window in KiB (>= 8192, power of 2)",
        // The seed's mb_max_prealloc_kb_store: at least 8192, rounded up to a power of 2.
        check |v: u32, _: &Geometry| {
            v.max(8192)
                .checked_next_power_of_two()
                .ok_or_else(|| "8192 ..= 2^31 KiB (rounded up to a power of two)".to_string())
        };
    /// btrfs-style size classes per group (seed 002).
    size_classes: bool = false,
        "seed 002: btrfs-style small/medium/large size classes per group";
    /// With size classes: a group claimed for a class is that CPU's (the requester's
    /// `cpu`), and requests look in their own CPU's groups of their class first, then in
    /// unclaimed ones, and only then in other CPUs' (ours; keeps threads out of each other's
    /// group locks, as per-CPU locality groups do).
    size_class_per_cpu: bool = false,
        "with size classes: each CPU looks in its own groups of a class first (ours)";
    /// With size classes: the goal try refuses a goal inside a group of another class, so a
    /// chain of goals (a file's next window, a fallocate's next piece) cannot carry one class
    /// into another's group (ours; btrfs hints are filtered by class from the first pass).
    size_class_strict_goal: bool = false,
        "with size classes: a goal in another class's group is not tried (ours)";
    /// With size classes: a stream window (an inode preallocation) that misses its goal opens
    /// a group that holds no data before it joins a group of its class, so every growing file
    /// has room to grow in place and its unused window tail rejoins the group's free space
    /// when it is discarded (ours).
    size_class_stream_groups: bool = false,
        "with size classes: a file's new run opens an empty group first (ours)";
    /// With size classes: a class stage takes the start of the group's largest free extent
    /// (btrfs `btrfs_find_space_for_alloc` with `use_bytes_index` in a block group that is
    /// not the hinted one), not the buddy's lowest aligned chunk, so a fresh group fills
    /// front to back with no alignment gap behind its metadata (ours).
    size_class_largest_first: bool = false,
        "with size classes: take the start of a group's largest free extent (btrfs)";
    /// With size classes: a request that extends a file (it has a mapped neighbour on the
    /// left) takes the class of the group holding that neighbour, when that group has one. A
    /// class then describes a file's run, not the piece a preallocation window happened to
    /// leave over (a 129 KiB append split at a window's end is a medium write, not a 13-block
    /// small one) (ours).
    size_class_inherit: bool = false,
        "with size classes: a file's next blocks take its group's class (ours)";
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
        Tunables::from_defaults(&Defaults {
            geo,
            cpus,
            groups,
            prefetch,
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
