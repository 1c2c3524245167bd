//! The README's Rust example is `examples/quickstart.rs`, word for word: `cargo test` compiles
//! the example, and this test fails as soon as the two differ.

#[test]
fn readme_example_is_the_quickstart_example() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("../../README.md")).unwrap();
    let example = std::fs::read_to_string(root.join("examples/quickstart.rs")).unwrap();
    let start = readme
        .find("```rust\n")
        .expect("the README has a Rust block")
        + 8;
    let len = readme[start..].find("```").expect("the Rust block ends");
    assert_eq!(
        &readme[start..start + len],
        example,
        "README.md's Rust block differs from crates/mballoc/examples/quickstart.rs"
    );
}
