//! Splits `RunConfig::settings` into allocator tunables (passed to
//! [`mballoc::apply_settings`]) and the lab's own settings, validating the latter.

use super::error::LabError;
use super::LAB_SETTINGS;
use crate::fs::DEFAULT_COMMIT_OPS;

/// The lab settings of one run (see [`LAB_SETTINGS`]).
#[derive(Debug, Clone, PartialEq)]
pub struct LabSettings {
    pub age: Option<f64>,
    pub prefill: Option<f64>,
    pub commit_ops: u64,
    pub duration_s: Option<f64>,
    pub warmup_s: Option<f64>,
    pub ops: Option<u64>,
    pub cpus: Option<u32>,
    pub lazy: Option<bool>,
    /// Volume scale of the fsperf job files (1 = as published).
    pub scale: Option<f64>,
    /// Whether files allocate extent-tree blocks (on unless `extent_tree=0`).
    pub extent_tree: bool,
    /// log2 of the blocks per bigalloc cluster (`cluster_kib`; 0 = one block per cluster).
    pub cluster_bits: u32,
    /// fsperf tests: jbd2 commits on the simulated clock (on unless `commit_clock=0`).
    pub commit_clock: bool,
    /// fsperf tests: each fallocate job starts at its first call measured in real runs
    /// (`falloc_start=1`) instead of at time 0 (default).
    pub falloc_start: bool,
    /// fsperf tests: a fallocate job's latency is drawn from the distribution measured inside
    /// its test (on unless `falloc_spread=0`, which charges its mean every time).
    pub falloc_spread: bool,
    /// A create takes the lowest free inode number, so an unlinked file's number goes to the
    /// next create, as ext4's `find_inode_bit` does with a journal (on unless `ino_reuse=0`,
    /// which gives every create a new number).
    pub ino_reuse: bool,
    /// `journal=0`: a filesystem without a journal (frees reusable at once); default: the
    /// image's `has_journal`, or a journal.
    pub journal: Option<bool>,
    /// The simulated machine's page size in bytes (how many groups share a buddy-cache page);
    /// default 4096.
    pub page_size: Option<u32>,
    /// Virtual CPUs: the block bitmap's checksum at each marking updated for the changed bits
    /// only (`bitmap_csum=incremental`, the ext4 incremental-CRC RFC of 2026-05) instead of
    /// recomputed over the whole bitmap (`full`, 6.18, default).
    pub incremental_csum: bool,
    /// Virtual CPUs: every cache-line transfer and lock hand-off costs this many ns instead
    /// of the machine's own figure (`line_ns`): a what-if on an unmeasured interconnect.
    pub line_ns: Option<u64>,
    /// Virtual CPUs: an access to a group's `bb_state` word (a prefetch walk's) whose line
    /// no other CPU is moving costs the issuing CPU what one of many independent misses
    /// costs (`line_overlap`; the machine's measured figures), not a whole transfer: a what-if.
    pub line_overlap: bool,
    /// Virtual CPUs, fallocate3: off (`walk_thunk=0`), the prefetch walk's steps cost what
    /// they would on a kernel without this machine's return thunk (a what-if); on by default.
    pub walk_thunk: bool,
    /// Virtual CPUs, seed 003's filesystems: which random fill of the filesystem a point runs
    /// on (`fill`, the seed of its holes; default 1). Which holes a fill makes is incidental,
    /// so a figure that moves with it is noise (`reproduce` runs fills 1-3).
    pub fill: Option<u64>,
    /// Virtual CPUs: the group locks shared as the kernel's `s_blockgroup_lock` shares them,
    /// this many hashed spinlocks (`bg_locks`; the kernel's `NR_BG_LOCKS`, 128 when built
    /// for 32 CPUs or more); 0, the default, one lock per group as the library has.
    pub bg_locks: u32,
    /// Virtual CPUs: every `ext4_mark_inode_dirty` of a fallocate2 call writes the reference
    /// count of the inode table block's buffer head, a line shared by the CPUs whose inodes
    /// lie in that block (`inode_bh`; unset: the point's own choice, on for fallocate2; 0:
    /// the line left out).
    pub inode_bh: Option<bool>,
    /// Virtual CPUs: each of jbd2's atomic writes to the running transaction's counters a
    /// handle makes (`start_this_handle`: `t_outstanding_credits`, `t_updates`,
    /// `t_handle_count`; `stop_this_handle`: `t_outstanding_credits`, `t_updates`) is a write
    /// of that line of its own, which another CPU can take in between (`jbd2_rmw=each`), not
    /// one write at the start and one at the stop (`paired`, the default): a what-if.
    pub jbd2_rmw_each: bool,
    /// `name=value` pairs for the allocator.
    pub tunables: Vec<String>,
}

impl Default for LabSettings {
    fn default() -> Self {
        LabSettings {
            age: None,
            prefill: None,
            commit_ops: DEFAULT_COMMIT_OPS,
            duration_s: None,
            warmup_s: None,
            ops: None,
            cpus: None,
            lazy: None,
            scale: None,
            extent_tree: true,
            cluster_bits: 0,
            commit_clock: true,
            falloc_start: false,
            falloc_spread: true,
            ino_reuse: true,
            journal: None,
            page_size: None,
            incremental_csum: false,
            line_ns: None,
            line_overlap: false,
            walk_thunk: true,
            fill: None,
            bg_locks: 0,
            inode_bh: None,
            jbd2_rmw_each: false,
            tunables: Vec::new(),
        }
    }
}

fn fraction(name: &str, v: &str, max: f64) -> Result<f64, LabError> {
    let x: f64 = v
        .parse()
        .map_err(|_| LabError::bad(name, v, "expected a number"))?;
    if !(0.0..=max).contains(&x) {
        return Err(LabError::bad(name, v, format!("must be in 0 ..= {max}")));
    }
    Ok(x)
}

fn seconds(name: &str, v: &str) -> Result<f64, LabError> {
    let x: f64 = v
        .parse()
        .map_err(|_| LabError::bad(name, v, "expected seconds"))?;
    if !(x.is_finite() && x > 0.0 && x <= 86_400.0) {
        return Err(LabError::bad(name, v, "must be in (0, 86400] seconds"));
    }
    Ok(x)
}

/// A warm-up may be none at all: 0 counts from the first sample (the `--vcpus` default).
fn warmup_seconds(name: &str, v: &str) -> Result<f64, LabError> {
    if v.parse::<f64>() == Ok(0.0) {
        return Ok(0.0);
    }
    seconds(name, v).map_err(|_| LabError::bad(name, v, "must be 0 or in (0, 86400] seconds"))
}

fn switch(name: &str, v: &str) -> Result<bool, LabError> {
    match v {
        "1" | "on" | "true" => Ok(true),
        "0" | "off" | "false" => Ok(false),
        _ => Err(LabError::bad(name, v, "0 or 1")),
    }
}

/// `cluster_kib`: a power of two from 8 KiB (2 blocks of 4 KiB) to 256 MiB (mke2fs's
/// largest cluster with 32768 clusters per group under 2^32 blocks); log2 of its blocks.
fn cluster_bits(name: &str, v: &str) -> Result<u32, LabError> {
    let max_kib = 4u64 << crate::mkfs::MAX_CLUSTER_BITS;
    match v.parse::<u64>() {
        Ok(k) if k.is_power_of_two() && (8..=max_kib).contains(&k) => Ok((k / 4).trailing_zeros()),
        _ => Err(LabError::bad(
            name,
            v,
            format!("a power of two from 8 to {max_kib} (KiB)"),
        )),
    }
}

fn count(name: &str, v: &str) -> Result<u64, LabError> {
    match v.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(LabError::bad(name, v, "expected a positive integer")),
    }
}

impl LabSettings {
    /// Parses `settings`; an unknown name is an error listing both kinds of names.
    pub fn parse(settings: &[String]) -> Result<LabSettings, LabError> {
        let mut s = LabSettings::default();
        for kv in settings {
            let (name, value) = kv
                .split_once('=')
                .ok_or_else(|| LabError::bad(kv, "", "settings are name=value"))?;
            let (name, v) = (name.trim(), value.trim());
            match name {
                "age" => s.age = Some(fraction(name, v, 0.95)?),
                "prefill" => s.prefill = Some(fraction(name, v, 0.98)?),
                "commit_ops" => s.commit_ops = count(name, v)?,
                "duration_s" => s.duration_s = Some(seconds(name, v)?),
                "warmup_s" => s.warmup_s = Some(warmup_seconds(name, v)?),
                "ops" => s.ops = Some(count(name, v)?),
                "cpus" => {
                    let n = count(name, v)?;
                    s.cpus = Some(
                        u32::try_from(n)
                            .ok()
                            .filter(|&c| c <= 4096)
                            .ok_or_else(|| LabError::bad(name, v, "must be in 1 ..= 4096"))?,
                    )
                }
                "scale" => {
                    let x = fraction(name, v, 1.0)?;
                    if x == 0.0 {
                        return Err(LabError::bad(name, v, "must be in (0, 1]"));
                    }
                    s.scale = Some(x);
                }
                "lazy" => s.lazy = Some(switch(name, v)?),
                "extent_tree" => s.extent_tree = switch(name, v)?,
                "cluster_kib" => s.cluster_bits = cluster_bits(name, v)?,
                "commit_clock" => s.commit_clock = switch(name, v)?,
                "falloc_start" => s.falloc_start = switch(name, v)?,
                "falloc_spread" => s.falloc_spread = switch(name, v)?,
                "ino_reuse" => s.ino_reuse = switch(name, v)?,
                "journal" => s.journal = Some(switch(name, v)?),
                "page_size" => {
                    s.page_size = Some(
                        u32::try_from(count(name, v)?)
                            .map_err(|_| LabError::bad(name, v, "bytes: 4096, 16384 or 65536"))?,
                    )
                }
                "line_ns" => {
                    let ns = count(name, v)?;
                    if !(1..=100_000).contains(&ns) {
                        return Err(LabError::bad(name, v, "ns between 1 and 100000"));
                    }
                    s.line_ns = Some(ns);
                }
                "line_overlap" => s.line_overlap = switch(name, v)?,
                "walk_thunk" => s.walk_thunk = switch(name, v)?,
                "fill" => s.fill = Some(count(name, v)?),
                "inode_bh" => s.inode_bh = Some(switch(name, v)?),
                "jbd2_rmw" => {
                    s.jbd2_rmw_each = match v {
                        "paired" => false,
                        "each" => true,
                        _ => return Err(LabError::bad(name, v, "paired or each")),
                    }
                }
                "bg_locks" => {
                    let n = v.parse::<u64>().unwrap_or(u64::MAX);
                    if n != 0 && !(n.is_power_of_two() && n <= 1 << 16) {
                        return Err(LabError::bad(
                            name,
                            v,
                            "0 (one lock per group) or a power of two up to 65536",
                        ));
                    }
                    s.bg_locks = n as u32;
                }
                "bitmap_csum" => {
                    s.incremental_csum = match v {
                        "full" => false,
                        "incremental" => true,
                        _ => return Err(LabError::bad(name, v, "full or incremental")),
                    }
                }
                _ if mballoc::Tunables::NAMES.contains(&name) => s.tunables.push(kv.clone()),
                _ => {
                    return Err(LabError::UnknownSetting {
                        name: name.to_string(),
                        lab: LAB_SETTINGS
                            .iter()
                            .map(|(n, _)| *n)
                            .collect::<Vec<_>>()
                            .join(", "),
                        tunables: mballoc::Tunables::NAMES.join(", "),
                    })
                }
            }
        }
        if s.age.is_some() && s.prefill.is_some() {
            return Err(LabError::bad(
                "age",
                "",
                "age and prefill are two ways to pre-age; pick one",
            ));
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn lab_settings_and_tunables_are_split() {
        let s = LabSettings::parse(&v(&["age=0.5", "mb_max_prealloc_kb=32768", "ops=10"])).unwrap();
        assert_eq!(s.age, Some(0.5));
        assert_eq!(s.ops, Some(10));
        assert_eq!(s.tunables, v(&["mb_max_prealloc_kb=32768"]));
    }

    #[test]
    fn bad_settings_are_errors_naming_the_value() {
        let e = LabSettings::parse(&v(&["age=2"])).unwrap_err().to_string();
        assert!(e.contains("age") && e.contains('2'), "{e}");
        let e = LabSettings::parse(&v(&["colour=red"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("colour") && e.contains("prefill") && e.contains("mb_stream_req"),
            "{e}"
        );
        assert!(LabSettings::parse(&v(&["ops=0"])).is_err());
        assert!(LabSettings::parse(&v(&["scale=0"])).is_err());
        assert!(LabSettings::parse(&v(&["scale=1.5"])).is_err());
        assert_eq!(
            LabSettings::parse(&v(&["scale=0.5"])).unwrap().scale,
            Some(0.5)
        );
        assert!(LabSettings::parse(&v(&["novalue"])).is_err());
        assert!(LabSettings::parse(&v(&["duration_s=-1"])).is_err());
        assert!(LabSettings::parse(&v(&["duration_s=0"])).is_err());
        // No warm-up at all is a warm-up (the `--vcpus` default); a negative one is not.
        assert_eq!(
            LabSettings::parse(&v(&["warmup_s=0"])).unwrap().warmup_s,
            Some(0.0)
        );
        let e = LabSettings::parse(&v(&["warmup_s=-1"])).unwrap_err();
        assert!(e.to_string().contains("must be 0 or in"), "{e}");
        assert!(LabSettings::parse(&v(&["age=0.5", "prefill=0.5"])).is_err());
        assert_eq!(
            LabSettings::parse(&v(&["cluster_kib=64"]))
                .unwrap()
                .cluster_bits,
            4
        );
        for bad in ["4", "48", "524288", "x"] {
            let e = LabSettings::parse(&v(&[&format!("cluster_kib={bad}")])).unwrap_err();
            assert!(e.to_string().contains(bad), "{e}");
        }
        assert!(LabSettings::parse(&v(&["journal=maybe"])).is_err());
        assert!(LabSettings::parse(&v(&["page_size=0"])).is_err());
        let s = LabSettings::parse(&v(&["journal=0", "page_size=65536"])).unwrap();
        assert_eq!((s.journal, s.page_size), (Some(false), Some(65536)));
    }
}
