use crate::metrics::mb_groups::{mb_groups, render_mb_groups};
use crate::metrics::FreeSpace;

#[test]
fn fresh_group_matches_the_kernel_observation() {
    // Observed with the kernel's mb_groups on a fresh 1 GiB fs: group 1 with metadata in clusters
    // 0..128, run [129, 32768) decomposes into one chunk each of orders 0..6 and 8..12 and
    // three order-13 chunks (order 7 = 0): 129 | 130-131 | 132-135 | … | 192-255 | 256-511 |
    // … | 4096-8191 | 8192, 16384, 24576 (order 13 = 8192 blocks is the cap for 4 KiB blocks).
    let s = FreeSpace::from_extents(&[vec![(129, 32768 - 129)]], 32768, 4096).unwrap();
    let g = &mb_groups(&s)[0];
    assert_eq!(g.counters, vec![1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 3]);
    assert_eq!((g.free, g.frags, g.first), (32639, 1, 129));
    assert_eq!(g.largest_free_order, 13);
    // avg 32639: fls = 15 -> 13, within MB_NUM_ORDERS − 1 = 13.
    assert_eq!(
        (g.avg_fragment_size, g.avg_fragment_size_order),
        (32639, 13)
    );
}

#[test]
fn small_and_full_groups() {
    // 8-block group, free (0,1) (2,3): 0 -> order 0; 2..4 -> order 1; 4 -> order 0.
    // free 4, frags 2, avg 2 -> fls(2) − 2 = 0.
    let s = FreeSpace::from_extents(&[vec![(0, 1), (2, 3)], vec![]], 8, 4096).unwrap();
    let g = mb_groups(&s);
    assert_eq!(&g[0].counters[..3], &[2, 1, 0]);
    assert_eq!(
        (g[0].largest_free_order, g[0].avg_fragment_size_order),
        (1, 0)
    );
    assert_eq!((g[1].free, g[1].first, g[1].largest_free_order), (0, 8, -1));
    assert_eq!(g[1].avg_fragment_size_order, -1);
}

#[test]
fn order_cap_follows_block_size() {
    // 1 KiB blocks: max order 11 (2048 blocks): a free 8192-block group is four order-11 chunks.
    let s = FreeSpace::from_extents(&[vec![(0, 8192)]], 8192, 1024).unwrap();
    let g = &mb_groups(&s)[0];
    assert_eq!(g.counters[11], 4);
    assert_eq!(g.counters.iter().sum::<u64>(), 4);
    assert_eq!(g.avg_fragment_size_order, 11); // fls(8192) − 2 = 12 clamps to 10 + 2 − 1.
}

#[test]
fn render_has_proc_layout() {
    let s = FreeSpace::from_extents(&[vec![(129, 32768 - 129)]], 32768, 4096).unwrap();
    let text = render_mb_groups(&mb_groups(&s));
    assert!(text.starts_with("#group: free  frags first [ 2^0   2^1"));
    assert!(text.contains(
        "#0    : 32639 1     129   [ 1     1     1     1     1     1     1     0     1 "
    ));
    assert!(text.trim_end().ends_with("3     ]"));
}
