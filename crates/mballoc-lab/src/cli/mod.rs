//! The lab's command line, behind a thin `main.rs`: argument types ([`args`], [`parse`]),
//! validation into run configurations ([`config`]), output ([`output`], [`outdir`]), progress
//! bars ([`progress`]) and one module per command family.

pub mod args;
pub mod config;
pub mod emit;
pub mod error;
pub mod image;
pub mod list;
pub mod outdir;
pub mod output;
pub mod parse;
pub mod progress;
pub mod replay;
pub mod reproduce;
pub mod run;
pub mod summary;
pub mod vcpus;
#[cfg(feature = "vcpus")]
pub mod vcpus_fallocate3;

pub use error::CliError;
