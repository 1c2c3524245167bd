//! Metric tests.
