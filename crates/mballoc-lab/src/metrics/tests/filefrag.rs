use super::close;
use crate::metrics::filefrag::{file_extents, filefrag_count, merged_runs};
use crate::metrics::MetricsError;

#[test]
fn contiguous_records_merge_like_filefrag() {
    // (0,100,4) (4,104,4): physically contiguous            -> 1 extent
    // (8,200,2): new                                         -> 2
    // (10,202,1): contiguous                                 -> 2
    // (20,203,5): logical hole, but 203 = 202 + 1 (dense)    -> still 2
    // (30,250,1): new                                        -> 3
    let f = [
        (0, 100, 4),
        (4, 104, 4),
        (8, 200, 2),
        (10, 202, 1),
        (20, 203, 5),
        (30, 250, 1),
    ];
    assert_eq!(filefrag_count(&f), 3);
    assert_eq!(
        merged_runs(&f),
        vec![(0, 100, 8), (8, 200, 8), (30, 250, 1)]
    );
}

#[test]
fn hole_mirrored_on_disk_is_one_extent() {
    // expected = 500 + (5 − 0) = 505: the physical gap equals the logical hole.
    assert_eq!(filefrag_count(&[(0, 500, 2), (5, 505, 1)]), 1);
    // A file that starts with a hole still counts its first extent.
    assert_eq!(filefrag_count(&[(7, 9, 1)]), 1);
    assert_eq!(filefrag_count(&[]), 0);
}

#[test]
fn summary_over_files() {
    let a = vec![
        (30, 250, 1),
        (0, 100, 4),
        (4, 104, 4),
        (8, 200, 2),
        (10, 202, 1),
        (20, 203, 5),
    ];
    let b = vec![(0, 500, 2), (5, 505, 1)];
    let m = file_extents(&[a, b, vec![]], 4096).unwrap();
    assert_eq!(
        (m.files, m.total_extents, m.extents_per_file_max),
        (3, 4, 3)
    );
    close(m.extents_per_file, 4.0 / 3.0);
    assert_eq!(m.per_file_extents, vec![3, 1, 0]);
    let dist: Vec<(u64, u64)> = m
        .extents_per_file_distribution
        .iter()
        .map(|d| (d.extents, d.files))
        .collect();
    assert_eq!(dist, vec![(0, 1), (1, 1), (3, 1)]);
    // 17 + 3 = 20 blocks · 4 KiB = 80 KiB over 4 extents.
    assert_eq!(m.total_blocks, 20);
    close(m.avg_extent_size_kb, 20.0);
}

#[test]
fn bad_file_extents_are_errors() {
    assert_eq!(
        file_extents(&[vec![(0, 1, 0)]], 4096).unwrap_err(),
        MetricsError::ZeroLengthFileExtent {
            file: 0,
            logical: 0
        }
    );
    assert_eq!(
        file_extents(&[vec![], vec![(0, 1, 4), (2, 9, 1)]], 4096).unwrap_err(),
        MetricsError::OverlappingFileExtents {
            file: 1,
            logical: 2
        }
    );
    assert_eq!(
        file_extents(&[vec![(0, u64::MAX, 2)]], 4096).unwrap_err(),
        MetricsError::FileExtentOverflow {
            file: 0,
            logical: 0
        }
    );
    assert_eq!(
        file_extents(&[], 0).unwrap_err(),
        MetricsError::BadBlockSize(0)
    );
}
