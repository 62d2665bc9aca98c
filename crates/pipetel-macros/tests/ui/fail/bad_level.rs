#[pipetel::measure(level = "loud")]
fn f() {}

fn main() {}
