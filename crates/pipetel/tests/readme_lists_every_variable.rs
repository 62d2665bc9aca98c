//! The README's configuration table stays true: every variable pipetel reads has a row.

#[test]
fn every_environment_variable_has_a_readme_row() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).expect("README.md");
    for var in pipetel::config::ENV_VARS {
        assert!(readme.contains(&format!("| `{var}` |")), "README has no table row for {var}");
    }
}
