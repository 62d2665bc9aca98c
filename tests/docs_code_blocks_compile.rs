//! Every ```rust block of README.md and of the book (`docs/src/*.md`) compiles (see `build.rs`,
//! which turns them into the items included here): an example that no longer matches the API
//! fails this test's build. The blocks are compiled, not run; the examples and end-to-end tests
//! run the same calls.

include!(concat!(env!("OUT_DIR"), "/doc_blocks.rs"));

#[test]
fn every_rust_block_of_the_docs_was_compiled() {
    // Reaching here means the build compiled every block it generated; this checks the
    // generator saw all of them (a fence it skipped would be an example nobody compiles).
    let root = env!("CARGO_MANIFEST_DIR");
    let mut fences = 0;
    let mut pages = vec![format!("{root}/README.md")];
    for entry in std::fs::read_dir(format!("{root}/docs/src")).expect("docs/src") {
        let path = entry.expect("docs/src entry").path();
        if path.extension().is_some_and(|x| x == "md") {
            pages.push(path.display().to_string());
        }
    }
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap_or_else(|e| panic!("{page}: {e}"));
        fences += text.lines().filter(|l| l.trim_end() == "```rust").count();
    }
    assert!(fences > 0, "the docs have no Rust examples");
    assert_eq!(DOC_BLOCKS, fences, "build.rs compiled {DOC_BLOCKS} of the docs' {fences} Rust blocks");
}
