use super::close;
use crate::metrics::extfrag::{extfrag_indices, extfrag_of_space};
use crate::metrics::FreeSpace;

#[test]
fn suitable_chunks_exist() {
    // n = [2, 1, 0, 1]: free_pages = 2 + 2 + 8 = 12, total 4.
    // j = 2: suitable = n2 + 2·n3 = 2 -> F_u = (12 − 2·4)/12 = 1/3 (kernel 4000/12 = 333);
    // a suitable chunk exists -> F_i = −1 (−1000).
    let e = extfrag_indices(&[2, 1, 0, 1]);
    assert_eq!((e.free_pages, e.free_blocks_total), (12, 4));
    let o = &e.orders[2];
    assert_eq!(o.free_blocks_suitable, 2);
    close(o.unusable_index, 1.0 / 3.0);
    assert_eq!(
        (o.unusable_index_milli, o.extfrag_index_milli),
        (333, -1000)
    );
    close(o.extfrag_index, -1.0);
    close(e.orders[0].unusable_index, 0.0);
}

#[test]
fn failure_due_to_fragmentation() {
    // n = [4, 2, 0, 0]: free_pages 8, total 6. j = 2: no suitable chunk -> F_u = 1 (1000);
    // F_i = 1 − (1 + 8/4)/6 = 0.5 (kernel 1000 − 3000/6 = 500).
    // j = 3: F_i = 1 − (1 + 1)/6 = 2/3 (kernel 1000 − 2000/6 = 667).
    let e = extfrag_indices(&[4, 2, 0, 0]);
    close(e.orders[2].unusable_index, 1.0);
    close(e.orders[2].extfrag_index, 0.5);
    assert_eq!(e.orders[2].extfrag_index_milli, 500);
    close(e.orders[3].extfrag_index, 2.0 / 3.0);
    assert_eq!(e.orders[3].extfrag_index_milli, 667);
}

#[test]
fn nothing_free() {
    let e = extfrag_indices(&[0; 14]);
    assert_eq!(e.orders.len(), 14);
    assert!(e
        .orders
        .iter()
        .all(|o| o.unusable_index == 1.0 && o.extfrag_index == 0.0));
    assert!(e
        .orders
        .iter()
        .all(|o| o.unusable_index_milli == 1000 && o.extfrag_index_milli == 0));
}

#[test]
fn from_free_space_sums_group_counters() {
    // Two 8-block groups, free (0,1)(2,3) and (0,8): n0 = 2, n1 = 1, n3 = 1.
    let s = FreeSpace::from_extents(&[vec![(0, 1), (2, 3)], vec![(0, 8)]], 8, 4096).unwrap();
    let e = extfrag_of_space(&s);
    assert_eq!((e.free_pages, e.free_blocks_total), (12, 4));
}
