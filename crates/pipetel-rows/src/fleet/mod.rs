//! The fleet's rows store: the rows of every worker, read back from VictoriaLogs, where the
//! gateways write them (`otel-collector/gateway-stores.yaml`), through its HTTP API
//! (`/select/logsql/query`, LogsQL). The one reader behind `pipetel rows --url` and, through
//! the binding, `pipetel.rows.query` in Python (feature `fleet`).
//!
//! Each stored record is turned back into the line the writing process kept in its local store
//! (same keys, same types), so the same filters and views work on it. What VictoriaLogs gives
//! back differs from what was written in three ways, undone here:
//! - every value is text: the row fields' types are known ([`TEXT_FIELDS`](crate::TEXT_FIELDS),
//!   [`FLOAT_FIELDS`](crate::FLOAT_FIELDS)); a user counter is a float when any of its values in
//!   the answer has a decimal point (a float counter that only ever held whole numbers comes back
//!   as an integer), an integer otherwise;
//! - the stream name is `event_name`, the time `_time` (nanoseconds; the local row keeps the
//!   milliseconds, truncated);
//! - a column of decimals may be stored as floats that VictoriaLogs parses its own way (digits
//!   times a power of ten), one unit in the last place off (0.35 comes back as
//!   0.3500000000000001): the value whose shortest text parses, that way, to what came back is
//!   taken, preferring the shortest text.
//!
//! # Limits
//! A store is a server on the network, so the answer is read under [`Limits`]: a read timeout
//! (connecting, and each wait for more of the answer), a cap on the bytes of one line of the
//! answer and on the whole answer. The answer is read line by line as it arrives, never buffered
//! whole; a limit passed ends the query with a [`FleetError`] naming the limit and the URL.
//! URLs are shown with their user information (`user:password@`) redacted.
//!
//! Only `http://` URLs: this build has no TLS (put a TLS-terminating proxy in front, or use the
//! store's plain port on a trusted network).
//!
//! # Example
//! ```no_run
//! use pipetel_rows::fleet::{FleetReader, Limits, Query};
//!
//! # fn main() -> Result<(), pipetel_rows::fleet::FleetError> {
//! let mut reader = FleetReader::new("http://victoria-logs:9428", Limits::default())?;
//! let query = Query { stage: Some("tokenize".into()), ..Query::default() };
//! for row in reader.rows(&query.logsql(), None, None)? {
//!     println!("{}", row.to_json());
//! }
//! # Ok(())
//! # }
//! ```

mod error;
mod http;
mod limits;
mod row;
mod value;

use std::collections::BTreeSet;

pub use error::{FleetError, FleetErrorKind};
pub use http::redact;
pub use limits::Limits;
pub use row::{FieldValue, FleetRow};

/// The filters a query narrows the rows by; `None` matches anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// Rows of stream `namespace` or `namespace.*` (`pipeline`, `zephyr.worker`, ...).
    pub namespace: Option<String>,
    /// The stage name (`pipeline.stage.name`).
    pub stage: Option<String>,
    /// The execution id (`pipeline.execution.id`).
    pub execution: Option<String>,
    /// The shard index (`pipeline.shard.index`; worker rows).
    pub shard: Option<u64>,
    /// The row's status (`pipeline.status`).
    pub status: Option<String>,
    /// The writing service (`service.name`).
    pub service: Option<String>,
}

/// A LogsQL string literal.
fn quoted(s: &str) -> String {
    // JSON string escapes are LogsQL's (Go's) quoted-string escapes for everything a name holds.
    serde_json::Value::from(s).to_string()
}

impl Query {
    /// The LogsQL query for these filters: stored rows only (records with a
    /// `pipeline.namespace`), narrowed by every filter, oldest first.
    ///
    /// ```
    /// let q = pipetel_rows::fleet::Query { shard: Some(3), ..Default::default() };
    /// assert_eq!(q.logsql(), r#""pipeline.namespace":* "pipeline.shard.index":="3" | sort by (_time)"#);
    /// ```
    pub fn logsql(&self) -> String {
        let mut q = vec!["\"pipeline.namespace\":*".to_string()];
        if let Some(ns) = &self.namespace {
            q.push(format!("(event_name:={} or event_name:{}*)", quoted(ns), quoted(&format!("{ns}."))));
        }
        for (field, value) in [
            ("pipeline.stage.name", self.stage.clone()),
            ("pipeline.execution.id", self.execution.clone()),
            ("pipeline.shard.index", self.shard.map(|s| s.to_string())),
            ("pipeline.status", self.status.clone()),
            ("service.name", self.service.clone()),
        ] {
            if let Some(v) = value {
                q.push(format!("{}:={}", quoted(field), quoted(&v)));
            }
        }
        format!("{} | sort by (_time)", q.join(" "))
    }
}

/// A reader of one store: the URL checked once, a connection pool, and the counters seen as
/// floats so far (a counter seen with a decimal point stays a float in later queries).
#[derive(Debug)]
pub struct FleetReader {
    /// The query endpoint, user information included (ureq sends it as basic auth).
    target: String,
    /// The query endpoint as shown in messages.
    endpoint: String,
    agent: ureq::Agent,
    limits: Limits,
    float_counters: BTreeSet<String>,
}

impl FleetReader {
    /// A reader of the VictoriaLogs at `base_url` (e.g. `http://victoria-logs:9428`).
    ///
    /// # Errors
    /// [`FleetErrorKind::Url`] when `base_url` is not an `http://` URL.
    pub fn new(base_url: &str, limits: Limits) -> Result<FleetReader, FleetError> {
        let shown_base = redact(base_url);
        if base_url.starts_with("https://") {
            return Err(FleetError::new(
                FleetErrorKind::Url,
                format!(
                    "{shown_base}: https is not supported by this build; use the store's http:// address \
                     (or a TLS-terminating proxy in front of it)"
                ),
            ));
        }
        if !base_url.starts_with("http://") {
            return Err(FleetError::new(
                FleetErrorKind::Url,
                format!("{shown_base}: expected the VictoriaLogs base URL, e.g. http://victoria-logs:9428"),
            ));
        }
        let target = format!("{}/select/logsql/query", base_url.trim_end_matches('/'));
        let endpoint = redact(&target);
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(limits.timeout)
            .timeout_read(limits.timeout)
            .timeout_write(limits.timeout)
            // A redirect is an error: the query (and any credentials) goes to the URL given, only.
            .redirects(0)
            .build();
        Ok(FleetReader { target, endpoint, agent, limits, float_counters: BTreeSet::new() })
    }

    /// The query endpoint as shown in messages (user information redacted).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The rows `logsql` selects ([`Query::logsql`]), stored from `start` (anything
    /// VictoriaLogs takes: RFC 3339, `5m` ago, ...) to `end` when given, oldest first.
    ///
    /// # Errors
    /// The store could not be reached, was silent for the read timeout, answered with an error
    /// status or with something that is not VictoriaLogs' answer, or the answer passed a cap.
    pub fn rows(&mut self, logsql: &str, start: Option<&str>, end: Option<&str>) -> Result<Vec<FleetRow>, FleetError> {
        let mut form = vec![("query", logsql)];
        form.extend(start.map(|s| ("start", s)));
        form.extend(end.map(|e| ("end", e)));
        let entries = http::entries(&self.agent, &self.target, &self.endpoint, &form, &self.limits)?;
        for entry in &entries {
            self.float_counters.extend(value::float_counters_of(entry));
        }
        let mut rows: Vec<FleetRow> = entries.iter().filter_map(|e| value::row_of(e, &self.float_counters)).collect();
        // `sort by (_time)` already orders them; ties keep the store's order.
        rows.sort_by_key(|r| r.time);
        Ok(rows)
    }
}
