//! Loading every stored capture, and the typed errors of broken ones.

use std::fs;
use std::path::{Path, PathBuf};

use super::*;

/// The captures stored in the repository.
fn traces_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernel-cases")
}

#[test]
fn every_stored_case_loads_and_matches_its_meta() {
    let dir = traces_dir();
    if !dir.is_dir() {
        println!("skipped: {} does not exist", dir.display());
        return;
    }
    let cases = find_cases(&[dir]).expect("list cases");
    assert!(!cases.is_empty(), "no cases found");
    for path in cases {
        let case = Case::load(&path).unwrap_or_else(|e| panic!("{e}"));
        case.check_counts().unwrap_or_else(|e| panic!("{e}"));
        let init = &case.initial;
        let used = init.used_blocks();
        // Blocks before `first_data_block` (the 1 KiB boot block) belong to no group.
        assert_eq!(
            used,
            init.blocks_count - init.first_data_block - init.free_blocks_total,
            "{}",
            case.name
        );
        assert_eq!(
            case.final_state.group_count, init.group_count,
            "{}",
            case.name
        );
        for (i, r) in case.records.iter().enumerate() {
            assert_eq!(r.seq(), i as u64 + 1, "{}", case.name);
        }
    }
}

#[test]
fn stored_alloc_fields_are_typed() {
    let dir = traces_dir().join("falloc-1g-mixed");
    if !dir.is_dir() {
        println!("skipped: {} does not exist", dir.display());
        return;
    }
    let case = Case::load(&dir).unwrap();
    assert_eq!(case.name, "falloc-1g-mixed");
    assert!(!case.meta.optimize_scan);
    assert_eq!(case.meta.mballoc_tunables.get("mb_stream_req"), Some(&16));
    let allocs: Vec<&AllocRecord> = case
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Alloc(a) => Some(a),
            _ => None,
        })
        .collect();
    assert_eq!(allocs.len(), 129);
    assert!(allocs
        .iter()
        .all(|a| a.ok && a.result_len > 0 && a.stamp.cpu == Some(a.cpu)));
    let g0 = &case.initial.groups[0];
    assert_eq!(g0.used_ranges(), vec![(0, 4247)]);
    assert_eq!(g0.bitmap.len(), 4096);
}

// ---- synthetic cases: one 64-block group, blocks 0..8 in use ----

const INITIAL: &str = r#"{"block_size": 4096, "cluster_size": 4096, "blocks_count": 64,
 "blocks_per_group": 64, "group_count": 1, "first_data_block": 0, "flex_bg_size": 16,
 "free_blocks_total": 56, "inodes": {"2": {"size": 4096, "mode": 16877, "path": "/"}},
 "groups": [{"group": 0, "first_block": 0, "blocks": 64, "free": 56,
   "free_extents": [[8, 56]], "bitmap_b64": "/wAAAAAAAAA=", "flags": []}]}"#;

const META_JSON: &str = r#"{"kernel": "6.18.44", "description": "synthetic",
 "optimize_scan": 1, "mballoc_tunables": {"mb_stream_req": 16},
 "counts": {"records": 4, "by_type": {"marker": 1, "alloc": 1, "commit": 1, "free": 1}}}"#;

const FINAL: &str = r#"{"blocks_count": 64, "group_count": 1, "free_blocks_total": 56,
 "groups": [{"group": 0, "first_block": 0, "blocks": 64, "free": 56,
   "free_extents": [[8, 56]]}]}"#;

const ALLOC: &str = r#"{"type": "alloc", "seq": 2, "cpu": 0, "ino": 12, "lblk": 0, "len": 4, "goal": 8, "lleft": 0, "lright": 0, "pleft": 0, "pright": 0, "flags": 32, "i_size": 0, "wr_open": true, "ctx": "fallocate", "result_pstart": 8, "result_len": 4, "ok": true, "source": "scan", "new_pa": null, "pa_type_used": null, "goal_ex": {"group": 0, "start": -1, "len": 4, "logical": 0}, "result_ex": {"group": 0, "start": 8, "len": 4, "logical": 0, "block": 8}, "cr": 1, "groups_scanned": 0, "extents_scanned": 1, "ac_flags": 2080}"#;

fn records() -> Vec<String> {
    vec![
        r#"{"type": "marker", "seq": 1, "cpu": 0, "step": 1, "op": "begin"}"#.to_string(),
        ALLOC.to_string(),
        r#"{"type": "commit", "seq": 3, "cpu": 1, "phase": "end_commit", "tid": 2}"#.to_string(),
        r#"{"type": "free", "seq": 4, "cpu": 0, "ino": 12, "block": 8, "count": 4, "flags": 0, "tid": 3, "extents": []}"#.to_string(),
    ]
}

/// Writes a synthetic case into `dir` with the given record lines.
fn write_case(dir: &Path, lines: &[String]) {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join(INITIAL_STATE), INITIAL).unwrap();
    fs::write(dir.join(META), META_JSON).unwrap();
    fs::write(dir.join(FINAL_STATE), FINAL).unwrap();
    fs::write(dir.join(RECORDS), lines.join("\n") + "\n").unwrap();
}

fn load_with(lines: &[String]) -> Result<Case, CaseError> {
    let tmp = tempfile::tempdir().unwrap();
    write_case(tmp.path(), lines);
    Case::load(tmp.path())
}

#[test]
fn synthetic_case_loads() {
    let case = load_with(&records()).unwrap();
    case.check_counts().unwrap();
    assert!(case.meta.optimize_scan);
    assert_eq!(case.initial.used_ranges(), vec![(0, 8)]);
    assert_eq!(case.initial.inodes[&2].size, 4096);
    let Record::Alloc(a) = &case.records[1] else {
        panic!("not an alloc")
    };
    assert_eq!(a.goal_ex.unwrap().start, -1);
    assert_eq!(a.source, Some(AllocSource::Scan));
    let Record::Commit(c) = &case.records[2] else {
        panic!("not a commit")
    };
    assert_eq!(
        (c.phase, c.tid, c.stamp.cpu),
        (CommitPhase::EndCommit, 2, Some(1))
    );
    let Record::Context(m) = &case.records[0] else {
        panic!("not context")
    };
    assert_eq!((m.kind, m.op()), (ContextKind::Marker, Some("begin")));
}

#[test]
fn bad_json_names_its_line() {
    let mut lines = records();
    lines[2] = r#"{"type": "commit", "seq": 3,, }"#.to_string();
    match load_with(&lines) {
        Err(CaseError::Json { file, line: 3, .. }) => assert!(file.ends_with(RECORDS)),
        other => panic!("expected a Json error on line 3, got {other:?}"),
    }
}

#[test]
fn missing_field_names_field_and_line() {
    let mut lines = records();
    lines[1] = ALLOC.replace(r#""ino": 12, "#, "");
    match load_with(&lines) {
        Err(CaseError::Json { line: 2, msg, .. }) => assert!(msg.contains("ino"), "{msg}"),
        other => panic!("expected a Json error on line 2, got {other:?}"),
    }
}

#[test]
fn wrong_typed_field_is_an_error() {
    let mut lines = records();
    lines[1] = ALLOC.replace(r#""len": 4,"#, r#""len": "four","#);
    assert!(matches!(
        load_with(&lines),
        Err(CaseError::Json { line: 2, .. })
    ));
    lines = records();
    lines[2] = lines[2].replace("end_commit", "half_commit");
    assert!(matches!(
        load_with(&lines),
        Err(CaseError::Json { line: 3, .. })
    ));
}

#[test]
fn unknown_record_type_is_rejected() {
    let mut lines = records();
    lines[3] = r#"{"type": "teleport", "seq": 4, "cpu": 0}"#.to_string();
    match load_with(&lines) {
        Err(CaseError::UnknownRecordType { line: 4, kind, .. }) => assert_eq!(kind, "teleport"),
        other => panic!("expected UnknownRecordType on line 4, got {other:?}"),
    }
}

#[test]
fn truncated_last_line_is_reported() {
    let mut lines = records();
    let cut = lines[3].len() / 2;
    lines[3].truncate(cut);
    match load_with(&lines) {
        Err(CaseError::Truncated { line: 4, .. }) => {}
        other => panic!("expected Truncated on line 4, got {other:?}"),
    }
}

#[test]
fn seq_must_be_the_line_number() {
    let mut lines = records();
    lines.swap(2, 3);
    assert!(matches!(
        load_with(&lines),
        Err(CaseError::SeqMismatch {
            line: 3,
            seq: 4,
            ..
        })
    ));
}

#[test]
fn missing_file_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    write_case(tmp.path(), &records());
    fs::remove_file(tmp.path().join(FINAL_STATE)).unwrap();
    match Case::load(tmp.path()) {
        Err(CaseError::MissingFile { file }) => assert!(file.ends_with(FINAL_STATE)),
        other => panic!("expected MissingFile, got {other:?}"),
    }
}

#[test]
fn free_count_must_match_bitmap() {
    let tmp = tempfile::tempdir().unwrap();
    write_case(tmp.path(), &records());
    let bad = INITIAL.replace(r#""free": 56"#, r#""free": 55"#);
    fs::write(tmp.path().join(INITIAL_STATE), bad).unwrap();
    match Case::load(tmp.path()) {
        Err(CaseError::Inconsistent { file, what }) => {
            assert!(file.ends_with(INITIAL_STATE));
            assert!(what.contains("bitmap"), "{what}");
        }
        other => panic!("expected Inconsistent, got {other:?}"),
    }
}

/// Loads the synthetic case with `file` replaced by `text`; the error must be `Inconsistent`,
/// name `file`, and say `says`.
fn assert_inconsistent(file: &str, text: &str, says: &str) {
    let tmp = tempfile::tempdir().unwrap();
    write_case(tmp.path(), &records());
    fs::write(tmp.path().join(file), text).unwrap();
    match Case::load(tmp.path()) {
        Err(CaseError::Inconsistent { file: f, what }) => {
            assert!(f.ends_with(file), "{}", f.display());
            assert!(what.contains(says), "{what}");
        }
        other => panic!("expected Inconsistent, got {other:?}"),
    }
}

#[test]
fn a_final_extent_outside_its_group_is_inconsistent() {
    // Found by the mutation property (tests/case_mutations.rs): the replay's block-by-block
    // comparison indexed past the group's bitmap.
    let bad = FINAL.replace("[[8, 56]]", "[[1000, 56]]");
    assert_ne!(bad, FINAL);
    assert_inconsistent(FINAL_STATE, &bad, "outside its blocks");
    let wraps = FINAL.replace("[[8, 56]]", "[[18446744073709551615, 56]]");
    assert_inconsistent(FINAL_STATE, &wraps, "outside its blocks");
}

#[test]
fn a_final_state_of_another_geometry_is_inconsistent() {
    let bad = FINAL
        .replace(
            r#""first_block": 0, "blocks": 64"#,
            r#""first_block": 0, "blocks": 128"#,
        )
        .replace("[[8, 56]]", "[[8, 120]]")
        .replace(r#""free": 56"#, r#""free": 120"#)
        .replace(r#""free_blocks_total": 56"#, r#""free_blocks_total": 120"#);
    assert_ne!(bad, FINAL);
    assert_inconsistent(FINAL_STATE, &bad, "in the initial state");
}

#[test]
fn hostile_geometry_numbers_are_inconsistent_not_an_overflow() {
    let far = INITIAL.replace(
        r#""first_data_block": 0"#,
        r#""first_data_block": 18446744073709551615"#,
    );
    assert_inconsistent(INITIAL_STATE, &far, "group entry 0");
    // A group's own length must be its share of the geometry, not just add up.
    let short = INITIAL.replace(r#""blocks_per_group": 64"#, r#""blocks_per_group": 32"#);
    assert_inconsistent(INITIAL_STATE, &short, "has 64 blocks, expected 32");
}

#[test]
fn counts_mismatch_is_inconsistent() {
    let mut lines = records();
    lines.pop();
    let case = load_with(&lines).unwrap();
    assert!(matches!(
        case.check_counts(),
        Err(CaseError::Inconsistent { .. })
    ));
}

#[test]
fn find_cases_lists_case_dirs_sorted() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["b-case", "a-case"] {
        write_case(&tmp.path().join(name), &records());
    }
    fs::create_dir(tmp.path().join("not-a-case")).unwrap();
    let found = find_cases(&[tmp.path().to_path_buf()]).unwrap();
    let names: Vec<_> = found
        .iter()
        .map(|p| p.file_name().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["a-case", "b-case"]);
    let direct = find_cases(&[tmp.path().join("b-case")]).unwrap();
    assert_eq!(direct, [tmp.path().join("b-case")]);
    assert!(matches!(
        find_cases(&[tmp.path().join("nope")]),
        Err(CaseError::Io { .. })
    ));
}

/// Which traced builds the replay compares: allocations and frees where the capture
/// attributed frees, allocations alone before that, and none when a build fell outside them.
#[test]
fn fresh_mount_builds_prefer_the_record_attribution() {
    let loads = |json: &str| serde_json::from_str::<FreshMountLoads>(json).unwrap();
    let old = loads(r#"{"buddy_built_during_alloc_seq": {"3": 10, "4": 12}}"#);
    assert_eq!(old.builds(), Some([(3, 10), (4, 12)].into()));
    let both = loads(
        r#"{"buddy_built_during_alloc_seq": {"3": 10}, "loads_outside_allocations": 1,
            "buddy_built_during_seq": {"3": 10, "7": 5}, "loads_outside_records": 0}"#,
    );
    assert_eq!(both.builds(), Some([(3, 10), (7, 5)].into()));
    let outside = loads(r#"{"buddy_built_during_alloc_seq": {}, "loads_outside_allocations": 2}"#);
    assert_eq!(outside.builds(), None);
    let bad_key = loads(r#"{"buddy_built_during_alloc_seq": {"x": 1}}"#);
    assert_eq!(bad_key.builds(), None);
}
