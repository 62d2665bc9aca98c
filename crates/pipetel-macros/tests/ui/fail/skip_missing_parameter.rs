#[pipetel::measure(skip(bacth))]
fn f(batch: Vec<u8>) -> usize {
    batch.len()
}

fn main() {}
