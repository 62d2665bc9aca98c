//! `pipetel rows --url URL`: the rows of a whole fleet from VictoriaLogs, where the gateways
//! write them (`otel-collector/gateway-stores.yaml`), read with the fleet reader of
//! `pipetel-rows` ([`pipetel_rows::fleet`]: the query, the HTTP API, the rows' types, the read
//! timeout and the caps on the answer), the same reader `pipetel.rows.query` uses in Python.
//! Each row comes back as the line its writer kept in its local store, so every filter and view
//! works as on a local store and prints the same thing for the same rows.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::time::Duration;

use pipetel_rows::fleet::{FleetError, FleetErrorKind, FleetReader, FleetRow, Limits, Query};

use crate::args::{Mode, RowsArgs};
use crate::read::Row;
use crate::show;

/// How often `--follow` asks for new rows.
const POLL: Duration = Duration::from_secs(1);

/// How far back each `--follow` poll looks: a row stored later than this after its own time
/// (a gateway's retries after a long outage) is not shown by `--follow`; a plain query shows it.
const FOLLOW_WINDOW_MS: u64 = 120_000;

/// The fleet reader's query for the filters of `a` (the filters the store can apply).
pub(crate) fn query_of(a: &RowsArgs) -> Query {
    let f = &a.filters;
    Query {
        namespace: f.namespace.clone(),
        stage: f.stage.clone(),
        execution: f.execution.clone(),
        shard: f.shard,
        status: f.status.clone(),
        service: a.service.clone(),
    }
}

fn io_error(e: FleetError) -> io::Error {
    let kind = match e.kind() {
        FleetErrorKind::Url => io::ErrorKind::InvalidInput,
        FleetErrorKind::Timeout => io::ErrorKind::TimedOut,
        FleetErrorKind::Connect => io::ErrorKind::ConnectionRefused,
        _ => io::ErrorKind::InvalidData,
    };
    let msg = if e.kind() == FleetErrorKind::Url { format!("--url {e}") } else { e.to_string() };
    io::Error::new(kind, msg)
}

/// Runs `logsql` from `start` on; the rows, oldest first, with their store times.
fn query(reader: &mut FleetReader, logsql: &str, start: Option<&str>) -> io::Result<Vec<(Row, (u64, u32))>> {
    let rows = reader.rows(logsql, start, None).map_err(io_error)?;
    Ok(rows.iter().filter_map(|r: &FleetRow| Row::parse(&r.to_json()).ok().map(|row| (row, r.time))).collect())
}

fn print(rows: &[Row], mode: Mode, out: &mut dyn Write) -> io::Result<()> {
    match mode {
        Mode::List => rows.iter().try_for_each(|r| writeln!(out, "{}", show::row_line(r))),
        Mode::Json => rows.iter().try_for_each(|r| writeln!(out, "{}", pipetel_rows::escape_json_controls(&r.raw))),
        Mode::Summary => out.write_all(show::summary(rows).as_bytes()),
        Mode::Timeline => out.write_all(show::timeline(rows).as_bytes()),
    }
}

/// `pipetel rows --url URL ...`: the matching rows of the store at `url`, in the view `a`
/// asks for; with `--follow`, then every new row until interrupted.
pub(crate) fn rows(url: &str, a: &RowsArgs, out: &mut dyn Write) -> io::Result<()> {
    let limits = Limits {
        timeout: a.timeout.unwrap_or(Limits::DEFAULT_TIMEOUT),
        max_bytes: a.max_bytes.unwrap_or(Limits::DEFAULT_MAX_BYTES),
        ..Limits::default()
    };
    let mut reader = FleetReader::new(url, limits).map_err(io_error)?;
    let q = query_of(a).logsql();
    let keep = |rows: Vec<(Row, (u64, u32))>| -> Vec<(Row, (u64, u32))> {
        rows.into_iter().filter(|(r, _)| a.filters.matches(r)).collect()
    };
    let rows = keep(query(&mut reader, &q, None)?);
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
        batch = keep(query(&mut reader, &q, Some(&show::iso(from)))?);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Filters;

    fn args(filters: Filters, service: Option<&str>) -> RowsArgs {
        RowsArgs {
            service: service.map(String::from),
            filters,
            url: Some("http://127.0.0.1:9428".into()),
            ..RowsArgs::default()
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
        let q = query_of(&args(f, Some("svc"))).logsql();
        assert_eq!(
            q,
            "\"pipeline.namespace\":* (event_name:=\"zephyr\" or event_name:\"zephyr.\"*) \
             \"pipeline.stage.name\":=\"tok \\\"x\\\"\" \"pipeline.shard.index\":=\"3\" \
             \"service.name\":=\"svc\" | sort by (_time)"
        );
    }

    #[test]
    fn a_bad_url_names_the_flag() {
        let a = args(Filters::default(), None);
        for url in ["https://x", "x:9428"] {
            let e = rows(url, &a, &mut Vec::new()).expect_err("refused");
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
            assert!(e.to_string().starts_with(&format!("--url {url}: ")), "{e}");
        }
    }
}
