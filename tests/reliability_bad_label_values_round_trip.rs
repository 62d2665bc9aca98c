//! Hostile label values — quotes, backslashes, newlines, a carriage return, a tab, NUL bytes,
//! 64 KiB strings, non-ASCII text — through a registry counter's label and through stage names
//! (a stage name is a label value of every stage and worker metric): real Prometheus scrapes the
//! pull endpoint with an empty `lastError` and stores the exact strings, `promtool check metrics`
//! accepts the exposition, and the Python `prometheus_client` parser reads back the exact
//! strings. Invalid metric and label names are errors naming the culprit, and leave nothing in
//! the exposition.
//!
//! NUL needs no special handling: the text format allows any UTF-8 in a label value and escapes
//! only `\`, `"` and newline; Prometheus, promtool and the Python parser all read a raw NUL back
//! unchanged (this test pins that), so the encoder writes it as it is rather than altering the
//! value.
#![cfg(feature = "e2e")]

// Its own test binary: it calls `pipetel::init`, which a process does once.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use pipetel::registry::RegistryError;
use support::{peers_available, python_label_values, scrape_checked, Peer, Prometheus};

/// 64 KiB: ASCII with every escaped character sprinkled through it.
fn long_value() -> String {
    let mut s = String::with_capacity(64 * 1024);
    let mut i = 0u32;
    while s.len() < 64 * 1024 - 8 {
        s.push_str(match i % 5 {
            0 => "\"",
            1 => "\\",
            2 => "\n",
            3 => "\0",
            _ => "abcdefghijklmnop",
        });
        i += 1;
    }
    s
}

fn hostile_values() -> Vec<String> {
    vec![
        "say \"hi\"".into(),
        "C:\\models\\".into(),
        "two\nlines\n".into(),
        "cr\rand\ttab".into(),
        "nul\0inside\0".into(),
        "\0".into(),
        "日本語 ✓ émoji 🦀".into(),
        "we\"ird\\n\0…".into(),
        "\\\"\\n".into(),
        long_value(),
    ]
}

fn short(v: &str) -> String {
    let mut s: String = v.chars().take(40).collect();
    if s.len() < v.len() {
        s.push_str(&format!("…({} bytes)", v.len()));
    }
    format!("{s:?}")
}

#[test]
fn hostile_label_values_round_trip_through_prometheus_promtool_and_python() {
    if !peers_available(&[Peer::Prometheus, Peer::Promtool, Peer::Python]) {
        return;
    }
    let telemetry = pipetel::init(
        pipetel::Config::default()
            .with_service_name("bad-input")
            .with_prometheus_host("127.0.0.1")
            .with_prometheus_port(0)
            .with_console_log(false)
            // The hostile stage names reach worker series of ended shards too.
            .with_shard_metrics(pipetel::config::ShardMetrics::All),
    )
    .expect("init");
    let addr = telemetry.prometheus_addr().expect("pull endpoint");
    let values = hostile_values();

    // Invalid names: errors that name the culprit; nothing registered.
    let registry = pipetel::Registry::new("hostile").expect("registry");
    for bad in ["Bad-Name", "9lives", "__reserved", "sp ace", "é"] {
        let err = registry.counter(bad, "never").expect_err(bad);
        assert!(
            matches!(err, RegistryError::InvalidName { .. }) && err.to_string().contains(&format!("{bad:?}")),
            "{err}"
        );
    }
    for bad in ["bad-label", "1st", "__name__", "otel_scope_name"] {
        let err = registry.counter_vec("labelled", "never", &[bad]).expect_err(bad);
        assert!(matches!(err, RegistryError::InvalidLabelName { .. }) && err.to_string().contains(bad), "{err}");
    }
    assert!(matches!(pipetel::Registry::new("Bad Prefix"), Err(RegistryError::InvalidName { .. })));
    // Stage counter keys: `/`-separated segments of letters, digits, `_`, `-`, `.` (as Zephyr's
    // `zephyr/item_count`); a space, an empty segment or a control character is refused.
    for bad in ["bad key", "zephyr//items", "/leading", "tab\tkey"] {
        assert!(pipetel::pipeline::CounterKey::new(bad).is_err(), "{bad:?} accepted as a counter key");
    }
    assert!(pipetel::pipeline::CounterKey::new("zephyr/item_count").is_ok());

    // Registry: value i carries i + 1.
    let counter = registry.counter_vec("values", "Hostile label values", &["v"]).expect("counter");
    for (i, v) in values.iter().enumerate() {
        counter.with([("v", v.as_str())]).expect("any string is a valid label value").inc_by((i + 1) as f64);
    }
    // Stage path: a stage name is a label value of every stage and worker metric.
    for (i, v) in values.iter().enumerate() {
        let stage = pipetel::stage(v.as_str()).execution_id("hostile").shards(1).start();
        let shard = stage.shard(0).start();
        shard.record(i as u64 + 1, 1);
        shard.finish();
        let row = stage.finish();
        assert_eq!(row.stage_name, *v);
    }
    let expected: BTreeMap<String, f64> = values.iter().enumerate().map(|(i, v)| (v.clone(), (i + 1) as f64)).collect();
    let expected_names: BTreeSet<String> = values.iter().cloned().collect();

    let body = scrape_checked(&addr.to_string());
    assert!(!body.contains("never"), "an invalid metric reached the exposition");

    // The Python reference parser reads back the exact strings.
    let py: BTreeSet<String> = python_label_values(&body, "hostile_values_total", "v").into_iter().collect();
    assert_eq!(py, expected_names, "registry label values through the Python parser");
    let py: BTreeSet<String> =
        python_label_values(&body, "pipeline_stage_items_total", "pipeline_stage_name").into_iter().collect();
    assert_eq!(py, expected_names, "stage names through the Python parser");
    let py: BTreeSet<String> =
        python_label_values(&body, "pipeline_worker_items_total", "pipeline_stage_name").into_iter().collect();
    assert_eq!(py, expected_names, "stage names of worker series through the Python parser");

    // Real Prometheus: scrape succeeds, exact strings and values stored.
    let prometheus = Prometheus::scraping_cleanly(addr.port());
    let t = Duration::from_secs(20);
    let series = prometheus.wait_for_value("hostile_values_total", t, |x| x >= 1.0);
    let got: BTreeMap<String, f64> = series.iter().map(|(l, v)| (l["v"].clone(), *v)).collect();
    assert_eq!(got.len(), expected.len(), "series: {:?}", got.keys().map(|k| short(k)).collect::<Vec<_>>());
    for (v, n) in &expected {
        assert_eq!(got.get(v), Some(n), "registry value {} in Prometheus", short(v));
    }
    for metric in ["pipeline_stage_items_total", "pipeline_worker_items_total"] {
        let series =
            prometheus.wait_for_value(&format!("{metric}{{pipeline_execution_id=\"hostile\"}}"), t, |x| x >= 1.0);
        let got: BTreeMap<String, f64> = series.iter().map(|(l, v)| (l["pipeline_stage_name"].clone(), *v)).collect();
        assert_eq!(got, expected, "{metric} by stage name in Prometheus");
    }
    // Still healthy after many scrapes.
    assert_eq!(prometheus.wait_until_up(Duration::from_secs(10))[0]["lastError"], "");
    drop(telemetry);
}
