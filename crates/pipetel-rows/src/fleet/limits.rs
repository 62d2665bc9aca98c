//! How long and how much a query may read.

use std::time::Duration;

/// How long and how much a query may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The longest wait for the store: to connect, and for each further part of the answer.
    pub timeout: Duration,
    /// The most bytes of one line of the answer (one stored record), its line end included.
    pub max_line_bytes: usize,
    /// The most bytes of the whole answer.
    pub max_bytes: u64,
}

impl Limits {
    /// The default read timeout: 30 s.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
    /// The default cap on one line of the answer: 1 MiB (a stored row is a few hundred bytes).
    pub const DEFAULT_MAX_LINE_BYTES: usize = 1 << 20;
    /// The default cap on the whole answer: 256 MiB.
    pub const DEFAULT_MAX_BYTES: u64 = 256 << 20;
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            timeout: Limits::DEFAULT_TIMEOUT,
            max_line_bytes: Limits::DEFAULT_MAX_LINE_BYTES,
            max_bytes: Limits::DEFAULT_MAX_BYTES,
        }
    }
}
