//! What a failed query says.

use std::fmt;

/// What went wrong with a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FleetErrorKind {
    /// The URL is not a VictoriaLogs base URL this build can reach (not `http://`).
    Url,
    /// The store could not be reached, or the connection failed mid-answer.
    Connect,
    /// Nothing came from the store for the read timeout.
    Timeout,
    /// The store answered with an HTTP error status.
    Status(u16),
    /// A line of the answer, or the whole answer, passed its cap.
    TooLarge,
    /// The answer is not what VictoriaLogs answers (a line that is not a JSON object).
    Answer,
}

/// A query that failed: what went wrong, and a message naming the URL (redacted) and the limit
/// or the server's words (control characters escaped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetError {
    kind: FleetErrorKind,
    message: String,
}

impl FleetError {
    pub(super) fn new(kind: FleetErrorKind, message: String) -> FleetError {
        FleetError { kind, message }
    }

    /// What went wrong.
    pub fn kind(&self) -> FleetErrorKind {
        self.kind
    }
}

impl fmt::Display for FleetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FleetError {}
