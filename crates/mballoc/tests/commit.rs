//! `commit()` under concurrency: when it returns, every block freed before it was called is
//! allocatable again, even while another thread's commit is still releasing (jbd2 waiters
//! wake only after the commit callback, `ext4_process_freed_data`, has run).

use mballoc::{Allocator, Extent, Flags, Geometry, Request};

/// Each thread frees only into its own group, then commits; a concurrent commit by the other
/// thread may have taken that group off the pending list already. After our own commit
/// returns, our group must hold no pending free.
#[test]
fn a_commit_returns_only_after_earlier_frees_are_released() {
    let geo = Geometry::ext4_default(1 << 30).unwrap(); // 8 groups
    let a = Allocator::builder(geo).cpus(2).build().unwrap();
    let rounds = 3000;
    std::thread::scope(|s| {
        for t in 0..2u32 {
            let a = &a;
            s.spawn(move || {
                let group = 2 + 2 * t; // 2 and 4: nobody else allocates or frees there
                let goal = geo.group_first_block(group);
                let owner = 100 + u64::from(t);
                for round in 0..rounds {
                    let mut got: Vec<Extent> = Vec::new();
                    for k in 0..8u64 {
                        let r = Request::new(owner, 0, 16)
                            .with_goal(goal + 64 * k)
                            .with_flags(Flags::HINT_DATA | Flags::HINT_NOPREALLOC | Flags::HINT_GOAL_ONLY);
                        got.push(a.allocate(&r).unwrap().extent);
                    }
                    for e in got {
                        a.free(owner, e).unwrap();
                    }
                    a.commit().unwrap();
                    let pending = a.group(group).unwrap().pending;
                    assert_eq!(pending, 0, "thread {t} round {round}: group {group} still has {pending} blocks pending after its commit returned");
                }
            });
        }
    });
    assert_eq!(a.pending_blocks(), 0);
    a.check_consistency().unwrap();
}
