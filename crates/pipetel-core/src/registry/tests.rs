use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::InstrumentationScope;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use std::sync::atomic::AtomicU64;

use super::*;
use crate::global::Installed;
use crate::test_exporter::TestExporter;

/// `(scope, name)` → `[(sorted attributes, value)]`.
type Exported = BTreeMap<(String, String), Vec<(Vec<(String, String)>, f64)>>;

/// A registry on its own provider, whose exports the test reads back.
struct Harness {
    registry: Registry,
    otel: TestExporter,
}

impl Harness {
    fn new(prefix: &str) -> Self {
        let otel = TestExporter::new();
        let registry = Registry::with_meters(
            prefix,
            otel.provider.meter("registry-test"),
            otel.provider.meter_with_scope(InstrumentationScope::builder(crate::global::PUSH_ONLY_SCOPE).build()),
        )
        .expect("registry");
        Harness { registry, otel }
    }

    /// `(scope, name) → [(sorted attributes, value)]`; histograms give `(count, sum)` as
    /// `name#count` / `name#sum`.
    fn collect(&self) -> Exported {
        let mut out = Exported::new();
        for p in self.otel.collect() {
            out.entry((p.scope, p.name)).or_default().push((p.attrs, p.value));
        }
        out
    }
}

fn key(scope: &str, name: &str) -> (String, String) {
    (scope.to_string(), name.to_string())
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn counter_counts_and_refuses_bad_increments() {
    let r = Registry::new("t_counter").expect("registry");
    let c = r.counter("requests", "Requests").expect("counter");
    c.inc();
    c.inc_by(2.0);
    c.inc_by(0.5);
    assert_eq!(c.value(), 3.5);
    for bad in [-1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        c.inc_by(bad);
    }
    assert_eq!(c.value(), 3.5, "refused increments leave the value unchanged");
    c.inc_by(1e300);
    assert_eq!(c.value(), 1e300 + 3.5);
    c.reset();
    assert_eq!(c.value(), 0.0);
    // `_total` or not: the same counter.
    let same = r.counter("requests_total", "Requests").expect("same counter");
    same.inc();
    assert_eq!(c.value(), 1.0);
    assert_eq!(c.name(), "t_counter_requests_total");
}

#[test]
fn gauge_moves_both_ways() {
    let r = Registry::new("t_gauge").expect("registry");
    let g = r.gauge("queue_depth", "Depth").expect("gauge");
    g.set(5.0);
    g.inc();
    g.dec();
    g.dec();
    g.inc_by(2.5);
    g.dec_by(0.5);
    assert_eq!(g.value(), 6.0);
    g.inc_by(f64::NAN);
    g.dec_by(f64::INFINITY);
    assert_eq!(g.value(), 6.0, "non-finite moves are refused");
    g.set(-3.0);
    assert_eq!(g.value(), -3.0);
    g.set_to_current_time();
    assert!(g.value() > 1.7e9 && g.value() < 1e10, "{}", g.value());
    g.reset();
    assert_eq!(g.value(), 0.0);
    let h = r.gauge_vec("temp", "Temp", &["room"]).expect("gauge").with([("room", "a")]).expect("h");
    h.set(21.5);
    h.inc();
    h.dec_by(0.5);
    h.set_to_current_time();
    assert!(h.value() > 1.7e9);
    h.reset();
    assert_eq!(h.value(), 0.0);
}

#[test]
fn histogram_buckets_count_sum_average() {
    let r = Registry::new("t_hist").expect("registry");
    let h = r.histogram("latency_seconds", "Latency").expect("histogram");
    assert_eq!(h.buckets(), crate::buckets::SECONDS_BUCKETS);
    assert_eq!(h.average(), None);
    for v in [0.005, 0.007, 2.0, 100.0] {
        h.observe(v);
    }
    h.observe(f64::NAN);
    assert_eq!(h.count(), 4);
    assert!((h.sum() - 102.012).abs() < 1e-9);
    assert!((h.average().expect("observed") - 25.503).abs() < 1e-9);
    let v = h.value();
    // `le` is inclusive: 0.005 lands in the first bucket.
    assert_eq!(v.buckets[0], (0.005, 1));
    assert_eq!(v.buckets[1], (0.01, 2));
    assert_eq!(v.buckets.last(), Some(&(10.0, 3)));
    h.reset();
    assert_eq!(h.count(), 0);
    assert_eq!(h.sum(), 0.0);

    let custom = r.histogram_with("size_bytes", "Size", Opts::new().buckets([1.0, 10.0])).expect("custom");
    custom.observe(-5.0);
    custom.observe(10.0);
    custom.observe(11.0);
    assert_eq!(custom.value().buckets, vec![(1.0, 1), (10.0, 2)]);
    let text = r.prometheus_text();
    assert!(
        text.contains("t_hist_size_bytes_bucket{le=\"+Inf\"} 3\nt_hist_size_bytes_sum 16\nt_hist_size_bytes_count 3\n"),
        "{text}"
    );

    let handle = r
        .histogram_vec("op_seconds", "Op", &["op"], Opts::new())
        .expect("labelled")
        .with([("op", "read")])
        .expect("handle");
    handle.observe(1.0);
    handle.observe(3.0);
    handle.observe_since(std::time::Instant::now());
    assert_eq!(handle.count(), 3);
    assert!(handle.sum() >= 4.0);
    assert!(handle.average().is_some());
    handle.reset();
    assert_eq!(handle.count(), 0);

    for bad in [vec![], vec![1.0, 1.0], vec![2.0, 1.0], vec![f64::INFINITY]] {
        assert!(matches!(
            r.histogram_with("bad_seconds", "", Opts::new().buckets(bad)),
            Err(RegistryError::InvalidOption { .. })
        ));
    }
    r.set_default_buckets(&[0.1, 1.0]).expect("valid");
    assert_eq!(r.histogram("later_seconds", "").expect("h").buckets(), &[0.1, 1.0]);
    assert!(r.set_default_buckets(&[1.0, 0.1]).is_err());
}

/// The nearest-rank quantile `per_mille / 1000` of `sorted`, in whole numbers: rank
/// `⌈per_mille·n/1000⌉`, at least 1.
fn nearest_rank(sorted: &[f64], per_mille: usize) -> f64 {
    sorted[(per_mille * sorted.len()).div_ceil(1000).max(1) - 1]
}

#[test]
fn summary_quantiles_are_order_statistics_while_the_sample_fits_and_within_the_error_beyond() {
    let r = Registry::new("t_summary_exact").expect("registry");
    // Three observations: the median, then the largest for every quantile above 2/3.
    let three = r.summary("three_seconds", "").expect("summary");
    for v in [0.3, 0.1, 0.2] {
        three.observe(v);
    }
    let got = three.value().quantiles;
    assert_eq!(got, [(0.5, Some(0.2)), (0.9, Some(0.3)), (0.95, Some(0.3)), (0.99, Some(0.3))]);
    let text = r.prometheus_text();
    assert!(text.contains("t_summary_exact_three_seconds{quantile=\"0.5\"} 0.2\n"), "{text}");
    assert!(text.contains("t_summary_exact_three_seconds{quantile=\"0.99\"} 0.3\n"), "{text}");

    // Random samples of many sizes against their sorted order statistics.
    let per_mille = [0, 1, 10, 100, 250, 333, 500, 667, 750, 900, 950, 990, 999, 1000];
    let qs: Vec<f64> = per_mille.iter().map(|i| *i as f64 / 1000.0).collect();
    let mut state = 0xda94_2042_e4dd_58b5u64;
    let mut uniform = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let sizes =
        [1, 2, 3, 4, 9, 10, 31, 100, EXACT_OBSERVATIONS - 1, EXACT_OBSERVATIONS, EXACT_OBSERVATIONS + 1, 1_000, 10_000];
    for (k, n) in sizes.into_iter().enumerate() {
        let s = r.summary_with(&format!("random_{k}_seconds"), "", Opts::new().quantiles(qs.clone())).expect("summary");
        // Log-uniform over five decades, about a tenth negative.
        let values: Vec<f64> = (0..n)
            .map(|_| {
                let v = 10f64.powf(uniform() * 5.0 - 3.0);
                if uniform() < 0.1 {
                    -v
                } else {
                    v
                }
            })
            .collect();
        for v in &values {
            s.observe(*v);
        }
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        let got = s.value();
        assert_eq!(got.count, n as u64);
        for ((q, got), i) in got.quantiles.iter().zip(per_mille) {
            let (got, want) = (got.expect("observations"), nearest_rank(&sorted, i));
            if n <= EXACT_OBSERVATIONS {
                assert_eq!(got, want, "n={n} q={q}");
            } else {
                assert!((got - want).abs() <= RELATIVE_ERROR * want.abs(), "n={n} q={q}: {got} vs exact {want}");
            }
        }
    }
}

#[test]
fn summary_quantiles_within_the_error_bound() {
    let r = Registry::new("t_summary").expect("registry");
    let s = r.summary("latency_seconds", "Latency").expect("summary");
    assert_eq!(s.quantiles(), DEFAULT_QUANTILES);
    let empty = s.value();
    assert!(empty.quantiles.iter().all(|(_, v)| v.is_none()));
    let mut values: Vec<f64> = (1..=1000).map(|i| f64::from(i) / 1000.0).collect();
    for v in values.iter().rev() {
        s.observe(*v);
    }
    s.observe(f64::NAN);
    s.observe(f64::INFINITY);
    let v = s.value();
    assert_eq!(v.count, 1000);
    assert!((v.sum - 500.5).abs() < 1e-9);
    values.sort_by(f64::total_cmp);
    for (q, got) in &v.quantiles {
        let exact = values[(q * (values.len() as f64 - 1.0)) as usize];
        let got = got.expect("non-empty");
        assert!((got - exact).abs() <= RELATIVE_ERROR * exact, "q={q} got {got} exact {exact}");
    }
    let text = r.prometheus_text();
    assert!(text.contains("# TYPE t_summary_latency_seconds summary\n"), "{text}");
    assert!(text.contains("t_summary_latency_seconds{quantile=\"0.5\"} "), "{text}");
    assert!(text.contains("t_summary_latency_seconds_count 1000\n"), "{text}");
    s.reset();
    assert_eq!(s.value().count, 0);
    assert!(r.prometheus_text().contains("t_summary_latency_seconds{quantile=\"0.99\"} NaN\n"));

    let custom = r
        .summary_vec(
            "custom_seconds",
            "",
            &["op"],
            Opts::new().quantiles([0.99, 0.5, 0.5]).max_age(Duration::from_secs(1)).age_buckets(2),
        )
        .expect("custom");
    let h = custom.with([("op", "x")]).expect("handle");
    assert_eq!(h.quantiles(), &[0.5, 0.99]);
    h.observe(2.0);
    h.observe(f64::NAN);
    assert_eq!(h.value().count, 1);
    h.reset();
    assert_eq!(h.value().count, 0);
    for opts in [
        Opts::new().quantiles([1.5]),
        Opts::new().quantiles(Vec::new()),
        Opts::new().max_age(Duration::ZERO),
        Opts::new().age_buckets(0),
        Opts::new().age_buckets(61),
        Opts::new().buckets([1.0]),
    ] {
        assert!(matches!(r.summary_with("bad_seconds", "", opts), Err(RegistryError::InvalidOption { .. })));
    }
}

#[test]
fn names_and_labels_are_checked_at_creation() {
    let r = Registry::new("t_names").expect("registry");
    for bad in ["", "Requests", "9lives", "has-dash", "__reserved", "a:b", "é"] {
        assert!(matches!(r.counter(bad, ""), Err(RegistryError::InvalidName { .. })), "{bad:?}");
    }
    for bad in ["Bad", "a-b", "__x", "9"] {
        assert!(matches!(Registry::new(bad), Err(RegistryError::InvalidName { .. })), "{bad:?}");
    }
    assert!(matches!(r.histogram("x_bucket", ""), Err(RegistryError::InvalidName { .. })));
    assert!(matches!(r.summary("x_count", ""), Err(RegistryError::InvalidName { .. })));
    let label_err = |kind: Kind, label: &str| match kind {
        Kind::Histogram => r.histogram_vec("l_seconds", "", &[label], Opts::new()).err(),
        Kind::Summary => r.summary_vec("l_seconds", "", &[label], Opts::new()).err(),
        _ => r.counter_vec("l", "", &[label]).err(),
    };
    for (kind, label) in [
        (Kind::Counter, "0a"),
        (Kind::Counter, "a-b"),
        (Kind::Counter, "__name__"),
        (Kind::Counter, ""),
        (Kind::Counter, "otel_scope_name"),
        (Kind::Histogram, "le"),
        (Kind::Summary, "quantile"),
    ] {
        assert!(matches!(label_err(kind, label), Some(RegistryError::InvalidLabelName { .. })), "{label:?}");
    }
    assert!(matches!(r.counter_vec("dup", "", &["a", "a"]), Err(RegistryError::InvalidLabelName { .. })));
    // Labels legal elsewhere: `le` on a counter, uppercase letters.
    r.counter_vec("ok", "", &["le", "Region"]).expect("legal labels");
    let quantiles = Opts::new().quantiles([0.5]);
    assert!(matches!(r.histogram_with("h_seconds", "", quantiles), Err(RegistryError::InvalidOption { .. })));
    let msg = r.counter("Bad", "").expect_err("refused").to_string();
    assert!(msg.contains("\"Bad\""), "{msg}");
}

#[test]
fn registering_twice_returns_the_same_metric_or_a_conflict() {
    let r = Registry::new("t_twice").expect("registry");
    let a = r.counter_vec("jobs", "Jobs", &["queue"]).expect("first");
    let b = r.counter_vec("jobs", "other help", &["queue"]).expect("same");
    a.with([("queue", "q")]).expect("a").inc();
    assert_eq!(b.with([("queue", "q")]).expect("b").value(), 1.0);
    let conflict = |e: Result<(), RegistryError>| matches!(e, Err(RegistryError::Conflict { .. }));
    assert!(conflict(r.gauge("jobs", "").map(drop)));
    assert!(conflict(r.counter("jobs", "").map(drop)));
    assert!(conflict(r.counter_vec("jobs", "", &["other"]).map(drop)));
    // Another kind writing the same sample name.
    assert!(conflict(r.gauge("jobs_total", "").map(drop)));
    let h = r.histogram_with("wait_seconds", "", Opts::new().buckets([1.0])).expect("h");
    assert!(conflict(r.histogram_with("wait_seconds", "", Opts::new().buckets([2.0])).map(drop)));
    assert!(conflict(r.gauge("wait_seconds_count", "").map(drop)));
    assert!(conflict(r.counter_fn("jobs", "", Vec::new)));
    r.histogram_with("wait_seconds", "", Opts::new().buckets([1.0])).expect("same buckets").observe(0.5);
    assert_eq!(h.count(), 1);
    let msg = r.gauge("jobs", "").expect_err("conflict").to_string();
    assert!(msg.contains("t_twice_jobs") && msg.contains("counter"), "{msg}");
}

#[test]
fn labels_as_pairs_or_maps_and_mismatches() {
    let r = Registry::new("t_labels").expect("registry");
    let c = r.counter_vec("hits", "Hits", &["method", "code"]).expect("counter");
    assert_eq!(c.label_names(), ["method", "code"]);
    c.with([("method", "GET"), ("code", "200")]).expect("slice").inc();
    c.with([("code", "200"), ("method", "GET")]).expect("array, other order").inc();
    c.with(vec![("method".to_string(), "GET".to_string()), ("code".into(), "200".into())]).expect("vec").inc();
    let map: HashMap<&str, &str> = [("method", "GET"), ("code", "200")].into();
    c.with(&map).expect("hash map").inc();
    let bmap: BTreeMap<String, String> = [("method".into(), "POST".into()), ("code".into(), "500".into())].into();
    c.with(bmap).expect("btree map").inc_by(2.0);
    assert_eq!(c.with([("method", "GET"), ("code", "200")]).expect("h").value(), 4.0);
    for bad in [
        vec![("method", "GET")],
        vec![("method", "GET"), ("code", "200"), ("extra", "x")],
        vec![("method", "GET"), ("method", "POST")],
        vec![("method", "GET"), ("status", "200")],
    ] {
        assert!(matches!(c.with(&bad), Err(RegistryError::LabelMismatch { .. })), "{bad:?}");
    }
    let text = r.prometheus_text();
    assert!(text.contains("t_labels_hits_total{method=\"GET\",code=\"200\"} 4\n"), "{text}");
    assert!(text.contains("t_labels_hits_total{method=\"POST\",code=\"500\"} 2\n"), "{text}");
    // A vec without labels is the unlabelled metric, and takes an empty label set.
    let plain = r.gauge("plain", "").expect("gauge");
    let vec = r.gauge_vec("plain", "", &[]).expect("the same gauge");
    vec.with(&[] as &[(&str, &str)]).expect("empty set").set(3.0);
    assert_eq!(plain.value(), 3.0);
    assert!(matches!(vec.with([("a", "b")]), Err(RegistryError::LabelMismatch { .. })));
}

#[test]
fn the_exposition_is_exact_and_escaped() {
    let r = Registry::new("t_text").expect("registry");
    r.counter("events", "Events\\seen\nhere").expect("c").inc_by(3.0);
    let g = r.gauge_vec("label_value", "Values", &["v"]).expect("g");
    g.with([("v", "quote\" backslash\\ newline\n ünïcødé ✓")]).expect("h").set(1.5);
    assert_eq!(
        r.prometheus_text(),
        "# HELP t_text_events_total Events\\\\seen\\nhere\n# TYPE t_text_events_total counter\nt_text_events_total 3\n\
         # HELP t_text_label_value Values\n# TYPE t_text_label_value gauge\n\
         t_text_label_value{v=\"quote\\\" backslash\\\\ newline\\n ünïcødé ✓\"} 1.5\n"
    );
}

/// A registry under `namespace` with a counter `a`, a gauge `b`, a histogram `c_seconds` and a
/// summary `d_seconds`.
fn one_of_each(namespace: &str) -> (Registry, Counter, Gauge, Histogram, Summary) {
    let r = Registry::new(namespace).expect("registry");
    let c = r.counter("a", "").expect("c");
    let g = r.gauge("b", "").expect("g");
    let h = r.histogram("c_seconds", "").expect("h");
    let s = r.summary("d_seconds", "").expect("s");
    (r, c, g, h, s)
}

#[test]
fn reset_all_and_clear() {
    let (r, c, g, h, s) = one_of_each("t_clear");
    c.inc();
    g.set(2.0);
    h.observe(1.0);
    s.observe(1.0);
    r.add_text_collector(|| "legacy_up 1\n".to_string());
    r.reset_all();
    assert_eq!((c.value(), g.value(), h.count(), s.value().count), (0.0, 0.0, 0, 0));
    assert_eq!(r.names().len(), 4);
    c.inc();
    r.clear();
    assert!(r.names().is_empty());
    assert_eq!(r.prometheus_text(), "");
    // Handles still work; a new registration starts from zero.
    c.inc();
    assert_eq!(c.value(), 2.0);
    assert_eq!(r.counter("a", "").expect("again").value(), 0.0);
}

#[test]
fn function_collectors_sample_at_collection() {
    let h = Harness::new("t_fn");
    let depth = Arc::new(AtomicU64::new(4));
    let d = depth.clone();
    h.registry
        .gauge_fn("queue_depth", "Depth", move || {
            vec![
                Sample::new([("queue", "a")], d.load(Ordering::Relaxed) as f64),
                Sample::new([("bad-label", "x")], 1.0),
            ]
        })
        .expect("gauge fn");
    h.registry
        .counter_fn("bytes_total", "Bytes", || {
            vec![Sample::new([("dir", "in")], 10.0), Sample::new([("dir", "out")], -1.0)]
        })
        .expect("counter fn");
    h.registry.gauge_fn("panics", "", || panic!("collector bug")).expect("registered");
    let text = h.registry.prometheus_text();
    assert!(text.contains("t_fn_queue_depth{queue=\"a\"} 4\n"), "{text}");
    assert!(text.contains("t_fn_bytes_total{dir=\"in\"} 10\n"), "{text}");
    assert!(!text.contains("bad-label") && !text.contains("dir=\"out\""), "{text}");
    depth.store(7, Ordering::Relaxed);
    let got = h.collect();
    assert_eq!(got[&key("registry-test", "t_fn_queue_depth")], vec![(pairs(&[("queue", "a")]), 7.0)]);
    assert_eq!(got[&key("registry-test", "t_fn_bytes")], vec![(pairs(&[("dir", "in")]), 10.0)]);
    assert!(!got.contains_key(&key("registry-test", "t_fn_panics")));
}

#[test]
fn text_collectors_are_checked() {
    let r = Registry::new("t_textc").expect("registry");
    r.counter("requests", "").expect("c").inc();
    r.add_text_collector(|| {
        "# HELP legacy_jobs Jobs\n# TYPE legacy_jobs gauge\nlegacy_jobs{q=\"a\"} 2\nnot a sample\n\
         # TYPE t_textc_requests_total counter\nt_textc_requests_total 99\n"
            .to_string()
    });
    r.add_text_collector(|| panic!("collector bug"));
    let text = r.prometheus_text();
    assert!(text.ends_with("# HELP legacy_jobs Jobs\n# TYPE legacy_jobs gauge\nlegacy_jobs{q=\"a\"} 2\n"), "{text}");
    assert!(!text.contains("99") && !text.contains("not a sample"), "{text}");
}

#[test]
fn metrics_reach_otel_with_their_values() {
    let h = Harness::new("t_otel");
    let r = &h.registry;
    let c = r.counter_vec("requests", "Requests", &["method"]).expect("c");
    let get = c.with([("method", "GET")]).expect("h");
    get.inc();
    get.inc_by(1.5);
    r.gauge("depth", "Depth").expect("g").set(3.0);
    let hist = r.histogram_with("latency_seconds", "Latency", Opts::new().buckets([0.1, 1.0])).expect("h");
    hist.observe(0.05);
    hist.observe(2.0);
    let s = r.summary("size_bytes", "Size").expect("s");
    for v in [1.0, 2.0, 3.0] {
        s.observe(v);
    }
    let got = h.collect();
    assert_eq!(got[&key("registry-test", "t_otel_requests")], vec![(pairs(&[("method", "GET")]), 2.5)]);
    assert_eq!(got[&key("registry-test", "t_otel_depth")], vec![(vec![], 3.0)]);
    // Histograms and summaries: push-only scope only (the pull endpoint renders them directly).
    let push = crate::global::PUSH_ONLY_SCOPE;
    assert_eq!(got[&key(push, "t_otel_latency_seconds#count")], vec![(vec![], 2.0)]);
    assert_eq!(got[&key(push, "t_otel_latency_seconds#sum")], vec![(vec![], 2.05)]);
    assert!(!got.contains_key(&key("registry-test", "t_otel_latency_seconds#count")));
    assert_eq!(got[&key(push, "t_otel_size_bytes_count")], vec![(vec![], 3.0)]);
    assert_eq!(got[&key(push, "t_otel_size_bytes_sum")], vec![(vec![], 6.0)]);
    let quantiles = &got[&key(push, "t_otel_size_bytes")];
    assert_eq!(quantiles.len(), 4);
    let median = quantiles.iter().find(|(a, _)| a == &pairs(&[("quantile", "0.5")])).expect("p50");
    assert!((median.1 - 2.0).abs() <= 0.02, "{median:?}");
    assert!(!got.contains_key(&key("registry-test", "t_otel_size_bytes")));

    // Reset shows as a counter restart; cleared metrics leave the export.
    r.reset_all();
    let got = h.collect();
    assert_eq!(got[&key("registry-test", "t_otel_requests")], vec![(pairs(&[("method", "GET")]), 0.0)]);
    r.clear();
    get.inc();
    let got = h.collect();
    assert!(got.get(&key("registry-test", "t_otel_requests")).is_none_or(Vec::is_empty), "{got:?}");
}

/// The pull endpoint's encoder and `prometheus_text()` agree on names and values, and the
/// summary arrives through the exposition source.
#[test]
fn the_pull_endpoint_and_prometheus_text_agree() {
    use crate::exposition::pull::{PrometheusRender, PullReader};
    let reader = PullReader::new();
    let provider = SdkMeterProvider::builder().with_reader(reader.clone()).build();
    let r = Registry::with_meters(
        "t_pull",
        provider.meter("pipetel"),
        provider.meter_with_scope(InstrumentationScope::builder(crate::global::PUSH_ONLY_SCOPE).build()),
    )
    .expect("registry");
    r.counter("jobs", "Jobs").expect("c").inc_by(3.0);
    r.gauge("depth", "Depth").expect("g").set(2.0);
    r.histogram_with("wait_seconds", "Wait", Opts::new().buckets([1.0])).expect("h").observe(0.5);
    r.summary("size_bytes", "Size").expect("s").observe(10.0);
    r.add_text_collector(|| "t_pull_legacy 1\n".into());
    let pulled = PrometheusRender::new(reader).render();
    for line in [
        "t_pull_jobs_total{otel_scope_name=\"pipetel\"} 3",
        "t_pull_depth{otel_scope_name=\"pipetel\"} 2",
        "t_pull_wait_seconds_bucket{otel_scope_name=\"pipetel\",le=\"1\"} 1",
        "t_pull_wait_seconds_count{otel_scope_name=\"pipetel\"} 1",
        "# TYPE t_pull_size_bytes summary",
        "t_pull_size_bytes_count 1",
        "t_pull_legacy 1",
    ] {
        assert!(pulled.lines().any(|l| l == line), "{line} missing from\n{pulled}");
    }
    assert!(!pulled.contains("t_pull_size_bytes_count_total"), "push-only instruments stay off the pull endpoint");
    let own = r.prometheus_text();
    for line in ["t_pull_jobs_total 3", "t_pull_depth 2", "t_pull_wait_seconds_count 1", "t_pull_size_bytes_count 1"] {
        assert!(own.lines().any(|l| l == line), "{line} missing from\n{own}");
    }
}

/// The directly rendered histogram on the pull endpoint is line for line what the endpoint's
/// encoder writes for the same observations recorded into an OTel histogram of pipetel's meter
/// (how registry histograms reached the pull endpoint before), and appears once.
#[test]
fn direct_histograms_on_the_pull_endpoint_match_the_encoders_form() {
    use crate::exposition::pull::{PrometheusRender, PullReader};
    use crate::exposition::ExpositionSource as _;

    let reader = PullReader::new();
    let provider = SdkMeterProvider::builder().with_reader(reader.clone()).build();
    // The OTel histogram on a scope the encoder does not skip, to render both forms at once.
    let r = Registry::with_meters("t_same", provider.meter("pipetel"), provider.meter("pipetel")).expect("registry");
    let h = r
        .histogram_vec("wait_seconds", "Wait \\ time\nper call", &["zone", "app"], Opts::new().buckets([0.1, 1.0]))
        .expect("h");
    for (zone, app, v) in [("eu", "a\"b", 0.05), ("eu", "a\"b", 3.0), ("us", "x\ny", 1.0), ("us", "x\ny", 0.25)] {
        h.with([("zone", zone), ("app", app)]).expect("handle").observe(v);
    }
    let mut direct = String::new();
    r.inner.write_exposition(&mut crate::exposition::Page::new(&mut direct, crate::exposition::Format::Text));
    let rendered = PrometheusRender::new(reader).render();
    let family = |text: &str| -> Vec<String> {
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with("t_same_wait_seconds") || l.contains(" t_same_wait_seconds "))
            .map(str::to_string)
            .collect();
        lines.sort();
        lines
    };
    let pos = rendered.find(&direct).expect("the exposition source's text in the render");
    let encoded = format!("{}{}", &rendered[..pos], &rendered[pos + direct.len()..]);
    assert_eq!(family(&direct), family(&encoded), "direct:\n{direct}\nencoder:\n{encoded}");
    assert!(direct.contains(
        "t_same_wait_seconds_bucket{app=\"a\\\"b\",zone=\"eu\",otel_scope_name=\"pipetel\",le=\"+Inf\"} 2\n"
    ));
    assert_eq!(family(&direct).len(), 2 + 2 * 5, "{direct}");

    // With the usual push-only scope, the render holds the family once.
    let reader = PullReader::new();
    let provider = SdkMeterProvider::builder().with_reader(reader.clone()).build();
    let push_only = provider.meter_with_scope(InstrumentationScope::builder(crate::global::PUSH_ONLY_SCOPE).build());
    let r = Registry::with_meters("t_once", provider.meter("pipetel"), push_only).expect("registry");
    r.histogram("wait_seconds", "Wait").expect("h").observe(0.5);
    let rendered = PrometheusRender::new(reader).render();
    assert_eq!(rendered.matches("# TYPE t_once_wait_seconds histogram\n").count(), 1, "{rendered}");
    assert_eq!(rendered.matches("\nt_once_wait_seconds_count{otel_scope_name=\"pipetel\"} 1\n").count(), 1);
}

/// A registry on the global provider feeds an OTel histogram only while a push exporter is
/// installed; one with its own meters always does.
#[test]
fn histograms_feed_otel_only_when_something_pushes() {
    let r = Registry::new("t_push_flag").expect("registry");
    let h = r.histogram("wait_seconds", "").expect("h");
    assert!(!h.feeds_otel(), "no push exporter: atomics only");
    // What `init` publishes, on the global provider: with a push exporter, then without.
    let publish = |pushes| {
        let provider = opentelemetry::global::meter_provider();
        crate::global::publish(Installed::new(&*provider, pushes, crate::limits::cardinality_limit()));
    };
    publish(true);
    let fed = h.feeds_otel();
    publish(false);
    assert!(fed, "a push exporter installed: the OTel histogram is fed");
    assert!(!h.feeds_otel());
    h.observe(0.5);
    assert_eq!(h.count(), 1);
    let fixed = Harness::new("t_push_fixed");
    assert!(fixed.registry.histogram("wait_seconds", "").expect("h").feeds_otel());
}

#[test]
fn handles_record_from_many_threads() {
    let (_r, c, _, h, q) = one_of_each("t_threads");
    std::thread::scope(|s| {
        for _ in 0..4 {
            let (c, h, q) = (c.clone(), h.clone(), q.clone());
            s.spawn(move || {
                for i in 0..10_000 {
                    c.inc();
                    h.observe(0.5);
                    q.observe(if i % 2 == 0 { 0.5 } else { 1.5 });
                }
            });
        }
        // Reads while the writers run.
        s.spawn(|| {
            for _ in 0..100 {
                assert!(q.value().count <= 40_000);
            }
        });
    });
    assert_eq!(c.value(), 40_000.0);
    assert_eq!(h.count(), 40_000);
    assert_eq!(h.sum(), 20_000.0);
    let v = q.value();
    assert_eq!((v.count, v.sum), (40_000, 40_000.0));
    assert_eq!(v.quantiles[0].0, 0.5);
    let median = v.quantiles[0].1.expect("observations");
    assert!((median - 0.5).abs() <= 0.5 * RELATIVE_ERROR, "{median}");
}

#[test]
fn the_global_registry_is_one() {
    let a = global().counter("t_global_hits", "").expect("c");
    a.inc();
    assert_eq!(global().counter("t_global_hits", "").expect("same").value(), 1.0);
    assert_eq!(global().prefix(), "");
}

#[test]
fn label_sets_are_told_apart_by_their_values_alone() {
    let h = Harness::new("t_keys");
    let c = h.registry.counter_vec("items", "Items", &["a", "b"]).expect("counter");
    let long = "v".repeat(40);
    let sets: [(&str, &str); 5] = [("", "x"), ("x", ""), ("", ""), (long.as_str(), "y"), ("ÿ", "z")];
    for (n, (a, b)) in sets.iter().enumerate() {
        c.with([("a", *a), ("b", *b)]).expect("series").inc_by((n + 1) as f64);
    }
    // The same label set, in another order and form, is the same series.
    c.with(HashMap::from([("b", "x"), ("a", "")])).expect("series").inc();
    assert_eq!(c.with([("a", ""), ("b", "x")]).expect("series").value(), 2.0);
    let text = h.registry.prometheus_text();
    let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        samples,
        vec![
            "t_keys_items_total{a=\"\",b=\"\"} 3".to_string(),
            "t_keys_items_total{a=\"\",b=\"x\"} 2".to_string(),
            format!("t_keys_items_total{{a=\"{long}\",b=\"y\"}} 4"),
            "t_keys_items_total{a=\"x\",b=\"\"} 2".to_string(),
            "t_keys_items_total{a=\"ÿ\",b=\"z\"} 5".to_string(),
        ],
        "{text}"
    );
    let debug = format!("{:?}", c.with([("a", long.as_str()), ("b", "y")]).expect("series"));
    assert!(debug.contains(&format!("labels: [\"{long}\", \"y\"]")), "{debug}");
}

#[test]
fn without_push_exporters_the_pull_endpoint_renders_counters_and_gauges_from_the_registry() {
    // On the global binding before `init`: no push exporter, so no OTel instrument at all.
    let r = Registry::new("t_direct").expect("registry");
    let jobs = r.counter_vec("jobs", "Jobs \"done\"", &["zone", "app"]).expect("counter");
    jobs.with([("zone", "eu"), ("app", "a\"b")]).expect("series").inc_by(2.0);
    r.gauge("depth", "Depth").expect("gauge").set(1.5);
    r.counter_vec("idle", "Never recorded", &["k"]).expect("counter");
    let mut out = String::new();
    crate::exposition::write_sources(&mut crate::exposition::Page::new(&mut out, crate::exposition::Format::Text));
    // As the encoder writes an OTel observable counter: labels sorted by name, then the scope.
    assert!(out.contains("# HELP t_direct_jobs_total Jobs \"done\"\n# TYPE t_direct_jobs_total counter\n"), "{out}");
    assert!(out.contains("\nt_direct_jobs_total{app=\"a\\\"b\",zone=\"eu\",otel_scope_name=\"pipetel\"} 2\n"), "{out}");
    assert!(out.contains("\nt_direct_depth{otel_scope_name=\"pipetel\"} 1.5\n"), "{out}");
    // A family without series is not written at all, as the SDK exports no such instrument.
    assert!(!out.contains("t_direct_idle"), "{out}");
    // A registry on fixed meters keeps its counters on its OTel instruments.
    let h = Harness::new("t_fixed");
    h.registry.counter("jobs", "Jobs").expect("counter").inc();
    let mut out = String::new();
    crate::exposition::write_sources(&mut crate::exposition::Page::new(&mut out, crate::exposition::Format::Text));
    assert!(!out.contains("t_fixed_jobs"), "{out}");
    assert_eq!(h.collect().get(&key("registry-test", "t_fixed_jobs")).map(|v| v[0].1), Some(1.0));
}
