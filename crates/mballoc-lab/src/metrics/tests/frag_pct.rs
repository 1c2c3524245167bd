use super::close;
use crate::metrics::frag_pct::{fsperf_frag, fsperf_frag_masked, group_frag_pct};
use crate::metrics::{FreeSpace, MetricsError};

/// Four 16-block groups:
/// * g0 free (0,2), (5,6), (14,2): total 10, max 6 -> 100·(1 − 6/10) = 40;
/// * g1 entirely free: one extent -> 0, and not a data group;
/// * g2 free (0,4), (8,4): total 8, max 4 -> 50;
/// * g3 full: nothing free -> 0.
fn space() -> FreeSpace {
    FreeSpace::from_extents(
        &[
            vec![(0, 2), (5, 6), (14, 2)],
            vec![(0, 16)],
            vec![(0, 4), (8, 4)],
            vec![],
        ],
        16,
        4096,
    )
    .unwrap()
}

#[test]
fn hand_built_groups() {
    close(group_frag_pct(&[(0, 2), (5, 6), (14, 2)]), 40.0);
    close(group_frag_pct(&[]), 0.0);
    let f = fsperf_frag(&space());
    assert_eq!(f.bg_count, 4);
    assert_eq!(f.fragmented_bg_count, 2);
    assert_eq!(f.per_group_frag_pct, vec![40.0, 0.0, 50.0, 0.0]);
    close(f.frag_pct_mean, 45.0);
    close(f.frag_pct_min, 40.0);
    close(f.frag_pct_p50, 45.0);
    // R-8 with n = 2: τ = 0.95 -> h = 2.55, hf = 2 ≥ n -> max.
    close(f.frag_pct_p95, 50.0);
    close(f.frag_pct_p99, 50.0);
    close(f.frag_pct_max, 50.0);
}

#[test]
fn nothing_fragmented_reports_zeros() {
    let s = FreeSpace::from_extents(&[vec![(0, 16)], vec![(3, 5)]], 16, 4096).unwrap();
    let f = fsperf_frag(&s);
    assert_eq!((f.bg_count, f.fragmented_bg_count), (2, 0));
    assert_eq!([f.frag_pct_mean, f.frag_pct_p50, f.frag_pct_max], [0.0; 3]);
}

#[test]
fn data_mask_filters_groups() {
    let f = fsperf_frag_masked(&space(), &[false, true, true, true]).unwrap();
    assert_eq!(f.fragmented_bg_count, 1);
    close(f.frag_pct_mean, 50.0);
    assert_eq!(
        fsperf_frag_masked(&space(), &[true]).unwrap_err(),
        MetricsError::LengthMismatch {
            what: "data-group mask",
            expected: 4,
            got: 1
        }
    );
}

#[test]
fn serialises_with_fsperf_names() {
    let v = serde_json::to_value(fsperf_frag(&space())).unwrap();
    for k in [
        "bg_count",
        "fragmented_bg_count",
        "frag_pct_mean",
        "frag_pct_p99",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
}
