use super::close;
use crate::metrics::size_class::{
    size_class_census, size_class_of, size_class_report, GroupClass, SizeClass, SizeClassEvents,
};
use crate::metrics::MetricsError;

#[test]
fn boundaries_are_inclusive_upwards() {
    assert_eq!(size_class_of(131_072), SizeClass::Small);
    assert_eq!(size_class_of(131_073), SizeClass::Medium);
    assert_eq!(size_class_of(8_388_608), SizeClass::Medium);
    assert_eq!(size_class_of(8_388_609), SizeClass::Large);
    // fsperf's funny sizes: 127 KiB SMALL, 129 KiB MEDIUM, 9 MiB LARGE.
    assert_eq!(size_class_of(127 << 10), SizeClass::Small);
    assert_eq!(size_class_of(129 << 10), SizeClass::Medium);
    assert_eq!(size_class_of(9 << 20), SizeClass::Large);
}

fn gc(class: SizeClass, used_blocks: u64) -> GroupClass {
    GroupClass { class, used_blocks }
}

#[test]
fn census_transitions_and_forced_share() {
    let t0 = vec![
        gc(SizeClass::None, 0),
        gc(SizeClass::Small, 10),
        gc(SizeClass::Large, 100),
    ];
    let t1 = vec![
        gc(SizeClass::Medium, 5),
        gc(SizeClass::Small, 0),
        gc(SizeClass::Large, 50),
    ];
    let events = SizeClassEvents {
        allocs_per_stage: [50, 30, 10, 0, 10, 0],
        forced_wrong_class: 10,
        ..SizeClassEvents::default()
    };
    let r = size_class_report(&[t0, t1], 128, &events).unwrap();
    assert_eq!(r.census[0].groups_per_class, [1, 1, 0, 1]);
    assert_eq!(r.census[0].used_blocks_per_class, [0, 10, 0, 100]);
    // Group 1 is empty but still SMALL: a stale class (the pre-2026 "never reset" behaviour).
    assert_eq!(r.census[1].stale_class_groups, 1);
    assert_eq!(r.class_transitions, vec![1]);
    assert_eq!(r.allocs_total, 100);
    close(r.forced_wrong_class_pct, 10.0);
}

#[test]
fn inconsistent_input_is_an_error() {
    assert_eq!(
        size_class_census(&[gc(SizeClass::Small, 200)], 128).unwrap_err(),
        MetricsError::UsedBeyondGroup {
            group: 0,
            used: 200,
            blocks_per_group: 128
        }
    );
    let a = vec![gc(SizeClass::None, 0)];
    assert!(size_class_report(&[a, vec![]], 128, &SizeClassEvents::default()).is_err());
}
