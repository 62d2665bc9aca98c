//! Deterministic mutations of a seed, for the stable replay tests of the fuzz targets: what a
//! fuzzer's first minutes do (truncations, bit flips, byte and token edits, splices), from a
//! fixed seed so a failure reproduces.

/// xorshift64*.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Tokens worth splicing into text inputs: separators, escapes, numbers at the edges of their
/// types, non-ASCII.
const TOKENS: &[&str] = &[
    "=",
    ",",
    "\n",
    "\r",
    "\"",
    "\\",
    "{",
    "}",
    "[",
    "]",
    "%",
    "%0",
    "%zz",
    "%E2%82",
    " ",
    "\t",
    "#",
    ":",
    ".",
    "-",
    "0",
    "-1",
    "1e308",
    "-0",
    "NaN",
    "+Inf",
    "inf",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775808",
    "4294967296",
    "\u{0}",
    "\u{7f}",
    "\u{e9}",
    "\u{20ac}",
    "\u{1f600}",
    "true",
    "none",
];

/// Calls `run` on every truncation of `seed` (at most `cap` of them, evenly spread), on up to
/// `cap` single-bit flips, and on `random` inputs with one to four random edits each.
pub(crate) fn mutations(seed: &[u8], rng: &mut Rng, cap: usize, random: usize, mut run: impl FnMut(&[u8])) {
    let step = seed.len().div_ceil(cap.max(1)).max(1);
    for len in (0..seed.len()).step_by(step) {
        run(&seed[..len]);
    }
    let bits = seed.len() * 8;
    for i in 0..bits.min(cap) {
        let bit = if bits <= cap { i } else { rng.below(bits) };
        let mut m = seed.to_vec();
        m[bit / 8] ^= 1 << (bit % 8);
        run(&m);
    }
    for _ in 0..random {
        let mut m = seed.to_vec();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(m.len() + 1);
            match rng.below(7) {
                0 if at < m.len() => m[at] = rng.next() as u8,
                1 if at < m.len() => m[at] = [0x00, 0x7f, 0x80, 0xff][rng.below(4)],
                2 => m.insert(at, rng.next() as u8),
                3 if at < m.len() => {
                    m.remove(at);
                }
                4 => {
                    let token = TOKENS[rng.below(TOKENS.len())].as_bytes();
                    m.splice(at..at, token.iter().copied());
                }
                5 if !m.is_empty() => {
                    // Repeat a chunk: a line, a frame or a field twice.
                    let from = rng.below(m.len());
                    let to = (from + 1 + rng.below(64)).min(m.len());
                    let chunk = m[from..to].to_vec();
                    m.splice(at..at, chunk);
                }
                _ if at < m.len() => {
                    let to = (at + 1 + rng.below(16)).min(m.len());
                    m.drain(at..to);
                }
                _ => {}
            }
        }
        run(&m);
    }
}

/// The committed seeds in `dir` (name, bytes), sorted by name.
#[allow(dead_code)] // Not every test that includes this file reads a corpus.
pub(crate) fn read_seeds(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("the seed corpus {} is committed: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("dir entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).expect("utf-8 seed name").to_owned();
            (name, std::fs::read(&path).expect("read seed"))
        })
        .collect();
    out.sort();
    out
}
