//! bigalloc in the `mballoc` binary: `groups --set cluster_kib=N` prints what the kernel's
//! `/proc/fs/ext4/<dev>/mb_groups` printed for the same `mkfs.ext4 -O bigalloc -C` (stored
//! under `tests/data/bigalloc`, each with the command that made it), and what stays
//! unsupported is refused with the offending value.

use std::path::Path;
use std::process::{Command, Output};

fn mballoc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mballoc"))
        .args(args)
        .output()
        .expect("the mballoc binary runs")
}

fn reference(name: &str) -> String {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/bigalloc/{name}.mb_groups"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// 64 KiB clusters on 4 GiB (two groups; the journal right after group 1's backup
/// superblock), 16 KiB clusters on 4 GiB (eight groups, the journal in group 4) and 64 KiB
/// clusters on 1 GiB (one short group of 16384 clusters, a size no replayed capture has).
#[test]
fn groups_with_clusters_are_the_kernels_mb_groups() {
    for (size, kib, name) in [
        ("4G", "64", "bigalloc64k-4g"),
        ("4G", "16", "bigalloc16k-4g"),
        ("1G", "64", "bigalloc64k-1g"),
    ] {
        let o = mballoc(&[
            "groups",
            "--fs-size",
            size,
            "--set",
            &format!("cluster_kib={kib}"),
        ]);
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            reference(name),
            "{name}"
        );
    }
}

#[test]
fn unsupported_cluster_settings_are_refused_with_the_value() {
    for (args, needle) in [
        (&["groups", "--set", "cluster_kib=48"][..], "48"),
        (&["groups", "--set", "cluster_kib=4"][..], "cluster_kib"),
        (&["groups", "--set", "cluster_kib=524288"][..], "524288"),
        (&["groups", "--set", "mb_stream_req=8"][..], "mb_stream_req"),
        (
            &["run", "fallocate2", "--quick", "--set", "cluster_kib=64"][..],
            "cluster_kib=64",
        ),
    ] {
        let o = mballoc(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(
            err.contains(needle),
            "{args:?}: {needle:?} missing from {err}"
        );
    }
}
