//! Every ```rust block of README.md compiles (see `build.rs`, which turns them into the items
//! included here): a README example that no longer matches the API fails this test's build.
//! The blocks are compiled, not run; the examples and end-to-end tests run the same calls.

include!(concat!(env!("OUT_DIR"), "/readme_blocks.rs"));

#[test]
fn every_rust_block_of_the_readme_was_compiled() {
    // Reaching here means the build compiled every block it generated; this checks the
    // generator saw all of them (a fence it skipped would be an example nobody compiles).
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README.md");
    let fences = readme.lines().filter(|l| l.trim_end() == "```rust").count();
    assert!(fences > 0, "the README has no Rust examples");
    assert_eq!(README_BLOCKS, fences, "build.rs compiled {README_BLOCKS} of the README's {fences} Rust blocks");
}
