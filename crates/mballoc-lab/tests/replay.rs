//! Every stored kernel capture is replayed; the agreement each case reaches is asserted, and
//! these assertions only ever get tighter.

use std::path::PathBuf;

use mballoc_lab::case::{AllocRecord, Case, Record};
use mballoc_lab::replay::{replay_case, replay_paths};

/// The captures stored in the repository (`kernel-cases/`): always there, so never skipped.
fn traces() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../kernel-cases");
    assert!(p.is_dir(), "{} is missing", p.display());
    Some(p)
}

#[test]
fn every_public_case_matches_the_kernel_exactly() {
    let Some(dir) = traces() else {
        eprintln!("kernel-cases/ not found: skipped");
        return;
    };
    let rep = replay_paths(&[dir]).unwrap();
    assert_eq!(
        rep.cases.len(),
        45,
        "the ten public cases, the 31 captured for what they leave out and the four bigalloc \
         ones (kernel-cases/README.md)"
    );
    for c in &rep.cases {
        assert_eq!(
            c.matched,
            c.allocs,
            "{}: placements {:?}",
            c.name,
            c.mismatches.first()
        );
        assert_eq!(
            c.path_matched, c.allocs,
            "{}: goal/criterion/PA path",
            c.name
        );
        assert_eq!(c.free_errors, 0, "{}", c.name);
        assert_eq!(c.release_mismatches, 0, "{}: PA releases", c.name);
        assert_eq!(c.final_diff_blocks, 0, "{}: final free space", c.name);
        assert_eq!(c.buddy_build_mismatches, 0, "{}: buddy builds", c.name);
    }
    assert_eq!(rep.agreement, 1.0);
    assert!(rep.agrees());
    assert_fidelity_doc_carries(&rep.markdown());
}

/// The bigalloc captures (clusters of 4 and 16 blocks) replay in clusters, and the tunables
/// the allocator derives for their geometry are the ones the kernel reported: the locality
/// group's preallocation shrinks to 128 and 32 clusters (`ext4_mb_init`: 512 clusters shifted
/// by the cluster bits, at least 32), the prefetch to the two or eight groups there are.
#[test]
fn bigalloc_cases_replay_with_the_kernels_defaults() {
    let dir = traces().unwrap();
    for (name, bits) in [
        ("bigalloc16k-4g-falloc", 2),
        ("bigalloc16k-4g-bufwrite", 2),
        ("bigalloc64k-4g-falloc", 4),
        ("bigalloc64k-4g-bufwrite", 4),
    ] {
        let case = Case::load(dir.join(name)).unwrap();
        let geo = case.initial.geometry().unwrap();
        assert_eq!(geo.cluster_bits(), bits, "{name}");
        let t = mballoc::Tunables::for_geometry(&geo, mballoc_lab::replay::CAPTURE_CPUS);
        assert!(!case.meta.mballoc_tunables.is_empty(), "{name}");
        for (k, v) in &case.meta.mballoc_tunables {
            assert_eq!(t.get(k), Some(v.to_string()), "{name}: {k}");
        }
        let rep = replay_case(&case).unwrap();
        assert!(rep.allocs > 80 && rep.agrees(), "{name}: {rep:?}");
    }
}

/// docs/fidelity.md carries the table `mballoc replay --markdown kernel-cases` prints, between
/// two marker comments, so the document cannot drift from what the replay measures.
fn assert_fidelity_doc_carries(table: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/fidelity.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (begin, end) = ("<!-- replay table begin -->\n", "<!-- replay table end -->");
    let start = doc.find(begin).expect("begin marker") + begin.len();
    let stop = doc[start..].find(end).expect("end marker") + start;
    assert_eq!(
        &doc[start..stop],
        table,
        "docs/fidelity.md's table differs from `mballoc replay --markdown kernel-cases`; \
         paste the command's output between the markers"
    );
}

/// The fresh-mount captures test the lazy path: every group's buddy is built during the same
/// request as in the kernel, and replayed from an allocator with every buddy built at the
/// start (what a capture that read `mb_groups` would have given) the aged one diverges.
/// (`fresh-uninit-4g-run` and `fresh-prefetch-4g-run` were made to tell the two
/// `BLOCK_UNINIT` rules apart: with either left out, about half their placements differ;
/// kernel-cases/README.md; in `fresh-unlink-4g-run` frees build six groups, one at a time;
/// in `fresh-1k-1g-run`, with 1 KiB blocks, every build also builds its buddy-cache page-mate.)
#[test]
fn fresh_mount_cases_check_the_lazy_path() {
    let Some(dir) = traces() else { return };
    for name in [
        "fresh-4g-falloc",
        "fresh-aged-4g-run",
        "fresh-uninit-4g-run",
        "fresh-prefetch-4g-run",
        "fresh-unlink-4g-run",
        "fresh-1k-1g-run",
    ] {
        let case = Case::load(dir.join(name)).unwrap();
        assert!(case.meta.fresh_mount, "{name}");
        let rep = replay_case(&case).unwrap();
        let groups = u64::from(case.initial.group_count);
        assert_eq!(
            (rep.buddy_builds_checked, rep.buddy_build_mismatches),
            (groups, 0),
            "{name}"
        );
    }
    let mut built = Case::load(dir.join("fresh-aged-4g-run")).unwrap();
    built.meta.fresh_mount = false;
    let rep = replay_case(&built).unwrap();
    assert!(rep.matched < rep.allocs, "{rep:?}");
    assert_eq!(rep.buddy_builds_checked, 0);
}

/// The captures made without a journal (`nojournal-*`): their frees carry no transaction and
/// no commit follows, and the kernel reused freed blocks at once (`ext4_mb_clear_bb` without a
/// handle). Replayed with a journal, the frees would wait for a commit that never comes, and
/// the placements diverge in every one of them.
#[test]
fn journal_less_cases_reuse_freed_blocks_at_once() {
    let Some(dir) = traces() else { return };
    for name in [
        "nojournal-1g-falloc",
        "nojournal-1g-bufwrite",
        "nojournal-4g-fallocate2",
        "nojournal-1g-nodelalloc",
    ] {
        let mut case = Case::load(dir.join(name)).unwrap();
        assert!(!case.initial.has_journal(), "{name}");
        let frees: Vec<_> = case
            .records
            .iter()
            .filter_map(|r| match r {
                Record::Free(f) => Some(f.tid),
                _ => None,
            })
            .collect();
        assert!(
            !frees.is_empty() && frees.iter().all(Option::is_none),
            "{name}"
        );
        assert!(replay_case(&case).unwrap().agrees(), "{name}");
        case.initial.features.push("has_journal".into());
        let rep = replay_case(&case).unwrap();
        assert!(
            rep.matched < rep.allocs,
            "{name}: {} of {} placements match with frees waiting for a commit",
            rep.matched,
            rep.allocs
        );
    }
}

/// The stored cases reach every criterion of the kernel's scan, and the best-found extent
/// after all of them, so the replay above checks each one against the kernel, not only the
/// cheap ones (the ten public cases never reach CR_BEST_AVAIL_LEN or CR_ANY_FREE; the
/// `full-*` cases and `enospc-1g-run` were captured for them).
#[test]
fn the_cases_reach_every_criterion() {
    let Some(dir) = traces() else { return };
    // The five criteria, and 5 (`EXT4_MB_NUM_CRS`): a best extent taken after every pass.
    let mut found = [0u32; 6];
    for path in mballoc_lab::case::find_cases(&[dir]).unwrap() {
        for r in Case::load(&path).unwrap().records {
            if let Record::Alloc(AllocRecord { cr: Some(cr), .. }) = r {
                found[usize::from(cr)] += 1;
            }
        }
    }
    assert!(
        found.iter().all(|&n| n >= 10),
        "allocations per criterion: {found:?}"
    );
}

/// The comparison can fail: the same case under the wrong configuration diverges.
#[test]
fn a_wrong_configuration_is_caught() {
    let Some(dir) = traces() else { return };
    let mut case = Case::load(dir.join("tar-doc-1g-scan1")).unwrap();
    case.meta
        .mballoc_tunables
        .insert("mb_group_prealloc".into(), 256);
    let rep = replay_case(&case).unwrap();
    assert!(
        rep.path_matched < rep.allocs,
        "a smaller group PA must change the PAs created"
    );
    let mut case = Case::load(dir.join("bufwrite-1g")).unwrap();
    case.meta.mballoc_tunables.insert("mb_stream_req".into(), 0);
    let rep = replay_case(&case).unwrap();
    assert!(
        rep.matched < rep.allocs,
        "without locality groups small files land elsewhere"
    );
    let mut case = Case::load(dir.join("stripe-4g-bufwrite")).unwrap();
    case.meta.proc_options.retain(|o| !o.starts_with("stripe="));
    let rep = replay_case(&case).unwrap();
    assert!(
        rep.matched < rep.allocs,
        "without the stripe=16 mount option the stripe-aligned search is not taken"
    );
    let mut case = Case::load(dir.join("tuned-1g-falloc")).unwrap();
    case.meta
        .mballoc_tunables
        .insert("mb_max_to_scan".into(), 200);
    case.meta
        .mballoc_tunables
        .insert("mb_min_to_scan".into(), 10);
    let rep = replay_case(&case).unwrap();
    assert!(
        rep.matched < rep.allocs,
        "the default scan limits measure other extents than the captured ones"
    );
}

/// The path check includes the search's work: a capture whose record says one more extent
/// was measured than the kernel really measured fails the path, not the placement.
#[test]
fn the_search_work_is_compared() {
    let Some(dir) = traces() else { return };
    let mut case = Case::load(dir.join("full-1g-falloc")).unwrap();
    let r = case
        .records
        .iter_mut()
        .find_map(|r| match r {
            Record::Alloc(a) if a.extents_scanned.is_some_and(|e| e > 1) => Some(a),
            _ => None,
        })
        .unwrap();
    r.extents_scanned = r.extents_scanned.map(|e| e + 1);
    let rep = replay_case(&case).unwrap();
    assert_eq!(rep.matched, rep.allocs);
    assert_eq!(rep.path_matched, rep.allocs - 1);
}

/// The blocks handed back from preallocations are compared operation by operation: with a
/// close's `discard_inode_pas` record dropped, that close releases nothing here while the
/// kernel's `pa_release` records say it did.
#[test]
fn pa_releases_are_compared() {
    let Some(dir) = traces() else { return };
    let mut case = Case::load(dir.join("full-4g-bufwrite")).unwrap();
    // A close whose next record of substance is a PA release.
    let at = (0..case.records.len())
        .find(|&i| {
            matches!(case.records[i], Record::DiscardInodePas(_))
                && case.records[i + 1..]
                    .iter()
                    .find(|r| !matches!(r, Record::Context(_)))
                    .is_some_and(|r| matches!(r, Record::PaRelease(_)))
        })
        .unwrap();
    case.records.remove(at);
    let rep = replay_case(&case).unwrap();
    assert!(rep.release_mismatches > 0, "{rep:?}");
}

/// Buddy generation against the kernel's own `mb_groups` at mount, for every group of every
/// case (free, fragments, first free, free chunks per order).
#[test]
fn buddies_match_the_kernel_mb_groups() {
    let Some(dir) = traces() else { return };
    for path in mballoc_lab::case::find_cases(&[dir]).unwrap() {
        let case = Case::load(&path).unwrap();
        if case.meta.fresh_mount {
            // Read before the trace, `mb_groups` would have built every buddy: a fresh
            // capture does without it.
            assert!(case
                .initial
                .groups
                .iter()
                .all(|g| g.kernel_mb_groups.is_none()));
            continue;
        }
        let a = mballoc_lab::replay::allocator_for(&case).unwrap();
        for g in &case.initial.groups {
            let k = g
                .kernel_mb_groups
                .as_ref()
                .expect("every case records kernel_mb_groups");
            let ours = a.group(g.group).unwrap();
            assert_eq!(
                (ours.free, ours.fragments, ours.first_free),
                (k.free, k.frags, k.first_free),
                "{} group {}",
                case.name,
                g.group
            );
            // `mb_groups` prints 14 orders whatever the block size, zero past MB_NUM_ORDERS
            // (12 orders with 1 KiB blocks).
            let mut counters = ours.counters.clone();
            counters.resize(k.buddy_counts.len().max(counters.len()), 0);
            assert_eq!(counters, k.buddy_counts, "{} group {}", case.name, g.group);
        }
    }
}

/// `mballoc groups` lays out a fresh filesystem like mkfs.ext4: same buddies as the kernel
/// reported for the fresh 1 GiB capture.
#[test]
fn fresh_layout_matches_a_fresh_capture() {
    let Some(dir) = traces() else { return };
    let case = Case::load(dir.join("falloc-1g-mixed")).unwrap();
    let layout = mballoc_lab::mkfs::layout(1 << 30).unwrap();
    let geo = mballoc::Geometry::new(
        4096,
        layout.blocks_per_group,
        layout.blocks_count,
        0,
        layout.flex_bg_size,
    )
    .unwrap();
    let a = mballoc::Allocator::new(geo, &layout.used).unwrap();
    for g in &case.initial.groups {
        let k = g.kernel_mb_groups.as_ref().unwrap();
        assert_eq!(
            a.group(g.group).unwrap().counters,
            k.buddy_counts,
            "group {}",
            g.group
        );
    }
}

#[test]
fn a_directory_without_cases_is_an_error_not_a_perfect_score() {
    let tmp = tempfile::tempdir().unwrap();
    match replay_paths(&[tmp.path().to_path_buf()]) {
        Err(mballoc_lab::replay::ReplayError::NoCases { paths }) => {
            assert_eq!(paths, [tmp.path().display().to_string()]);
        }
        other => panic!("expected NoCases, got {other:?}"),
    }
}

/// A records file cut at a line boundary still parses, and its prefix would replay and agree:
/// the replay refuses it on `meta.json`'s count of records.
#[test]
fn a_records_file_cut_at_a_line_is_refused_not_replayed() {
    let src = traces().unwrap().join("1k-1g-falloc");
    let tmp = tempfile::tempdir().unwrap();
    let case = tmp.path().join("cut");
    std::fs::create_dir(&case).unwrap();
    for f in ["initial_state.json", "final_state.json", "meta.json"] {
        std::fs::copy(src.join(f), case.join(f)).unwrap();
    }
    let records = std::fs::read_to_string(src.join("allocs.jsonl")).unwrap();
    let cut: String = records.lines().take(50).map(|l| format!("{l}\n")).collect();
    std::fs::write(case.join("allocs.jsonl"), cut).unwrap();
    let err = replay_paths(&[case]).unwrap_err().to_string();
    assert!(err.contains("counts 422 records, file has 50"), "{err}");
}
