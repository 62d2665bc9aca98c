//! Plain HTTP requests, and the checked scrape of a pull endpoint.

use std::time::Duration;

use super::prometheus::promtool_check_metrics;

/// A plain HTTP request; returns the status and the body (any status, no error for 4xx/5xx).
pub fn http(method: &str, url: &str) -> Result<(u16, String), String> {
    let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(10)).build();
    match agent.request(method, url).call() {
        Ok(r) => {
            let status = r.status();
            r.into_string().map(|b| (status, b)).map_err(|e| e.to_string())
        }
        Err(ureq::Error::Status(status, r)) => Ok((status, r.into_string().unwrap_or_default())),
        Err(e) => Err(e.to_string()),
    }
}

/// Scrapes `http://{addr}/metrics`, asserts a `200` and an exposition `promtool check metrics`
/// accepts; returns the exposition.
pub fn scrape_checked(addr: &str) -> String {
    let (status, body) = http("GET", &format!("http://{addr}/metrics")).expect("scrape");
    assert_eq!(status, 200, "{body}");
    promtool_check_metrics(&body).expect("promtool check metrics");
    body
}

/// Percent-encodes everything but the unreserved characters (for a query string).
pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
