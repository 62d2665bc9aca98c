//! `pipetel rows --url URL`: the rows of a whole fleet from VictoriaLogs, where the gateways
//! write them (`otel-collector/gateway-stores.yaml`), through its HTTP API
//! (`/select/logsql/query`, LogsQL).
//!
//! Each stored log record is turned back into the line the writing process kept in its local
//! store (same keys, same types), so every filter and view works as on a local store and prints
//! the same thing for the same rows. What VictoriaLogs gives back differs from what was written
//! in three ways, undone here:
//! - every value is text: the row fields' types are known (`docs/src/stages.md`, "Rows"); a user
//!   counter is a float when any of its values in the answer has a decimal point (a float counter that
//!   only ever held whole numbers comes back as an integer), an integer otherwise;
//! - the stream name is `event_name`, the time `_time` (nanoseconds; the local row keeps the
//!   milliseconds, truncated);
//! - a column of decimals may be stored as floats that VictoriaLogs parses its own way (digits
//!   times a power of ten), one unit in the last place off (0.35 comes back as
//!   0.3500000000000001): the value whose shortest text parses, that way, to what came back is
//!   taken, preferring the shortest text.
//!
//! Only `http://` URLs: this build has no TLS (put a TLS-terminating proxy in front, or use
//! the store's plain port on a trusted network).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, BufRead, BufReader, Write};
use std::time::Duration;

use pipetel_rows::{FLOAT_FIELDS, TEXT_FIELDS};
use serde_json::{Map, Number, Value};

use crate::args::{Mode, RowsArgs};
use crate::read::Row;
use crate::show;

/// How often `--follow` asks for new rows.
const POLL: Duration = Duration::from_secs(1);

/// How far back each `--follow` poll looks: a row stored later than this after its own time
/// (a gateway's retries after a long outage) is not shown by `--follow`; a plain query shows it.
const FOLLOW_WINDOW_MS: u64 = 120_000;

fn error(kind: io::ErrorKind, msg: String) -> io::Error {
    io::Error::new(kind, msg)
}

/// A LogsQL string literal.
fn quoted(s: &str) -> String {
    // JSON string escapes are LogsQL's (Go's) quoted-string escapes for everything a name holds.
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

/// The LogsQL query for the rows `a` asks for: stored rows only (records with a
/// `pipeline.namespace`), narrowed by the filters the store can apply, oldest first.
pub(crate) fn logsql(a: &RowsArgs) -> String {
    let mut q = vec!["\"pipeline.namespace\":*".to_string()];
    let f = &a.filters;
    if let Some(ns) = &f.namespace {
        q.push(format!("(event_name:={} or event_name:{}*)", quoted(ns), quoted(&format!("{ns}."))));
    }
    for (field, value) in [
        ("pipeline.stage.name", f.stage.clone()),
        ("pipeline.execution.id", f.execution.clone()),
        ("pipeline.shard.index", f.shard.map(|s| s.to_string())),
        ("pipeline.status", f.status.clone()),
        ("service.name", a.service.clone()),
    ] {
        if let Some(v) = value {
            q.push(format!("{}:={}", quoted(field), quoted(&v)));
        }
    }
    format!("{} | sort by (_time)", q.join(" "))
}

/// `10^-k` as Go's `math.Pow10(-k)` computes it (what VictoriaLogs multiplies by).
fn go_pow10_neg(k: usize) -> f64 {
    let lit = |e: String| e.parse::<f64>().unwrap_or(0.0);
    if k > 323 {
        return 0.0;
    }
    lit(format!("1e-{}", k / 32 * 32)) / lit(format!("1e{}", k % 32))
}

/// How VictoriaLogs parses a decimal it stores as a float: `int + frac * 10^-len(frac)`, fused.
fn vl_parse(s: &str) -> Option<f64> {
    let (neg, s) = s.strip_prefix('-').map_or((false, s), |r| (true, r));
    let (int, frac) = s.split_once('.')?;
    if int.is_empty() || frac.is_empty() || !(int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())) {
        return None;
    }
    let n_int: u64 = int.parse().ok()?;
    let n_frac: u64 = frac.trim_start_matches('0').parse().unwrap_or(0);
    let f = (n_frac as f64).mul_add(go_pow10_neg(frac.len()), n_int as f64);
    Some(if neg { -f } else { f })
}

/// The written value behind a float VictoriaLogs gave back as `text`: the value with the
/// fewest significant digits from which VictoriaLogs' parsing, applied up to four times over
/// (each merge of its parts parses the column again), reaches what came back.
fn written_float(text: &str) -> Option<f64> {
    let x: f64 = text.parse().ok()?;
    if x == 0.0 || !x.is_finite() {
        return Some(x);
    }
    for digits in 1..=17 {
        let Ok(y) = format!("{:.*e}", digits - 1, x).parse::<f64>() else { continue };
        let mut z = y;
        for _ in 0..=4 {
            if z == x {
                return Some(y);
            }
            match vl_parse(&format!("{z}")) {
                Some(next) if next != z => z = next,
                _ => break,
            }
        }
    }
    Some(x)
}

/// The JSON value of row field `key` from its stored text; `float_counters` are the counters
/// seen with a decimal point.
fn field_value(key: &str, text: &str, float_counters: &BTreeSet<String>) -> Value {
    let float = |t: &str| written_float(t).and_then(Number::from_f64).map(Value::Number);
    let int = |t: &str| t.parse::<i64>().ok().map(Value::from);
    let v = if TEXT_FIELDS.contains(&key) {
        None
    } else if FLOAT_FIELDS.contains(&key) {
        float(text)
    } else if key.starts_with("pipeline.counter.") {
        match text {
            "true" | "false" => Some(Value::Bool(text == "true")),
            t if t.contains(['.', 'e', 'E']) || float_counters.contains(key) => float(t),
            t => int(t).or_else(|| float(t)),
        }
    } else {
        int(text).or_else(|| float(text))
    };
    v.unwrap_or_else(|| Value::String(text.to_string()))
}

/// One stored record as the row its writer kept locally, with its time in nanoseconds for
/// ordering; `None` for a record that is not a row.
fn row_of(entry: &Map<String, Value>, float_counters: &BTreeSet<String>) -> Option<(Row, (u64, u32))> {
    let text = |k: &str| entry.get(k).and_then(Value::as_str);
    let time = pipetel_rows::parse_utc(text("_time")?)?;
    let mut row = Map::new();
    row.insert("event".into(), text("event_name")?.into());
    row.insert("timestamp_ms".into(), time.0.into());
    for key in ["trace_id", "span_id"] {
        if let Some(v) = text(key).filter(|v| !v.is_empty()) {
            row.insert(key.into(), v.into());
        }
    }
    for (k, v) in entry.iter().filter(|(k, _)| k.starts_with("pipeline.")) {
        row.insert(k.clone(), field_value(k, v.as_str()?, float_counters));
    }
    Row::parse(&Value::Object(row).to_string()).ok().map(|r| (r, time))
}

/// Counters of `entry` whose text has a decimal point.
fn float_counters_of(entry: &Map<String, Value>) -> impl Iterator<Item = String> + '_ {
    entry
        .iter()
        .filter(|(k, v)| k.starts_with("pipeline.counter.") && v.as_str().is_some_and(|t| t.contains('.')))
        .map(|(k, _)| k.clone())
}

/// Runs `logsql` against `base`, optionally from `start_ms` on; the rows, oldest first.
/// `float_counters` gathers the counters seen with a decimal point, over calls.
fn query(
    base: &str,
    logsql: &str,
    start_ms: Option<u64>,
    float_counters: &mut BTreeSet<String>,
) -> io::Result<Vec<(Row, (u64, u32))>> {
    let mut form: Vec<(&str, String)> = vec![("query", logsql.to_string())];
    if let Some(ms) = start_ms {
        form.push(("start", show::iso(ms)));
    }
    let url = format!("{}/select/logsql/query", base.trim_end_matches('/'));
    let form_refs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let agent = ureq::AgentBuilder::new().timeout_connect(Duration::from_secs(10)).build();
    let response = match agent.post(&url).send_form(&form_refs) {
        Ok(r) => r,
        Err(ureq::Error::Status(status, r)) => {
            let body = r.into_string().unwrap_or_default();
            return Err(error(io::ErrorKind::InvalidData, format!("{url}: HTTP {status}: {}", body.trim())));
        }
        Err(e) => return Err(error(io::ErrorKind::ConnectionRefused, format!("{url}: {e}"))),
    };
    let mut entries = Vec::new();
    for (n, line) in BufReader::new(response.into_reader()).lines().enumerate() {
        let line = line.map_err(|e| error(e.kind(), format!("{url}: reading the answer: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(&line) {
            Ok(Value::Object(entry)) => {
                float_counters.extend(float_counters_of(&entry));
                entries.push(entry);
            }
            _ => {
                return Err(error(
                    io::ErrorKind::InvalidData,
                    format!("{url}: line {} of the answer is not a JSON object (is this VictoriaLogs?)", n + 1),
                ))
            }
        }
    }
    let mut rows: Vec<(Row, (u64, u32))> = entries.iter().filter_map(|e| row_of(e, float_counters)).collect();
    // `sort by (_time)` already orders them; ties keep the store's order.
    rows.sort_by_key(|(_, t)| *t);
    Ok(rows)
}

/// Checks `url` names a VictoriaLogs this build can reach.
fn check_url(url: &str) -> io::Result<()> {
    if url.starts_with("https://") {
        return Err(error(
            io::ErrorKind::InvalidInput,
            format!("--url {url}: https is not supported by this build; use the store's http:// address"),
        ));
    }
    if !url.starts_with("http://") {
        return Err(error(
            io::ErrorKind::InvalidInput,
            format!("--url {url}: expected the VictoriaLogs base URL, e.g. http://victoria-logs:9428"),
        ));
    }
    Ok(())
}

fn print(rows: &[Row], mode: Mode, out: &mut dyn Write) -> io::Result<()> {
    match mode {
        Mode::List => rows.iter().try_for_each(|r| writeln!(out, "{}", show::row_line(r))),
        Mode::Json => rows.iter().try_for_each(|r| writeln!(out, "{}", r.raw)),
        Mode::Summary => out.write_all(show::summary(rows).as_bytes()),
        Mode::Timeline => out.write_all(show::timeline(rows).as_bytes()),
    }
}

/// `pipetel rows --url URL ...`: the matching rows of the store at `url`, in the view `a`
/// asks for; with `--follow`, then every new row until interrupted.
pub(crate) fn rows(url: &str, a: &RowsArgs, out: &mut dyn Write) -> io::Result<()> {
    check_url(url)?;
    let q = logsql(a);
    let keep = |rows: Vec<(Row, (u64, u32))>| -> Vec<(Row, (u64, u32))> {
        rows.into_iter().filter(|(r, _)| a.filters.matches(r)).collect()
    };
    let mut float_counters = BTreeSet::new();
    let rows = keep(query(url, &q, None, &mut float_counters)?);
    if !a.follow {
        let rows: Vec<Row> = rows.into_iter().map(|(r, _)| r).collect();
        print(&rows, a.mode, out)?;
        return out.flush();
    }
    // Rows already shown, by time and line, for as long as a poll can return them again.
    let mut shown: BTreeMap<((u64, u32), String), ()> = BTreeMap::new();
    let mut batch = rows;
    loop {
        let fresh: Vec<Row> = batch
            .into_iter()
            .filter_map(|(r, t)| shown.insert((t, r.raw.clone()), ()).is_none().then_some(r))
            .collect();
        print(&fresh, a.mode, out)?;
        out.flush()?;
        std::thread::sleep(POLL);
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let from = now_ms.saturating_sub(FOLLOW_WINDOW_MS);
        shown.retain(|(t, _), ()| t.0 + 1000 >= from);
        batch = keep(query(url, &q, Some(from), &mut float_counters)?);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Filters;

    fn args(filters: Filters, service: Option<&str>) -> RowsArgs {
        RowsArgs {
            file: None,
            service: service.map(String::from),
            dir: None,
            filters,
            mode: Mode::List,
            follow: false,
            url: Some("http://127.0.0.1:9428".into()),
        }
    }

    #[test]
    fn filters_become_logsql_with_quoted_values() {
        let f = Filters {
            namespace: Some("zephyr".into()),
            stage: Some("tok \"x\"".into()),
            shard: Some(3),
            ..Filters::default()
        };
        let q = logsql(&args(f, Some("svc")));
        assert_eq!(
            q,
            "\"pipeline.namespace\":* (event_name:=\"zephyr\" or event_name:\"zephyr.\"*) \
             \"pipeline.stage.name\":=\"tok \\\"x\\\"\" \"pipeline.shard.index\":=\"3\" \
             \"service.name\":=\"svc\" | sort by (_time)"
        );
    }

    #[test]
    fn stored_floats_come_back_as_written() {
        // 0.35 is parsed to 0.35000000000000003, and again at a merge to 0.3500000000000001
        // (what a real VictoriaLogs returned for a row's 0.35).
        assert_eq!(vl_parse("0.35"), Some(0.350_000_000_000_000_03));
        assert_eq!(vl_parse("0.35000000000000003"), Some(0.350_000_000_000_000_1));
        assert_eq!(written_float("0.3500000000000001"), Some(0.35));
        for written in
            [0.35, 0.3, 25.985_576_186_226_307, 4_650_474.661_029_901, 1.0 / 3.0, 0.5, 12.0, 9_082.958_322_324_026]
        {
            let mut stored = written;
            for parses in 0..4 {
                assert_eq!(
                    written_float(&format!("{stored}")),
                    Some(written),
                    "{written} parsed {parses} times: {stored}"
                );
                stored = vl_parse(&format!("{stored}")).unwrap_or(stored);
            }
        }
        // The price: a value written a few units in the last place from a shorter decimal
        // comes back as that decimal.
        assert_eq!(written_float("0.30000000000000004"), Some(0.3));
    }

    #[test]
    fn an_entry_becomes_the_local_row() {
        let entry: Map<String, Value> = serde_json::from_str(
            r#"{"_msg":"shard 2 of tokenize start: 0 items","_time":"2026-12-02T10:00:29.297775696Z",
                "event_name":"pipeline.worker","host.name":"node1","pipeline.byte_rate":"0",
                "pipeline.cpu.time_seconds":"0.3500000000000001","pipeline.counter.retries":"2",
                "pipeline.execution.id":"1234","pipeline.items":"64","pipeline.namespace":"pipeline.worker",
                "pipeline.shard.index":"2","pipeline.stage.name":"tokenize","pipeline.status":"start",
                "pipetel.gateway":"gw1","service.name":"pipeline-example","span_id":"095c34e2088ea841",
                "trace_id":"35b8a37c5f18f2bb9351886e30148603"}"#,
        )
        .expect("entry");
        let (row, (ms, ns)) = row_of(&entry, &BTreeSet::new()).expect("a row");
        assert_eq!((ms, ns), (1_796_205_629_297, 775_696));
        assert_eq!(
            row.raw,
            r#"{"event":"pipeline.worker","pipeline.byte_rate":0.0,"pipeline.counter.retries":2,"pipeline.cpu.time_seconds":0.35,"pipeline.execution.id":"1234","pipeline.items":64,"pipeline.namespace":"pipeline.worker","pipeline.shard.index":2,"pipeline.stage.name":"tokenize","pipeline.status":"start","span_id":"095c34e2088ea841","timestamp_ms":1796205629297,"trace_id":"35b8a37c5f18f2bb9351886e30148603"}"#
        );
        // A float counter that held a whole number here and a fraction elsewhere in the answer.
        let floats: BTreeSet<String> = ["pipeline.counter.retries".to_string()].into();
        let (row, _) = row_of(&entry, &floats).expect("a row");
        assert!(row.raw.contains(r#""pipeline.counter.retries":2.0"#), "{}", row.raw);
        assert!(check_url("https://x").is_err() && check_url("x:9428").is_err());
    }
}
