use super::close;
use crate::metrics::throughput::{
    intervals_from_cumulative, scaling, throughput_from_totals, wis_throughput, WisConfig,
};
use crate::metrics::MetricsError;

/// 8 one-second samples, 2 tasks; samples 0..=5 are warm-up (will-it-scale's `k > 5`).
/// Measured: sample 6 = (100, 50), sample 7 = (110, 70): totals 150, 180 -> average 165,
/// per task 82.5; task rates 105 and 60.
fn samples() -> Vec<Vec<u64>> {
    let mut s = vec![vec![1_000_000, 1_000_000]; 6];
    s.push(vec![100, 50]);
    s.push(vec![110, 70]);
    s
}

#[test]
fn will_it_scale_average() {
    let t = wis_throughput(&samples(), &WisConfig::default()).unwrap();
    assert_eq!((t.tasks, t.samples_measured), (2, 2));
    close(t.ops_per_sec, 165.0);
    close(t.per_task_ops, 82.5);
    assert_eq!(t.per_task_ops_per_sec, vec![105.0, 60.0]);
    close(t.min_task_ops_per_sec, 60.0);
    close(t.max_task_ops_per_sec, 105.0);
    // Half-second samples double the rate.
    let half = WisConfig {
        interval_secs: 0.5,
        ..WisConfig::default()
    };
    close(
        wis_throughput(&samples(), &half).unwrap().ops_per_sec,
        330.0,
    );
}

#[test]
fn cumulative_counters_become_intervals() {
    let d = intervals_from_cumulative(&[vec![5, 1], vec![7, 4], vec![7, 10]]).unwrap();
    assert_eq!(d, vec![vec![5, 1], vec![2, 3], vec![0, 6]]);
    assert_eq!(
        intervals_from_cumulative(&[vec![5], vec![4]]).unwrap_err(),
        MetricsError::CounterWentBackwards { task: 0, sample: 1 }
    );
}

#[test]
fn bad_samples_are_errors() {
    let cfg = WisConfig::default();
    assert_eq!(
        wis_throughput(&samples()[..6], &cfg).unwrap_err(),
        MetricsError::NotEnoughSamples { warmup: 6, got: 6 }
    );
    let mut ragged = samples();
    ragged[7].push(1);
    assert_eq!(
        wis_throughput(&ragged, &cfg).unwrap_err(),
        MetricsError::RaggedSamples {
            sample: 7,
            expected: 2,
            got: 3
        }
    );
    let zero = WisConfig {
        interval_secs: 0.0,
        ..cfg
    };
    assert_eq!(
        wis_throughput(&samples(), &zero).unwrap_err(),
        MetricsError::BadInterval(0.0)
    );
    assert_eq!(
        throughput_from_totals(&[1], 0).unwrap_err(),
        MetricsError::EmptyRun
    );
}

#[test]
fn totals_over_elapsed_time() {
    let t = throughput_from_totals(&[1000, 3000], 2_000_000_000).unwrap();
    assert_eq!(t.per_task_ops_per_sec, vec![500.0, 1500.0]);
    close(t.ops_per_sec, 2000.0);
    close(t.per_task_ops, 1000.0);
}

#[test]
fn scaling_sweep() {
    // linear = T·100; scalability 1, 0.9, 0.5; per task 100, 90, 50 (mean 80); workload 480.
    let s = scaling(&[(4, 200.0), (1, 100.0), (2, 180.0)]).unwrap();
    let got: Vec<(usize, f64, f64)> = s
        .points
        .iter()
        .map(|p| (p.tasks, p.linear, p.scalability))
        .collect();
    assert_eq!(got, vec![(1, 100.0, 1.0), (2, 200.0, 0.9), (4, 400.0, 0.5)]);
    close(s.per_task_ops_mean, 80.0);
    close(s.workload, 480.0);
    assert_eq!(
        scaling(&[(2, 1.0)]).unwrap_err(),
        MetricsError::MissingSingleTaskPoint
    );
}
