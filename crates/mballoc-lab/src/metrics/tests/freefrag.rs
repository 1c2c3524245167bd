use super::close;
use crate::metrics::freefrag::{e2freefrag, FreeFragOptions};
use crate::metrics::log2_hist::bucket_labels;
use crate::metrics::{FreeSpace, MetricsError, RunScope};

/// Two 64-block groups, 4 KiB blocks (128 blocks = 512 KiB):
/// g0 free (0,1) (3,2) (8,8) (32,32)  — the last run ends at the group boundary;
/// g1 free (0,4) (10,3) (20,20).
/// Device runs (offline scan, merged across groups):
///   [0,1)=1, [3,5)=2, [8,16)=8, [32,68)=36, [74,77)=3, [84,104)=20  -> 6 extents, 70 blocks.
fn space() -> FreeSpace {
    FreeSpace::from_extents(
        &[
            vec![(0, 1), (3, 2), (8, 8), (32, 32)],
            vec![(0, 4), (10, 3), (20, 20)],
        ],
        64,
        4096,
    )
    .unwrap()
}

#[test]
fn histogram_and_extent_stats_by_hand() {
    let f = e2freefrag(&space(), &FreeFragOptions::default()).unwrap();
    assert_eq!((f.total_blocks, f.free_blocks), (128, 70));
    close(f.free_pct, 70.0 * 100.0 / 128.0);
    assert_eq!(f.num_free_extent, 6);
    // min 1 block = 4 KB, max 36 blocks = 144 KB, avg = (70 / 6 = 11, integer) · 4 = 44 KB.
    assert_eq!(
        (
            f.min_free_extent_kb,
            f.max_free_extent_kb,
            f.avg_free_extent_kb
        ),
        (4, 144, 44)
    );
    // Buckets ⌊log2 n⌋ + 1: 1 -> 1; 2, 3 -> 2; 8 -> 4; 20 -> 5; 36 -> 6.
    let rows: Vec<(&str, u64, u64)> = f
        .histogram
        .iter()
        .map(|b| (b.range.as_str(), b.extents, b.blocks))
        .collect();
    assert_eq!(
        rows,
        vec![
            ("4K...8K-", 1, 1),
            ("8K...16K-", 2, 5),
            ("32K...64K-", 1, 8),
            ("64K...128K-", 1, 20),
            ("128K...256K-", 1, 36),
        ]
    );
    close(f.histogram[4].percent, 36.0 * 100.0 / 70.0);
    close(f.free_pct_in_extents_ge_8mib, 0.0);
}

#[test]
fn free_chunks_by_hand() {
    // 32 KiB chunks = 8 blocks. Total chunks = (128 + 8) >> 3 = 17 (e2freefrag's formula).
    // Fully free aligned chunks: [8,16) in run 8..16; [32,40) [40,48) [48,56) [56,64) in run
    // 32..68; [88,96) [96,104) in run 84..104 -> 7.
    let opts = FreeFragOptions {
        chunk_bytes: vec![32 << 10, 1 << 20],
        scope: RunScope::Device,
    };
    let f = e2freefrag(&space(), &opts).unwrap();
    assert_eq!(
        (f.chunks[0].chunk_blocks, f.chunks[0].total_chunks),
        (8, 17)
    );
    assert_eq!(f.chunks[0].free_chunks, 7);
    close(f.chunks[0].free_chunks_pct, 7.0 * 100.0 / 17.0);
    // 1 MiB = 256 blocks: (128 + 256) >> 8 = 1 chunk, not free.
    assert_eq!((f.chunks[1].total_chunks, f.chunks[1].free_chunks), (1, 0));
}

#[test]
fn per_group_scope_splits_the_boundary_run() {
    let opts = FreeFragOptions {
        scope: RunScope::PerGroup,
        ..FreeFragOptions::default()
    };
    let f = e2freefrag(&space(), &opts).unwrap();
    // 36 splits into 32 (bucket 6) and 4 (bucket 3, "16K...32K-").
    assert_eq!(f.num_free_extent, 7);
    assert!(f
        .histogram
        .iter()
        .any(|b| b.range == "16K...32K-" && b.blocks == 4));
    assert!(f
        .histogram
        .iter()
        .any(|b| b.range == "128K...256K-" && b.blocks == 32));
}

#[test]
fn labels_switch_units_like_e2freefrag() {
    let l = bucket_labels(12);
    assert_eq!(l[1], ("4K".into(), "8K-".into()));
    assert_eq!(l[8], ("512K".into(), "1024K-".into()));
    assert_eq!(l[9], ("1M".into(), "2M-".into()));
    assert_eq!(l[19], ("1G".into(), "2G-".into()));
    assert_eq!(l[31], ("4T".into(), "max".into()));
    // 1 KiB blocks: bucket 1 is one block.
    assert_eq!(bucket_labels(10)[1], ("1K".into(), "2K-".into()));
}

#[test]
fn share_of_free_space_in_8mib_extents() {
    // 4096 blocks of 4 KiB; free 2048 blocks (exactly 8 MiB) + 100 blocks.
    let s = FreeSpace::from_extents(&[vec![(0, 2048), (3000, 100)]], 4096, 4096).unwrap();
    let f = e2freefrag(&s, &FreeFragOptions::default()).unwrap();
    close(f.free_pct_in_extents_ge_8mib, 2048.0 * 100.0 / 2148.0);
    assert!(f
        .histogram
        .iter()
        .any(|b| b.range == "8M...16M-" && b.extents == 1));
}

#[test]
fn render_matches_e2freefrag_layout() {
    let text = e2freefrag(&space(), &FreeFragOptions::default())
        .unwrap()
        .render();
    assert!(text.contains("Free blocks: 70 (54.7%)"), "{text}");
    assert!(text.contains("Min. free extent: 4 KB \nMax. free extent: 144 KB\n"));
    assert!(text.contains("Extent Size Range :  Free extents   Free Blocks  Percent\n"));
    assert!(
        text.contains("    4K...    8K-  :             1             1    1.43%\n"),
        "{text}"
    );
}

#[test]
fn empty_device_and_bad_chunk() {
    let s = FreeSpace::from_extents(&[vec![]], 64, 4096).unwrap();
    let f = e2freefrag(&s, &FreeFragOptions::default()).unwrap();
    assert_eq!(
        (
            f.num_free_extent,
            f.min_free_extent_kb,
            f.avg_free_extent_kb
        ),
        (0, 0, 0)
    );
    assert!(f.histogram.is_empty());
    let bad = FreeFragOptions {
        chunk_bytes: vec![3000],
        ..FreeFragOptions::default()
    };
    assert_eq!(
        e2freefrag(&s, &bad).unwrap_err(),
        MetricsError::BadChunkSize {
            chunk_bytes: 3000,
            block_size: 4096
        }
    );
    let small = FreeFragOptions {
        chunk_bytes: vec![1024],
        ..FreeFragOptions::default()
    };
    assert!(e2freefrag(&s, &small).is_err());
}
