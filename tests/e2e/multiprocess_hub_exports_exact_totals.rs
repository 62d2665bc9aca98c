//! Three worker processes send cumulative snapshots over their stdout pipes — one envelope lost,
//! one late and repeated, one worker killed and restarted mid-run with its sequence starting
//! again — and real Prometheus scraping the parent sees exactly what the workers recorded, with
//! no counter reset along the way.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::support::{example_serving, free_port, turn_if_peers, wait_for, Peer, Process, Prometheus};

/// Steps per worker run, the step after which worker 1 is killed, and the step interval.
const STEPS: u64 = 12;
const KILL_AFTER: u64 = 8;
const INTERVAL_MS: u64 = 300;

/// The Prometheus name of each family the example exports (the OTel → Prometheus translation).
const NAMES: &[(&str, &str)] = &[
    ("pipeline.stage.items", "pipeline_stage_items_total"),
    ("pipeline.stage.bytes", "pipeline_stage_bytes_total"),
    ("pipeline.transfer.bytes", "pipeline_transfer_bytes_total"),
    ("pipeline.transfer.count", "pipeline_transfer_count_total"),
    ("pipeline.transfer.tensors", "pipeline_transfer_tensors_total"),
    ("pipeline.transfer.duration", "pipeline_transfer_duration_seconds_total"),
    // Histograms are real Prometheus histograms on the pull endpoint.
    ("task.duration.bucket", "task_duration_seconds_bucket"),
    ("task.duration.count", "task_duration_seconds_count"),
    ("task.duration.sum", "task_duration_seconds_sum"),
];

/// `expected <family>{<labels>} <value>` lines → PromQL selector → value.
fn expectations(output: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in output.lines().filter_map(|l| l.strip_prefix("expected ")) {
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("bad line {line:?}"));
        let (family, labels) = series.split_once('{').unwrap_or_else(|| panic!("bad series {series:?}"));
        let name = NAMES
            .iter()
            .find(|(f, _)| *f == family)
            .map(|(_, p)| *p)
            .unwrap_or_else(|| panic!("no Prometheus name for {family}"));
        // Label keys only: values may hold dots (`0.1`) that stay as they are.
        let labels: Vec<String> = labels
            .trim_end_matches('}')
            .split("\",")
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (k, v) = l.split_once('=').unwrap_or_else(|| panic!("bad label {l:?}"));
                format!("{}={}\"", k.replace('.', "_"), v.trim_end_matches('"'))
            })
            .collect();
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad value in {line:?}"));
        out.insert(format!("{name}{{job=\"pipetel\",{}}}", labels.join(",")), value);
    }
    out
}

#[test]
fn worker_totals_arrive_exactly_and_no_counter_resets_across_a_killed_worker() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Prometheus]) else { return };
    let port = free_port();
    let prometheus = Prometheus::start(&[format!("127.0.0.1:{port}")], "/metrics");
    // Start the run only once Prometheus scrapes, so scrapes straddle the kill and restart.
    wait_for("a first scrape attempt", Duration::from_secs(20), || {
        let t = prometheus.targets();
        let last = t["data"]["activeTargets"][0]["lastScrape"].as_str()?.to_owned();
        (!last.starts_with("0001")).then_some(())
    });

    let mut cmd = example_serving("multiprocess", port);
    cmd.args(["--workers", "3", "--steps", &STEPS.to_string(), "--interval-ms", &INTERVAL_MS.to_string()])
        .args(["--restart-worker", "1", "--kill-after", &KILL_AFTER.to_string()])
        .args(["--stale-after-ms", "60000", "--linger-seconds", "60"]);
    let mut example = Process::spawn("multiprocess", cmd);
    let out = example.wait_for_output("done:", Duration::from_secs(30));
    assert!(out.contains("restarts=1 "), "the hub did not see exactly one restart:\n{out}");
    assert!(out.contains("hub totals match expected"), "{out}");
    assert!(out.contains("worker 1 killed after step 8"), "{out}");

    // The example's own arithmetic, anchored: items of 3 full runs plus the killed run of worker 1.
    let expected = expectations(&out);
    assert_eq!(expected.len(), 21, "{expected:?}");
    let tokenize = (10 + 20 + 30) * STEPS + 20 * KILL_AFTER;
    assert_eq!(
        expected.get(r#"pipeline_stage_items_total{job="pipetel",pipeline_stage_name="tokenize"}"#),
        Some(&(tokenize as f64)),
        "{expected:?}"
    );
    assert_eq!(
        expected.get(r#"pipeline_stage_items_total{job="pipetel",pipeline_stage_name="embed"}"#),
        Some(&((3 * (3 * STEPS + KILL_AFTER)) as f64)),
        "{expected:?}"
    );

    let targets = prometheus.wait_until_up(Duration::from_secs(20));
    assert_eq!(targets[0]["lastError"], "", "the real parser refused the exposition: {targets:?}");
    for (selector, value) in &expected {
        prometheus.wait_for_value(selector, Duration::from_secs(10), |v| v == *value);
    }

    // Every counter series was scraped several times during the run, and none ever went down.
    // (One query per name: range functions drop `__name__`, so names cannot share a query.)
    let (mut series, mut resets) = (0, Vec::new());
    for (_, name) in NAMES {
        let samples = prometheus.query(&format!(r#"count_over_time({name}{{job="pipetel"}}[5m])"#)).expect("count");
        assert!(samples.iter().all(|(_, n)| *n >= 4.0), "too few scrapes of {name} straddled the run: {samples:?}");
        series += samples.len();
        resets.extend(prometheus.query(&format!(r#"resets({name}{{job="pipetel"}}[5m])"#)).expect("resets"));
    }
    assert_eq!(series, expected.len());
    assert_eq!(resets.len(), expected.len(), "{resets:?}");
    assert!(resets.iter().all(|(_, n)| *n == 0.0), "a counter went backwards: {resets:?}");
    assert_eq!(prometheus.targets()["data"]["activeTargets"][0]["lastError"], "");
}
