//! The HTTP server families, as the OTel HTTP semantic conventions name them.

use super::family::families;

const REQUEST: &[&str] = &[
    "http.request.method",
    "http.response.status_code",
    "http.route",
    "url.scheme",
    "network.protocol.name",
    "network.protocol.version",
];

families! {
    /// Duration of finished requests.
    REQUEST_DURATION = "http.server.request.duration", Histogram, "s", REQUEST, "Duration of HTTP server requests.";
    /// Requests being served now.
    ACTIVE_REQUESTS = "http.server.active_requests", UpDownCounter, "{request}", &["http.request.method", "url.scheme"],
        "Number of active HTTP server requests.";
    /// Request body sizes (from `Content-Length`).
    REQUEST_BODY_SIZE = "http.server.request.body.size", Histogram, "By", REQUEST,
        "Size of HTTP server request bodies.";
    /// Response body sizes (when the body's length is known).
    RESPONSE_BODY_SIZE = "http.server.response.body.size", Histogram, "By", REQUEST,
        "Size of HTTP server response bodies.";
}
