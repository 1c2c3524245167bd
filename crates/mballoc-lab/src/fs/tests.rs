//! The file layer on small, hand-checked cases. Expected placements follow the Linux 6.18
//! captures where one exists (fallocate2-4g, falloc-1g-mixed) and hand arithmetic otherwise.

use std::sync::Arc;

use mballoc::{Allocator, Extent, Flags, Geometry, Request};

use super::*;
use crate::mkfs;

/// A freshly made fs of `bytes`, as mkfs.ext4 lays it out, 2 CPUs like the captures.
fn fresh(bytes: u64, commit_every: u64) -> Fs {
    let l = mkfs::layout(bytes).unwrap();
    let geo = Geometry::new(4096, l.blocks_per_group, l.blocks_count, 0, l.flex_bg_size).unwrap();
    let a = Allocator::builder(geo)
        .used(&l.used)
        .cpus(2)
        .build()
        .unwrap();
    Fs::new(Arc::new(a), l.inodes_per_group, commit_every).unwrap()
}

fn log(t: &Task) -> Vec<(Request, Extent)> {
    t.rec.log.clone().unwrap()
}

#[test]
fn fallocate2_steps_follow_the_kernel_capture() {
    // fallocate2-4g: the first 8 KiB fallocate of inode 12 asks for 2 blocks at goal 32768
    // (group 1, the inode's flex group + 1) and gets 33282 (after group 1's backup superblock,
    // descriptors and 512 reserved GDT blocks); the next asks at goal 33284 with the left
    // neighbour 1@33283.
    let fs = fresh(4 << 30, 1000);
    let mut t = fs.task(0);
    t.rec = Recorder::logging();
    let mut f = fs.create();
    assert_eq!(f.ino, 12);
    t.fallocate(&mut f, 0, 8192, false).unwrap();
    t.fallocate(&mut f, 8192, 8192, false).unwrap();
    let l = log(&t);
    assert_eq!(l.len(), 2);
    let (r0, e0) = &l[0];
    assert_eq!((r0.logical, r0.len, r0.goal, r0.i_size), (0, 2, 32768, 0));
    assert_eq!(r0.flags, Flags::HINT_DATA | Flags::HINT_NOPREALLOC);
    assert_eq!(*e0, Extent::new(33282, 2));
    let (r1, e1) = &l[1];
    assert_eq!((r1.logical, r1.goal, r1.i_size), (2, 33284, 8192));
    assert_eq!((r1.lleft, r1.pleft, r1.pright), (1, 33283, 0));
    assert_eq!(*e1, Extent::new(33284, 2));
    // One merged record, 4 blocks, size 16 KiB.
    assert_eq!(f.map.len(), 1);
    assert_eq!((f.map.blocks(), f.size), (4, 16384));
}

/// nojournal-4g-fallocate2: without a journal the truncate's blocks are free at once, so the
/// next cycle's first 8 KiB fallocate takes 33282 again (as the kernel did, record after
/// record); with a journal and no commit between, it cannot.
#[test]
fn without_a_journal_a_truncated_file_refills_its_own_blocks() {
    for journal in [false, true] {
        let l = mkfs::layout_with(4 << 30, journal).unwrap();
        let geo =
            Geometry::new(4096, l.blocks_per_group, l.blocks_count, 0, l.flex_bg_size).unwrap();
        let a = Allocator::builder(geo)
            .used(&l.used)
            .cpus(2)
            .journal(journal)
            .build()
            .unwrap();
        let fs = Fs::new(Arc::new(a), l.inodes_per_group, 1_000_000).unwrap();
        let mut t = fs.task(0);
        t.rec = Recorder::logging();
        let mut f = fs.create();
        for _ in 0..2 {
            for off in (0..1 << 20).step_by(8192) {
                t.fallocate(&mut f, off, 8192, false).unwrap();
            }
            t.truncate(&mut f, 0).unwrap();
        }
        let l = log(&t);
        assert_eq!(l.len(), 256);
        assert_eq!(l[0].1, Extent::new(33282, 2));
        let second = l[128].1.start;
        assert_eq!(second == 33282, !journal, "journal {journal}: {second}");
    }
}

#[test]
fn big_fallocate_is_split_at_32767_blocks_without_noprealloc() {
    // falloc-1g-mixed: a 257,299,373-byte fallocate (62,818 blocks) is asked 32767 blocks at a
    // time with HINT_DATA only; mballoc normalises each to 8 MiB (2048 blocks), and i_size
    // follows the mapped end.
    let fs = fresh(1 << 30, 1000);
    let mut t = fs.task(0);
    t.rec = Recorder::logging();
    let mut f = fs.create();
    t.fallocate(&mut f, 0, 257_299_373, false).unwrap();
    let l = log(&t);
    assert_eq!(f.map.blocks(), 62_818);
    let mut at = 0u32;
    for (r, e) in &l {
        assert_eq!(r.flags, Flags::HINT_DATA);
        assert_eq!(r.logical, at);
        assert_eq!(r.len, (62_818 - at).min(32767));
        assert_eq!(r.i_size, u64::from(at) * 4096);
        if at > 0 {
            assert_eq!(r.lleft, at - 1);
            assert_eq!(r.goal, r.pleft + 1);
        }
        at += e.len;
    }
    assert_eq!(l[0].1.len, 2048, "8 MiB normalisation");
    assert_eq!(f.size, 257_299_373);
}

#[test]
fn keep_size_leaves_i_size_alone() {
    let fs = fresh(1 << 30, 1000);
    let mut t = fs.task(0);
    t.rec = Recorder::logging();
    let mut f = fs.create();
    t.fallocate(&mut f, 0, 73_819_750, true).unwrap();
    assert_eq!(f.size, 0);
    assert_eq!(f.map.blocks(), 18_023);
    let l = log(&t);
    assert!(l.iter().all(|(r, _)| r.i_size == 0 && r.len <= 18_023));
    assert!(l[0].0.flags.contains(Flags::HINT_NOPREALLOC));
}

#[test]
fn buffered_writes_allocate_at_fsync_in_2048_block_pieces() {
    let fs = fresh(1 << 30, 1000);
    let mut t = fs.task(1);
    t.rec = Recorder::logging();
    let mut f = fs.create();
    for i in 0..160u64 {
        t.write_buffered(&mut f, i * 65536, 65536).unwrap();
    }
    assert_eq!(t.rec.calls, 0, "delalloc: nothing placed before fsync");
    assert_eq!(f.dirty_blocks(), 2560);
    t.fsync(&mut f).unwrap();
    let l = log(&t);
    assert_eq!(f.map.blocks(), 2560);
    assert_eq!(f.dirty_blocks(), 0);
    assert_eq!((l[0].0.logical, l[0].0.len), (0, 2048));
    for (r, _) in &l {
        assert_eq!(
            r.flags,
            Flags::HINT_DATA | Flags::DELALLOC_RESERVED | Flags::USE_RESERVED
        );
        assert_eq!(r.i_size, 160 * 65536);
        assert_eq!(r.cpu, 1);
    }
    // Unaligned appends overlap the previous write's last page: only new blocks are asked for.
    let mut g = fs.create();
    t.write_buffered(&mut g, 0, 130_048).unwrap(); // 127 KiB: blocks 0..32
    t.fsync(&mut g).unwrap();
    t.write_buffered(&mut g, 130_048, 130_048).unwrap(); // blocks 31..64
    assert_eq!(g.dirty_blocks(), 32);
    t.fsync(&mut g).unwrap();
    assert_eq!(g.map.blocks(), 64);
}

#[test]
fn direct_writes_allocate_at_once_with_the_old_size() {
    let fs = fresh(1 << 30, 1000);
    let mut t = fs.task(0);
    t.rec = Recorder::logging();
    let mut f = fs.create();
    t.write_direct(&mut f, 0, 131072).unwrap();
    t.write_direct(&mut f, 131072, 131072).unwrap();
    let l = log(&t);
    assert_eq!(l[0].0.flags, Flags::HINT_DATA);
    assert_eq!((l[0].0.i_size, l[1].0.i_size), (0, 131072));
    assert_eq!(f.size, 262144);
    assert_eq!(f.map.blocks(), 64);
    // Overwrites allocate nothing.
    let calls = t.rec.calls;
    t.write_direct(&mut f, 4096, 8192).unwrap();
    assert_eq!(t.rec.calls, calls);
}

#[test]
fn truncate_frees_after_commit_and_drops_preallocations() {
    let fs = fresh(1 << 30, 1_000_000);
    let a = fs.allocator_arc();
    let mut t = fs.task(0);
    let mut f = fs.create();
    t.write_direct(&mut f, 0, 1 << 20).unwrap(); // 256 blocks, an inode PA behind them
    let free_before = a.free_blocks();
    t.truncate(&mut f, 4096 * 100).unwrap();
    assert_eq!(f.map.blocks(), 100);
    assert_eq!(a.free_blocks(), free_before + 156);
    assert_eq!(a.pending_blocks(), 156, "reusable only after the commit");
    assert!(a.preallocations().iter().all(|&(o, _)| o != f.ino));
    fs.commit().unwrap();
    assert_eq!(a.pending_blocks(), 0);
    t.unlink(f).unwrap();
    assert_eq!(t.rec.blocks_freed, 256);
    a.check_consistency().unwrap();
}

#[test]
fn enospc_commits_and_retries() {
    // 64 MiB: fill it, free everything without a commit, and allocate again: the first try
    // finds nothing (the frees wait for the commit), the layer commits and succeeds.
    let fs = fresh(64 << 20, 1_000_000);
    let a = fs.allocator_arc();
    let mut t = fs.task(0);
    let mut f = fs.create();
    let free = a.free_blocks();
    let want = (free - 64) * 4096;
    t.fallocate(&mut f, 0, want, false).unwrap();
    t.truncate(&mut f, 0).unwrap();
    assert!(a.pending_blocks() > 0);
    let mut g = fs.create();
    t.fallocate(&mut g, 0, want, false).unwrap();
    assert!(t.rec.enospc_commits >= 1);
    assert_eq!(g.map.blocks(), want / 4096);
    // Now really full: the error says how far it got.
    let mut h = fs.create();
    match t.fallocate(&mut h, 0, 1 << 20, false) {
        Err(FsError::NoSpace { ino, mapped, .. }) => {
            assert_eq!(ino, h.ino);
            assert_eq!(mapped, h.map.blocks());
        }
        other => panic!("expected ENOSPC, got {other:?}"),
    }
}

#[test]
fn enospc_retry_follows_ext4_should_retry_alloc() {
    use super::ops::should_retry_alloc;
    // Frees waiting: commit and retry, three times at most.
    assert!(should_retry_alloc(0, 10, 0, true));
    assert!(should_retry_alloc(0, 10, 2, true));
    assert!(!should_retry_alloc(0, 10, 3, true));
    // None waiting but blocks free: a commit by another task released them after the search
    // failed (seed 001's fallocate3 at two tasks hit this: 991,265 free, 0 waiting).
    assert!(should_retry_alloc(991_265, 0, 0, true));
    // Nothing free, nothing waiting: ENOSPC at once.
    assert!(!should_retry_alloc(0, 0, 0, true));
    // No journal: no retry at all (`if (!sbi->s_journal) return 0`).
    assert!(!should_retry_alloc(991_265, 0, 0, false));
}

#[test]
fn bad_input_is_an_error() {
    let fs = fresh(64 << 20, 10);
    let mut t = fs.task(0);
    let mut f = fs.create();
    assert!(matches!(
        t.fallocate(&mut f, 0, 0, false),
        Err(FsError::ZeroLength { .. })
    ));
    assert!(matches!(
        t.write_direct(&mut f, u64::MAX - 10, 100),
        Err(FsError::RangeTooLarge { .. })
    ));
    assert!(matches!(
        t.fallocate(&mut f, 1 << 50, 4096, false),
        Err(FsError::RangeTooLarge { .. })
    ));
    let a = fs.allocator_arc();
    assert!(matches!(
        Fs::new(a, 8192, 0),
        Err(FsError::BadCommitInterval(0))
    ));
}

#[test]
fn the_journal_commits_every_k_operations() {
    let fs = fresh(64 << 20, 3);
    let mut t = fs.task(0);
    let mut f = fs.create();
    for i in 0..7 {
        t.fallocate(&mut f, i * 8192, 8192, false).unwrap();
    }
    assert_eq!(fs.journal().ops(), 7);
    assert_eq!(fs.journal().commits(), 2);
}

#[test]
fn fallocate3_rounds_follow_the_kernel_capture() {
    // fallocate3-4g: inodes 12..15 each open(O_TRUNC) + KEEP_SIZE fallocate of 73,819,750
    // bytes (18,023 blocks) + close, round after round. The goal (group 1's first block) is
    // busy, so every request falls back to the stream goal. Round 2 runs before any commit:
    // round 1's blocks are freed but not reusable yet. Placements as the kernel's.
    let fs = fresh(4 << 30, 1_000_000);
    let mut t = fs.task(0);
    t.rec = Recorder::logging();
    let mut files: Vec<File> = (0..4).map(|_| fs.create()).collect();
    let mut starts = Vec::new();
    for _round in 0..2 {
        for f in &mut files {
            f.open = true;
            t.truncate(f, 0).unwrap();
            t.fallocate(f, 0, 73_819_750, true).unwrap();
            t.close(f);
            assert_eq!(f.map.len(), 1);
            starts.push(f.map.iter().next().unwrap().physical);
        }
    }
    let l = log(&t);
    assert!(l
        .iter()
        .all(|(r, _)| r.goal == 32768 && r.len == 18_023 && r.i_size == 0));
    assert_eq!(
        starts,
        vec![8743, 33281, 65536, 98817, 131072, 164353, 196608, 229889]
    );
}

/// Fallocates one block at every other logical block, `n` times: `n` extents, as no two are
/// logically contiguous.
fn every_other_block(t: &mut Task, f: &mut File, n: u64) {
    for k in 0..n {
        t.fallocate(f, 2 * k * 4096, 4096, true).unwrap();
    }
}

#[test]
fn the_fifth_extent_allocates_a_leaf_at_the_inode_goal() {
    let fs = fresh(4 << 30, 1000);
    let mut t = fs.task(0);
    t.rec = Recorder::logging();
    let mut f = fs.create();
    every_other_block(&mut t, &mut f, 4);
    assert_eq!((f.map.len(), f.tree.depth(), t.rec.tree_blocks), (4, 0, 0));
    every_other_block(&mut t, &mut f, 5);
    assert_eq!((f.map.len(), f.tree.depth(), t.rec.tree_blocks), (5, 1, 1));
    let l = log(&t);
    // Without HINT_TRY_GOAL a 1-block request takes group 1's first free block (33281 for
    // the first, after the reserved GDT blocks), so the data packs: lblk 2k at 33281 + k.
    let (data, got) = &l[l.len() - 2];
    assert_eq!((data.logical, data.goal, got.start), (8, 33284 + 2, 33285));
    // ext4_ext_grow_indepth: one block at ext4_inode_to_goal_block (group 1's first block),
    // not a data request, right after the data that needed it.
    let (leaf, got) = &l[l.len() - 1];
    assert_eq!((leaf.len, leaf.goal, leaf.logical), (1, 32768, 0));
    assert!(!leaf.flags.contains(Flags::HINT_DATA));
    assert_eq!(*got, Extent::new(33286, 1));
    assert_eq!(f.tree.blocks().collect::<Vec<_>>(), [33286]);
}

#[test]
fn unlink_frees_the_leaf() {
    let fs = fresh(4 << 30, 1000);
    let mut t = fs.task(0);
    let mut f = fs.create();
    every_other_block(&mut t, &mut f, 5);
    fs.commit().unwrap();
    let a = fs.allocator();
    let free_before = a.free_blocks();
    t.unlink(f).unwrap();
    fs.commit().unwrap();
    assert_eq!(a.free_blocks(), free_before + 5 + 1);
    assert_eq!(t.rec.blocks_freed, 6);
}

#[test]
fn the_341st_extent_gets_a_second_leaf_near_its_data() {
    let fs = fresh(4 << 30, 1000);
    let mut t = fs.task(0);
    t.rec = Recorder::logging();
    let mut f = fs.create();
    every_other_block(&mut t, &mut f, 341);
    assert_eq!((f.map.len(), t.rec.tree_blocks), (341, 2));
    let l = log(&t);
    // ext4_ext_new_meta_block: ext4_ext_find_goal on the path to block 680 before the
    // insert, i.e. the record at 678 continued by 2: the data request's goal too.
    let (data, _) = &l[l.len() - 2];
    let (leaf, _) = &l[l.len() - 1];
    let at_678 = f.map.lookup(678).unwrap().physical;
    assert_eq!((data.logical, data.goal), (680, at_678 + 2));
    assert_eq!((leaf.len, leaf.goal), (1, at_678 + 2));
    assert!(!leaf.flags.contains(Flags::HINT_TRY_GOAL) && !leaf.flags.contains(Flags::HINT_DATA));
    // Truncating back to 340 extents frees the second leaf, not the first.
    t.truncate(&mut f, 679 * 4096).unwrap();
    assert_eq!((f.map.len(), f.tree.blocks().count()), (340, 1));
    assert_eq!(t.rec.blocks_freed, 2);
}

#[test]
fn extent_tree_blocks_can_be_left_out() {
    let mut fs = fresh(4 << 30, 1000);
    fs.set_extent_tree_blocks(false);
    let mut t = fs.task(0);
    let mut f = fs.create();
    every_other_block(&mut t, &mut f, 5);
    assert_eq!((f.map.len(), f.tree.depth(), t.rec.tree_blocks), (5, 0, 0));
}

/// A timed journal: fsync no longer commits; blocks freed before a commit starts become
/// allocatable when it ends, blocks freed while it runs wait for the next one.
#[test]
fn a_timed_commit_releases_what_was_freed_before_it_started() {
    let fs = fresh(1 << 30, 1);
    fs.journal().set_timed();
    let a = fs.allocator_arc();
    let mut t = fs.task(0);
    let mut f = fs.create();
    let mut g = fs.create();
    t.write_direct(&mut f, 0, 1 << 20).unwrap();
    t.write_direct(&mut g, 0, 1 << 20).unwrap();
    t.write_buffered(&mut g, 1 << 20, 4096).unwrap();
    t.fsync(&mut g).unwrap();
    assert_eq!(
        fs.journal().commits(),
        0,
        "neither fsync nor the op count commits"
    );
    t.unlink(f).unwrap();
    let first = fs.journal().close(); // a commit starts
    t.truncate(&mut g, 0).unwrap(); // freed while it runs
    assert_eq!(a.pending_blocks(), 256 + 257);
    fs.journal().release(&a, first).unwrap(); // it ends
    assert_eq!(
        a.pending_blocks(),
        257,
        "the truncate waits for the next commit"
    );
    fs.commit().unwrap(); // a forced commit (ENOSPC, syncfs) takes everything
    assert_eq!(a.pending_blocks(), 0);
    assert_eq!(fs.journal().commits(), 2);
    a.check_consistency().unwrap();
}

/// With inode reuse a file created after an unlink takes the lowest freed number (real
/// foursizes: its three fallocate jobs keep inodes 12, 13 and 14 over their 100 loops); by
/// default numbers are never reused.
#[test]
fn unlinked_inode_numbers_are_reused_when_asked() {
    let mut fs = fresh(4 << 30, 1000);
    let mut t = fs.task(0);
    let (a, b) = (fs.create(), fs.create());
    assert_eq!((a.ino, b.ino), (12, 13));
    t.unlink(b).unwrap();
    t.unlink(a).unwrap();
    assert_eq!(fs.create().ino, 14);
    drop(t);
    fs.set_reuse_inos(true);
    let mut t = fs.task(0);
    let (c, d) = (fs.create(), fs.create());
    t.unlink(d).unwrap();
    t.unlink(c).unwrap();
    assert_eq!(
        [fs.create().ino, fs.create().ino, fs.create().ino],
        [15, 16, 17]
    );
    let e = fs.create();
    t.unlink(e).unwrap();
    assert_eq!(fs.create().ino, 18);
    assert_eq!(fs.create_with_ino(30).ino, 30);
    assert_eq!(fs.create().ino, 31);
}
