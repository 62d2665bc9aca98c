#[pipetel::measure(input_size = 10)]
fn f() -> u32 {
    1
}

fn main() {}
