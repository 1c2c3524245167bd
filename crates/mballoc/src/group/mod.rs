//! One block group and what it is made of: the on-disk `bitmap`, the `buddy` built from it
//! over its free `runs`, the group's summary and lock (`info`), its `state` bits, and the
//! mb_optimize_scan indexes over all groups (`index`, `class_index`) with their `size_class`es.

pub mod bitmap;
pub mod buddy;
pub(crate) mod class_index;
pub(crate) mod index;
pub(crate) mod info;
pub(crate) mod runs;
pub mod size_class;
pub(crate) mod state;
