//! Preallocations, whole: the structures (`space`), serving a request from one (`use_pa`),
//! making one from what a normalised allocation leaves over (`new_pa`), and giving them back
//! (`discard`).

mod discard;
mod new_pa;
pub(crate) mod space;
mod use_pa;
