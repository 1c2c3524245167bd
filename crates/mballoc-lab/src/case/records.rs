//! The records of `allocs.jsonl`: one JSON object per line, tagged by `type`.
//!
//! Each line is parsed once into a `serde_json::Value`, and the typed record is read from
//! that value. Going through a value (rather than an internally tagged serde enum) lets an
//! unknown `type` and a `seq` that is not the line number be reported as their own errors.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::error::CaseError;

/// Fields every record carries: where it sits in the file and which task/CPU produced it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Stamp {
    /// Position in the file, 1-based; equal to the line number (checked on load).
    pub seq: u64,
    /// CPU of the event. Only the rare unpaired `mballoc_discard` records may lack it.
    pub cpu: Option<u32>,
    /// Trace time in seconds; only differences mean anything.
    #[serde(default)]
    pub ts: f64,
    /// Task that produced the event.
    #[serde(default)]
    pub pid: i64,
    /// Task name (`python3`, `jbd2/...`, `kworker/...`).
    #[serde(default)]
    pub comm: String,
    /// Workload step current when the record's first event was seen.
    pub step: Option<u64>,
}

/// One line of `allocs.jsonl`.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// `alloc`: an `ext4_mb_new_blocks()` request and the kernel's answer.
    Alloc(AllocRecord),
    /// `free`: blocks freed; reusable only after the `end_commit` of `tid`.
    Free(FreeRecord),
    /// `pa_release`: unused preallocated blocks that go back to the free space at once.
    PaRelease(PaReleaseRecord),
    /// `commit`: a jbd2 transaction state change.
    Commit(CommitRecord),
    /// `discard_inode_pas`: `ext4_discard_preallocations(inode)` was called.
    DiscardInodePas(DiscardInodePasRecord),
    /// `discard_all_pas_enospc`: the ENOSPC path discarded all PAs.
    DiscardAllPasEnospc(DiscardAllPasEnospcRecord),
    /// Markers, fs operations, inode events and unpaired events: context for a replay.
    Context(ContextRecord),
}

impl Record {
    /// The common fields of the record.
    pub fn stamp(&self) -> &Stamp {
        match self {
            Record::Alloc(r) => &r.stamp,
            Record::Free(r) => &r.stamp,
            Record::PaRelease(r) => &r.stamp,
            Record::Commit(r) => &r.stamp,
            Record::DiscardInodePas(r) => &r.stamp,
            Record::DiscardAllPasEnospc(r) => &r.stamp,
            Record::Context(r) => &r.stamp,
        }
    }

    /// Position in the file (= 1-based line number).
    pub fn seq(&self) -> u64 {
        self.stamp().seq
    }

    /// CPU of the event, where recorded.
    pub fn cpu(&self) -> Option<u32> {
        self.stamp().cpu
    }

    /// The record's `type` as written in the file (the key of `meta.json` → `counts.by_type`).
    pub fn type_name(&self) -> &'static str {
        match self {
            Record::Alloc(_) => "alloc",
            Record::Free(_) => "free",
            Record::PaRelease(_) => "pa_release",
            Record::Commit(_) => "commit",
            Record::DiscardInodePas(_) => "discard_inode_pas",
            Record::DiscardAllPasEnospc(_) => "discard_all_pas_enospc",
            Record::Context(r) => r.kind.as_str(),
        }
    }
}

/// Kind of preallocation: per inode, or the per-CPU locality group's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PaKind {
    Inode,
    Group,
}

/// Where an allocation was served from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AllocSource {
    /// The regular allocator searched the groups.
    Scan,
    /// Served from an existing preallocation.
    Prealloc,
}

/// Which preallocation an allocation used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PaTypeUsed {
    /// A new inode PA made by this request (the request took its matching part).
    NewInode,
    /// A new locality-group PA made by this request (the request took its head).
    NewGroup,
    /// An existing inode PA.
    Inode,
    /// An existing locality-group PA.
    Group,
    /// Served from a PA the parser could not identify.
    Unknown,
}

/// Kernel context the allocation ran in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AllocCtx {
    /// Inside a fallocate of this inode.
    Fallocate,
    /// Inside fsync/fdatasync of this inode.
    Fsync,
}

/// A PA created by an allocation request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct NewPa {
    #[serde(rename = "type")]
    pub kind: PaKind,
    /// Absolute first block.
    pub pstart: u64,
    /// Blocks.
    pub len: u32,
    /// First logical block covered (inode PA); equals `pstart` for a group PA.
    pub lstart: u64,
}

/// A free extent as mballoc's tracepoints print it (`goal_ex`, `result_ex`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct AllocExtent {
    pub group: u32,
    /// Start inside the group; −1 in a goal means "anywhere in this group" (stream goal).
    pub start: i64,
    pub len: u32,
    pub logical: u64,
    /// Absolute first block (`result_ex` only).
    pub block: Option<u64>,
}

/// One per-group piece of a free or a PA release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct GroupExtent {
    pub group: u32,
    /// Start inside the group.
    pub start: u32,
    pub len: u32,
    /// Absolute first block.
    pub block: u64,
}

/// `alloc`: the request (what the model gets) and the kernel's answer (what it must match).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AllocRecord {
    #[serde(skip)]
    pub stamp: Stamp,
    pub ino: u64,
    /// Logical block asked for (`ar->logical`).
    pub lblk: u64,
    /// Blocks asked for (`ar->len`).
    pub len: u32,
    /// Physical goal block (`ar->goal`, absolute).
    pub goal: u64,
    pub lleft: u64,
    pub lright: u64,
    pub pleft: u64,
    pub pright: u64,
    /// `ar->flags` (EXT4_MB_HINT_* bits).
    pub flags: u32,
    /// In-memory i_size in bytes when the request was made; `None` = unknown.
    pub i_size: Option<u64>,
    /// Is the file open for write; `None` = unknown.
    pub wr_open: Option<bool>,
    /// CPU of the request: selects the locality group.
    pub cpu: u32,
    pub ctx: Option<AllocCtx>,
    /// jbd2 transaction of the allocating task's handle (reference only).
    pub handle_tid: Option<u64>,
    pub result_pstart: u64,
    pub result_len: u32,
    pub result_lblk: Option<u64>,
    pub ok: bool,
    /// `None` only for a request the kernel answered without an mballoc event.
    pub source: Option<AllocSource>,
    pub new_pa: Option<NewPa>,
    pub pa_type_used: Option<PaTypeUsed>,
    /// The normalized goal the allocator searched with (scan only).
    pub goal_ex: Option<AllocExtent>,
    /// The extent found (scan: whole PA when one was created; prealloc: the part used).
    pub result_ex: Option<AllocExtent>,
    /// Criterion that found the extent (0 CR_POWER2_ALIGNED … 4 CR_ANY_FREE); scan only.
    pub cr: Option<u8>,
    /// Groups whose buddy was scanned (`ac_groups_scanned`); `None` if the capture lacks it.
    #[serde(default)]
    pub groups_scanned: Option<u32>,
    /// Free extents measured (`ac_found`); `None` if the capture lacks it.
    #[serde(default)]
    pub extents_scanned: Option<u64>,
    /// Allocation-context flags after group-or-file choice and normalization (low 16 bits).
    pub ac_flags: Option<u32>,
    /// Present only if the event sequence was cut.
    pub incomplete: Option<String>,
}

/// `free`: `ext4_free_blocks` with its per-group pieces.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FreeRecord {
    #[serde(skip)]
    pub stamp: Stamp,
    pub ino: u64,
    pub block: u64,
    pub count: u64,
    /// EXT4_FREE_BLOCKS_* bits.
    pub flags: u32,
    /// Transaction the free belongs to: the blocks become free at its `end_commit`. `None`
    /// (`null`) on a filesystem without a journal: the free had no journal handle, and
    /// `ext4_mb_clear_bb` gave the blocks back to the buddy at once.
    pub tid: Option<u64>,
    pub last_locked_tid: Option<u64>,
    /// Inode mode, octal string.
    pub mode: Option<String>,
    #[serde(default)]
    pub extents: Vec<GroupExtent>,
}

/// `pa_release`: one released run of unused preallocated blocks.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PaReleaseRecord {
    #[serde(skip)]
    pub stamp: Stamp,
    #[serde(rename = "pa")]
    pub kind: PaKind,
    /// Inode of an inode PA; `None` for group PAs.
    pub ino: Option<u64>,
    pub block: u64,
    pub count: u64,
    pub extent: Option<GroupExtent>,
}

/// Phase of a jbd2 transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommitPhase {
    /// The journal thread starts committing `tid`.
    StartCommit,
    /// `tid` is locked: handles started from now on belong to `tid + 1`.
    CommitLocking,
    /// `tid` is committed: its freed blocks are back in the allocator.
    EndCommit,
}

/// `commit`: a jbd2 transaction state.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CommitRecord {
    #[serde(skip)]
    pub stamp: Stamp,
    pub phase: CommitPhase,
    pub tid: u64,
    /// 1 if a task waited for this commit.
    pub sync: Option<u8>,
}

/// `discard_inode_pas`: the inode's PAs were discarded (released runs follow as `pa_release`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DiscardInodePasRecord {
    #[serde(skip)]
    pub stamp: Stamp,
    pub ino: u64,
    /// Number of inode PAs (not blocks).
    pub active_pas: u32,
}

/// `discard_all_pas_enospc`: the ENOSPC path discarded all PAs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DiscardAllPasEnospcRecord {
    #[serde(skip)]
    pub stamp: Stamp,
    pub needed: u64,
}

/// The context record types: a replay reads them for orientation only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContextKind {
    Marker,
    FsOp,
    InodeAlloc,
    InodeFree,
    NewPa,
    MballocAllocOrphan,
    MballocPreallocOrphan,
    MballocFreeOrphan,
    MballocDiscard,
}

impl ContextKind {
    const ALL: [ContextKind; 9] = [
        ContextKind::Marker,
        ContextKind::FsOp,
        ContextKind::InodeAlloc,
        ContextKind::InodeFree,
        ContextKind::NewPa,
        ContextKind::MballocAllocOrphan,
        ContextKind::MballocPreallocOrphan,
        ContextKind::MballocFreeOrphan,
        ContextKind::MballocDiscard,
    ];

    /// The `type` string of the record.
    pub fn as_str(self) -> &'static str {
        match self {
            ContextKind::Marker => "marker",
            ContextKind::FsOp => "fs_op",
            ContextKind::InodeAlloc => "inode_alloc",
            ContextKind::InodeFree => "inode_free",
            ContextKind::NewPa => "new_pa",
            ContextKind::MballocAllocOrphan => "mballoc_alloc_orphan",
            ContextKind::MballocPreallocOrphan => "mballoc_prealloc_orphan",
            ContextKind::MballocFreeOrphan => "mballoc_free_orphan",
            ContextKind::MballocDiscard => "mballoc_discard",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// A context record, kept whole: its kind plus every field other than the common ones.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextRecord {
    pub stamp: Stamp,
    pub kind: ContextKind,
    pub fields: Map<String, Value>,
}

impl ContextRecord {
    /// `op` of a marker or fs_op (`fallocate`, `truncate_size`, `syncfs`, ...).
    pub fn op(&self) -> Option<&str> {
        self.fields.get("op").and_then(Value::as_str)
    }

    /// An unsigned integer field, if present and of that type.
    pub fn u64_field(&self, name: &str) -> Option<u64> {
        self.fields.get(name).and_then(Value::as_u64)
    }
}

/// Fields that [`Stamp`] holds, left out of [`ContextRecord::fields`].
const STAMP_FIELDS: [&str; 7] = ["type", "seq", "cpu", "ts", "pid", "comm", "step"];

/// Parses the whole `allocs.jsonl` text. `file` is only used in errors.
pub(crate) fn parse_records(file: &Path, text: &str) -> Result<Vec<Record>, CaseError> {
    text.lines()
        .enumerate()
        .map(|(i, line)| parse_line(file, i + 1, line))
        .collect()
}

/// Parses one line (`line_no` is 1-based) into a typed record.
fn parse_line(file: &Path, line_no: usize, line: &str) -> Result<Record, CaseError> {
    let json_err = |e: serde_json::Error| CaseError::from_json(file.to_path_buf(), line_no, &e);
    let value: Value = serde_json::from_str(line).map_err(json_err)?;
    let kind = record_type(&value).map_err(|msg| CaseError::Json {
        file: file.to_path_buf(),
        line: line_no,
        msg,
    })?;
    let stamp = Stamp::deserialize(&value).map_err(json_err)?;
    if stamp.seq != line_no as u64 {
        return Err(CaseError::SeqMismatch {
            file: file.to_path_buf(),
            line: line_no,
            seq: stamp.seq,
        });
    }
    build(kind, stamp, value).map_err(|e| match e {
        BuildError::Json(e) => json_err(e),
        BuildError::Unknown(kind) => CaseError::UnknownRecordType {
            file: file.to_path_buf(),
            line: line_no,
            kind,
        },
    })
}

/// The `type` of a parsed line, or why it has none.
fn record_type(value: &Value) -> Result<String, String> {
    let obj = value.as_object().ok_or("record is not a JSON object")?;
    match obj.get("type") {
        Some(Value::String(kind)) => Ok(kind.clone()),
        Some(other) => Err(format!("field `type` is not a string: {other}")),
        None => Err("missing field `type`".to_string()),
    }
}

enum BuildError {
    Json(serde_json::Error),
    Unknown(String),
}

impl From<serde_json::Error> for BuildError {
    fn from(e: serde_json::Error) -> Self {
        BuildError::Json(e)
    }
}

/// Reads the typed body of a record of type `kind` and attaches its stamp.
fn build(kind: String, stamp: Stamp, value: Value) -> Result<Record, BuildError> {
    Ok(match kind.as_str() {
        "alloc" => Record::Alloc(AllocRecord {
            stamp,
            ..typed(&value)?
        }),
        "free" => Record::Free(FreeRecord {
            stamp,
            ..typed(&value)?
        }),
        "pa_release" => Record::PaRelease(PaReleaseRecord {
            stamp,
            ..typed(&value)?
        }),
        "commit" => Record::Commit(CommitRecord {
            stamp,
            ..typed(&value)?
        }),
        "discard_inode_pas" => Record::DiscardInodePas(DiscardInodePasRecord {
            stamp,
            ..typed(&value)?
        }),
        "discard_all_pas_enospc" => Record::DiscardAllPasEnospc(DiscardAllPasEnospcRecord {
            stamp,
            ..typed(&value)?
        }),
        other => match ContextKind::parse(other) {
            Some(kind) => Record::Context(context(kind, stamp, value)),
            None => return Err(BuildError::Unknown(kind)),
        },
    })
}

fn typed<T: DeserializeOwned>(value: &Value) -> Result<T, serde_json::Error> {
    T::deserialize(value)
}

fn context(kind: ContextKind, stamp: Stamp, value: Value) -> ContextRecord {
    let mut fields = match value {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    for name in STAMP_FIELDS {
        fields.remove(name);
    }
    ContextRecord {
        stamp,
        kind,
        fields,
    }
}
