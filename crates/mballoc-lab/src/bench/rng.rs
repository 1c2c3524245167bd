//! The benchmarks draw from the workloads' seeded SplitMix64, so every system sees the same
//! operation stream and a run can be repeated exactly.

pub use crate::workload::rng::Rng;
