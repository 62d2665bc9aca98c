trait Store {
    #[pipetel::measure]
    fn get(&self) -> u32;
}

fn main() {}
