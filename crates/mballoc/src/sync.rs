//! The atomics of the lock-free structures that the `loom` model checks cover
//! ([`crate::index::GroupSet`], [`crate::percpu::PerCpuCounter`]): loom's under
//! `--cfg loom`, std's otherwise.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test --release -p mballoc --lib loom_
//! ```

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicI64, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
