//! Shared by the in-process pipeline tests that read their rows file back: the configuration
//! they start from, and the rows they check.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// `pipetel-<name>-<pid>.jsonl` in the temporary folder, removed if a former run left it.
pub fn fresh_rows_file(name: &str) -> PathBuf {
    let rows_file = std::env::temp_dir().join(format!("pipetel-{name}-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&rows_file);
    rows_file
}

/// `service` writing its rows to `rows_file`, with the pull endpoint on a free port and no
/// console output.
pub fn rows_config(service: &str, rows_file: &Path) -> pipetel::Config {
    pipetel::Config::default()
        .with_service_name(service)
        .with_rows_file(rows_file)
        .with_prometheus_port(0)
        .with_console_log(false)
        // Ended shards keep their worker series: these tests read them after the end rows.
        .with_shard_metrics(pipetel::config::ShardMetrics::All)
}

/// Every row of a rows file, in order.
pub fn rows(rows_file: &Path) -> Vec<Value> {
    std::fs::read_to_string(rows_file)
        .expect("rows")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("row"))
        .collect()
}

/// The stage rows (`event` `pipeline.stage`) of a rows file, by stage name.
pub fn stage_rows(rows_file: &Path) -> BTreeMap<String, Value> {
    rows(rows_file)
        .into_iter()
        .filter(|r| r["event"] == "pipeline.stage")
        .map(|r| (r["pipeline.stage.name"].as_str().expect("name").to_string(), r))
        .collect()
}
