use super::close;
use crate::metrics::bluestore::{
    bluestore_scores, extent_score, fragmentation, fragmentation_score,
};
use crate::metrics::{FreeSpace, RunScope};

const BS: u64 = 4096;

#[test]
fn boundary_cases() {
    // Empty and one single free block: nothing can be fragmented -> 0 (Ceph would give 0/0).
    close(fragmentation_score(&[], BS), 0.0);
    close(fragmentation_score(&[BS], BS), 0.0);
    // One extent: Σscore = ideal -> 0.
    close(fragmentation_score(&[10 * BS], BS), 0.0);
    // All singletons: Σscore = terrible -> 1.
    close(fragmentation_score(&[BS; 5], BS), 1.0);
    close(fragmentation(0, 0), 0.0);
    close(fragmentation(1, 10), 0.0);
    close(fragmentation(5, 5), 1.0);
}

#[test]
fn two_extents_by_hand() {
    // Extents of 1 and 3 blocks (4096 B, 12288 B); a = S[12] = 1.2^12.
    // score(4096)  = 4096·a
    // score(12288) = sc 13, x = 0.5: 8192·S13·0.5 + 16384·S14·0.5 = 4096·1.2a + 8192·1.44a
    // Σ = 20807.68a; ideal = score(16384) = 16384·1.44a = 23592.96a; terrible = 4·4096·a.
    // score = (23592.96 − 20807.68)/(23592.96 − 16384) = 2785.28/7208.96 = 17/44.
    close(fragmentation_score(&[BS, 3 * BS], BS), 17.0 / 44.0);
    // get_fragmentation: E = 2, F = 4 -> 1/3.
    let s = FreeSpace::from_extents(&[vec![(0, 1), (5, 3)]], 16, 4096).unwrap();
    let b = bluestore_scores(&s, RunScope::Device);
    close(b.fragmentation_score, 17.0 / 44.0);
    close(b.fragmentation, 1.0 / 3.0);
    assert_eq!((b.free_extents, b.free_units), (2, 4));
}

#[test]
fn scale_table_follows_allocator_cc() {
    // S[k] = 1.2^k up to 1 MiB; S[21] = S[20]·(1·1 + 1.2·6)/7 (multiplier of the appended index);
    // from 2^27 on the multiplier is 1, so per-byte value is flat: score(2^28) = 2·score(2^27).
    close(extent_score(1 << 20), (1u64 << 20) as f64 * 1.2f64.powi(20));
    close(
        extent_score(1 << 21),
        (1u64 << 21) as f64 * 1.2f64.powi(20) * 8.2 / 7.0,
    );
    close(extent_score(1 << 28), 2.0 * extent_score(1 << 27));
    // Interpolation inside a grade: score(3·2^12) computed above.
    close(
        extent_score(3 * BS),
        4096.0 * 1.2f64.powi(13) + 8192.0 * 1.2f64.powi(14),
    );
}

#[test]
fn merging_extents_lowers_the_score() {
    let split = fragmentation_score(&[BS, BS, 2 * BS, 8 * BS], BS);
    let merged = fragmentation_score(&[2 * BS, 2 * BS, 8 * BS], BS);
    assert!(merged < split && split < 1.0 && merged > 0.0);
}
