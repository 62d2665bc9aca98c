//! A cardinality flood: a user puts a request id into a label. 100,000 distinct values go into
//! an OTel counter (`pipetel::meter()`), 100,000 into a labelled registry counter, and a stage
//! of 1,500 shards exceeds the limit with its worker series — all under
//! `with_cardinality_limit(1000)`. The exposition keeps at most 1,000 series per instrument plus
//! one `otel_metric_overflow="true"` series; for the OTel counter that series holds the excess
//! exactly (nothing lost) and a second flood of 100,000 new ids adds no series and no memory;
//! pipetel warns once about the worker series.
//!
//! Worker series and registry label sets past the limit fold into one overflow series holding
//! their sum (pipetel caps them before the SDK does), and the registry's memory stays bounded.
//! Known gap, printed but not asserted: an OTel counter's own overflow is not warned about (the
//! SDK does not report it).
//!
//! The scenario runs in a child process (see `support::child`) so its warnings can be counted.

mod support;

use support::child::scenario_in_child;

const LIMIT: usize = 1000;
const FLOOD: u64 = 100_000;
const WIDE_SHARDS: u32 = 1500;
const CHILD: &str = "PIPETEL_TEST_CARDINALITY_CHILD";

fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.trim_start_matches("VmRSS:").trim().trim_end_matches("kB").trim().parse().expect("number")
}

/// `(labels, value)` of every sample of `metric` in an exposition.
fn samples<'a>(text: &'a str, metric: &str) -> Vec<(&'a str, f64)> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")))
        .map(|l| {
            let (labels, value) = l.rsplit_once(' ').expect("value");
            (labels, value.parse().expect("numeric value"))
        })
        .collect()
}

/// Asserts the bounded shape of one flooded metric and, when `total` is given, that the series
/// sum to it; returns (series, sum of all series, overflow value).
fn check_bounded(text: &str, metric: &str, total: Option<f64>) -> (usize, f64, f64) {
    let s = samples(text, metric);
    let overflow: Vec<_> = s.iter().filter(|(l, _)| l.contains("otel_metric_overflow=\"true\"")).collect();
    assert_eq!(overflow.len(), 1, "{metric}: one overflow series");
    assert!(s.len() <= LIMIT + 1, "{metric}: {} series over the limit of {LIMIT}", s.len());
    assert!(s.len() >= LIMIT / 2, "{metric}: only {} series", s.len());
    let sum: f64 = s.iter().map(|(_, v)| v).sum();
    if let Some(total) = total {
        assert_eq!(sum, total, "{metric}: nothing lost: the overflow series holds the excess");
    }
    (s.len(), sum, overflow[0].1)
}

/// The flood itself, in the child process; prints its figures on stdout.
fn flood() {
    use pipetel::opentelemetry::KeyValue;
    let telemetry = pipetel::init(
        pipetel::Config::default()
            .with_prometheus_port(0)
            .with_cardinality_limit(LIMIT)
            // Every shard keeps its worker series, so the stage's 1,500 shards pass the limit.
            .with_shard_metrics(pipetel::config::ShardMetrics::All)
            .with_console_log(true)
            .with_log_filter("warn"),
    )
    .expect("init");
    let render = telemetry.prometheus_render().expect("render");
    let requests = pipetel::meter().u64_counter("flood.requests").build();
    let before = resident_kib();
    for i in 0..FLOOD {
        requests.add(1, &[KeyValue::new("request.id", format!("req-{i:08}"))]);
    }
    let text = render.render();
    let (series, _, overflow) = check_bounded(&text, "flood_requests_total", Some(FLOOD as f64));
    let after_first = resident_kib();
    for i in FLOOD..2 * FLOOD {
        requests.add(1, &[KeyValue::new("request.id", format!("req-{i:08}"))]);
    }
    let text = render.render();
    let (series_2, ..) = check_bounded(&text, "flood_requests_total", Some(2.0 * FLOOD as f64));
    assert_eq!(series_2, series, "a second flood adds no series");
    let after_second = resident_kib();
    println!(
        "otel: series={series} overflow={overflow} rss_kib: before={before} first={after_first} second={after_second}"
    );
    assert!(
        after_second.saturating_sub(after_first) < 8 * 1024,
        "a second flood of new ids grew memory by {} KiB",
        after_second - after_first
    );

    let registry = pipetel::Registry::new("flood").expect("registry");
    let by_id = registry.counter_vec("by_id", "Requests by id", &["request_id"]).expect("counter");
    let before = resident_kib();
    for i in 0..FLOOD {
        by_id.with([("request_id", format!("req-{i:08}").as_str())]).expect("label").inc();
    }
    let text = render.render();
    // The registry caps its own series too: the overflow series holds the excess exactly.
    let (series, sum, overflow) = check_bounded(&text, "flood_by_id_total", Some(FLOOD as f64));
    let grown = resident_kib().saturating_sub(before);
    assert!(grown < 8 * 1024, "a flood of {FLOOD} label values grew the registry by {grown} KiB");
    println!(
        "registry: series={series} sum={sum} overflow={overflow} rss_kib: before={before} after={}",
        resident_kib()
    );

    let stage = pipetel::stage("wide").execution_id("flood").shards(WIDE_SHARDS).start();
    for i in 0..WIDE_SHARDS {
        let shard = stage.shard(i).start();
        shard.record(1, 1);
        shard.finish();
    }
    let row = stage.finish();
    assert_eq!(row.items, u64::from(WIDE_SHARDS));
    let text = render.render();
    // Worker series fold into pipetel's own overflow series holding the sum: nothing lost.
    let (series, sum, overflow) = check_bounded(&text, "pipeline_worker_items_total", Some(f64::from(WIDE_SHARDS)));
    println!("workers: series={series} sum={sum} overflow={overflow}");
    drop(telemetry);
}

#[test]
fn request_ids_in_labels_stay_bounded_with_overflow_and_one_warning() {
    let name = "request_ids_in_labels_stay_bounded_with_overflow_and_one_warning";
    let Some((stdout, stderr)) = scenario_in_child(name, CHILD, flood) else { return };
    for line in stdout.lines().filter(|l| l.contains("series=")) {
        println!("{line}");
    }
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains(" WARN ")).collect();
    let cardinality: Vec<&&str> = warnings.iter().filter(|l| l.contains("cardinality limit")).collect();
    // One warning per flooded source (the registry counter, the worker series), not one per
    // series or per scrape.
    assert_eq!(cardinality.len(), 2, "one cardinality warning per flooded metric:\n{stderr}");
    assert_eq!(cardinality.iter().filter(|l| l.contains("flood_by_id_total")).count(), 1, "{stderr}");
    assert_eq!(cardinality.iter().filter(|l| l.contains("worker series")).count(), 1, "{stderr}");
    for w in &cardinality {
        assert!(w.contains("PIPETEL_CARDINALITY_LIMIT"), "the warning says what to do: {w}");
    }
}
