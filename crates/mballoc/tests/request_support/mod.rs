//! The request kinds the model and shuttle tests draw from (shared by both test crates).

use mballoc::{Flags, Request};

/// Request kinds: 0 a small file (locality-group PA; the length is cut to 1–8), 1 an open,
/// growing file (inode PA), 2 an exact extent that leaves no PA, 3 metadata.
pub fn request(owner: u64, logical: u32, len: u32, kind: u8, cpu: u32, goal: u64) -> Request {
    let len = match kind {
        0 => len % 8 + 1, // small file: locality group
        _ => len,
    };
    let r = Request::new(owner, logical, len)
        .with_cpu(cpu)
        .with_goal(goal);
    match kind {
        0 => r.with_i_size(u64::from(logical + len) * 4096),
        1 => r.with_i_size(u64::from(logical + len) * 4096 + 12_345),
        2 => r.with_flags(Flags::HINT_DATA | Flags::HINT_NOPREALLOC),
        _ => r.with_flags(Flags(0)), // metadata
    }
}
