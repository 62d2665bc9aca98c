//! One query over HTTP: the request, and the answer read line by line under the limits.

use std::error::Error as _;
use std::io::{self, BufRead, BufReader, Read};

use serde_json::{Map, Value};

use super::error::{FleetError, FleetErrorKind};
use super::limits::Limits;
use crate::escape_controls;

/// The most bytes of an error answer's body kept for the message.
const ERROR_BODY_BYTES: u64 = 4096;

/// `url` with its user information (`user:password@`) replaced by `***@`, for messages.
///
/// ```
/// use pipetel_rows::fleet::redact;
/// assert_eq!(redact("http://reader:s3cret@vl:9428/x"), "http://***@vl:9428/x");
/// assert_eq!(redact("http://vl:9428/a@b"), "http://vl:9428/a@b");
/// ```
pub fn redact(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (Some(s), r),
        None => (None, url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let shown = match rest[..authority_end].rfind('@') {
        Some(at) => format!("***{}", &rest[at..]),
        None => rest.to_string(),
    };
    let shown = escape_controls(&shown).into_owned();
    match scheme {
        Some(s) => format!("{}://{shown}", escape_controls(s)),
        None => shown,
    }
}

/// Whether `e`, or an error it wraps, is a read or connect that timed out.
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<io::Error>() {
            if matches!(io.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock) {
                return true;
            }
        }
        cause = c.source();
    }
    false
}

fn timeout_error(shown: &str, limits: &Limits, what: &str) -> FleetError {
    FleetError::new(
        FleetErrorKind::Timeout,
        format!("{shown}: timed out {what}: nothing received for {:?} (the read timeout)", limits.timeout),
    )
}

/// A failed request as a message naming the endpoint (redacted), never ureq's own text (which
/// carries the URL as given, user information included).
fn request_error(e: ureq::Error, shown: &str, limits: &Limits) -> FleetError {
    match e {
        ureq::Error::Status(status, response) => {
            let mut body = Vec::new();
            // At most a few KiB of the body: an error answer is read no more than a row.
            let _ = response.into_reader().take(ERROR_BODY_BYTES).read_to_end(&mut body);
            let body = String::from_utf8_lossy(&body);
            FleetError::new(
                FleetErrorKind::Status(status),
                format!("{shown}: HTTP {status}: {}", escape_controls(body.trim())),
            )
        }
        ureq::Error::Transport(t) => {
            if timed_out(&t) {
                return timeout_error(shown, limits, "waiting for the answer");
            }
            let mut what = t.kind().to_string().to_lowercase();
            if let Some(m) = t.message() {
                what.push_str(": ");
                what.push_str(m);
            }
            if let Some(source) = t.source() {
                what.push_str(&format!(": {source}"));
            }
            FleetError::new(FleetErrorKind::Connect, format!("{shown}: {}", escape_controls(&what)))
        }
    }
}

/// Posts `form` to `endpoint` and reads the answer: one JSON object per line, blank lines
/// skipped, under `limits`. `shown` is the endpoint for messages.
pub(super) fn entries(
    agent: &ureq::Agent,
    endpoint: &str,
    shown: &str,
    form: &[(&str, &str)],
    limits: &Limits,
) -> Result<Vec<Map<String, Value>>, FleetError> {
    let response = agent.post(endpoint).send_form(form).map_err(|e| request_error(e, shown, limits))?;
    let status = response.status();
    if !(200..300).contains(&status) {
        let to = response.header("location").map(|l| format!(" to {}", redact(l))).unwrap_or_default();
        return Err(FleetError::new(
            FleetErrorKind::Status(status),
            format!("{shown}: HTTP {status}: a redirect{to}, not followed (give the store's own URL)"),
        ));
    }
    read_lines(response.into_reader(), shown, limits)
}

/// Reads the answer from `reader` line by line, never holding more than one line (and at most
/// the line cap plus one byte of it) besides the parsed entries.
pub(super) fn read_lines(
    reader: impl Read,
    shown: &str,
    limits: &Limits,
) -> Result<Vec<Map<String, Value>>, FleetError> {
    let mut reader = BufReader::with_capacity(64 << 10, reader);
    let mut entries = Vec::new();
    let mut line = Vec::new();
    let mut total: u64 = 0;
    let max_line = limits.max_line_bytes as u64;
    for n in 1.. {
        line.clear();
        // One byte past either cap is enough to know it was passed.
        let room = (max_line + 1).min(limits.max_bytes.saturating_sub(total).saturating_add(1));
        let read = (&mut reader).take(room).read_until(b'\n', &mut line).map_err(|e| {
            if timed_out(&e) {
                timeout_error(shown, limits, &format!("reading line {n} of the answer"))
            } else {
                FleetError::new(
                    FleetErrorKind::Connect,
                    format!("{shown}: reading line {n} of the answer: {}", escape_controls(&e.to_string())),
                )
            }
        })?;
        if read == 0 {
            break;
        }
        total += read as u64;
        if total > limits.max_bytes {
            return Err(FleetError::new(
                FleetErrorKind::TooLarge,
                format!(
                    "{shown}: the answer is over the cap of {} bytes on a whole answer (at line {n}); \
                     narrow the query with filters or raise the cap",
                    limits.max_bytes
                ),
            ));
        }
        if read as u64 > max_line {
            return Err(FleetError::new(
                FleetErrorKind::TooLarge,
                format!("{shown}: line {n} of the answer is over the cap of {max_line} bytes on one line"),
            ));
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(text) {
            Ok(Value::Object(entry)) => entries.push(entry),
            _ => {
                return Err(FleetError::new(
                    FleetErrorKind::Answer,
                    format!("{shown}: line {n} of the answer is not a JSON object (is this VictoriaLogs?)"),
                ))
            }
        }
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_line_bytes: usize, max_bytes: u64) -> Limits {
        Limits { max_line_bytes, max_bytes, ..Limits::default() }
    }

    #[test]
    fn lines_under_the_caps_are_read_and_over_them_refused() {
        let answer = "{\"a\":\"1\"}\n\n{\"b\":\"22\"}\r\n{\"c\":\"3\"}";
        let got = read_lines(answer.as_bytes(), "u", &limits(12, 100)).expect("under the caps");
        assert_eq!(got.len(), 3);
        // A line of exactly the cap (10 bytes with its line end) passes; 11 do not.
        let e = read_lines("{\"a\":\"1\"}\n{\"b\":\"22\"}\n".as_bytes(), "u", &limits(10, 100)).expect_err("over");
        assert_eq!(e.kind(), FleetErrorKind::TooLarge);
        assert_eq!(e.to_string(), "u: line 2 of the answer is over the cap of 10 bytes on one line");
        let e = read_lines("{\"aaaaaaaaaaaaaaaaa\":1}".as_bytes(), "u", &limits(9, 100)).expect_err("over");
        assert!(e.to_string().contains("line 1 of the answer is over the cap of 9 bytes"), "{e}");
        // The whole answer: 22 bytes against a cap of 21, then of 22.
        let e = read_lines(answer.as_bytes()[..22].as_ref(), "u", &limits(20, 21)).expect_err("over");
        assert!(e.to_string().contains("over the cap of 21 bytes on a whole answer (at line 3)"), "{e}");
        assert!(read_lines(&answer.as_bytes()[..22], "u", &limits(20, 22)).is_ok());
        let e = read_lines("[1]\n".as_bytes(), "u", &limits(20, 100)).expect_err("not an object");
        assert_eq!(e.to_string(), "u: line 1 of the answer is not a JSON object (is this VictoriaLogs?)");
    }

    #[test]
    fn user_information_is_redacted() {
        assert_eq!(redact("http://u:p@h:1"), "http://***@h:1");
        assert_eq!(redact("http://u@h:1/select?x=a@b"), "http://***@h:1/select?x=a@b");
        assert_eq!(redact("h:1"), "h:1");
        assert_eq!(redact("http://h\u{1b}[2J:1"), "http://h\\x1b[2J:1");
    }
}
