//! The stored test images (`tests/data/images/`, gzip'd `e2image -r` output), for the test
//! binaries that read them.
#![allow(dead_code)] // each test binary uses its own part

use std::io::Read as _;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// A file of the stored image data.
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/images")
        .join(name)
}

/// The image's bytes, decompressed.
pub fn bytes(name: &str) -> Vec<u8> {
    let gz = std::fs::File::open(data(&format!("{name}.raw.gz"))).unwrap();
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// Writes `img` to `dir/file` sparsely (all-zero blocks are holes: the images are mostly
/// empty), with `flips` (byte offset, xor mask) applied, and returns the path.
pub fn materialise(dir: &Path, file: &str, mut img: Vec<u8>, flips: &[(usize, u8)]) -> PathBuf {
    for &(at, mask) in flips {
        img[at] ^= mask;
    }
    let path = dir.join(file);
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(img.len() as u64).unwrap();
    for (i, chunk) in img.chunks(4096).enumerate() {
        if chunk.iter().any(|&b| b != 0) {
            f.write_all_at(chunk, i as u64 * 4096).unwrap();
        }
    }
    path
}
