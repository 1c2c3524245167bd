use super::close;
use crate::metrics::quantile::{median, quantile_r7, quantile_r8};

#[test]
fn r7_matches_numpy_percentile() {
    let x = [1.0, 2.0, 3.0, 4.0, 5.0];
    // numpy.percentile([1..5], 25) = 2.0 (h = 4·0.25 = 1); 90 -> h = 3.6 -> 4 + 0.6 = 4.6.
    close(quantile_r7(&x, 0.25), 2.0);
    close(quantile_r7(&x, 0.90), 4.6);
    close(quantile_r7(&x, 0.0), 1.0);
    close(quantile_r7(&x, 1.0), 5.0);
    close(quantile_r7(&[], 0.5), 0.0);
    close(quantile_r7(&[7.0], 0.99), 7.0);
}

#[test]
fn r8_matches_statrs() {
    let x = [1.0, 2.0, 3.0, 4.0, 5.0];
    // τ = 0.25: h = (5 + 1/3)·0.25 + 1/3 = 5/3, hf = 1 -> x0 + (2/3)(x1 − x0) = 5/3.
    close(quantile_r8(&x, 0.25), 5.0 / 3.0);
    // τ = 0.95: h = 16/3·0.95 + 1/3 = 5.4 ≥ n -> max.
    close(quantile_r8(&x, 0.95), 5.0);
    // τ = 0.05: h = 0.6, hf = 0 -> min.
    close(quantile_r8(&x, 0.05), 1.0);
    // R-8 at 0.5 is the ordinary median for odd and even n.
    close(quantile_r8(&x, 0.5), median(&x));
    close(quantile_r8(&[1.0, 2.0, 3.0, 10.0], 0.5), 2.5);
    close(median(&[1.0, 2.0, 3.0, 10.0]), 2.5);
}
