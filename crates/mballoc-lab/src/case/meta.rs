//! `meta.json`: how the case was made (kernel, mkfs, mount options, tunables, workload) and
//! what the capture counted.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// The parts of `meta.json` a replay uses; the rest stays available in [`Meta::workload`] and
/// friends as raw JSON.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Meta {
    /// Kernel release the capture ran on.
    pub kernel: String,
    pub description: String,
    pub case_name: Option<String>,
    pub size_mib: Option<u64>,
    /// CPU the workload was pinned to (`taskset -c`; the file stores it as a string).
    #[serde(default, deserialize_with = "opt_u32_or_string")]
    pub cpu_pinned: Option<u32>,
    pub mkfs_cmd: Option<String>,
    pub mkfs_version: Option<String>,
    /// What was asked at mount; `(defaults)` = nothing.
    pub mount_opts: Option<String>,
    /// The filesystem's options as the kernel ran them (`/proc/fs/ext4/<dev>/options`, one
    /// `name` or `name=value` each); absent in older captures.
    #[serde(default)]
    pub proc_options: Vec<String>,
    /// `mb_optimize_scan` as the kernel ran it (the file stores 0/1).
    #[serde(deserialize_with = "bool_or_int")]
    pub optimize_scan: bool,
    /// `mb_group_prealloc`, `mb_stream_req`, ... as read from sysfs.
    pub mballoc_tunables: BTreeMap<String, u64>,
    pub geometry: Option<MetaGeometry>,
    pub counts: Option<Counts>,
    pub lost_events: Option<u64>,
    /// Workload name and parameters, as written.
    pub workload: Option<Value>,
    pub aging: Option<Value>,
    /// The traced mount was fresh (`scripts/capture_fresh.py`): mounted with
    /// `no_prefetch_block_bitmaps` and nothing read `mb_groups` before the trace, so every
    /// group's buddy was still unbuilt (`NEED_INIT`) when the workload started. Absent in the
    /// other captures, whose capture read `mb_groups` (which builds every buddy) first.
    #[serde(default)]
    pub fresh_mount: bool,
    /// On a fresh mount, the buddy builds the capture traced (`ext4_mb_buddy_bitmap_load`).
    pub fresh_mount_loads: Option<FreshMountLoads>,
}

/// The buddy builds of a fresh-mount capture (`scripts/capture_fresh.py`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FreshMountLoads {
    /// Group number (as a string, a JSON object's key) → `seq` of the allocation record
    /// during whose request the kernel built that group's buddy.
    pub buddy_built_during_alloc_seq: BTreeMap<String, u64>,
    /// Builds outside any allocation (mount, frees, other tasks).
    #[serde(default)]
    pub loads_outside_allocations: u64,
    /// Group → `seq` of the record, allocation or free, during which the kernel built it (a
    /// free into an unbuilt group builds it: `ext4_mb_clear_bb` loads the buddy). Absent in
    /// captures made before frees were attributed.
    pub buddy_built_during_seq: Option<BTreeMap<String, u64>>,
    /// Loads during no allocation and no free.
    pub loads_outside_records: Option<u64>,
}

impl FreshMountLoads {
    /// Group → `seq` of the record during which the kernel built its buddy, if every traced
    /// build fell inside a record the replay can attribute: allocations and frees where the
    /// capture attributed frees, allocations alone otherwise.
    pub fn builds(&self) -> Option<BTreeMap<u32, u64>> {
        let (map, outside) = match (&self.buddy_built_during_seq, self.loads_outside_records) {
            (Some(map), Some(outside)) => (map, outside),
            _ => (
                &self.buddy_built_during_alloc_seq,
                self.loads_outside_allocations,
            ),
        };
        if outside > 0 {
            return None;
        }
        map.iter()
            .map(|(g, &seq)| Some((g.parse().ok()?, seq)))
            .collect()
    }
}

impl Meta {
    /// The value of mount option `name` as the kernel ran it (`stripe=16` → `"16"`).
    pub fn mount_option(&self, name: &str) -> Option<&str> {
        self.proc_options
            .iter()
            .find_map(|o| o.strip_prefix(name)?.strip_prefix('='))
    }
}

/// `meta.json` → `geometry`: mostly a copy of `initial_state.json`, plus the journal size.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct MetaGeometry {
    pub blocks_count: Option<u64>,
    pub group_count: Option<u32>,
    pub journal_blocks: Option<u64>,
    pub free_blocks_total: Option<u64>,
}

/// `meta.json` → `counts`: what the capture counted, to check a load against.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Counts {
    /// Number of records (lines of `allocs.jsonl`).
    pub records: Option<u64>,
    /// Records by `type`.
    #[serde(default)]
    pub by_type: BTreeMap<String, u64>,
    pub allocs: Option<u64>,
    pub frees: Option<u64>,
    pub pa_releases: Option<u64>,
    pub end_commits: Option<u64>,
    pub blocks_allocated: Option<u64>,
    pub blocks_freed: Option<u64>,
}

/// Accepts `true`/`false` or the integers 0/1.
fn bool_or_int<'de, D: Deserializer<'de>>(de: D) -> Result<bool, D::Error> {
    match Value::deserialize(de)? {
        Value::Bool(b) => Ok(b),
        Value::Number(n) if n.as_u64() == Some(0) => Ok(false),
        Value::Number(n) if n.as_u64() == Some(1) => Ok(true),
        other => Err(serde::de::Error::custom(format!(
            "expected a boolean or 0/1, found {other}"
        ))),
    }
}

/// Accepts null, an integer, or a string holding one (`"0"`).
fn opt_u32_or_string<'de, D: Deserializer<'de>>(de: D) -> Result<Option<u32>, D::Error> {
    let value = Value::deserialize(de)?;
    let parsed = match &value {
        Value::Null => return Ok(None),
        Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    parsed
        .map(Some)
        .ok_or_else(|| serde::de::Error::custom(format!("expected a CPU number, found {value}")))
}
