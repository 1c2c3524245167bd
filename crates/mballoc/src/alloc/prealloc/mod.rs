//! Preallocations, whole: the structures (`space`), their use by a request, their creation
//! from what a request leaves over, and their discard.

pub(crate) mod space;
