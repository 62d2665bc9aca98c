//! Text from a store made safe for a terminal: stage names, failure reasons and a server's error
//! bodies are written by whoever writes rows (or runs the server), and a terminal acts on the
//! control characters in them (`ESC [ 2 J` clears the screen, others retitle the window or
//! rewrite what was printed before).

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` is a control character a terminal may act on: C0 (`U+0000`–`U+001F`, tab and
/// newline included), DEL (`U+007F`) and C1 (`U+0080`–`U+009F`).
pub fn is_control(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

/// `text` with every control character ([`is_control`]) written as a visible escape: `\x1b`
/// for C0 and DEL, `\u{9b}` for C1. Everything else, backslashes included, is kept as it is, so
/// a name without control characters prints unchanged (and is not copied).
///
/// ```
/// assert_eq!(pipetel_rows::escape_controls("tok\u{1b}[2Jenize"), "tok\\x1b[2Jenize");
/// assert_eq!(pipetel_rows::escape_controls("a\nb\u{9b}c"), "a\\x0ab\\u{9b}c");
/// assert_eq!(pipetel_rows::escape_controls("tokenize"), "tokenize");
/// ```
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match u32::from(c) {
            n @ (0..=0x1f | 0x7f) => {
                let _ = write!(out, "\\x{n:02x}");
            }
            n @ 0x80..=0x9f => {
                let _ = write!(out, "\\u{{{n:x}}}");
            }
            _ => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A JSON text (one stored row) safe for a terminal and still the same JSON: DEL and C1
/// characters, which JSON allows unescaped inside strings, written as `\u007f` ... `\u009f`
/// (C0 characters cannot appear unescaped in valid JSON).
///
/// ```
/// assert_eq!(pipetel_rows::escape_json_controls("{\"a\":\"x\u{9b}y\"}"), "{\"a\":\"x\\u009by\"}");
/// ```
pub fn escape_json_controls(json: &str) -> Cow<'_, str> {
    if !json.chars().any(is_control) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        if is_control(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_control_character_is_escaped_and_nothing_else() {
        for n in (0..=0x1f).chain(0x7f..=0x9f) {
            let c = char::from_u32(n).expect("a char");
            let escaped = escape_controls(&format!("a{c}b")).into_owned();
            assert!(!escaped.chars().any(is_control), "U+{n:04X}: {escaped:?}");
            assert!(escaped.starts_with("a\\") && escaped.ends_with('b'), "U+{n:04X}: {escaped:?}");
        }
        let plain = "stage \\x1b é ü 漢 \u{a0}";
        assert!(matches!(escape_controls(plain), Cow::Borrowed(_)));
        assert_eq!(escape_controls("\u{1b}[2J\u{7f}\u{85}"), "\\x1b[2J\\x7f\\u{85}");
    }

    #[test]
    fn json_stays_json() {
        let line = "{\"pipeline.stage.name\":\"a\u{7f}\u{9b}b\",\"n\":1}";
        let safe = escape_json_controls(line);
        assert!(!safe.chars().any(is_control), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).expect("valid JSON");
        let orig: serde_json::Value = serde_json::from_str(line).expect("valid JSON");
        assert_eq!(back, orig);
    }
}
