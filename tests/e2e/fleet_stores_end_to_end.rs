//! The fleet's path on loopback, every part real: the pipeline example pushes OTLP to an agent
//! (`otel-collector/agent.yaml` as shipped), whose loadbalancing exporters send to a gateway
//! running `otel-collector/gateway-stores.yaml`, which writes metrics to VictoriaMetrics (remote
//! write), rows to VictoriaLogs (OTLP logs) and traces to Jaeger v2 (OTLP). Asserted on what the
//! stores answer: the stage and worker totals in PromQL equal what the example printed; every
//! row the example kept locally is in VictoriaLogs once, with every field and the stream fields
//! (the host being the agent's node name, from the record's resource);
//! each row's trace id resolves in Jaeger to a trace holding the row's span; and
//! `pipetel rows --url` on VictoriaLogs prints, in every view and with filters, what
//! `pipetel rows` prints on the same rows in a local store.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::support::otlp_json::Row;
use crate::support::stores::Stores;
use crate::support::workspace::built_binary;
use crate::support::{free_port, turn, wait_for, Otelcol, PipelineRun};

/// Shards per stage of the example run.
const SHARDS: u32 = 4;

/// The node name the agent puts on every resource (`host.name` from its `NODE_NAME`): a row's
/// `host.name` travels on its record's resource, so the store holds the node's name.
const NODE: &str = "node-1";

/// Whether a VictoriaLogs entry carries `row`: the same stream (`event_name`), span, time to
/// the millisecond and every field with an equal value (VictoriaLogs keeps every value as text:
/// numbers are compared as numbers).
fn entry_holds_row(entry: &Map<String, Value>, row: &Row) -> Result<(), String> {
    let text = |k: &str| entry.get(k).and_then(Value::as_str);
    for (key, value) in row {
        let stored = match key.as_str() {
            "event" => text("event_name"),
            "host.name" => {
                if text(key) != Some(NODE) {
                    return Err(format!("{key}: stored {:?}, the agent's node name is {NODE}", text(key)));
                }
                continue;
            }
            "timestamp_ms" => {
                // `_time` has nanoseconds; the local row keeps the milliseconds, truncated.
                let ms = text("_time").and_then(rfc3339_ms);
                if ms != value.as_u64() {
                    return Err(format!("_time {:?} is not {value} ms", text("_time")));
                }
                continue;
            }
            k => text(k),
        };
        let Some(stored) = stored else { return Err(format!("no field {key}")) };
        let equal = match value {
            Value::String(s) => s == stored,
            // VictoriaLogs stores a column of decimals as floats parsed its own way (digits times
            // a power of ten), which can land one unit in the last place away: 0.35 comes back
            // as 0.3500000000000001. Integers below 2^53 come back exact.
            Value::Number(n) => n.as_f64().zip(stored.parse::<f64>().ok()).is_some_and(|(a, b)| {
                a == b || (n.is_f64() && (a - b).abs() <= 4.0 * f64::EPSILON * a.abs().max(b.abs()))
            }),
            Value::Bool(b) => stored == b.to_string(),
            other => stored == *other,
        };
        if !equal {
            return Err(format!("{key}: stored {stored:?}, written {value}"));
        }
    }
    Ok(())
}

/// Milliseconds since the epoch of an RFC 3339 UTC time such as `2026-12-02T10:00:29.29980714Z`.
fn rfc3339_ms(t: &str) -> Option<u64> {
    pipetel_rows::parse_utc(t).map(|(ms, _)| ms)
}

#[test]
fn agent_gateway_and_the_three_stores_hold_the_run() {
    let _turn = turn(module_path!());
    let Some(stores) = Stores::start(module_path!()) else { return };
    let mut gateway = Otelcol::shipped("gateway-stores", "gateway-stores.yaml");
    for (key, value) in stores.gateway_env() {
        gateway = gateway.env(key, value);
    }
    let gateway = gateway.start();
    // The agent's DNS resolver takes an address as the pool's name: a pool of one.
    let agent = Otelcol::shipped("agent", "agent.yaml")
        .env("OTELCOL_GATEWAY_HOSTNAME", gateway.host.clone())
        .env("OTELCOL_GATEWAY_PORT", gateway.grpc_port.to_string())
        .env("NODE_NAME", NODE)
        .start();

    let run =
        PipelineRun::pushing(&agent.endpoint("grpc"), "grpc", &["--seconds", "2", "--shards", &SHARDS.to_string()]);
    let exec = &run.execution;

    // Metrics: the totals the example printed, in VictoriaMetrics.
    let mut expected = Vec::new();
    for (stage, (_, items)) in &run.stages {
        let sel = format!("job=\"pipeline-example\",pipeline_execution_id=\"{exec}\",pipeline_stage_name=\"{stage}\"");
        expected.push((format!("pipeline_stage_items_total{{{sel}}}"), *items));
        expected.push((format!("pipeline_stage_bytes_total{{{sel}}}"), items * 512.0));
        expected.push((format!("sum(pipeline_worker_items_total{{{sel}}})"), *items));
        expected.push((format!("count(pipeline_worker_items_total{{{sel}}})"), f64::from(SHARDS)));
    }
    stores.metrics.wait_for_values(expected, Duration::from_secs(60));

    // Rows: each one in VictoriaLogs once, every field kept, under its stream fields.
    let query = format!("{{pipeline.execution.id=\"{exec}\"}} \"pipeline.namespace\":*");
    let entries = wait_for("every row in VictoriaLogs", Duration::from_secs(60), || {
        let entries = stores.logs.query(&query).ok()?;
        (entries.len() >= run.rows.len()).then_some(entries)
    });
    assert_eq!(entries.len(), run.rows.len(), "VictoriaLogs holds more entries than rows were written");
    for row in &run.rows {
        let holding: Vec<_> = entries.iter().filter(|e| entry_holds_row(e, row).is_ok()).collect();
        if holding.len() != 1 {
            let near: Vec<_> = entries
                .iter()
                .filter(|e| {
                    e.get("span_id") == row.get("span_id") && e.get("pipeline.status") == row.get("pipeline.status")
                })
                .map(|e| entry_holds_row(e, row))
                .collect();
            panic!("row {row:?} is in VictoriaLogs {} times; entries of its span and status: {near:?}", holding.len());
        }
        let stream = holding[0].get("_stream").and_then(Value::as_str).unwrap_or_default();
        for field in ["service.name", "pipeline.namespace", "pipeline.stage.name", "pipeline.execution.id"] {
            assert!(stream.contains(&format!("{field}=")), "{field} is not a stream field: {stream}");
        }
    }

    remote_rows_equal_local(&stores.logs.url, &run);

    // Traces: every row's trace id resolves in Jaeger to a trace holding the row's span.
    let traces: BTreeSet<(&str, &str)> =
        run.rows.iter().filter_map(|r| Some((r.get("trace_id")?.as_str()?, r.get("span_id")?.as_str()?))).collect();
    assert!(traces.len() >= 3 * SHARDS as usize, "rows without their span: {traces:?}");
    for (trace_id, span_id) in traces {
        let spans = wait_for(&format!("span {span_id} of trace {trace_id} in Jaeger"), Duration::from_secs(60), || {
            let spans = stores.traces.trace(trace_id).ok()??;
            spans.iter().any(|s| s["spanID"] == span_id).then_some(spans)
        });
        assert!(spans.iter().all(|s| s["traceID"] == trace_id), "{spans:?}");
    }
}

/// `--json` lines of the store against the local ones, row by row (matched by span, status and
/// time): the same keys, equal text and integers, floats within a few units in the last place
/// (VictoriaLogs' float columns; see `crates/pipetel-cli/src/remote.rs`).
fn json_rows_equal(got: &[String], want: &[String], args: &[&str]) {
    let parse = |l: &String| -> Map<String, Value> { serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")) };
    let key = |m: &Map<String, Value>| {
        ["span_id", "pipeline.status", "timestamp_ms", "pipeline.shard.index"].map(|k| m.get(k).cloned())
    };
    let mut remote: Vec<Map<String, Value>> = got.iter().map(parse).collect();
    assert_eq!(got.len(), want.len(), "pipetel rows --url {args:?}: {} rows, locally {}", got.len(), want.len());
    let mut differences = Vec::new();
    for local in want.iter().map(parse) {
        let Some(i) = remote.iter().position(|r| key(r) == key(&local)) else {
            differences.push(format!("no remote row for {local:?}"));
            continue;
        };
        let mut r = remote.swap_remove(i);
        // The store keeps the resource's host and pid on every row; a local row names them on
        // its start row only. The host is the agent's node name there.
        let mut local = local;
        if local.contains_key("host.name") {
            local.insert("host.name".into(), NODE.into());
        }
        for resource in ["host.name", "process.pid"] {
            if !local.contains_key(resource) && r.remove(resource).is_none() {
                differences.push(format!("no {resource} in the remote row {r:?}"));
            }
        }
        let keys = |m: &Map<String, Value>| m.keys().cloned().collect::<Vec<_>>();
        if keys(&r) != keys(&local) {
            differences.push(format!("keys {:?} vs local {:?}", keys(&r), keys(&local)));
        }
        for (k, v) in &local {
            let close = match (v, r.get(k)) {
                (Value::Number(a), Some(Value::Number(b))) if a.is_f64() && b.is_f64() => {
                    let (a, b) = (a.as_f64().unwrap_or(f64::NAN), b.as_f64().unwrap_or(f64::NAN));
                    (a - b).abs() <= 4.0 * f64::EPSILON * a.abs().max(b.abs())
                }
                (v, other) => Some(v) == other,
            };
            if !close {
                differences.push(format!("{k}: remote {:?}, local {v}", r.get(k)));
            }
        }
    }
    assert!(differences.is_empty(), "pipetel rows --url {args:?} differs from the local store: {differences:#?}");
}

/// Runs `pipetel rows` with `args`; its output, or a panic showing what it said.
fn pipetel_rows(pipetel: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(pipetel).arg("rows").args(args).output().expect("run pipetel rows");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "pipetel rows {args:?} failed: {stderr}");
    stdout.into_owned()
}

/// `pipetel rows --url` on the store against `pipetel rows FILE` on the run's own rows: the
/// same text in every view, with and without filters.
fn remote_rows_equal_local(logs_url: &str, run: &PipelineRun) {
    let pipetel = built_binary("pipetel", &["-p", "pipetel-cli", "--bin", "pipetel"]);
    let file = std::env::temp_dir().join(format!("pipetel-fleet-rows-{}-{}.jsonl", std::process::id(), free_port()));
    let lines: String = run.rows.iter().map(|r| format!("{}\n", Value::Object(r.clone()))).collect();
    std::fs::write(&file, lines).expect("write the local rows");
    let local = file.to_string_lossy().into_owned();
    let exec = run.execution.as_str();
    let cases: [&[&str]; 8] = [
        &["--execution", exec],
        &["--execution", exec, "--json"],
        &["--execution", exec, "--summary"],
        &["--execution", exec, "--timeline"],
        &["--execution", exec, "--stage", "tokenize", "--status", "failed"],
        &["--execution", exec, "--shard", "2", "--namespace", "pipeline.worker"],
        &["--execution", exec, "--namespace", "pipeline", "--stage", "index", "--json"],
        &["--execution", exec, "--status", "running", "--summary"],
    ];
    for args in cases {
        let want = pipetel_rows(&pipetel, &[&[local.as_str()], args].concat());
        assert!(!want.is_empty(), "no local rows for {args:?}");
        let got = pipetel_rows(&pipetel, &[&["--url", logs_url], args].concat());
        if args.iter().any(|a| ["--summary", "--timeline"].contains(a)) {
            assert_eq!(got, want, "pipetel rows --url {args:?} differs from the local store");
        } else {
            // One row per line, oldest first on both sides; rows of the same millisecond are in
            // the order they were appended locally and in nanosecond order in the store, which
            // for rows of different threads can differ.
            let sorted = |text: &str| {
                let mut lines: Vec<String> = text.lines().map(String::from).collect();
                lines.sort();
                lines
            };
            let (got_lines, want_lines) = (sorted(&got), sorted(&want));
            if args.contains(&"--json") {
                json_rows_equal(&got_lines, &want_lines, args);
                continue;
            }
            let only =
                |a: &[String], b: &[String]| -> Vec<String> { a.iter().filter(|l| !b.contains(l)).cloned().collect() };
            assert!(
                got_lines == want_lines,
                "pipetel rows --url {args:?} differs from the local store: only remote {:#?}, only local {:#?}",
                only(&got_lines, &want_lines),
                only(&want_lines, &got_lines)
            );
            let times: Vec<u64> = got
                .lines()
                .map(|l| match serde_json::from_str::<Value>(l) {
                    Ok(v) => v["timestamp_ms"].as_u64().unwrap_or_default(),
                    Err(_) => l.get(..24).and_then(rfc3339_ms).unwrap_or_default(),
                })
                .collect();
            assert!(times.windows(2).all(|w| w[0] <= w[1]), "pipetel rows --url {args:?} is not in time order:\n{got}");
        }
    }
    let _ = std::fs::remove_file(&file);
}
