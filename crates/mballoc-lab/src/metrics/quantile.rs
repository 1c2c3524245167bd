//! Exact quantiles on sorted data, with the two estimators the reference tools use.
//!
//! We use exact sorted quantiles rather than an HDR histogram: the lab's sample counts fit in
//! memory, and exactness lets tests compare against hand-computed values. fsperf uses two
//! estimators, so both are here:
//! * `numpy.percentile` (latency, `LatencyTracing`): linear interpolation, Hyndman–Fan R-7;
//! * statrs 0.15 `Data::percentile` (btrfs-frag-view's `frag_pct_p95/p99`): R-8.

/// R-7 (`numpy.percentile`, default "linear"): `h = (n − 1)·q`, interpolate between
/// `x[⌊h⌋]` and `x[⌊h⌋ + 1]`. `q` is clamped to `[0, 1]`; an empty slice gives 0.
pub fn quantile_r7(sorted: &[f64], q: f64) -> f64 {
    let Some(&last) = sorted.last() else {
        return 0.0;
    };
    let h = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    match sorted.get(lo + 1) {
        Some(&hi) => sorted[lo] + (h - lo as f64) * (hi - sorted[lo]),
        None => last,
    }
}

/// R-8 as statrs 0.15 `quantile(tau)`: `h = (n + 1/3)·τ + 1/3`, `hf = ⌊h⌋`; the minimum if
/// `hf ≤ 0`, the maximum if `hf ≥ n`, else `x[hf−1] + (h − hf)(x[hf] − x[hf−1])`.
/// An empty slice gives 0 (fsperf reports 0 when nothing is fragmented).
pub fn quantile_r8(sorted: &[f64], tau: f64) -> f64 {
    let (Some(&first), Some(&last)) = (sorted.first(), sorted.last()) else {
        return 0.0;
    };
    let tau = tau.clamp(0.0, 1.0);
    let n = sorted.len() as f64;
    let h = (n + 1.0 / 3.0) * tau + 1.0 / 3.0;
    let hf = h.floor();
    if hf <= 0.0 || tau == 0.0 {
        return first;
    }
    if hf >= n || tau == 1.0 {
        return last;
    }
    let i = hf as usize;
    sorted[i - 1] + (h - hf) * (sorted[i] - sorted[i - 1])
}

/// The ordinary median (mean of the two middle values for even `n`); 0 when empty.
pub fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// Arithmetic mean; 0 when empty.
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// Sorts a copy of `values` with a total order (NaNs last).
pub fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v
}
