//! `#[pipetel::measure]` on sync functions and methods: calls, errors on `Err` and on panic
//! (the panic goes on unchanged), in-flight back to zero, durations, sizes, labels.

mod measure_support;

use measure_support::{f, global_metrics as metrics};

#[pipetel::measure]
fn plain(x: u32) -> u32 {
    x + 1
}

#[pipetel::measure(stage = "parse")]
fn parse(input: &str) -> Result<u32, std::num::ParseIntError> {
    let n: u32 = input.trim().parse()?;
    if n == 0 {
        return Ok(1);
    }
    Ok(n)
}

#[pipetel::measure]
fn explode(n: u32) -> u32 {
    if n > 1 {
        panic!("boom {n}");
    }
    n
}

#[pipetel::measure(input_size = batch.len(), output_size = ret.len())]
fn tokenize(batch: &[u8]) -> Vec<u8> {
    batch.iter().copied().filter(|b| *b != b' ').collect()
}

#[pipetel::measure(output_size = |v: &Vec<u8>| v.len() * 2)]
fn load(n: usize) -> std::io::Result<Vec<u8>> {
    if n == 0 {
        return Err(std::io::Error::other("empty"));
    }
    Ok(vec![0; n])
}

struct Model {
    scale: u64,
}

impl Model {
    #[pipetel::measure(skip(self), name = "model.infer", stage = "infer", level = "debug")]
    fn infer(&self, x: u64) -> u64 {
        x * self.scale
    }

    #[pipetel::measure(skip_all)]
    fn consume(self) -> u64 {
        self.scale
    }
}

#[test]
fn counts_calls_and_durations_with_labels() {
    let m = metrics();
    for i in 0..3 {
        assert_eq!(plain(i), i + 1);
    }
    let s = m.collect();
    assert_eq!(s.counter("function.calls", &[("function", "plain"), ("module", module_path!())]), 3);
    assert_eq!(s.up_down("function.in_flight", &f("plain")), 0);
    assert_eq!(s.counter("function.errors", &f("plain")), 0);
    assert_eq!(s.histogram("function.duration", &f("plain")).0, 3);
    assert_eq!(s.unit("function.duration").as_deref(), Some("s"));
    assert_eq!(s.bounds("function.duration", &f("plain")), pipetel::SECONDS_BUCKETS);
}

#[test]
fn err_is_an_error_and_question_mark_works() {
    let m = metrics();
    assert_eq!(parse("5"), Ok(5));
    assert_eq!(parse("0"), Ok(1));
    assert!(parse("x").is_err());
    let s = m.collect();
    let at = [("function", "parse"), ("stage", "parse")];
    assert_eq!(s.counter("function.calls", &at), 3);
    assert_eq!(s.counter("function.errors", &[("function", "parse"), ("error.type", "err")]), 1);
    assert_eq!(s.histogram("function.duration", &at).0, 3);
    assert_eq!(s.up_down("function.in_flight", &at), 0);
}

#[test]
fn panic_is_an_error_and_propagates_unchanged() {
    let m = metrics();
    assert_eq!(explode(1), 1);
    let caught = std::panic::catch_unwind(|| explode(2));
    let payload = caught.expect_err("explode(2) panics");
    assert_eq!(payload.downcast_ref::<String>().map(String::as_str), Some("boom 2"));
    m.collect().assert_one_panic("explode", 2);
}

#[test]
fn sizes_are_recorded() {
    let m = metrics();
    assert_eq!(tokenize(b"a b c"), b"abc");
    assert_eq!(tokenize(b"dd"), b"dd");
    assert_eq!(load(4).map(|v| v.len()).ok(), Some(4));
    assert!(load(0).is_err());
    let s = m.collect();
    assert_eq!(s.size_histogram("function.input.size", &f("tokenize")), (2, 7));
    assert_eq!(s.size_histogram("function.output.size", &f("tokenize")), (2, 5));
    assert_eq!(s.unit("function.input.size").as_deref(), Some("By"));
    // On `Err` nothing is recorded; the closure form gets the `Ok` value.
    assert_eq!(s.size_histogram("function.output.size", &f("load")), (1, 8));
    assert_eq!(s.counter("function.errors", &f("load")), 1);
}

#[test]
fn methods_and_options() {
    let m = metrics();
    let model = Model { scale: 3 };
    assert_eq!(model.infer(2), 6);
    assert_eq!(model.consume(), 3);
    let s = m.collect();
    assert_eq!(s.counter("function.calls", &[("function", "infer"), ("stage", "infer")]), 1);
    assert_eq!(s.counter("function.calls", &f("consume")), 1);
}

#[test]
fn in_flight_counts_running_calls() {
    let m = metrics();
    let (entered_tx, entered_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();

    #[pipetel::measure]
    fn blocking(entered: std::sync::mpsc::Sender<()>, release: std::sync::mpsc::Receiver<()>) {
        let _ = entered.send(());
        let _ = release.recv();
    }

    let worker = std::thread::spawn(move || blocking(entered_tx, release_rx));
    entered_rx.recv().expect("entered");
    assert_eq!(m.collect().up_down("function.in_flight", &f("blocking")), 1);
    release_tx.send(()).expect("release");
    worker.join().expect("join");
    assert_eq!(m.collect().up_down("function.in_flight", &f("blocking")), 0);
}
