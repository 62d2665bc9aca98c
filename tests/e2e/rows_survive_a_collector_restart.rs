//! The rows (log records) wait in a persistent sending queue (`file_storage`) in every shipped
//! collector config, so they survive the collector being killed while its downstream is down.
//! For `config.yaml` and `gateway.yaml` (downstream: Loki's OTLP endpoint) and `agent.yaml`
//! (downstream: the gateway pool), each run by the real collector: the pipeline example pushes
//! its rows to the collector while nothing listens downstream (a port held bound, refusing every
//! connection) and exits having delivered everything to the collector; the collector is
//! SIGKILLed, started again on the same queue folder while the downstream is still down, then the
//! downstream (a collector writing what it receives as OTLP JSON) comes up on that port. Every
//! row arrives, exactly once, with every field.
//!
//! The check is not vacuous: `config.yaml` with the one `storage: file_storage` line of its Loki
//! exporter removed (an in-memory queue) loses every row of the killed collector, while rows sent
//! after its restart arrive.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::otelcol::shipped_config;
use crate::support::otlp_json::{assert_rows_arrived, log_records_in, rows_missing, LogRecord, Row};
use crate::support::{free_port, turn, wait_for, workspace_root, Otelcol, PipelineRun, RefusingPort};

/// Where a config sends the rows.
#[derive(Clone, Copy)]
enum Downstream {
    /// Loki's OTLP endpoint (`OTELCOL_LOKI_URL`, OTLP/HTTP): `config.yaml`, `gateway.yaml`.
    Loki,
    /// The gateway pool (`OTELCOL_GATEWAY_HOSTNAME` and `OTELCOL_GATEWAY_PORT`, OTLP gRPC): `agent.yaml`.
    Gateways,
}

impl Downstream {
    /// The collector's settings that point it at `port` on loopback.
    fn env(self, port: u16) -> Vec<(&'static str, String)> {
        match self {
            Self::Loki => vec![("OTELCOL_LOKI_URL", format!("http://127.0.0.1:{port}"))],
            // The DNS resolver of the loadbalancing exporter takes an address as it is.
            Self::Gateways => {
                vec![("OTELCOL_GATEWAY_HOSTNAME", "127.0.0.1".to_string()), ("OTELCOL_GATEWAY_PORT", port.to_string())]
            }
        }
    }
}

/// A temporary folder, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("pipetel-{what}-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- kept {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The downstream, up: a collector on `port` (OTLP/HTTP, logs also at `/otlp/v1/logs`, for Loki;
/// OTLP gRPC for the gateways) writing every log request it gets into `dir`.
fn downstream_up(kind: Downstream, port: u16, dir: &Path) -> Otelcol {
    let sink = Otelcol::with_config("downstream", &workspace_root().join("tests/support/otelcol-sink.yaml"))
        .env("OTELCOL_SINK_DIR", dir.display().to_string());
    match kind {
        Downstream::Loki => sink.env("OTELCOL_OTLP_HTTP_ENDPOINT", format!("127.0.0.1:{port}")),
        Downstream::Gateways => sink.grpc_port(port),
    }
    .start()
}

/// Every log record the downstream wrote so far.
fn received(dir: &Path) -> Vec<LogRecord> {
    log_records_in(&std::fs::read_to_string(dir.join("logs.jsonl")).unwrap_or_default())
}

/// The collector running `config` on the queue folder `storage`, sending rows to `port`.
fn collector(name: &str, config: &Path, kind: Downstream, port: u16, storage: &Path) -> Otelcol {
    let mut builder = Otelcol::with_config(name, config).env("OTELCOL_FILE_STORAGE_DIR", storage.display().to_string());
    for (key, value) in kind.env(port) {
        builder = builder.env(key, value);
    }
    builder.start()
}

/// Runs the pipeline example against `collector` and returns its rows, once it exited having
/// delivered everything (its shutdown reported no loss: the collector accepted every row).
fn send_rows(collector: &Otelcol) -> Vec<Row> {
    let run = PipelineRun::pushing(&collector.endpoint("grpc"), "grpc", &["--seconds", "1", "--shards", "4"]);
    assert!(!run.output.contains("shutdown:"), "the collector refused data:\n{}", run.output);
    assert!(run.rows.len() >= 15, "3 stage rows and 12 worker rows at least: {}", run.rows.len());
    run.rows
}

/// The rows that arrived as more than one log record (matched as `otlp_json::record_of` does: by
/// event, span, millisecond and status), with their count.
fn duplicated(rows: &[Row], logs: &[LogRecord]) -> Vec<(Row, usize)> {
    let copies = |row: &Row| {
        let event = row["event"].as_str().unwrap_or_default();
        let span = row.get("span_id").and_then(|v| v.as_str()).unwrap_or_default();
        let ms = row["timestamp_ms"].as_u64().unwrap_or_default();
        logs.iter()
            .filter(|l| {
                l.event_name == event
                    && l.span_id == span
                    && l.time_unix_nano / 1_000_000 == ms
                    && l.attributes.get("pipeline.status") == row.get("pipeline.status")
            })
            .count()
    };
    rows.iter().map(|r| (r.clone(), copies(r))).filter(|(_, n)| *n > 1).collect()
}

/// Rows sent, the collector SIGKILLed with its downstream down, restarted on the same queue
/// folder, the downstream up: returns the rows sent before the kill and what the downstream had
/// received once each of them arrived (and the folder it wrote to).
fn kill_and_restart(config: &Path, kind: Downstream) -> (Vec<Row>, Vec<LogRecord>, TempDir) {
    let storage = TempDir::new("queue");
    let received_dir = TempDir::new("downstream");
    let down = RefusingPort::new();
    let port = down.port();

    let first = collector("collector", config, kind, port, &storage.0);
    let rows = send_rows(&first);
    // The rows are in the queue on disk: the collector answered the program after storing them.
    let files: Vec<String> = std::fs::read_dir(&storage.0)
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    drop(first); // SIGKILL
    assert!(received(&received_dir.0).is_empty(), "nothing can have arrived while the downstream was down");

    let restarted = collector("collector-restarted", config, kind, port, &storage.0);
    // The restarted collector tries, and fails, while the downstream is still down.
    std::thread::sleep(Duration::from_secs(2));
    drop(down);
    let downstream = downstream_up(kind, port, &received_dir.0);
    let logs = wait_for(
        &format!("the rows sent before the SIGKILL at the downstream (queue folder held {files:?})"),
        Duration::from_secs(90),
        || {
            let logs = received(&received_dir.0);
            (rows_missing(&rows, &logs) == 0).then_some(logs)
        },
    );
    drop(restarted);
    drop(downstream);
    (rows, logs, received_dir)
}

fn rows_survive(file: &str, kind: Downstream, extra: &[&str]) {
    let _turn = turn(module_path!());
    let (rows, logs, _dir) = kill_and_restart(&shipped_config(file), kind);
    assert_rows_arrived(&rows, &logs, extra);
    assert_eq!(duplicated(&rows, &logs), Vec::new(), "{file}: rows delivered more than once");
}

#[test]
fn single_collector_rows_survive_a_sigkill_while_loki_is_down() {
    rows_survive("config.yaml", Downstream::Loki, &[]);
}

#[test]
fn gateway_rows_survive_a_sigkill_while_loki_is_down() {
    rows_survive("gateway.yaml", Downstream::Loki, &["pipetel.gateway"]);
}

#[test]
fn agent_rows_survive_a_sigkill_while_the_gateways_are_down() {
    rows_survive("agent.yaml", Downstream::Gateways, &["host.name"]);
}

#[test]
fn without_the_queue_on_disk_the_killed_collectors_rows_are_lost() {
    let _turn = turn(module_path!());
    // config.yaml with an in-memory queue for the rows: the one line naming the storage removed.
    let text = std::fs::read_to_string(shipped_config("config.yaml")).expect("config.yaml");
    let loki = text.find("  otlphttp/loki:").expect("the Loki exporter");
    let line = "      storage: file_storage\n";
    let at = loki + text[loki..].find(line).expect("the Loki exporter's storage line");
    let mutant_dir = TempDir::new("in-memory-config");
    let mutant = mutant_dir.0.join("config.yaml");
    std::fs::write(&mutant, format!("{}{}", &text[..at], &text[at + line.len()..])).expect("write the config");

    let storage = TempDir::new("queue");
    let received_dir = TempDir::new("downstream");
    let down = RefusingPort::new();
    let port = down.port();
    let first = collector("collector", &mutant, Downstream::Loki, port, &storage.0);
    let lost = send_rows(&first);
    drop(first); // SIGKILL
    let restarted = collector("collector-restarted", &mutant, Downstream::Loki, port, &storage.0);
    drop(down);
    let _downstream = downstream_up(Downstream::Loki, port, &received_dir.0);
    // Rows sent after the restart arrive: the collector and the downstream work.
    let later = send_rows(&restarted);
    let logs = wait_for("the rows sent after the restart", Duration::from_secs(60), || {
        let logs = received(&received_dir.0);
        (rows_missing(&later, &logs) == 0).then_some(logs)
    });
    assert_eq!(rows_missing(&lost, &logs), lost.len(), "an in-memory queue kept rows across a SIGKILL");
}
