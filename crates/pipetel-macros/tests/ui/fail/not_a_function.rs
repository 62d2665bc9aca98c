#[pipetel::measure]
struct Batch {
    len: usize,
}

fn main() {}
