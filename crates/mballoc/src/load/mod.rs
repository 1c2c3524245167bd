//! Loading groups: where bitmaps come from (`source`, or a durable store through `durable`),
//! asynchronous reads for prefetch (`readahead`), the bound on loaded groups (`cache`), and
//! the groups found corrupt on load (`corrupt`), and which groups one buddy-cache page holds,
//! built together (`page`).

pub(crate) mod cache;
pub(crate) mod corrupt;
pub(crate) mod durable;
pub(crate) mod page;
pub(crate) mod readahead;
pub mod source;
