use super::close;
use crate::metrics::e4defrag::{best_count, calc_score, e4defrag_score};
use crate::metrics::MetricsError;

fn singles(n: u64) -> Vec<(u64, u64, u64)> {
    (0..n).map(|i| (i, 1000 + 2 * i, 1)).collect()
}

#[test]
fn heavily_fragmented_file() {
    // 10 one-block records: now 10, best 1, ratio (10 − 1)·100/10 = 90 > 10
    // -> score 80 + 20·90/100 = 98; size/ext = 10·4/10 = 4 KB.
    let s = e4defrag_score(&[singles(10)], 32768, 16, 4096).unwrap();
    assert_eq!(
        (s.files, s.total_extents, s.best_extents, s.total_blocks),
        (1, 10, 1, 10)
    );
    close(s.ratio, 90.0);
    close(s.score, 98.0);
    assert_eq!(s.avg_size_per_extent_kb, 4);
    assert!(s.needs_defrag);
}

#[test]
fn mild_fragmentation_and_the_ratio_10_boundary() {
    // 100 blocks in 5 records: ratio 4·100/100 = 4 -> 8·4 = 32.
    let five: Vec<_> = (0..5).map(|i| (20 * i, 1000 * i, 20)).collect();
    close(e4defrag_score(&[five], 32768, 1, 4096).unwrap().score, 32.0);
    // ratio exactly 10 is not "> 10": 8·10 = 80; just above jumps to 80 + 2.
    close(calc_score(10.0), 80.0);
    close(calc_score(10.5), 82.1);
}

#[test]
fn best_count_uses_flex_groups() {
    assert_eq!(best_count(1, 32768, 16), 1);
    assert_eq!(best_count(524_288, 32768, 16), 1);
    assert_eq!(best_count(524_289, 32768, 16), 2);
    assert_eq!(best_count(32769, 32768, 1), 2);
}

#[test]
fn empty_files_are_skipped_and_bad_geometry_rejected() {
    let s = e4defrag_score(&[vec![], vec![(0, 5, 3)]], 32768, 16, 4096).unwrap();
    assert_eq!((s.files, s.total_extents), (1, 1));
    close(s.score, 0.0);
    assert_eq!(
        e4defrag_score(&[], 32768, 3, 4096).unwrap_err(),
        MetricsError::BadGroupsPerFlex(3)
    );
    assert_eq!(
        e4defrag_score(&[], 0, 1, 4096).unwrap_err(),
        MetricsError::ZeroBlocksPerGroup
    );
}
