use crate::metrics::{FreeSpace, MetricsError, RunScope};

#[test]
fn touching_extents_merge_and_sort() {
    let s = FreeSpace::from_extents(&[vec![(4, 2), (0, 4), (10, 1)]], 16, 4096).unwrap();
    assert_eq!(s.group(0), &[(0, 6), (10, 1)]);
    assert_eq!(s.free_blocks(), 7);
    assert_eq!(s.total_blocks(), 16);
}

#[test]
fn bad_input_is_a_typed_error() {
    let e = |g: Vec<(u32, u32)>| FreeSpace::from_extents(&[g], 16, 4096).unwrap_err();
    assert_eq!(
        e(vec![(10, 7)]),
        MetricsError::ExtentBeyondGroup {
            group: 0,
            start: 10,
            len: 7,
            blocks_per_group: 16
        }
    );
    assert_eq!(
        e(vec![(3, 0)]),
        MetricsError::ZeroLengthExtent { group: 0, start: 3 }
    );
    assert_eq!(
        e(vec![(0, 4), (3, 2)]),
        MetricsError::OverlappingExtents {
            group: 0,
            first: 0,
            second: 3
        }
    );
    // u32 overflow of start + len must not wrap into range.
    assert!(FreeSpace::from_extents(&[vec![(u32::MAX, 2)]], u32::MAX, 4096).is_err());
    assert_eq!(
        FreeSpace::from_extents(&[], 16, 0).unwrap_err(),
        MetricsError::BadBlockSize(0)
    );
    assert_eq!(
        FreeSpace::from_extents(&[], 16, 3000).unwrap_err(),
        MetricsError::BadBlockSize(3000)
    );
    assert_eq!(
        FreeSpace::from_extents(&[], 0, 4096).unwrap_err(),
        MetricsError::ZeroBlocksPerGroup
    );
}

#[test]
fn bitmap_bits_are_little_endian_and_set_means_used() {
    // 0b0000_0110: blocks 1 and 2 used -> free runs (0,1) and (3,5); second group all used
    // except block 9 (byte 1, bit 1) -> run (9,1); bits past 10 are ignored.
    let s = FreeSpace::from_bitmaps(
        &[vec![0b0000_0110, 0x00], vec![0xff, 0b1111_1101]],
        10,
        4096,
    )
    .unwrap();
    assert_eq!(s.group(0), &[(0, 1), (3, 7)]);
    assert_eq!(s.group(1), &[(9, 1)]);
    assert_eq!(
        FreeSpace::from_bitmaps(&[vec![0]], 10, 4096).unwrap_err(),
        MetricsError::BitmapTooShort {
            group: 0,
            got: 1,
            need: 2
        }
    );
}

#[test]
fn device_scope_merges_across_group_boundaries() {
    let s = FreeSpace::from_extents(&[vec![(6, 2)], vec![(0, 3), (5, 1)]], 8, 4096).unwrap();
    assert_eq!(s.runs(RunScope::Device), vec![(6, 5), (13, 1)]);
    assert_eq!(s.runs(RunScope::PerGroup), vec![(6, 2), (8, 3), (13, 1)]);
}
