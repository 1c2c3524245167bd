//! Huge filesystem. Filled in below.
