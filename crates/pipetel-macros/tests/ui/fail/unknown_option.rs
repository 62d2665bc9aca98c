#[pipetel::measure(stage = "s", retries = 3)]
fn f() {}

fn main() {}
