//! Arbitrary bytes as a whole store image: open (with recovery), read every group, fsck, run
//! an allocator on top, commit, reopen. Typed errors are fine; a violated invariant or a
//! panic is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(v) = mballoc::testing::open_image(data) {
        panic!("{v}");
    }
});
