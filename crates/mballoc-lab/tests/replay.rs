//! Every stored kernel capture is replayed; the agreement each case reaches is asserted, and
//! these assertions only ever get tighter.

use std::path::PathBuf;

use mballoc_lab::case::Case;
use mballoc_lab::replay::{replay_case, replay_paths};

fn traces() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/kernel-traces");
    p.is_dir().then_some(p)
}

#[test]
fn every_public_case_matches_the_kernel_exactly() {
    let Some(dir) = traces() else {
        eprintln!("shared/kernel-traces not found beside the repository: skipped");
        return;
    };
    let rep = replay_paths(&[dir]).unwrap();
    assert_eq!(rep.cases.len(), 10, "all ten public cases");
    for c in &rep.cases {
        assert_eq!(c.matched, c.allocs, "{}: placements {:?}", c.name, c.mismatches.first());
        assert_eq!(c.path_matched, c.allocs, "{}: goal/criterion/PA path", c.name);
        assert_eq!(c.free_errors, 0, "{}", c.name);
        assert_eq!(c.final_diff_blocks, 0, "{}: final free space", c.name);
    }
    assert_eq!(rep.agreement, 1.0);
}

/// The comparison can fail: the same case under the wrong configuration diverges.
#[test]
fn a_wrong_configuration_is_caught() {
    let Some(dir) = traces() else { return };
    let mut case = Case::load(dir.join("tar-doc-1g-scan1")).unwrap();
    case.meta.mballoc_tunables.insert("mb_group_prealloc".into(), 256);
    let rep = replay_case(&case).unwrap();
    assert!(rep.path_matched < rep.allocs, "a smaller group PA must change the PAs created");
    let mut case = Case::load(dir.join("bufwrite-1g")).unwrap();
    case.meta.mballoc_tunables.insert("mb_stream_req".into(), 0);
    let rep = replay_case(&case).unwrap();
    assert!(rep.matched < rep.allocs, "without locality groups small files land elsewhere");
}
