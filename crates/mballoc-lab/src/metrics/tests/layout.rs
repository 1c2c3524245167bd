use super::close;
use crate::metrics::layout::{dynamic_layout_score, layout_score};

#[test]
fn static_layout_by_hand() {
    // 8 blocks, 7 with a predecessor. Within records 3 + 1 + 1 = 5; across: 104 = 100 + 4 yes,
    // 300 ≠ 106 no -> 6/7. A one-block file has no predecessor (None).
    let l = layout_score(&[vec![(6, 300, 2), (0, 100, 4), (4, 104, 2)], vec![(0, 5, 1)]]).unwrap();
    assert_eq!((l.contiguous_blocks, l.blocks_with_predecessor), (6, 7));
    close(l.layout_score, 6.0 / 7.0);
    assert_eq!(l.per_file.len(), 2);
    close(l.per_file[0].unwrap_or(f64::NAN), 6.0 / 7.0);
    assert_eq!(l.per_file[1], None);
    close(layout_score(&[]).unwrap().layout_score, 1.0);
}

#[test]
fn dynamic_layout_by_hand() {
    // Requests (10,2) (12,1) (20,3) (23,1): 7 blocks, 6 with a predecessor; within 1 + 0 + 2 + 0
    // = 3; across 12 = 12 yes, 20 ≠ 13, 23 = 23 yes -> 5/6.
    let d = dynamic_layout_score(&[(10, 2), (12, 1), (20, 3), (23, 1)]);
    assert_eq!((d.contiguous_blocks, d.blocks_with_predecessor), (5, 6));
    close(d.dynamic_layout_score, 5.0 / 6.0);
    close(dynamic_layout_score(&[]).dynamic_layout_score, 1.0);
}
