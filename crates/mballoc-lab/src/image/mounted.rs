//! Whether an image is mounted read-write right now: its bitmaps then change under the reader
//! (and the on-disk ones lag the kernel's), so reading it gives a state that never existed.
//! A block device is matched against `/proc/self/mounts` by device number; an image file
//! through the loop devices that have it as their backing file.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use super::error::ImageError;

/// A read-write mount of `path`, if there is one.
pub fn check_not_mounted_rw(path: &Path) -> Result<(), ImageError> {
    let Ok(mounts) = fs::read_to_string("/proc/self/mounts") else {
        return Ok(()); // Not Linux, or no /proc: nothing to check against.
    };
    let devices = devices_of(path);
    if devices.is_empty() {
        return Ok(());
    }
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [source, target, _fstype, options, ..] = f[..] else {
            continue;
        };
        let rw = options.split(',').any(|o| o == "rw");
        if rw && rdev(Path::new(source)).is_some_and(|d| devices.contains(&d)) {
            return Err(ImageError::MountedReadWrite {
                path: path.to_path_buf(),
                device: source.to_string(),
                mount_point: unescape(target),
            });
        }
    }
    Ok(())
}

/// Device numbers that stand for `path`: its own for a block device, those of the loop
/// devices backed by it for a file.
fn devices_of(path: &Path) -> Vec<u64> {
    let Ok(meta) = fs::metadata(path) else {
        return Vec::new();
    };
    if meta.file_type().is_block_device() {
        return vec![meta.rdev()];
    }
    let Ok(canon) = fs::canonicalize(path) else {
        return Vec::new();
    };
    let Ok(entries) = fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let backing = fs::read_to_string(e.path().join("loop/backing_file")).ok()?;
            (canon == Path::new(backing.trim_end())).then_some(())?;
            rdev(&Path::new("/dev").join(e.file_name()))
        })
        .collect()
}

fn rdev(p: &Path) -> Option<u64> {
    let m = fs::metadata(p).ok()?;
    m.file_type().is_block_device().then(|| m.rdev())
}

/// `/proc/self/mounts` escapes blanks as octal (`\040`).
fn unescape(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\134", "\\")
}
