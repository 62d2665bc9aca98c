//! The HTTP server families, as the OTel HTTP semantic conventions name them.

use super::family::{Family, Instrument::*};

const REQUEST: &[&str] = &[
    "http.request.method",
    "http.response.status_code",
    "http.route",
    "url.scheme",
    "network.protocol.name",
    "network.protocol.version",
];

/// Duration of finished requests.
pub const REQUEST_DURATION: Family =
    Family::new("http.server.request.duration", Histogram, "s", "Duration of HTTP server requests.", REQUEST);
/// Requests being served now.
pub const ACTIVE_REQUESTS: Family = Family::new(
    "http.server.active_requests",
    UpDownCounter,
    "{request}",
    "Number of active HTTP server requests.",
    &["http.request.method", "url.scheme"],
);
/// Request body sizes (from `Content-Length`).
pub const REQUEST_BODY_SIZE: Family =
    Family::new("http.server.request.body.size", Histogram, "By", "Size of HTTP server request bodies.", REQUEST);
/// Response body sizes (when the body's length is known).
pub const RESPONSE_BODY_SIZE: Family =
    Family::new("http.server.response.body.size", Histogram, "By", "Size of HTTP server response bodies.", REQUEST);

/// Every family of the table, in the reference's order.
pub const ALL: &[Family] = &[REQUEST_DURATION, ACTIVE_REQUESTS, REQUEST_BODY_SIZE, RESPONSE_BODY_SIZE];
