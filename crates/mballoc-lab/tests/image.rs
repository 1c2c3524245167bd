//! The ext4 image reader against what the real tools say about the same images: the kernel's
//! `/proc/fs/ext4/<dev>/mb_groups` (captured once from a read-only loop mount), e2freefrag,
//! dumpe2fs and debugfs (`scripts/image_fixtures.sh` made the images and the captures). The
//! images are stored as gzip'd `e2image -r` output; nothing here mounts anything.

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;

use mballoc_lab::image::{Image, ImageError, OpenOptions};

mod image_support;
use image_support::{bytes, data, materialise};

const IMAGES: [&str; 3] = ["frag4k", "frag1k", "old4k"];

fn text(name: &str) -> String {
    std::fs::read_to_string(data(name)).unwrap()
}

/// `name`'s image with `flips` applied, written to `dir/file` and opened.
fn open_image(dir: &Path, file: &str, name: &str, flips: &[(usize, u8)]) -> Image {
    open(&materialise(dir, file, bytes(name), flips))
}

/// Runs `mballoc args` in `dir`, asserts it succeeded, and returns its stdout.
fn mballoc_ok(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_mballoc"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "mballoc {args:?}: {err}");
    String::from_utf8(out.stdout).unwrap()
}

fn open(path: &Path) -> Image {
    Image::open(path, OpenOptions::default()).unwrap()
}

/// `mballoc groups --image` prints the kernel's mb_groups byte for byte: 4 KiB and 1 KiB
/// blocks, metadata_csum with flex_bg and BLOCK_UNINIT groups, and uninit_bg's crc16 without
/// flex_bg.
#[test]
fn groups_are_the_kernels_mb_groups() {
    let dir = tempfile::tempdir().unwrap();
    for name in IMAGES {
        let path = materialise(dir.path(), &format!("{name}.img"), bytes(name), &[]);
        let ours = open(&path).view().unwrap().mb_groups_text();
        assert_eq!(ours, text(&format!("{name}.mb_groups")), "{name}");
    }
}

/// `mballoc freefrag --image` prints what e2freefrag printed, the device line included (run
/// in the image's folder with the same relative name).
#[test]
fn freefrag_is_e2freefrags_output() {
    let dir = tempfile::tempdir().unwrap();
    for name in IMAGES {
        let file = format!("{name}.img");
        materialise(dir.path(), &file, bytes(name), &[]);
        assert_eq!(
            mballoc_ok(dir.path(), &["freefrag", "--image", &file]),
            text(&format!("{name}.e2freefrag")),
            "{name}"
        );
    }
}

/// One group of dumpe2fs's listing: flags, bitmap and table locations, free blocks.
#[derive(Debug, PartialEq)]
struct DumpGroup {
    block_uninit: bool,
    inode_uninit: bool,
    block_bitmap: u64,
    inode_bitmap: u64,
    inode_table: u64,
    free_blocks: u32,
}

fn dumpe2fs_groups(name: &str) -> Vec<DumpGroup> {
    let mut out: Vec<DumpGroup> = Vec::new();
    let num = |s: &str| -> u64 {
        s.trim_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .unwrap()
    };
    for line in text(&format!("{name}.dumpe2fs")).lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first() == Some(&"Group") && words.get(1).is_some_and(|w| w.ends_with(':')) {
            out.push(DumpGroup {
                block_uninit: line.contains("BLOCK_UNINIT"),
                inode_uninit: line.contains("INODE_UNINIT"),
                block_bitmap: 0,
                inode_bitmap: 0,
                inode_table: 0,
                free_blocks: 0,
            });
        } else if let Some(g) = out.last_mut() {
            match words[..] {
                ["Block", "bitmap", "at", at, ..] => g.block_bitmap = num(at),
                ["Inode", "bitmap", "at", at, ..] => g.inode_bitmap = num(at),
                ["Inode", "table", "at", at, ..] => {
                    g.inode_table = num(at.split('-').next().unwrap())
                }
                [free, "free", "blocks,", ..] => g.free_blocks = num(free) as u32,
                _ => {}
            }
        }
    }
    out
}

/// Descriptors as dumpe2fs lists them, and no checksum failure on a clean image.
#[test]
fn descriptors_are_dumpe2fs_groups() {
    let dir = tempfile::tempdir().unwrap();
    for name in IMAGES {
        let img = open(&materialise(dir.path(), "i.img", bytes(name), &[]));
        let sb = img.superblock();
        let ours: Vec<DumpGroup> = img
            .descriptors()
            .iter()
            .map(|d| {
                assert!(d.csum_error.is_none(), "{name}: {:?}", d.csum_error);
                DumpGroup {
                    block_uninit: d.block_uninit(sb),
                    inode_uninit: d.inode_uninit(sb),
                    block_bitmap: d.block_bitmap,
                    inode_bitmap: d.inode_bitmap,
                    inode_table: d.inode_table,
                    free_blocks: d.free_blocks,
                }
            })
            .collect();
        assert_eq!(ours, dumpe2fs_groups(name), "{name}");
        assert!(
            ours.iter().any(|g| g.block_uninit) || name == "old4k",
            "{name}"
        );
    }
}

/// Every regular file's leaf extents as debugfs lists them (`ex <ino>`).
#[test]
fn file_extents_are_debugfs_extents() {
    let dir = tempfile::tempdir().unwrap();
    for name in IMAGES {
        let img = open(&materialise(dir.path(), "i.img", bytes(name), &[]));
        let scan = img.files().unwrap();
        assert!(scan.errors.is_empty(), "{name}: {:?}", scan.errors);
        let mut ours: Vec<[u64; 4]> = scan
            .files
            .iter()
            .flat_map(|f| {
                f.extents
                    .iter()
                    .map(|e| [f.ino, u64::from(e.logical), e.physical, u64::from(e.len)])
            })
            .collect();
        ours.sort_unstable();
        let theirs: Vec<[u64; 4]> = text(&format!("{name}.extents"))
            .lines()
            .map(|l| {
                let v: Vec<u64> = l.split_whitespace().map(|w| w.parse().unwrap()).collect();
                [v[0], v[1], v[2], v[3]]
            })
            .collect();
        assert!(!theirs.is_empty());
        assert_eq!(ours, theirs, "{name}");
        // fallocate left unwritten extents behind (every fifth file).
        assert!(scan
            .files
            .iter()
            .flat_map(|f| &f.extents)
            .any(|e| e.unwritten));
    }
}

/// The byte `scripts/image_fixtures.sh` flipped before the kernel read these captures.
const BAD_BITMAP: (usize, u8) = (98 * 4096 + 100, 0x0f);
const BAD_DESC: (usize, u8) = (4096 + 4 * 64 + 0x3c, 0x0f);

/// A block bitmap that fails its checksum is a typed error naming the group, and the group
/// shows as the kernel showed it ("Filesystem failed CRC"); e2freefrag's view stops there.
#[test]
fn bad_bitmap_checksum_is_a_typed_error_and_the_kernels_line() {
    let dir = tempfile::tempdir().unwrap();
    let img = open_image(dir.path(), "b.img", "frag4k", &[BAD_BITMAP]);
    assert!(matches!(
        img.block_bitmap(1),
        Err(ImageError::BlockBitmapChecksum { group: 1, stored, computed }) if stored != computed
    ));
    let view = img.view().unwrap();
    assert_eq!(view.mb_groups_text(), text("frag4k-bad-bitmap.mb_groups"));
    assert!(matches!(
        view.freefrag("b.img"),
        Err(ImageError::BlockBitmapChecksum { group: 1, .. })
    ));
    // The other groups are untouched.
    assert!((0..6)
        .filter(|&g| g != 1)
        .all(|g| img.block_bitmap(g).is_ok()));
}

/// A `BLOCK_UNINIT` group whose descriptor fails its checksum cannot have its bitmap computed
/// (`ext4_init_block_bitmap`), as the kernel showed.
#[test]
fn bad_descriptor_checksum_fails_its_block_uninit_group() {
    let dir = tempfile::tempdir().unwrap();
    let img = open_image(dir.path(), "d.img", "frag4k", &[BAD_DESC]);
    assert!(matches!(
        img.descriptors()[4].csum_error.as_deref(),
        Some(ImageError::DescriptorChecksum { group: 4, .. })
    ));
    assert!(matches!(
        img.block_bitmap(4),
        Err(ImageError::DescriptorChecksum { group: 4, .. })
    ));
    assert_eq!(
        img.view().unwrap().mb_groups_text(),
        text("frag4k-bad-desc.mb_groups")
    );
}

/// uninit_bg's crc16 descriptor checksum is checked too; a group whose bitmap is on disk
/// still loads (its bitmap has no checksum of its own there).
#[test]
fn crc16_descriptor_checksum_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    // old4k: 32-byte descriptors in block 1; byte 0x14 (bg_exclude_bitmap_lo) of group 2's.
    let img = open_image(dir.path(), "o.img", "old4k", &[(4096 + 2 * 32 + 0x14, 1)]);
    assert!(matches!(
        img.descriptors()[2].csum_error.as_deref(),
        Some(ImageError::DescriptorChecksum { group: 2, .. })
    ));
    assert!(img
        .descriptors()
        .iter()
        .enumerate()
        .all(|(g, d)| (g == 2) == d.csum_error.is_some()));
    assert!(img.block_bitmap(2).is_ok());
}

/// A superblock or inode that fails its checksum is a typed error too.
#[test]
fn superblock_and_inode_checksums_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    // s_wtime, inside the checksummed range.
    let p = materialise(dir.path(), "s.img", bytes("frag4k"), &[(1024 + 0x30, 1)]);
    assert!(matches!(
        Image::open(&p, OpenOptions::default()),
        Err(ImageError::SuperblockChecksum { stored, computed }) if stored != computed
    ));
    // The first file's inode: i_atime of inode `ino` in group 0's table.
    let clean = open_image(dir.path(), "c.img", "frag4k", &[]);
    let first = clean.files().unwrap().files[0].ino;
    let d = &clean.descriptors()[0];
    let at = d.inode_table * 4096 + (first - 1) * u64::from(clean.superblock().inode_size) + 0x8;
    let img = open_image(dir.path(), "n.img", "frag4k", &[(at as usize, 1)]);
    let scan = img.files().unwrap();
    assert!(scan
        .errors
        .iter()
        .any(|e| matches!(e, ImageError::InodeChecksum { ino, .. } if *ino == first)));
    assert!(scan.files.iter().all(|f| f.ino != first));
    assert_eq!(scan.files.len() + 1, clean.files().unwrap().files.len());
}

/// Reading never changes the image.
#[test]
fn reading_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let original = bytes("frag1k");
    let p = materialise(dir.path(), "r.img", original.clone(), &[]);
    let img = open(&p);
    img.view().unwrap().frag_report(&img).unwrap();
    drop(img);
    assert!(std::fs::read(&p).unwrap() == original);
}

/// Not ext4, or cut short: typed errors with the values.
#[test]
fn garbage_and_truncated_images_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = materialise(dir.path(), "z.img", vec![0u8; 8192], &[]);
    assert!(matches!(
        Image::open(&p, OpenOptions::default()),
        Err(ImageError::BadMagic { magic: 0 })
    ));
    let whole = bytes("frag4k");
    let p = materialise(dir.path(), "s.img", whole[..1500].to_vec(), &[]);
    assert!(matches!(
        Image::open(&p, OpenOptions::default()),
        Err(ImageError::Truncated {
            what: "superblock",
            ..
        })
    ));
    // Cut inside its metadata, or after it (everything `groups` reads is in the first 3 MB):
    // both refused as the kernel refuses a device smaller than its file system, where the
    // second read as the whole image.
    for (cut, blocks) in [(4096 + 100, 1), (3_000_000, 732)] {
        let p = materialise(dir.path(), "t.img", whole[..cut].to_vec(), &[]);
        match Image::open(&p, OpenOptions::default()) {
            Err(ImageError::ShortDevice {
                blocks_count: 24576,
                device_blocks,
                block_size: 4096,
                ..
            }) => assert_eq!(device_blocks, blocks, "cut at {cut}"),
            Err(e) => panic!("cut at {cut}: {e}"),
            Ok(_) => panic!("cut at {cut}: opened"),
        }
    }
}

fn run_cfg(image: &Path, workload: &str, settings: &[&str]) -> mballoc_lab::workload::RunConfig {
    mballoc_lab::workload::RunConfig {
        workload: workload.into(),
        policy: mballoc::Policy::Linux618,
        settings: settings.iter().map(|s| s.to_string()).collect(),
        threads: 1,
        fs_size: 0,
        seed: 3,
        quick: true,
        load_cost_ns: 0,
        image: Some(mballoc_lab::workload::ImageRun {
            path: image.to_path_buf(),
            allow_mounted: false,
        }),
    }
}

/// Used blocks of the image's files, as absolute ranges.
fn file_ranges(img: &Image) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = img
        .files()
        .unwrap()
        .files
        .iter()
        .flat_map(|f| f.extents.iter().map(|e| (e.physical, u64::from(e.len))))
        .collect();
    v.sort_unstable();
    v
}

/// A workload runs from the image's state: it starts with the image's free blocks, never
/// places anything on the image's files, numbers its files after the image's, and leaves the
/// image as it was.
#[test]
fn a_run_starts_from_the_image_state() {
    let dir = tempfile::tempdir().unwrap();
    let original = bytes("frag4k");
    let p = materialise(dir.path(), "w.img", original.clone(), &[]);
    let img = open(&p);
    let before = img.view().unwrap().free_space().unwrap().free_blocks();
    let max_ino = img
        .files()
        .unwrap()
        .files
        .iter()
        .map(|f| f.ino)
        .max()
        .unwrap();
    let out = mballoc_lab::workload::run_detailed(
        &run_cfg(&p, "appenders", &["ops=20"]),
        &mballoc_lab::workload::NoProgress,
    )
    .unwrap();
    let r = &out.result;
    assert_eq!(r.fs_size, 96 << 20);
    assert_eq!(r.scalars["aged_files"], 40.0);
    // Data and the extent-tree blocks of files past 4 extents.
    let written = r.scalars["blocks_allocated"] as u64;
    assert_eq!(written - r.scalars["tree_blocks"] as u64, 32 * 20);
    assert_eq!(out.allocator.free_blocks(), before - written);
    let theirs = file_ranges(&img);
    for f in &out.files {
        assert!(f.ino > max_ino, "new file {} among the image's", f.ino);
        for m in f.map.iter() {
            let (s, e) = (m.physical, m.physical + u64::from(m.len));
            assert!(
                theirs.iter().all(|&(ts, tl)| e <= ts || s >= ts + tl),
                "file {} got {s}..{e}, an image file's blocks",
                f.ino
            );
        }
    }
    assert!(std::fs::read(&p).unwrap() == original);
}

/// A group whose bitmap fails its checksum is left out of a run as the kernel leaves it out:
/// marked corrupt when first needed, never allocated from.
#[test]
fn a_run_leaves_a_corrupt_group_alone() {
    let dir = tempfile::tempdir().unwrap();
    let p = materialise(dir.path(), "c.img", bytes("frag4k"), &[BAD_BITMAP]);
    let out = mballoc_lab::workload::run_detailed(
        &run_cfg(&p, "appenders", &["ops=20"]),
        &mballoc_lab::workload::NoProgress,
    )
    .unwrap();
    let corrupt = out.allocator.corrupt_groups();
    assert_eq!(corrupt.len(), 1);
    assert_eq!(corrupt[0].0, 1);
    assert!(
        corrupt[0].1.contains("block bitmap checksum"),
        "{}",
        corrupt[0].1
    );
    let geo = *out.allocator.geometry();
    assert!(out
        .files
        .iter()
        .flat_map(|f| f.map.iter())
        .all(|m| geo.locate(m.physical).0 != 1));
}

/// Settings that would replace the image's state are refused; 1 KiB blocks are refused for
/// runs (the file layer models 4 KiB blocks) with the reason.
#[test]
fn runs_refuse_what_an_image_cannot_be() {
    let dir = tempfile::tempdir().unwrap();
    let p = materialise(dir.path(), "a.img", bytes("frag4k"), &[]);
    let nop = &mballoc_lab::workload::NoProgress;
    let err =
        mballoc_lab::workload::run(&run_cfg(&p, "appenders", &["prefill=0.5"]), nop).unwrap_err();
    assert!(
        err.to_string().contains("the image is the starting state"),
        "{err}"
    );
    let p1 = materialise(dir.path(), "k.img", bytes("frag1k"), &[]);
    let err = mballoc_lab::workload::run(&run_cfg(&p1, "appenders", &["ops=1"]), nop).unwrap_err();
    assert!(err.to_string().contains("1024"), "{err}");
}

/// A capture's request stream replays on the image: every allocation is answered, the blocks
/// add up, and its goals follow its own earlier extents there.
#[test]
fn a_capture_replays_on_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let p = materialise(dir.path(), "r.img", bytes("frag4k"), &[]);
    let img = open(&p);
    let case = mballoc_lab::case::Case::load(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernel-cases/falloc-1g-mixed"),
    )
    .unwrap();
    let r = mballoc_lab::image::replay::replay_on_image(&case, &img, None).unwrap();
    let c = &r.counts;
    assert_eq!(c.placed + c.failed, c.allocs);
    assert!(c.placed > 0 && c.goals_followed > 0);
    assert_eq!(
        r.free_before,
        img.view().unwrap().free_space().unwrap().free_blocks()
    );
    // The stream is 1 GiB of fallocates on a 96 MiB image: it runs out of space.
    assert!(c.failed > 0 && r.free_after < r.free_before / 100);
    assert!(r.mb_groups.starts_with("#group: free  frags first"));
    let other =
        mballoc_lab::image::replay::replay_on_image(&case, &img, Some(mballoc::Policy::Proposed))
            .unwrap();
    assert_eq!(other.tunables, "proposed");
}

/// `mballoc frag --json --svg`: fsperf frag_pct for every group, extents per file, and a heat
/// map with one cell per group.
#[test]
fn frag_reports_json_and_a_heat_map() {
    let dir = tempfile::tempdir().unwrap();
    materialise(dir.path(), "f.img", bytes("frag4k"), &[]);
    let json = mballoc_ok(
        dir.path(),
        &["frag", "--json", "--image", "f.img", "--svg", "heat.svg"],
    );
    let svg = dir.path().join("heat.svg");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let per_group = v["frag_pct"]["per_group_frag_pct"].as_array().unwrap();
    assert_eq!(per_group.len(), 6);
    // Group 1 of the kernel's capture: 1745 free in 13 runs, the largest 256 (2^8) long.
    let g1 = per_group[1].as_f64().unwrap();
    assert!(g1 > 0.0 && g1 < 100.0);
    assert_eq!(v["file_extents"]["files"], 40);
    assert_eq!(v["block_uninit_groups"], serde_json::json!([3, 4]));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"));
    assert_eq!(text.matches("<rect").count(), 6);
}

/// `mballoc groups --image` through the command line, and a clear refusal of a file that is
/// not ext4.
#[test]
fn groups_command_prints_the_kernels_text_and_refuses_garbage() {
    let dir = tempfile::tempdir().unwrap();
    materialise(dir.path(), "g.img", bytes("old4k"), &[]);
    assert_eq!(
        mballoc_ok(dir.path(), &["groups", "--image", "g.img"]),
        text("old4k.mb_groups")
    );
    materialise(dir.path(), "z.img", vec![0u8; 4096], &[]);
    let out = Command::new(env!("CARGO_BIN_EXE_mballoc"))
        .args(["groups", "--image", "z.img"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an ext4 file system"));
}

/// `imageappend` appends to the image's own files: each keeps its extents and inode number
/// and grows by exactly the appended blocks, which never land on another image file, and
/// appends aimed past a file's last extent hit their goal there.
#[test]
fn imageappend_grows_the_images_files() {
    let dir = tempfile::tempdir().unwrap();
    let p = materialise(dir.path(), "a.img", bytes("frag4k"), &[]);
    let img = open(&p);
    let before = img.files().unwrap().files;
    let out = mballoc_lab::workload::run_detailed(
        &run_cfg(&p, "imageappend", &["ops=4"]),
        &mballoc_lab::workload::NoProgress,
    )
    .unwrap();
    assert_eq!(out.files.len(), before.len());
    let image_blocks: HashSet<u64> = file_ranges(&img)
        .into_iter()
        .flat_map(|(s, n)| s..s + n)
        .collect();
    for (old, new) in before.iter().zip(&out.files) {
        assert_eq!(old.ino, new.ino);
        let old_blocks: u64 = old.extents.iter().map(|e| u64::from(e.len)).sum();
        assert_eq!(new.map.blocks(), old_blocks + 4 * 16, "file {}", old.ino);
        for e in &old.extents {
            assert_eq!(
                new.map
                    .lookup(e.logical)
                    .map(|m| m.physical + u64::from(e.logical - m.logical)),
                Some(e.physical)
            );
        }
        let own: HashSet<u64> = old
            .extents
            .iter()
            .flat_map(|e| e.physical..e.physical + u64::from(e.len))
            .collect();
        let new_blocks = new
            .map
            .iter()
            .flat_map(|m| m.physical..m.physical + u64::from(m.len))
            .filter(|b| !own.contains(b));
        for b in new_blocks {
            assert!(
                !image_blocks.contains(&b),
                "file {} appended onto block {b}",
                old.ino
            );
        }
    }
    let r = &out.result;
    assert_eq!(
        r.scalars["bytes_appended"],
        (before.len() * 4 * 65536) as f64
    );
    assert!(r.scalars["mb_goal_hits"] > 0.0);
}
