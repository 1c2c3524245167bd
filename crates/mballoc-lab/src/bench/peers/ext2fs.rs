//! libext2fs (`e2fsprogs`) through a small C shim (`csrc/ext2fs_shim.c`): an ext4-shaped
//! filesystem held in memory, `ext2fs_new_range(MIN_LENGTH)` from a goal, marked with
//! `ext2fs_block_alloc_stats_range`. Built only where the header was found (see `build.rs`);
//! elsewhere [`Ext2fsPeer::open`] says why it is not available.

use crate::bench::peer::{RangeAlloc, Run, Runs};
use crate::bench::BenchError;

/// Which bitmap back-end libext2fs uses (`blkmap64_ba.c` or `blkmap64_rb.c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    BitArray,
    RbTree,
}

#[cfg(have_ext2fs)]
mod ffi {
    use std::os::raw::{c_char, c_int, c_long, c_uint, c_ulonglong, c_void};
    extern "C" {
        pub fn mb_e2_open(
            path: *const c_char,
            blocks: c_ulonglong,
            per_group: c_uint,
            rbtree: c_int,
            out: *mut *mut c_void,
        ) -> c_long;
        pub fn mb_e2_alloc(
            h: *mut c_void,
            goal: c_ulonglong,
            len: c_uint,
            start: *mut c_ulonglong,
        ) -> c_long;
        pub fn mb_e2_free(h: *mut c_void, start: c_ulonglong, len: c_uint);
        pub fn mb_e2_next_free(
            h: *mut c_void,
            from: c_ulonglong,
            start: *mut c_ulonglong,
            len: *mut c_ulonglong,
        ) -> c_int;
        pub fn mb_e2_close(h: *mut c_void);
    }
}

/// An open in-memory libext2fs filesystem.
pub struct Ext2fsPeer {
    #[cfg(have_ext2fs)]
    fs: *mut std::os::raw::c_void,
    #[cfg(have_ext2fs)]
    _file: TempImage,
    backend: Backend,
}

/// Whether the shim was built into this binary.
pub const AVAILABLE: bool = cfg!(have_ext2fs);

/// Why the peer is missing, when it is.
pub const UNAVAILABLE_REASON: &str =
    "libext2fs header (ext2fs/ext2fs.h, Debian package libext2fs-dev) not found at build time";

/// The file libext2fs opens (it is never written: we never flush); removed on drop.
#[cfg(have_ext2fs)]
struct TempImage(std::path::PathBuf);

#[cfg(have_ext2fs)]
impl Drop for TempImage {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(have_ext2fs)]
impl Ext2fsPeer {
    /// A fresh filesystem of `blocks` 4 KiB blocks, `per_group` blocks per group.
    pub fn open(blocks: u64, per_group: u32, backend: Backend) -> Result<Ext2fsPeer, BenchError> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "mballoc-bench-e2-{}-{}.img",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let file = std::fs::File::create(&path).map_err(|e| BenchError::Io(path.clone(), e))?;
        file.set_len(blocks * 4096)
            .map_err(|e| BenchError::Io(path.clone(), e))?;
        let image = TempImage(path);
        let c = std::ffi::CString::new(image.0.to_string_lossy().as_bytes())
            .map_err(|_| BenchError::Peer("libext2fs: temp path has a NUL byte".into()))?;
        let mut fs = std::ptr::null_mut();
        let rb = i32::from(backend == Backend::RbTree);
        // SAFETY: `c` is a valid C string, `fs` a valid out-pointer; the shim only writes it
        // on success.
        let err = unsafe { ffi::mb_e2_open(c.as_ptr(), blocks, per_group, rb, &mut fs) };
        if err != 0 || fs.is_null() {
            return Err(BenchError::Peer(format!(
                "libext2fs: ext2fs_initialize failed (errcode {err})"
            )));
        }
        Ok(Ext2fsPeer {
            fs,
            _file: image,
            backend,
        })
    }
}

#[cfg(not(have_ext2fs))]
impl Ext2fsPeer {
    /// Always an error here: the shim was not built.
    pub fn open(
        _blocks: u64,
        _per_group: u32,
        _backend: Backend,
    ) -> Result<Ext2fsPeer, BenchError> {
        Err(BenchError::Unavailable(UNAVAILABLE_REASON.into()))
    }
}

#[cfg(have_ext2fs)]
impl Drop for Ext2fsPeer {
    fn drop(&mut self) {
        // SAFETY: `fs` came from mb_e2_open and is freed exactly once.
        unsafe { ffi::mb_e2_close(self.fs) }
    }
}

impl RangeAlloc for Ext2fsPeer {
    type Handle = Run;
    fn name(&self) -> String {
        match self.backend {
            Backend::BitArray => "libext2fs".into(),
            Backend::RbTree => "libext2fs-rbtree".into(),
        }
    }
    #[cfg(have_ext2fs)]
    fn alloc(&mut self, len: u32, goal: u64) -> Result<Option<Run>, BenchError> {
        let mut start = 0;
        // SAFETY: `fs` is open; `start` is a valid out-pointer.
        let err = unsafe { ffi::mb_e2_alloc(self.fs, goal, len, &mut start) };
        Ok((err == 0).then_some((start, len)))
    }
    #[cfg(not(have_ext2fs))]
    fn alloc(&mut self, _len: u32, _goal: u64) -> Result<Option<Run>, BenchError> {
        Err(BenchError::Unavailable(UNAVAILABLE_REASON.into()))
    }
    fn runs(&self, h: &Run) -> Runs {
        Runs::one(h.0, h.1)
    }
    fn free(&mut self, h: Run) -> Result<(), BenchError> {
        #[cfg(have_ext2fs)]
        // SAFETY: `fs` is open; the range was allocated by this peer.
        unsafe {
            ffi::mb_e2_free(self.fs, h.0, h.1)
        };
        let _ = h;
        Ok(())
    }
    #[cfg(have_ext2fs)]
    fn free_runs(&mut self) -> Option<Vec<Run>> {
        let (mut from, mut out) = (0u64, Vec::new());
        loop {
            let (mut s, mut l) = (0, 0);
            // SAFETY: `fs` is open; out-pointers are valid.
            if unsafe { ffi::mb_e2_next_free(self.fs, from, &mut s, &mut l) } != 0 {
                return Some(out);
            }
            out.push((s, l as u32));
            from = s + l;
        }
    }
}
