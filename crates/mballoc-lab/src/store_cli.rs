//! `mballoc mkstore`, `mballoc info`, `mballoc fsck`: create, describe and check a durable
//! allocator store (`mballoc::store::FileStore`), the way `mkfs`, `dumpe2fs -h` and `e2fsck -n`
//! do for ext4.
//!
//! `info` reads only the superblock and the descriptors (what opening a store costs), so it
//! is instant even on a 16 TiB store; `fsck` reads every bitmap, recomputes every checksum and
//! free count. Both open the store read-only under a shared lock: they never write (a log
//! record not yet applied is replayed in memory only), work on a file the user may only read,
//! and refuse a store a writer has open rather than read it half-way through a commit.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use mballoc::store::{
    verify_device, FileDevice, FileStore, FileStoreOptions, GroupFlags, OpenOptions, Store,
};
use mballoc::Geometry;

/// Groups per flex group: what mkfs.ext4 picks, and only a placement hint here.
const FLEX_BG: u32 = 16;

#[derive(Args)]
pub struct MkstoreArgs {
    /// The store file (created, or a block device used as is).
    pub path: PathBuf,
    /// Space the store manages: bytes, or with a K/M/G/T/P suffix (binary units), e.g. 1T.
    #[arg(long)]
    pub size: String,
    /// Block size, 1K to 64K.
    #[arg(long, default_value = "4K")]
    pub block_size: String,
    /// Write-ahead log size; one commit's record must fit in half of it.
    #[arg(long, default_value = "4M")]
    pub log_size: String,
    /// Overwrite an existing non-empty file.
    #[arg(long)]
    pub force: bool,
}

#[derive(Args)]
pub struct InfoArgs {
    /// The store file.
    pub path: PathBuf,
    /// Also print one line per group.
    #[arg(long)]
    pub groups: bool,
    /// If a writer has the store open, wait up to this many seconds for it to close it
    /// (default: fail at once).
    #[arg(long, value_name = "SECONDS")]
    pub wait: Option<f64>,
}

#[derive(Args)]
pub struct FsckArgs {
    /// The store file.
    pub path: PathBuf,
    /// If a writer has the store open, wait up to this many seconds for it to close it
    /// (default: fail at once).
    #[arg(long, value_name = "SECONDS")]
    pub wait: Option<f64>,
}

/// `e`, led by the store's path unless it already names it.
fn named(path: &std::path::Path, e: &mballoc::store::StoreError) -> String {
    let (p, msg) = (path.display().to_string(), e.to_string());
    if msg.contains(&p) {
        msg
    } else {
        format!("{p}: {msg}")
    }
}

/// Read-only, waiting `wait` seconds for a writer's lock.
fn read_only(wait: Option<f64>) -> Result<OpenOptions, String> {
    let wait = wait
        .map(|w| Duration::try_from_secs_f64(w).map_err(|e| format!("--wait {w}: {e}")))
        .transpose()?;
    Ok(OpenOptions::read_only().wait(wait))
}

/// Parses `4096`, `4K`, `1T`, `16TiB` (binary units).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("bad size {s:?}: expected a number with an optional K/M/G/T/P"))?;
    let unit = unit.trim().to_ascii_uppercase();
    let shift = match unit.trim_end_matches('B').trim_end_matches('I') {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        "P" => 50,
        _ => return Err(format!("bad size unit in {s:?}: use K, M, G, T or P")),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("size {s:?} is too large"))
}

/// `1.00 TiB`-style.
fn human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// The geometry `mkstore` gives `size` bytes of `block_size`-byte blocks: full bitmaps of
/// `8 * block_size` blocks per group, and (as ext4) block 0 reserved with 1 KiB blocks.
/// Errors name the argument at fault (`--size` or `--block-size`).
pub fn geometry_for(size: u64, block_size: u64) -> Result<Geometry, String> {
    let bs =
        u32::try_from(block_size).map_err(|_| format!("--block-size {block_size}: too large"))?;
    let blocks = size / block_size.max(1);
    let first = u64::from(bs == 1024);
    Geometry::new(bs, bs.saturating_mul(8), blocks, first, FLEX_BG).map_err(|e| match e.field {
        "block_size" | "blocks_per_group" | "first_data_block" => {
            format!("--block-size {block_size}: {e}")
        }
        _ => format!("--size {size}: {e}"),
    })
}

/// Parses the value of `flag`, naming it in the error.
fn size_arg(flag: &str, value: &str) -> Result<u64, String> {
    parse_size(value).map_err(|e| format!("{flag}: {e}"))
}

pub fn mkstore(a: &MkstoreArgs) -> Result<(), String> {
    let geo = geometry_for(
        size_arg("--size", &a.size)?,
        size_arg("--block-size", &a.block_size)?,
    )?;
    let opts = FileStoreOptions {
        log_len: size_arg("--log-size", &a.log_size)?,
    };
    // Checked before the file is touched: a bad log size leaves nothing behind.
    let len = FileStore::required_len(&geo, opts)
        .map_err(|e| format!("--log-size {}: {e}", a.log_size))?;
    let existed = std::fs::symlink_metadata(&a.path).is_ok();
    if let Ok(meta) = std::fs::metadata(&a.path) {
        if meta.is_file() && meta.len() > 0 && !a.force {
            return Err(format!(
                "{} exists and is not empty; pass --force to overwrite it",
                a.path.display()
            ));
        }
    }
    let store = FileStore::create_with(&a.path, geo, &[], opts).map_err(|e| {
        if !existed {
            let _ = std::fs::remove_file(&a.path);
        }
        format!("{}: {e}", a.path.display())
    })?;
    println!(
        "created {}: {} blocks of {} bytes ({}), {} groups of {} blocks; store {} bytes ({}), commit {}",
        a.path.display(),
        geo.blocks_count(),
        geo.block_size(),
        human(geo.bytes()),
        geo.group_count(),
        geo.clusters_per_group(),
        len,
        human(len),
        store.last_commit().0
    );
    Ok(())
}

pub fn info(a: &InfoArgs) -> Result<(), String> {
    let store =
        FileStore::open_with(&a.path, read_only(a.wait)?).map_err(|e| named(&a.path, &e))?;
    let geo = store.geometry();
    let descs = store.descriptors();
    let corrupt = store.corrupt_groups();
    // Corrupt groups carry the CORRUPT flag: one pass, however many there are.
    let sound = || {
        descs
            .iter()
            .enumerate()
            .filter(|(_, d)| !d.flags.contains(GroupFlags::CORRUPT))
    };
    let usable: u64 = sound()
        .map(|(g, _)| u64::from(geo.group_len(g as u32)))
        .sum();
    let free: u64 = sound().map(|(_, d)| u64::from(d.free)).sum();
    let uninit = descs
        .iter()
        .filter(|d| d.flags.contains(GroupFlags::BLOCK_UNINIT))
        .count();
    let full = descs.iter().filter(|d| d.free == 0).count();
    let (log_off, log_len) = store.log_area();
    println!("store:            {}", a.path.display());
    println!("block size:       {}", geo.block_size());
    println!(
        "blocks:           {} ({})",
        geo.blocks_count(),
        human(geo.bytes())
    );
    println!("first data block: {}", geo.first_data_block());
    println!("blocks per group: {}", geo.clusters_per_group());
    println!("flex_bg size:     {}", geo.flex_bg_size());
    println!("groups:           {}", geo.group_count());
    println!("never written:    {uninit} groups");
    println!("full:             {full} groups");
    println!(
        "free blocks:      {free} of {usable} ({}, {:.2} %)",
        human(free * u64::from(geo.block_size())),
        100.0 * free as f64 / usable.max(1) as f64
    );
    println!("last commit:      {}", store.last_commit().0);
    if let Some(id) = store.recovered() {
        println!(
            "unapplied log:    commit {} replayed in memory for this report; the store is \
             unchanged (the next read-write open applies it)",
            id.0
        );
    }
    println!("log:              {} bytes at byte {log_off}", log_len);
    println!(
        "corrupt groups:   {} (descriptors only; `mballoc fsck` checks every bitmap)",
        list(&corrupt)
    );
    if a.groups {
        println!("#group  free     flags");
        for (g, d) in descs.iter().enumerate() {
            let mut flags = Vec::new();
            if d.flags.contains(GroupFlags::BLOCK_UNINIT) {
                flags.push("BLOCK_UNINIT");
            }
            if d.flags.contains(GroupFlags::CORRUPT) {
                flags.push("CORRUPT");
            }
            println!("{g:<7} {:<8} {}", d.free, flags.join(","));
        }
    }
    Ok(())
}

fn list(groups: &[u32]) -> String {
    if groups.is_empty() {
        return "none".into();
    }
    let shown: Vec<String> = groups.iter().take(32).map(u32::to_string).collect();
    let more = groups.len().saturating_sub(32);
    let tail = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!("{} [{}{tail}]", groups.len(), shown.join(", "))
}

pub fn fsck(a: &FsckArgs) -> Result<(), String> {
    let dev = FileDevice::open(&a.path, read_only(a.wait)?).map_err(|e| named(&a.path, &e))?;
    let problems = verify_device(Arc::new(dev)).map_err(|e| named(&a.path, &e))?;
    if problems.is_empty() {
        println!(
            "{}: clean (superblock, every descriptor and bitmap checksum, free counts, log \
             markers and the latest record; the unused rest of the log is not checked: it \
             holds whatever older commits left there, and recovery never reads it)",
            a.path.display()
        );
        return Ok(());
    }
    for p in &problems {
        println!("{}: {p}", a.path.display());
    }
    Err(format!(
        "{}: {} problem(s) found",
        a.path.display(),
        problems.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        assert_eq!(parse_size("16TiB"), Ok(16 << 40));
        assert_eq!(parse_size("2 GB"), Ok(2 << 30));
        assert!(parse_size("").is_err());
        assert!(parse_size("4X").is_err());
        assert!(parse_size("99999999P").is_err());
    }

    #[test]
    fn one_tib_of_4k_blocks_is_8192_groups() {
        let g = geometry_for(1 << 40, 4096).unwrap();
        assert_eq!((g.group_count(), g.clusters_per_group()), (8192, 32768));
        let small = geometry_for(1 << 20, 1024).unwrap();
        assert_eq!(small.first_data_block(), 1);
        assert!(geometry_for(1 << 20, 3000).is_err());
        assert!(geometry_for(100, 4096).is_err());
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(1 << 40), "1.00 TiB");
    }
}
