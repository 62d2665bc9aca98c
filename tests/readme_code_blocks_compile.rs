//! Every ```rust block of README.md compiles (see `build.rs`, which turns them into the items
//! included here): a README example that no longer matches the API fails this test's build.
//! The blocks are compiled, not run; the examples and end-to-end tests run the same calls.

include!(concat!(env!("OUT_DIR"), "/readme_blocks.rs"));

#[test]
fn the_readme_has_rust_examples_and_all_of_them_compile() {
    // Reaching here means the build compiled every block; the count keeps the generator honest.
    assert!(README_BLOCKS >= 8, "README_BLOCKS = {README_BLOCKS}: the generator lost the README's blocks");
}
