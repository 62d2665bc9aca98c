//! The configuration reference stays true: every variable pipetel reads has a row in it (the
//! metric tables are generated and checked by `metric_families.rs`).

#[test]
fn every_environment_variable_has_a_reference_row() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/src/configuration.md"))
        .expect("docs/src/configuration.md");
    for var in pipetel::config::ENV_VARS {
        assert!(readme.contains(&format!("| `{var}` |")), "docs/src/configuration.md has no table row for {var}");
    }
}
