use super::close;
use crate::metrics::xfs::{xfs_frag, xfs_freesp};
use crate::metrics::FreeSpace;

#[test]
fn frag_factor_by_hand() {
    // f1: two records, logically contiguous -> actual 2, ideal 1.
    // f2: two records with a hole -> actual 2, ideal 2.
    // actual 4, ideal 3 -> (4 − 3)·100/4 = 25 %, average 4/3 extents per file.
    let f = xfs_frag(&[vec![(0, 100, 4), (4, 200, 4)], vec![(5, 11, 1), (0, 10, 1)]]).unwrap();
    assert_eq!((f.actual, f.ideal), (4, 3));
    close(f.frag_factor_pct, 25.0);
    close(f.avg_extents_per_file, 4.0 / 3.0);
    let none = xfs_frag(&[]).unwrap();
    assert_eq!(
        (none.actual, none.frag_factor_pct, none.avg_extents_per_file),
        (0, 0.0, 0.0)
    );
}

#[test]
fn freesp_bins_by_hand() {
    // Per-AG (group) runs: g0 1, 2, 8, 32; g1 4, 3, 20 (never merged across groups).
    // Bins [1,1]: 1/1; [2,3]: 2/5; [4,7]: 1/4; [8,15]: 1/8; [16,31]: 1/20; [32,63]: 1/32.
    let s = FreeSpace::from_extents(
        &[
            vec![(0, 1), (3, 2), (8, 8), (32, 32)],
            vec![(0, 4), (10, 3), (20, 20)],
        ],
        64,
        4096,
    )
    .unwrap();
    let f = xfs_freesp(&s);
    let bins: Vec<(u64, u64, u64, u64)> = f
        .bins
        .iter()
        .map(|b| (b.from, b.to, b.extents, b.blocks))
        .collect();
    assert_eq!(
        bins,
        vec![
            (1, 1, 1, 1),
            (2, 3, 2, 5),
            (4, 7, 1, 4),
            (8, 15, 1, 8),
            (16, 31, 1, 20),
            (32, 63, 1, 32)
        ]
    );
    assert_eq!((f.total_free_extents, f.total_free_blocks), (7, 70));
    close(f.average_free_extent_size, 10.0);
    close(f.bins[5].pct, 32.0 * 100.0 / 70.0);
    // The top bin is capped at the group size.
    let full = xfs_freesp(&FreeSpace::from_extents(&[vec![(0, 40)]], 40, 4096).unwrap());
    assert_eq!((full.bins[0].from, full.bins[0].to), (32, 40));
}
