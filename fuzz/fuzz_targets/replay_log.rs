//! Arbitrary bytes as the write-ahead log of a fixed, valid store: recovery must refuse them
//! with a typed error or replay them into a clean store that a second open leaves alone.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(v) = mballoc::testing::replay_log(data) {
        panic!("{v}");
    }
});
