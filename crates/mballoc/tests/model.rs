//! Every allocation path against a reference model: a plain per-cluster state array (one
//! block per cluster without bigalloc) that knows what is allocated, what waits for a commit
//! and what is free. Random operation sequences (proptest) under every policy, with and
//! without a journal (without one a freed block is free at once), with 4, 16 and 64 KiB pages,
//! on geometries with and without bigalloc clusters; plus many threads at once.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use mballoc::{Allocator, Error, Extent, Flags, FreeFlags, Geometry, Policy, Request};
use proptest::prelude::*;

mod request_support;
use request_support::request;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum B {
    Free,
    Used(u64),
    Pending,
}

/// The state of every cluster (`blocks[c]`: cluster `c`, which is block `c` without
/// bigalloc), and the block extents handed out.
struct Model {
    blocks: Vec<B>,
    live: Vec<(u64, Extent)>,
    /// `cluster_bits` of the geometry.
    bits: u32,
}

impl Model {
    fn new(geo: &Geometry, used: &[(u64, u64)]) -> Model {
        let mut m = Model {
            blocks: vec![B::Free; geo.clusters_count() as usize],
            live: Vec::new(),
            bits: geo.cluster_bits(),
        };
        for &(s, l) in used {
            for c in m.clusters(Extent::new(s, l as u32)) {
                m.blocks[c] = B::Used(0);
            }
        }
        m
    }
    fn count(&self, f: impl Fn(B) -> bool) -> u64 {
        self.blocks.iter().filter(|&&b| f(b)).count() as u64
    }
    /// The clusters holding any block of `e`.
    fn clusters(&self, e: Extent) -> std::ops::Range<usize> {
        let first = e.start >> self.bits;
        let end = (e.end() - 1) >> self.bits;
        first as usize..end as usize + 1
    }
    /// Blocks of `n` clusters.
    fn c2b(&self, n: u64) -> u64 {
        n << self.bits
    }
}

#[derive(Debug, Clone)]
enum Op {
    Alloc {
        owner: u64,
        logical: u32,
        len: u32,
        kind: u8,
        cpu: u32,
        goal: u64,
    },
    /// A free, by the owner that was given the blocks, or (`as_owner`) by another: a caller's
    /// bug the allocator cannot see, which must still hand no block out twice. A `trim`
    /// frees only the tail and keeps a partial cluster the head still uses
    /// (`NOFREE_FIRST_CLUSTER`, as a truncate inside a cluster does).
    Free {
        pick: usize,
        trim: u32,
        as_owner: Option<u64>,
    },
    Commit,
    Discard {
        owner: u64,
    },
    DoubleFree {
        pick: usize,
    },
    /// A request with every field drawn at random: any flag bits, neighbours, sizes and
    /// goals, in range or not. It must be served without overlap or refused with a typed
    /// error that changes nothing.
    Wild(Box<Request>),
    /// A tunable changed between operations (sysfs writes while the filesystem is in use).
    Tune(&'static str, &'static str),
}

/// Every tunable at a few values, the switches both ways.
const TUNES: &[(&str, &str)] = &[
    ("mb_optimize_scan", "0"),
    ("mb_optimize_scan", "1"),
    ("size_classes", "0"),
    ("size_classes", "1"),
    ("size_class_per_cpu", "0"),
    ("size_class_per_cpu", "1"),
    ("size_class_strict_goal", "0"),
    ("size_class_strict_goal", "1"),
    ("size_class_stream_groups", "0"),
    ("size_class_stream_groups", "1"),
    ("size_class_largest_first", "0"),
    ("size_class_largest_first", "1"),
    ("size_class_inherit", "0"),
    ("size_class_inherit", "1"),
    ("goal_md_lock", "0"),
    ("goal_md_lock", "1"),
    ("order_lists", "0"),
    ("order_lists", "1"),
    ("free_md_lock", "0"),
    ("free_md_lock", "1"),
    ("free_insert_then_merge", "0"),
    ("free_insert_then_merge", "1"),
    ("nr_global_goals", "1"),
    ("nr_global_goals", "3"),
    ("mb_group_prealloc", "0"),
    ("mb_group_prealloc", "8"),
    ("mb_group_prealloc", "512"),
    ("mb_stream_req", "0"),
    ("mb_stream_req", "16"),
    ("mb_stream_req", "4000"),
    ("mb_order2_req", "0"),
    ("mb_order2_req", "2"),
    ("mb_max_to_scan", "1"),
    ("mb_max_to_scan", "200"),
    ("mb_min_to_scan", "0"),
    ("mb_min_to_scan", "10"),
    ("mb_max_linear_groups", "0"),
    ("mb_max_linear_groups", "4"),
    ("mb_max_linear_groups", "4294967295"),
    ("mb_best_avail_max_trim_order", "0"),
    ("mb_best_avail_max_trim_order", "3"),
    ("stripe", "0"),
    ("stripe", "16"),
    ("try_lock_groups", "0"),
    ("try_lock_groups", "1"),
    ("prefetch_test_before_set", "1"),
    ("mb_max_prealloc_kb", "8192"),
    ("mb_max_prealloc_kb", "32768"),
    ("flavor", "6.18.y"),
    ("flavor", "6.18"),
];

/// Mostly in range, so that most wild requests get past the checks and reach the search.
fn place() -> impl Strategy<Value = u64> {
    prop_oneof![8 => 0u64..261_000, 1 => any::<u64>()]
}

/// A neighbouring extent (`lleft`/`pleft` or `lright`/`pright`): none, a random one in range,
/// or anything at all.
fn neighbour() -> impl Strategy<Value = (u32, u64)> {
    prop_oneof![
        4 => Just((0u32, 0u64)),
        2 => (0u32..8000, 0u64..261_000),
        1 => (any::<u32>(), any::<u64>()),
    ]
}

fn wild() -> impl Strategy<Value = Request> {
    (
        (
            1u64..12,
            0u32..8000,
            prop_oneof![1u32..600, 0u32..70_000],
            place(),
        ),
        (neighbour(), neighbour()),
        (any::<u32>(), prop_oneof![0u64..(1 << 32), any::<u64>()]),
        (
            any::<bool>(),
            0u32..4,
            prop_oneof![4 => Just(true), 1 => Just(false)],
        ),
    )
        .prop_map(
            |(
                (owner, logical, len, goal),
                ((ll, pl), (lr, pr)),
                (flags, i_size),
                (open, cpu, extents),
            )| {
                let mut r = Request::new(owner, logical, len)
                    .with_goal(goal)
                    .with_flags(Flags(flags))
                    .with_i_size(i_size)
                    .with_cpu(cpu)
                    .with_open_for_write(open);
                (r.lleft, r.pleft, r.lright, r.pright) = (ll, pl, lr, pr);
                r.extents = extents;
                r
            },
        )
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u64..12, 0u32..4000, 1u32..3000, 0u8..4, 0u32..2, 0u64..261_000).prop_map(|(owner, logical, len, kind, cpu, goal)| Op::Alloc { owner, logical, len, kind, cpu, goal }),
        3 => (any::<usize>(), 0u32..8, prop::option::weighted(0.25, 1u64..12)).prop_map(|(pick, trim, as_owner)| Op::Free { pick, trim, as_owner }),
        1 => Just(Op::Commit),
        1 => (1u64..12).prop_map(|owner| Op::Discard { owner }),
        1 => any::<usize>().prop_map(|pick| Op::DoubleFree { pick }),
        2 => wild().prop_map(|r| Op::Wild(Box::new(r))),
        1 => prop::sample::select(TUNES).prop_map(|(n, v)| Op::Tune(n, v)),
    ]
}

fn run(policy: &str, journal: bool, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let geo = Geometry::new(4096, 32768, 8 * 32768 - 1000, 0, 16).unwrap();
    let used = [(0u64, 300u64), (32768, 129), (5 * 32768 + 77, 4000)];
    // The presets as users get them, plus the optimised scan on this small geometry (8 groups
    // leave it off by default) under each.
    let (name, optimize) = match policy.strip_suffix("+optimize") {
        Some(p) => (p, true),
        None => (policy, false),
    };
    let mut t = Policy::from_name(name).unwrap().tunables(&geo, 2);
    t.mb_optimize_scan |= optimize;
    let a = Allocator::builder(geo)
        .used(&used)
        .tunables(t)
        .cpus(2)
        .lazy(name == "proposed")
        .journal(journal)
        .build()
        .unwrap();
    check(&a, Model::new(&geo, &used), ops)
}

/// Runs `ops` on `a` and the model `m` of the same blocks, checking every answer and, after
/// each operation, the allocator's consistency and counters against the model. Goals wrap
/// into the filesystem (the generated range fits the default geometry as it is).
fn check(a: &Allocator, mut m: Model, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let blocks = m.c2b(m.blocks.len() as u64);
    for op in ops {
        match op {
            Op::Alloc {
                owner,
                logical,
                len,
                kind,
                cpu,
                goal,
            } => {
                let req = request(owner, logical, len, kind, cpu, goal % blocks);
                match a.allocate(&req) {
                    Ok(got) => {
                        let e = got.extent;
                        prop_assert!(e.len >= 1 && e.len <= req.len, "{e:?} for {req:?}");
                        // The blocks sit where the logical block sits in its cluster.
                        let mask = m.c2b(1) - 1;
                        prop_assert_eq!(e.start & mask, u64::from(req.logical) & mask);
                        for c in m.clusters(e) {
                            prop_assert_eq!(
                                m.blocks[c],
                                B::Free,
                                "cluster {} handed out while {:?}",
                                c,
                                m.blocks[c]
                            );
                            m.blocks[c] = B::Used(owner);
                        }
                        m.live.push((owner, e));
                    }
                    Err(Error::NoSpace { .. }) => {
                        let offset = u64::from(req.logical) & (m.c2b(1) - 1);
                        let wanted = (offset + u64::from(req.len)).div_ceil(m.c2b(1));
                        prop_assert!(m.count(|b| b == B::Free) < wanted)
                    }
                    Err(e) => prop_assert!(false, "unexpected error {e}"),
                }
            }
            Op::Wild(req) => {
                // A refusal changes nothing: the checks below find every counter as it was.
                if let Ok(got) = a.allocate(&req) {
                    let e = got.extent;
                    prop_assert!(e.len >= 1 && e.len <= req.len, "{e:?} for {req:?}");
                    prop_assert!(e.end() <= m.c2b(m.blocks.len() as u64), "{e:?} for {req:?}");
                    for c in m.clusters(e) {
                        prop_assert_eq!(m.blocks[c], B::Free, "cluster {} for {:?}", c, req);
                        m.blocks[c] = B::Used(req.owner);
                    }
                    m.live.push((req.owner, e));
                }
            }
            Op::Free {
                pick,
                trim,
                as_owner,
            } => {
                if m.live.is_empty() {
                    continue;
                }
                let (owner, mut e) = m.live.swap_remove(pick % m.live.len());
                let mut flags = FreeFlags::default();
                let mut freed = m.clusters(e);
                if trim > 0 && e.len > trim {
                    // Free only the tail, keep the head live (a truncate); a cluster the
                    // head still uses stays allocated.
                    let head = Extent::new(e.start, e.len - trim);
                    e = Extent::new(e.start + u64::from(e.len - trim), trim);
                    m.live.push((owner, head));
                    flags = FreeFlags::NOFREE_FIRST_CLUSTER;
                    freed = m.clusters(head).end..freed.end;
                }
                a.free_with_flags(as_owner.unwrap_or(owner), e, flags)
                    .map_err(|err| TestCaseError::fail(err.to_string()))?;
                // Without a journal nothing waits for a commit (`ext4_mb_clear_bb`).
                let now = if a.journal() { B::Pending } else { B::Free };
                for c in freed {
                    m.blocks[c] = now;
                }
            }
            Op::Commit => {
                a.commit()
                    .map_err(|err| TestCaseError::fail(err.to_string()))?;
                for b in m.blocks.iter_mut() {
                    if *b == B::Pending {
                        *b = B::Free;
                    }
                }
            }
            Op::Discard { owner } => {
                a.discard_preallocations(owner);
            }
            Op::Tune(name, value) => {
                // Every value listed is valid on every geometry here but nr_global_goals=3
                // on filesystems of fewer groups: refused, nothing changed.
                let before = a.tunables();
                if a.set_tunable(name, value).is_err() {
                    prop_assert_eq!(a.tunables(), before);
                }
            }
            Op::DoubleFree { pick } => {
                let Some(b) = (0..m.blocks.len())
                    .map(|i| (i + pick) % m.blocks.len())
                    .find(|&i| m.blocks[i] != B::Used(0) && !matches!(m.blocks[i], B::Used(_)))
                else {
                    continue;
                };
                let block = m.c2b(b as u64);
                let err = a.free(1, Extent::new(block, 1));
                prop_assert!(
                    matches!(err, Err(Error::NotAllocated { block: at, .. }) if at == block),
                    "{err:?}"
                );
            }
        }
        prop_assert!(a.check_consistency().is_ok(), "{:?}", a.check_consistency());
        prop_assert_eq!(
            a.free_blocks(),
            m.c2b(m.count(|b| !matches!(b, B::Used(_))))
        );
        prop_assert_eq!(a.pending_blocks(), m.c2b(m.count(|b| b == B::Pending)));
    }
    Ok(())
}

/// A small filesystem of any shape the geometry accepts: 1 KiB or 4 KiB blocks (with
/// `first_data_block` 1 or 0), groups of 8 clusters up to full size, a short last group, any
/// flex_bg size, one block per cluster or (bigalloc, first data block 0) 2 to 16; a few
/// blocks in use at the start.
fn small_geometry() -> impl Strategy<Value = (Geometry, Vec<(u64, u64)>)> {
    let units = prop_oneof![1u32..=8, 1u32..=4096];
    let cluster_bits = prop_oneof![2 => Just(0u32), 1 => 1u32..=4];
    (
        any::<bool>(),
        units,
        1u64..=6,
        0u32..=100,
        0u32..=4,
        0u64..40,
        cluster_bits,
    )
        .prop_map(|(kib, units, groups, tail_pct, flex_log, used, bits)| {
            let bs = if kib { 1024 } else { 4096 };
            let first = u64::from(kib && bits == 0);
            let cpg = 8 * units.min(bs);
            let tail = u64::from(cpg) * u64::from(tail_pct) / 100;
            let count = first + (((groups - 1) * u64::from(cpg) + tail.max(1)) << bits);
            let geo = Geometry::with_clusters(bs, bits, cpg, count, first, 1 << flex_log).unwrap();
            let used = used.min(count - first - 1);
            (
                geo,
                if used > 0 {
                    vec![(first, used)]
                } else {
                    vec![]
                },
            )
        })
}

/// How the small filesystem is mounted: with a journal or not, the page size (how many
/// groups one buddy-cache page holds: up to 32 with 1 KiB blocks in 64 KiB pages), and
/// whether groups load lazily (only then do page-mates matter).
fn mount() -> impl Strategy<Value = (bool, u32, bool)> {
    (
        any::<bool>(),
        prop::sample::select(&[4096u32, 16384, 65536][..]),
        any::<bool>(),
    )
}

fn run_small(
    policy: Policy,
    (geo, used): (Geometry, Vec<(u64, u64)>),
    (journal, page_size, lazy): (bool, u32, bool),
    ops: Vec<Op>,
) -> Result<(), TestCaseError> {
    let mut t = policy.tunables(&geo, 2);
    t.mb_optimize_scan = true;
    let a = Allocator::builder(geo)
        .used(&used)
        .tunables(t)
        .cpus(2)
        .journal(journal)
        .page_size(page_size)
        .lazy(lazy)
        .prefetch_threads(0)
        .build()
        .unwrap();
    // The model counts clusters from 0; blocks below first_data_block do not exist.
    let mut m = Model::new(&geo, &used);
    for b in m.blocks.iter_mut().take(geo.first_data_block() as usize) {
        *b = B::Used(0);
    }
    check(&a, m, ops)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn small_geometries_linux_6_18(g in small_geometry(), m in mount(), ops in proptest::collection::vec(op(), 1..80)) {
        run_small(Policy::Linux618, g, m, ops)?;
    }
    #[test]
    fn small_geometries_proposed(g in small_geometry(), m in mount(), ops in proptest::collection::vec(op(), 1..80)) {
        run_small(Policy::Proposed, g, m, ops)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn linux_6_16(ops in proptest::collection::vec(op(), 1..120), journal in any::<bool>()) { run("linux-6.16", journal, ops)?; }
    #[test]
    fn linux_6_16_optimize(ops in proptest::collection::vec(op(), 1..120), journal in any::<bool>()) { run("linux-6.16+optimize", journal, ops)?; }
    #[test]
    fn linux_6_18(ops in proptest::collection::vec(op(), 1..120), journal in any::<bool>()) { run("linux-6.18", journal, ops)?; }
    #[test]
    fn linux_6_18_optimize(ops in proptest::collection::vec(op(), 1..120), journal in any::<bool>()) { run("linux-6.18+optimize", journal, ops)?; }
    #[test]
    fn proposed(ops in proptest::collection::vec(op(), 1..120), journal in any::<bool>()) { run("proposed", journal, ops)?; }
    #[test]
    fn proposed_optimize(ops in proptest::collection::vec(op(), 1..120), journal in any::<bool>()) { run("proposed+optimize", journal, ops)?; }
}

/// Fill the filesystem to the last block: partial allocations near ENOSPC, PAs discarded on
/// the retry path, then a clean NoSpace.
#[test]
fn fills_to_the_last_block() {
    let geo = Geometry::new(4096, 32768, 2 * 32768, 0, 16).unwrap();
    let a = Allocator::builder(geo)
        .used(&[(0, 100)])
        .cpus(2)
        .build()
        .unwrap();
    let mut got = 0u64;
    for i in 0.. {
        let req = Request::new(10 + i % 7, (i as u32 % 50) * 100, 700).with_i_size(1 << 30);
        match a.allocate(&req) {
            Ok(x) => got += u64::from(x.extent.len),
            Err(Error::NoSpace { .. }) => break,
            Err(e) => panic!("{e}"),
        }
        assert!(i < 100_000);
    }
    assert_eq!(got, 2 * 32768 - 100);
    assert_eq!(a.free_blocks(), 0);
    a.check_consistency().unwrap();
}

/// Out of space, the retry releases preallocations group by group from group 0 until it has
/// as many clusters as the request asked for (`ext4_mb_discard_preallocations`), not every
/// PA at once: a PA in a later group survives a small request's retry (found by a kernel
/// capture of a filesystem run out of space, `kernel-cases/enospc-1g-run`).
#[test]
fn enospc_discards_preallocations_group_by_group() {
    let geo = Geometry::new(4096, 32768, 4 * 32768, 0, 16).unwrap();
    // Group 1 has room for one 512-block PA, group 3 for more.
    let free = [(32768 + 1024u64, 512u64), (3 * 32768 + 5120, 2000)];
    let mut used = Vec::new();
    let mut at = 0;
    for &(s, n) in &free {
        used.push((at, s - at));
        at = s + n;
    }
    used.push((at, geo.blocks_count() - at));
    let a = Allocator::builder(geo).used(&used).cpus(2).build().unwrap();
    // Two files, one PA each: owner 10's fills group 1's room, so owner 11's goes to group 3.
    for (owner, group) in [(10u64, 1u32), (11, 3)] {
        let req = Request::new(owner, 0, 16).with_i_size(4 << 20);
        let got = a.allocate(&req).unwrap();
        assert_eq!(got.found.group, group, "{got:?}");
    }
    assert_eq!(a.preallocations().len(), 2);
    // Metadata requests (never preallocated) take the rest until one finds only PA blocks.
    let meta = Request::new(12, 0, 1).with_flags(Flags(0));
    while a.stats().enospc_retries == 0 {
        a.allocate(&meta).unwrap();
    }
    assert_eq!(
        a.preallocations(),
        vec![(11, 1)],
        "group 1's PA freed enough for one block; group 3's stays"
    );
    a.check_consistency().unwrap();
}

/// A goal outside the filesystem is not an error: the search starts at the first data block
/// (`ext4_mb_initialize_context`), as for a goal of the first data block itself. The kernel
/// gets such goals: the block after a file's last extent when that extent ends the
/// filesystem (`lastblock-1g-run` replays two). With 1 KiB blocks the first data block is 1.
#[test]
fn a_goal_outside_the_filesystem_starts_at_the_first_data_block() {
    for geo in [
        Geometry::ext4_default(1 << 30).unwrap(),
        Geometry::new(1024, 8192, 8 * 8192, 1, 4).unwrap(),
    ] {
        let first = geo.first_data_block();
        let used = [(first, 300), (700, 50)];
        for goal in [
            geo.blocks_count(),
            geo.blocks_count() + 1,
            1 << 40,
            u64::MAX,
        ] {
            let (a, b) = (
                Allocator::new(geo, &used).unwrap(),
                Allocator::new(geo, &used).unwrap(),
            );
            for (len, flags) in [
                (16, Flags::HINT_DATA | Flags::HINT_NOPREALLOC),
                (5, Flags(0)),
            ] {
                let req = Request::new(1, 0, len).with_flags(flags);
                let past = a.allocate(&req.clone().with_goal(goal)).unwrap();
                let at_first = b.allocate(&req.with_goal(first)).unwrap();
                assert_eq!(past.extent, at_first.extent, "goal {goal}, {geo:?}");
            }
        }
    }
}

/// Bad input is an error and leaves the allocator usable.
#[test]
fn bad_input_is_a_clear_error() {
    let geo = Geometry::ext4_default(1 << 30).unwrap();
    let a = Allocator::new(geo, &[(0, 1000)]).unwrap();
    assert!(matches!(
        a.allocate(&Request::new(1, 0, 0)),
        Err(Error::ZeroLength { owner: 1 })
    ));
    assert!(matches!(
        a.allocate(&Request::new(1, 5, 1).with_left(9, 100)),
        Err(Error::InvalidRequest { .. })
    ));
    // The group-or-file decision's own flags, found by the wild-request property: with
    // mb_group_prealloc = 0 a preset HINT_GROUP_ALLOC became a zero-length goal.
    a.set_tunable("mb_group_prealloc", "0").unwrap();
    for f in [Flags::HINT_GROUP_ALLOC, Flags::STREAM_ALLOC] {
        let req = Request::new(1, 901, 1).with_flags(Flags::HINT_DATA | f);
        match a.allocate(&req) {
            Err(Error::InvalidRequest { what, .. }) => assert!(what.contains("decision"), "{what}"),
            other => panic!("{f:?}: expected InvalidRequest, got {other:?}"),
        }
    }
    a.set_tunable("mb_group_prealloc", "512").unwrap();
    assert!(matches!(
        a.free(1, Extent::new(1 << 40, 1)),
        Err(Error::OutOfRange { .. })
    ));
    assert!(matches!(
        a.free(1, Extent::new(5000, 10)),
        Err(Error::NotAllocated { block: 5000, .. })
    ));
    let x = a.allocate(&Request::new(1, 0, 8)).unwrap().extent;
    a.free(1, x).unwrap();
    assert!(
        matches!(a.free(1, x), Err(Error::NotAllocated { .. })),
        "double free"
    );
    assert!(a.set_tunable("mb_group_prealloc", "40000").is_err());
    assert!(matches!(
        a.set_tunable("bogus", "1"),
        Err(Error::UnknownTunable { .. })
    ));
    a.check_consistency().unwrap();
    assert!(a.allocate(&Request::new(2, 0, 8)).is_ok());
}

/// A free that names the wrong owner still retires the preallocation that handed the blocks
/// out: asking again for the same logical block must not be served from that PA (its block
/// waits for a commit, and after the commit may be someone else's).
#[test]
fn a_free_naming_the_wrong_owner_retires_the_pa() {
    for p in Policy::ALL {
        let geo = Geometry::ext4_default(1 << 30).unwrap();
        let a = Allocator::builder(geo)
            .tunables(p.tunables(&geo, 1))
            .build()
            .unwrap();
        let got = a.allocate(&request(2, 0, 38, 1, 0, 0)).unwrap().extent;
        assert_eq!(
            a.preallocations(),
            vec![(2, 1)],
            "{p:?}: no inode PA to test"
        );
        a.free(3, got).unwrap();
        assert!(
            a.preallocations().is_empty(),
            "{p:?}: the PA outlived the free"
        );
        a.commit().unwrap();
        let again = a.allocate(&request(2, 0, 38, 1, 0, 0)).unwrap().extent;
        let back = a
            .allocate(&request(4, 0, 38, 2, 0, got.start))
            .unwrap()
            .extent;
        assert!(
            again.end() <= back.start || back.end() <= again.start,
            "{p:?}: {again:?} and {back:?} overlap"
        );
        a.check_consistency().unwrap();
    }
}

/// Freed blocks are not reused before the commit that follows the free.
#[test]
fn no_reuse_before_commit() {
    let geo = Geometry::new(4096, 32768, 32768, 0, 16).unwrap();
    let a = Allocator::new(geo, &[]).unwrap();
    let req = Request::new(1, 0, 32768).with_flags(Flags::HINT_DATA | Flags::HINT_NOPREALLOC);
    let all = a.allocate(&req).unwrap().extent;
    assert_eq!(all.len, 32768);
    a.free(1, all).unwrap();
    assert!(matches!(
        a.allocate(&Request::new(2, 0, 1)),
        Err(Error::NoSpace { pending: 32768, .. })
    ));
    a.commit().unwrap();
    assert!(a.allocate(&Request::new(2, 0, 1)).is_ok());
}

/// Without a journal a free is reusable at once (`ext4_mb_clear_bb` without a handle), and a
/// commit has nothing to release.
#[test]
fn reuse_at_once_without_a_journal() {
    let geo = Geometry::new(4096, 32768, 32768, 0, 16).unwrap();
    let a = Allocator::builder(geo).journal(false).build().unwrap();
    let req = Request::new(1, 0, 32768).with_flags(Flags::HINT_DATA | Flags::HINT_NOPREALLOC);
    let all = a.allocate(&req).unwrap().extent;
    a.free(1, all).unwrap();
    assert_eq!(a.pending_blocks(), 0);
    let again = a.allocate(&req).unwrap().extent;
    assert_eq!(again, all);
    a.commit().unwrap();
    a.check_consistency().unwrap();
}

/// Many threads at once: no block is ever handed out twice, counters stay exact.
#[test]
fn threads_never_share_a_block() {
    for p in Policy::ALL {
        threads_under(p, false, None, WITH_JOURNAL, 0);
    }
}

/// The same with bigalloc clusters of 4 and 16 blocks: no cluster is ever handed out twice
/// (each request's blocks start where its logical block sits in its cluster).
#[test]
fn threads_never_share_a_cluster() {
    for p in Policy::ALL {
        for bits in [2, 4] {
            threads_under(p, false, None, WITH_JOURNAL, bits);
        }
    }
}

/// The same while a fifth thread keeps changing tunables (sysfs writes under load): the
/// indexes must still hold every group where its orders say once the writes stop.
#[test]
fn threads_with_tunables_changing_under_them() {
    for p in Policy::ALL {
        threads_under(p, true, None, WITH_JOURNAL, 0);
    }
}

/// The same on lazily loaded groups with a cache of three and background prefetch readers:
/// loads, evictions and prefetch reads race the requests, frees and commits of four threads.
/// Every block a thread holds must be in use in its group's bitmap at the end, evicted groups
/// reloaded included. (It found a prefetched copy outliving an eviction, reloaded stale about
/// one run in forty: `a_group_is_never_reloaded_from_a_read_older_than_its_eviction`.)
#[test]
fn threads_on_lazy_groups_with_a_small_cache() {
    for p in Policy::ALL {
        let (a, owners) = threads_under(p, false, Some(3), WITH_JOURNAL, 0);
        assert!(a.stats().evictions > 0, "{p:?}: the cache never evicted");
        held_blocks_are_used(&a, &owners, p);
    }
}

/// Every block a thread holds (`owners`) is in use in its group's bitmap.
fn held_blocks_are_used(a: &Allocator, owners: &[AtomicU8], p: Policy) {
    let geo = a.geometry();
    for g in 0..geo.group_count() {
        let bits = a.disk_bitmap(g).unwrap();
        for i in 0..geo.group_len(g) {
            let b = geo.block_of(g, i) as usize;
            if owners[b].load(Ordering::Relaxed) != 0 {
                assert!(bits.get(i), "{p:?}: block {b}, held, free on disk");
            }
        }
    }
}

/// The same without a journal (frees reusable at once, commits release nothing) on 64 KiB
/// pages: every group load also builds the seven other groups of its buddy-cache page, with a
/// cache of three, so building a page evicts groups another thread may be using.
#[test]
fn threads_without_a_journal_on_64k_pages() {
    for p in Policy::ALL {
        let (a, owners) = threads_under(p, false, Some(3), (false, 65536), 0);
        assert_eq!(a.pending_blocks(), 0);
        held_blocks_are_used(&a, &owners, p);
    }
}

/// Four threads on a filesystem too small for all of them: each allocates until it is refused,
/// then frees most of what it holds and commits, while a fifth drops the others' inode and
/// group preallocations and commits. Refusals, the ENOSPC retry (which takes other requests'
/// preallocations with try-locks) and discards race each other. No block may be handed out
/// twice; once everything is freed, committed and discarded, every block must be allocatable
/// again (a preallocation lost by a race would keep its blocks for good). Eight rounds: the
/// race it found (`discard_preallocations` releasing after the owner's lock) lost blocks in
/// about one policy run in a hundred, so that eight rounds fail about one time in two.
#[test]
fn threads_on_a_full_filesystem() {
    for _ in 0..8 {
        for p in Policy::ALL {
            for optimize in [false, true] {
                full_filesystem_under(p, optimize, true);
            }
        }
    }
}

/// The same without a journal: refused threads free and retry with nothing pending.
#[test]
fn threads_on_a_full_filesystem_without_a_journal() {
    for _ in 0..2 {
        for p in Policy::ALL {
            full_filesystem_under(p, true, false);
        }
    }
}

fn full_filesystem_under(policy: Policy, optimize: bool, journal: bool) {
    let geo = Geometry::new(4096, 4096, 8 * 4096, 0, 4).unwrap();
    let used = [(0u64, 300u64)];
    let mut t = policy.tunables(&geo, 4);
    t.mb_optimize_scan = optimize;
    let a = Arc::new(
        Allocator::builder(geo)
            .used(&used)
            .tunables(t)
            .cpus(4)
            .journal(journal)
            .build()
            .unwrap(),
    );
    let owners: Arc<Vec<AtomicU8>> =
        Arc::new((0..geo.blocks_count()).map(|_| AtomicU8::new(0)).collect());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..4u64)
        .map(|th| {
            let (a, owners) = (a.clone(), owners.clone());
            std::thread::spawn(move || {
                let (mut live, mut refused) = (Vec::new(), 0u32);
                for i in 0..1500u32 {
                    let owner = 1 + th * 100 + u64::from(i % 5);
                    let len = 1 + (i * 7919 + th as u32 * 31) % 700;
                    let goal = u64::from(i * 4099 + th as u32 * 8191) % geo.blocks_count();
                    let req = request(owner, (i % 40) * 700, len, (i % 4) as u8, th as u32, goal);
                    match a.allocate(&req) {
                        Ok(x) => {
                            claim(&owners, x.extent, th, policy, 0);
                            live.push((owner, x.extent));
                        }
                        Err(Error::NoSpace { .. }) => {
                            refused += 1;
                            // Keep every third extent, free the rest, commit.
                            let mut k = 0;
                            live.retain(|&(o, e): &(u64, Extent)| {
                                k += 1;
                                if k % 3 == 0 {
                                    return true;
                                }
                                release(&owners, e, 0);
                                a.free(o, e).unwrap();
                                false
                            });
                            a.commit().unwrap();
                        }
                        Err(e) => panic!("{policy:?}: {e}"),
                    }
                    if i % 25 == 0 {
                        a.discard_preallocations(owner);
                    }
                }
                (live, refused)
            })
        })
        .collect();
    let dropper = {
        let (a, stop) = (a.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                a.discard_preallocations(1 + (i % 4) * 100 + i % 5);
                if i.is_multiple_of(7) {
                    a.discard_group_preallocations();
                    a.commit().unwrap();
                }
                i += 1;
                std::thread::yield_now();
            }
        })
    };
    let mut refused = 0;
    let mut live = Vec::new();
    for w in workers {
        let (l, r) = w.join().unwrap();
        live.extend(l);
        refused += r;
    }
    stop.store(true, Ordering::Relaxed);
    dropper.join().unwrap();
    assert!(refused > 0, "{policy:?}: the filesystem never filled");
    for (o, e) in live {
        a.free(o, e).unwrap();
    }
    a.commit().unwrap();
    for o in (0..4).flat_map(|th| (0..5).map(move |k| 1 + th * 100 + k)) {
        a.discard_preallocations(o);
    }
    a.discard_group_preallocations();
    a.check_consistency().unwrap();
    let free = geo.blocks_count() - 300;
    assert_eq!(a.free_blocks(), free, "{policy:?} optimize {optimize}");
    assert_eq!(a.pending_blocks(), 0);
    assert!(a.preallocations().is_empty(), "{:?}", a.preallocations());
    // Every free block can be had again, in pieces.
    let mut got = 0;
    while let Ok(x) = a.allocate(&request(7, 0, 4096, 2, 0, 0)) {
        got += u64::from(x.extent.len);
    }
    assert_eq!(got, free, "{policy:?} optimize {optimize}: blocks lost");
}

/// The clusters (of `2^bits` blocks) holding the blocks of `e`.
fn clusters(e: Extent, bits: u32) -> std::ops::RangeInclusive<u64> {
    (e.start >> bits)..=((e.end() - 1) >> bits)
}

/// Marks the clusters of `e` (blocks without bigalloc) held by thread `th` in the ownership
/// array, one entry per cluster: none of them may be held already.
fn claim(owners: &[AtomicU8], e: Extent, th: u64, policy: Policy, bits: u32) {
    for b in clusters(e, bits) {
        let prev = owners[b as usize].swap(th as u8 + 1, Ordering::SeqCst);
        assert_eq!(
            prev, 0,
            "{policy:?}: cluster {b} handed to thread {th} while held by {prev}"
        );
    }
}

/// Marks the clusters of `e` held by nobody, before it is freed.
fn release(owners: &[AtomicU8], e: Extent, bits: u32) {
    for b in clusters(e, bits) {
        owners[b as usize].store(0, Ordering::SeqCst);
    }
}

/// A journal, 4 KiB pages: ext4's defaults on x86.
const WITH_JOURNAL: (bool, u32) = (true, 4096);

/// Four threads allocating and freeing against an ownership array (a fifth writing tunables
/// when `tune`), on groups loaded lazily into a cache of `cache` when given; `(journal,
/// page_size)` as [`mballoc::Builder`] takes them. Returns the allocator and who holds each
/// block at the end.
fn threads_under(
    policy: Policy,
    tune: bool,
    cache: Option<u32>,
    (journal, page_size): (bool, u32),
    bits: u32,
) -> (Arc<Allocator>, Arc<Vec<AtomicU8>>) {
    // 8 groups; 32 when the cache bounds them, so that goals keep landing on unloaded ones.
    let size: u64 = if cache.is_some() { 4 << 30 } else { 1 << 30 };
    let geo = Geometry::with_clusters(4096, bits, 32768, (size / 4096) << bits, 0, 16).unwrap();
    let mut t = policy.tunables(&geo, 4);
    t.mb_optimize_scan = true;
    let mut b = Allocator::builder(geo)
        .used(&[(0, 5000)])
        .tunables(t)
        .cpus(4)
        .journal(journal)
        .page_size(page_size);
    if let Some(n) = cache {
        // A read takes a while, so that requests meet prefetch reads still in flight.
        let read = std::time::Duration::from_micros(20);
        b = b
            .lazy(true)
            .cache_groups(n)
            .prefetch_threads(2)
            .load_cost(read);
    }
    let a = Arc::new(b.build().unwrap());
    let (spread, groups, bpg) = (cache.is_some(), geo.group_count(), geo.blocks_per_group());
    let commit_every = if spread { 10 } else { 50 };
    let owners: Arc<Vec<AtomicU8>> = Arc::new(
        (0..geo.clusters_count())
            .map(|_| AtomicU8::new(0))
            .collect(),
    );
    let handles: Vec<_> = (0..4u64)
        .map(|th| {
            let (a, owners) = (a.clone(), owners.clone());
            std::thread::spawn(move || {
                let mut live = Vec::new();
                for i in 0..3000u32 {
                    let owner = th * 100 + u64::from(i % 5);
                    let len = 1 + (i * 7919 + th as u32 * 31) % 300;
                    // Spread: mostly requests that leave no preallocation (a group holding
                    // one cannot be evicted), with goals all over the filesystem.
                    let kind = match spread && i % 8 != 0 {
                        true => 2,
                        false => (i % 4) as u8,
                    };
                    let mut req = request(owner, (i % 40) * 300, len, kind, th as u32, 0);
                    if spread {
                        let g = u64::from(i * 5 + th as u32 * 3) % u64::from(groups);
                        req = req.with_goal(g * bpg + u64::from(i % 7) * 1000);
                    }
                    if let Ok(x) = a.allocate(&req) {
                        claim(&owners, x.extent, th, policy, bits);
                        live.push((owner, x.extent));
                    }
                    if i % 3 == 0 && !live.is_empty() {
                        let (o, e): (u64, Extent) =
                            live.swap_remove((i as usize * 13) % live.len());
                        release(&owners, e, bits);
                        a.free(o, e).unwrap();
                    }
                    if i % commit_every == 0 {
                        a.commit().unwrap();
                    }
                }
            })
        })
        .collect();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let tuner = tune.then(|| {
        let (a, stop) = (a.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let (name, value) = TUNES[i * 7 % TUNES.len()];
                // nr_global_goals=3 is refused on no geometry here; every write must succeed.
                a.set_tunable(name, value).unwrap();
                i += 1;
            }
            i
        })
    });
    for h in handles {
        h.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(t) = tuner {
        assert!(t.join().unwrap() > 0);
        a.set_tunable("mb_optimize_scan", "1").unwrap();
    }
    a.commit().unwrap();
    a.check_consistency().unwrap();
    (a, owners)
}
