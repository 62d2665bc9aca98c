//! Compile-time behaviour of `#[pipetel::measure]`: what must compile (`tests/ui/pass`) and the
//! error messages misuse gets (`tests/ui/fail/*.stderr`; regenerate with `TRYBUILD=overwrite cargo test -p pipetel-macros --test ui`
//! and review the diff).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
