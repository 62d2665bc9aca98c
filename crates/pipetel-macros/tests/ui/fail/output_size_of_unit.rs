#[pipetel::measure(output_size = ret.len())]
fn f(x: u32) {
    let _ = x;
}

fn main() {}
