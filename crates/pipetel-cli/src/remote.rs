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

fn print(rows: &[Row], mode: Mode, lost: &show::Lost, out: &mut dyn Write) -> io::Result<()> {
    match mode {
        Mode::List => show::listing(rows, lost, out),
        Mode::Json => rows.iter().try_for_each(|r| writeln!(out, "{}", pipetel_rows::escape_json_controls(&r.raw))),
        Mode::Summary => out.write_all(show::summary(rows, lost).as_bytes()),
        Mode::Timeline => out.write_all(show::timeline(rows, lost).as_bytes()),
    }
}

/// The fleet's store read as it grows: every matching row, then at each [`FleetFollower::poll`]
/// the rows stored since (each once), for `--follow` and `pipetel top --url`.
pub(crate) struct FleetFollower<'a> {
    reader: FleetReader,
    logsql: String,
    a: &'a RowsArgs,
    /// Rows already returned, by time and line, for as long as a poll can return them again.
    shown: BTreeMap<((u64, u32), String), ()>,
}

impl<'a> FleetFollower<'a> {
    /// Connects to the store at `url` with the limits and filters of `a`.
    pub(crate) fn new(url: &str, a: &'a RowsArgs) -> io::Result<FleetFollower<'a>> {
        let limits = Limits {
            timeout: a.timeout.unwrap_or(Limits::DEFAULT_TIMEOUT),
            max_bytes: a.max_bytes.unwrap_or(Limits::DEFAULT_MAX_BYTES),
            ..Limits::default()
        };
        let reader = FleetReader::new(url, limits).map_err(io_error)?;
        Ok(FleetFollower { reader, logsql: query_of(a).logsql(), a, shown: BTreeMap::new() })
    }

    fn query(&mut self, start: Option<&str>) -> io::Result<Vec<(Row, (u64, u32))>> {
        let rows = query(&mut self.reader, &self.logsql, start)?;
        Ok(rows.into_iter().filter(|(r, _)| self.a.filters.matches(r)).collect())
    }

    /// Every matching row in the store now, oldest first.
    pub(crate) fn all(&mut self) -> io::Result<Vec<Row>> {
        let rows = self.query(None)?;
        Ok(self.fresh(rows))
    }

    /// The rows stored since the last call (stored at most [`FOLLOW_WINDOW_MS`] after their time).
    pub(crate) fn poll(&mut self) -> io::Result<Vec<Row>> {
        let from = crate::lost::now_ms().saturating_sub(FOLLOW_WINDOW_MS);
        self.shown.retain(|(t, _), ()| t.0 + 1000 >= from);
        let rows = self.query(Some(&show::iso(from)))?;
        Ok(self.fresh(rows))
    }

    fn fresh(&mut self, rows: Vec<(Row, (u64, u32))>) -> Vec<Row> {
        rows.into_iter().filter_map(|(r, t)| self.shown.insert((t, r.raw.clone()), ()).is_none().then_some(r)).collect()
    }
}

/// `pipetel rows --url URL ...`: the matching rows of the store at `url`, in the view `a`
/// asks for; with `--follow`, then every new row until interrupted.
pub(crate) fn rows(url: &str, a: &RowsArgs, out: &mut dyn Write) -> io::Result<()> {
    let mut fleet = FleetFollower::new(url, a)?;
    let rows = fleet.all()?;
    if !a.follow {
        // With --status the store leaves out the rows that end a shard: lost cannot be judged.
        let lost = match a.filters.status {
            None => show::Lost::judge(&rows, &crate::lost::LostRule::now(a.sample_interval)),
            Some(_) => show::Lost::default(),
        };
        print(&rows, a.mode, &lost, out)?;
        return out.flush();
    }
    let mut batch = rows;
    loop {
        print(&batch, a.mode, &show::Lost::default(), out)?;
        out.flush()?;
        std::thread::sleep(POLL);
        batch = fleet.poll()?;
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
