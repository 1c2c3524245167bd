//! Property tests: fast run-based metrics against the naive block-by-block versions.

use super::naive;
use crate::metrics::bluestore::bluestore_scores;
use crate::metrics::filefrag::{file_extents, filefrag_count, merged_runs};
use crate::metrics::frag_pct::group_frag_pct;
use crate::metrics::freefrag::{e2freefrag, FreeFragOptions};
use crate::metrics::layout::layout_score;
use crate::metrics::log2_hist::bucket_index;
use crate::metrics::mb_groups::mb_groups;
use crate::metrics::xfs::xfs_frag;
use crate::metrics::{FreeSpace, RunScope};
use proptest::prelude::*;

/// 1–4 groups of 1–96 blocks, each block free with probability ~1/2 (or mostly free).
fn groups() -> impl Strategy<Value = (usize, Vec<Vec<bool>>)> {
    (1usize..96, 1usize..5).prop_flat_map(|(bpg, n)| {
        let block = prop_oneof![any::<bool>(), prop::bool::weighted(0.9)];
        (
            Just(bpg),
            prop::collection::vec(prop::collection::vec(block, bpg), n),
        )
    })
}

fn space(bpg: usize, g: &[Vec<bool>]) -> FreeSpace {
    FreeSpace::from_bitmaps(&naive::to_ext4_bitmaps(g), bpg as u32, 4096).unwrap()
}

/// Random files: 0–6 records with increasing logical starts and small physical jumps.
fn files() -> impl Strategy<Value = Vec<Vec<(u64, u64, u64)>>> {
    let rec = (0u64..3, 1u64..5, prop_oneof![Just(0i64), -3i64..4]);
    let file = prop::collection::vec(rec, 0..7).prop_map(|recs| {
        let (mut l, mut p) = (0u64, 100u64);
        recs.into_iter()
            .map(|(hole, len, jump)| {
                l += hole;
                p = p.saturating_add_signed(jump).max(1);
                let e = (l, p, len);
                l += len;
                p += len;
                e
            })
            .collect()
    });
    prop::collection::vec(file, 0..5)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn bitmap_runs_match_naive((bpg, g) in groups()) {
        let s = space(bpg, &g);
        let flat: Vec<bool> = g.concat();
        let dev: Vec<(u64, u64)> =
            naive::runs(&flat).iter().map(|&(a, b)| (a as u64, b as u64)).collect();
        prop_assert_eq!(s.runs(RunScope::Device), dev);
        // Round trip through the extent constructor.
        let again = FreeSpace::from_extents(s.groups(), bpg as u32, 4096).unwrap();
        prop_assert_eq!(&again, &s);
        for (i, grp) in g.iter().enumerate() {
            prop_assert!((group_frag_pct(s.group(i)) - naive::frag_pct(grp)).abs() < 1e-9);
        }
    }

    #[test]
    fn e2freefrag_matches_the_c_loop((bpg, g) in groups(), chunk_shift in 0u32..5) {
        let s = space(bpg, &g);
        let chunk_blocks = 1usize << chunk_shift;
        let opts = FreeFragOptions { chunk_bytes: vec![4096 << chunk_shift], scope: RunScope::Device };
        let f = e2freefrag(&s, &opts).unwrap();
        let n = naive::e2freefrag_scan(&g.concat(), chunk_blocks);
        prop_assert_eq!(f.num_free_extent, n.count);
        prop_assert_eq!(f.chunks[0].free_chunks, n.free_chunks);
        let min = if n.count == 0 { 0 } else { n.min };
        let avg = n.sum.checked_div(n.count).unwrap_or(0);
        prop_assert_eq!(f.min_free_extent_kb, min * 4);
        prop_assert_eq!(f.max_free_extent_kb, n.max * 4);
        prop_assert_eq!(f.avg_free_extent_kb, avg * 4);
        for b in &f.histogram {
            prop_assert_eq!(b.extents, n.hist_counts[b.index]);
            prop_assert_eq!(b.blocks, n.hist_blocks[b.index]);
        }
        prop_assert_eq!(f.histogram.iter().map(|b| b.extents).sum::<u64>(), n.count);
    }

    #[test]
    fn buddy_counters_match_maximal_aligned_chunks((bpg, g) in groups()) {
        let s = space(bpg, &g);
        for (grp, m) in g.iter().zip(mb_groups(&s)) {
            // 4 KiB blocks cap at order 13; random groups are far smaller, so compare 0..=13.
            prop_assert_eq!(&m.counters[..14], &naive::buddy_counters(grp, 13)[..]);
            prop_assert_eq!(m.free as usize, grp.iter().filter(|&&b| b).count());
            prop_assert_eq!(m.frags as usize, naive::runs(grp).len());
        }
    }

    #[test]
    fn bluestore_scores_stay_in_range((bpg, g) in groups()) {
        let b = bluestore_scores(&space(bpg, &g), RunScope::Device);
        prop_assert!((-1e-9..=1.0 + 1e-9).contains(&b.fragmentation_score));
        prop_assert!((0.0..=1.0).contains(&b.fragmentation));
    }

    #[test]
    fn file_metrics_match_block_expansion(fs in files()) {
        let m = file_extents(&fs, 4096).unwrap();
        let mut contiguous = 0u64;
        let mut with_pred = 0u64;
        let mut ideal = 0u64;
        for (f, &count) in fs.iter().zip(&m.per_file_extents) {
            let blocks = naive::blocks_of(f);
            // Runs are physically contiguous and cover every block exactly once.
            let runs = merged_runs(f);
            prop_assert_eq!(runs.iter().map(|r| r.2).sum::<u64>(), blocks.len() as u64);
            prop_assert_eq!(count, runs.len() as u64);
            prop_assert!(count <= f.len() as u64);
            // Splitting every record into single blocks never changes filefrag's count.
            let singles: Vec<(u64, u64, u64)> = blocks.iter().map(|&(l, p)| (l, p, 1)).collect();
            prop_assert_eq!(filefrag_count(&singles), count);
            for w in blocks.windows(2) {
                with_pred += 1;
                contiguous += u64::from(w[1].1 == w[0].1 + 1);
                ideal += u64::from(w[1].0 != w[0].0 + 1);
            }
            ideal += u64::from(!blocks.is_empty());
        }
        let l = layout_score(&fs).unwrap();
        prop_assert_eq!((l.contiguous_blocks, l.blocks_with_predecessor), (contiguous, with_pred));
        prop_assert_eq!(xfs_frag(&fs).unwrap().ideal, ideal);
    }

    #[test]
    fn bucket_index_is_floor_log2_plus_one(n in 1u64..u64::MAX) {
        let i = bucket_index(n);
        prop_assert!(i == 31 || ((1u64 << (i - 1)) <= n && n < (1u64 << i)));
    }
}
