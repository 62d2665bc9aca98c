//! The decoder over the fuzz seed corpus and thousands of deterministic mutations of it: never
//! a panic, never an allocation much larger than the input, and valid seeds round-trip.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

#[path = "../../pipetel/fuzz/mutate.rs"]
#[allow(dead_code)] // Only the seed reader is used here.
mod mutate;

use pipetel_recorders::{codec, Counter, EdgeTransfers, Envelope, Family, Gauge, Histogram};

/// Records the largest single allocation made by a thread while it is measuring.
struct Tracking;

static LARGEST: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static MEASURING: Cell<bool> = const { Cell::new(false) };
}

fn note(size: usize) {
    if MEASURING.with(Cell::get) {
        LARGEST.fetch_max(size, Ordering::Relaxed);
    }
}

// SAFETY: forwards every call to the system allocator unchanged; only observes sizes.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Tracking = Tracking;

/// Decodes `bytes` and checks the allocation bound: a count can only make the decoder reserve
/// what the input could hold, so no single allocation exceeds a small multiple of its length.
fn decode_checked(bytes: &[u8]) -> Result<Envelope, codec::DecodeError> {
    LARGEST.store(0, Ordering::Relaxed);
    MEASURING.with(|m| m.set(true));
    let out = codec::decode(bytes);
    MEASURING.with(|m| m.set(false));
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(largest <= 32 * bytes.len() + 1024, "decoding {} bytes allocated {largest} bytes at once", bytes.len());
    if let Ok(envelope) = &out {
        let again = codec::encode(envelope);
        assert_eq!(codec::decode(&again).as_ref(), Ok(envelope));
    }
    out
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/decode")
}

/// The valid seeds: every kind, labels with multi-byte UTF-8, empty snapshots, edge transfers.
fn valid_seeds() -> Vec<(&'static str, Envelope)> {
    let c =
        Counter::new(Family::counter("pipeline.stage.items", "Items", "{item}", &["stage", "shard"]).expect("valid"))
            .expect("counter");
    c.add(&["tokenize", "0"], 1500.0).expect("add");
    c.add(&["tokenize", "1"], 12.0).expect("add");
    c.inc(&["d\u{e9}tokenize", "0"]).expect("inc");
    let g = Gauge::new(Family::gauge("queue.size", "Queue", "{task}", &[]).expect("valid")).expect("gauge");
    g.set(&[], -3.5).expect("set");
    let h = Histogram::new(
        Family::histogram("task.duration", "Duration", "s", &["op"], &[0.005, 0.1, 1.0, 10.0]).expect("valid"),
    )
    .expect("histogram");
    for (i, v) in [0.001, 0.05, 0.5, 5.0, 50.0, 0.07].iter().enumerate() {
        h.observe(&[if i % 2 == 0 { "read" } else { "write" }], *v).expect("observe");
    }
    let mut e = EdgeTransfers::new("nccl");
    let (a, b, d) = (e.endpoint("gpu0"), e.endpoint("gpu1"), e.endpoint("host"));
    e.record(a, b, 1 << 30, 4, 0.12);
    e.record(b, d, 4096, 1, 0.001);
    let empty = Counter::new(Family::counter("empty", "", "", &["x"]).expect("valid")).expect("counter");
    vec![
        ("valid-all-kinds.bin", Envelope::new("worker-1", 7, vec![c.snapshot(), g.snapshot(), h.snapshot()])),
        ("valid-edges.bin", Envelope::new("worker-2", 1, e.snapshot())),
        ("valid-empty.bin", Envelope::new("", 0, vec![empty.snapshot()])),
        ("valid-no-snapshots.bin", Envelope::new("w", u64::MAX, vec![])),
    ]
}

fn garbage_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut wrong_version = codec::encode(&valid_seeds()[0].1);
    wrong_version[4] = 9;
    let mut huge_count = b"PTRC\x01\x01w\x00".to_vec();
    huge_count.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    vec![
        ("garbage-empty.bin", Vec::new()),
        ("garbage-text.bin", b"not a recorder message\n".to_vec()),
        ("garbage-wrong-version.bin", wrong_version),
        ("garbage-huge-count.bin", huge_count),
        ("garbage-overlong-varint.bin", b"PTRC\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff".to_vec()),
    ]
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir();
    if std::env::var_os("PIPETEL_REGENERATE_CORPUS").is_some() {
        std::fs::create_dir_all(&dir).expect("corpus dir");
        for (name, envelope) in valid_seeds() {
            std::fs::write(dir.join(name), codec::encode(&envelope)).expect("write seed");
        }
        for (name, bytes) in garbage_seeds() {
            std::fs::write(dir.join(name), bytes).expect("write seed");
        }
    }
    mutate::read_seeds(&dir)
}

#[test]
fn committed_seeds_match_the_current_encoder() {
    let seeds = seeds();
    for (name, envelope) in valid_seeds() {
        let (_, bytes) = seeds
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("seed {name} is missing; regenerate the corpus"));
        assert_eq!(decode_checked(bytes).as_ref(), Ok(&envelope), "seed {name} no longer decodes to what it encodes");
        assert_eq!(&codec::encode(&envelope), bytes, "seed {name} is stale");
    }
}

#[test]
fn seeds_decode_or_fail_cleanly() {
    let seeds = seeds();
    assert!(seeds.len() >= 8, "seed corpus has {} files", seeds.len());
    for (name, bytes) in &seeds {
        let out = decode_checked(bytes);
        if name.starts_with("valid-") {
            assert!(out.is_ok(), "{name}: {out:?}");
        } else {
            assert!(out.is_err(), "{name} decoded");
        }
    }
}

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[test]
fn mutations_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut cases = 0usize;
    let mut decoded = 0usize;
    let mut run = |bytes: &[u8]| {
        cases += 1;
        if decode_checked(bytes).is_ok() {
            decoded += 1;
        }
    };
    for (_, seed) in seeds() {
        // Every truncation.
        for len in 0..seed.len() {
            run(&seed[..len]);
        }
        // Every single-bit flip past the magic.
        for bit in 32..seed.len() * 8 {
            let mut m = seed.clone();
            m[bit / 8] ^= 1 << (bit % 8);
            run(&m);
        }
        if seed.is_empty() {
            continue;
        }
        // Random overwrites, insertions and removals, several at once.
        for _ in 0..500 {
            let mut m = seed.clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(m.len());
                match rng.below(4) {
                    0 => m[at] = rng.next() as u8,
                    1 => m[at] = [0x00, 0x7f, 0x80, 0xff][rng.below(4)],
                    2 => m.insert(at, rng.next() as u8),
                    _ => {
                        m.remove(at);
                        if m.is_empty() {
                            break;
                        }
                    }
                }
            }
            run(&m);
        }
    }
    assert!(cases > 5000, "only {cases} mutations ran");
    // Some mutations (a changed value byte) still decode: the decoder is not just rejecting
    // everything.
    assert!(decoded > 0, "no mutation decoded");
}
