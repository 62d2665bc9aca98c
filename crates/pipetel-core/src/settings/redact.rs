//! Credentials in endpoint URLs: the userinfo of `http://user:secret@host` is never shown.
//! Every place that displays an endpoint, or a message that may quote one (configuration
//! errors, export-failure reports, `Debug` of settings), goes through these two helpers.

use std::borrow::Cow;

/// How the userinfo of a URL is written instead.
pub const REDACTED_USERINFO: &str = "<redacted>";

/// `endpoint` (a URL, or a schemeless `host:port` as gRPC takes) with its userinfo, if any,
/// replaced by [`REDACTED_USERINFO`]: `http://user:secret@host:4318` becomes
/// `http://<redacted>@host:4318`, `user:secret@host:4317` becomes `<redacted>@host:4317`.
pub fn redact_url(endpoint: &str) -> Cow<'_, str> {
    if endpoint.contains("://") {
        return redact_urls_in(endpoint);
    }
    match userinfo_end(endpoint) {
        Some(at) => Cow::Owned(format!("{REDACTED_USERINFO}{}", &endpoint[at..])),
        None => Cow::Borrowed(endpoint),
    }
}

/// `text` (a message that may quote URLs, such as an HTTP client's error) with the userinfo of
/// every `scheme://user:secret@host` in it replaced by [`REDACTED_USERINFO`].
pub fn redact_urls_in(text: &str) -> Cow<'_, str> {
    if !text.contains("://") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut changed = false;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        match userinfo_end(tail) {
            Some(at) => {
                out.push_str(REDACTED_USERINFO);
                rest = &tail[at..];
                changed = true;
            }
            None => rest = tail,
        }
    }
    if !changed {
        return Cow::Borrowed(text);
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Where the host starts (the position of the last `@` of the authority) when the authority at
/// the start of `s` carries userinfo. The authority ends at the path, query or fragment, or at
/// whatever cannot be part of a URL in a message (white space, quotes, brackets of prose).
fn userinfo_end(s: &str) -> Option<usize> {
    let end = s
        .find(|c: char| {
            matches!(c, '/' | '?' | '#' | '"' | '\'' | '`' | '<' | '>' | '(' | ')' | '{' | '}') || c.is_whitespace()
        })
        .unwrap_or(s.len());
    s[..end].rfind('@')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_redacted_and_the_rest_kept() {
        let cases = [
            ("http://user:secret@collector:4318/v1/traces", "http://<redacted>@collector:4318/v1/traces"),
            ("https://token@collector", "https://<redacted>@collector"),
            ("http://u:p%40ss@[::1]:4317", "http://<redacted>@[::1]:4317"),
            ("http://u:p@ss@host/x@y", "http://<redacted>@host/x@y"),
            ("user:secret@collector:4317", "<redacted>@collector:4317"),
            ("http://collector:4318/v1/logs", "http://collector:4318/v1/logs"),
            ("collector:4317", "collector:4317"),
            ("http://host/path@not-userinfo", "http://host/path@not-userinfo"),
        ];
        for (given, shown) in cases {
            assert_eq!(redact_url(given), shown, "{given}");
            assert_eq!(redact_url(&redact_url(given)), shown, "idempotent: {given}");
        }
    }

    #[test]
    fn every_url_in_a_message_is_redacted() {
        let message = "error sending request for url (http://a:one@h1/v1/metrics): \
                       redirect to \"https://b:two@h2\" refused; see http://h3/doc";
        let shown = redact_urls_in(message);
        assert!(!shown.contains("one") && !shown.contains("two") && !shown.contains("a:") && !shown.contains("b:"));
        assert_eq!(
            shown,
            "error sending request for url (http://<redacted>@h1/v1/metrics): \
             redirect to \"https://<redacted>@h2\" refused; see http://h3/doc"
        );
        assert!(matches!(redact_urls_in("no url here: a@b"), Cow::Borrowed(_)));
    }
}
