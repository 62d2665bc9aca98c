#[pipetel::measure(buckets = [0.1, 1.0, 0.5])]
fn f() {}

fn main() {}
