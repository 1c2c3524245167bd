//! The library's layers (docs/design.md, "Layout"): a module may use the modules of its own
//! layer and of the layers below, never one above, and never the crate root (`crate::Name`
//! goes through `lib.rs`, the top). Read from the source, so a new upward import fails here.
//! Tests are exempt (a store test may run an allocator on top): test-only files (`tests.rs`,
//! `*_tests.rs`) and each file's test module, from its `mod …tests {` line on.

use std::path::{Path, PathBuf};

/// Top-level modules of `src/`, lowest layer first; modules of one layer may use each other.
const LAYERS: &[&[&str]] = &[
    &["sync", "geometry", "request"],
    &["group", "store"],
    &["error", "stats"],
    &["tunables"],
    &["policy"],
    &["load"],
    &["alloc"],
    &["testing"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable source folder") {
        let path = entry.expect("readable entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`alloc` for `src/alloc/scan.rs`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("file under src");
    let first = rel.components().next().expect("non-empty path");
    let name = first.as_os_str().to_string_lossy();
    name.trim_end_matches(".rs").to_string()
}

/// The `crate::…` paths a line of code names: the first segment after `crate::`.
fn crate_paths(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    code.match_indices("crate::")
        .filter(|(i, _)| {
            // `$crate::` and identifiers ending in `crate` are not the crate root.
            !code[..*i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$')
        })
        .map(|(i, m)| {
            code[i + m.len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '{')
                .collect()
        })
        .collect()
}

/// Every use of a higher layer or of the crate root, as `file:line: what`.
fn violations() -> Vec<String> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let module = module_of(&src, &file);
        let name = file.file_name().expect("file name").to_string_lossy();
        if module == "lib" || name == "tests.rs" || name.ends_with("_tests.rs") {
            continue;
        }
        let own = layer_of(&module).unwrap_or_else(|| panic!("{module} is in no layer"));
        let text = std::fs::read_to_string(&file).expect("readable source");
        let code = text
            .lines()
            .take_while(|l| !(l.trim_start().starts_with("mod ") && l.ends_with("tests {")));
        for (n, line) in code.enumerate() {
            for used in crate_paths(line) {
                let bad = match layer_of(&used) {
                    Some(l) => l > own,
                    // A root item or a module no layer lists.
                    None => true,
                };
                if bad {
                    found.push(format!("{}:{}: crate::{used}", file.display(), n + 1));
                }
            }
        }
    }
    found
}

#[test]
fn no_module_uses_a_higher_layer_or_the_crate_root() {
    let v = violations();
    assert!(v.is_empty(), "imports that run up:\n{}", v.join("\n"));
}

#[test]
fn the_check_sees_an_upward_path() {
    assert_eq!(
        crate_paths("use crate::alloc::allocator::Allocator; // crate::x"),
        ["alloc"]
    );
    assert_eq!(
        crate_paths("use crate::{Allocator, Request};"),
        ["{Allocator"]
    );
    assert!(crate_paths("/// [`Group`](crate::group::info::Group)").is_empty());
    assert!(layer_of("alloc") > layer_of("group"));
}
