//! What each fuzz target checks on one input, shared by the libFuzzer targets
//! (`fuzz_targets/*.rs`) and the stable replay test (`crates/pipetel/tests/fuzz_inputs.rs`), so
//! a fuzzing run and CI judge an input alike. Every check panics on a finding: a panic of the
//! code under test, or a broken property.

use std::collections::HashMap;
use std::io::Cursor;
use std::path::Path;
use std::time::Duration;

use pipetel::config::{Config, Signal, ENV_VARS, OTEL_EXPORTER_OTLP_HEADERS, PIPETEL_CONFIG};
use pipetel::hub::{HubConfig, SnapshotHub};
use pipetel::recorders::{Envelope, FrameReader, Kind};

/// Sources and families a fuzzed hub accepts: small, so inputs reach the limits.
const MAX_SOURCES: usize = 3;
const MAX_FAMILIES: usize = 6;

fn small_hub() -> SnapshotHub {
    let config = HubConfig::default()
        .with_max_sources(MAX_SOURCES)
        .with_max_families(MAX_FAMILIES)
        .with_stale_after(Duration::from_secs(3600));
    SnapshotHub::with_meter(config, pipetel::opentelemetry::global::meter("pipetel-fuzz"))
}

/// Length-prefixed frames from another process, as `SnapshotHub::read_stream` reads them: never
/// a panic; the report adds up; the limits hold; the merged view is well formed; and, ingested
/// frame by frame, no exported counter or histogram count ever goes down.
pub(crate) fn hub_frames(data: &[u8]) {
    let hub = small_hub();
    let report = hub.read_stream(Cursor::new(data));
    assert_eq!(report.received, report.accepted + report.ignored + report.refused, "{report:?}");
    assert!(report.restarts <= report.accepted, "{report:?}");
    assert!(hub.sources().len() <= MAX_SOURCES, "{} sources", hub.sources().len());
    let merged = hub.snapshot();
    assert!(merged.len() <= MAX_FAMILIES, "{} families", merged.len());
    let bytes = Envelope::new("merged", 1, merged).encode();
    let again = Envelope::decode(&bytes).expect("the merged view encodes to a valid envelope");
    assert_eq!(again.encode(), bytes, "the merged view does not round-trip");

    let hub = small_hub();
    let mut frames = FrameReader::new(Cursor::new(data));
    let mut last: HashMap<(String, Vec<String>), f64> = HashMap::new();
    while let Ok(Some(payload)) = frames.read_frame() {
        let _ = hub.ingest_bytes(&payload);
        for snapshot in hub.snapshot() {
            if snapshot.kind() == Kind::Gauge {
                continue;
            }
            for series in snapshot.series() {
                let key = (snapshot.name().to_string(), series.labels.to_vec());
                if let Some(&before) = last.get(&key) {
                    if before.is_finite() && series.value.is_finite() {
                        assert!(series.value >= before, "{key:?} went down from {before} to {}", series.value);
                    }
                }
                last.insert(key, series.value);
            }
        }
    }
}

/// Whether `text` names a device or a kernel file: path-valued settings (certificates, keys)
/// are read to check them, and such a file could block or never end, which would say nothing
/// about the parser.
fn names_a_special_file(text: &str) -> bool {
    ["dev/", "proc/", "sys/", "/dev", "/proc", "/sys"].iter().any(|p| text.contains(p))
}

/// What a configuration that was accepted must do: resolve again and answer every accessor.
fn accepted(config: &Config) {
    config.validate().expect("an accepted configuration resolves");
    for signal in Signal::ALL {
        let _ = config.otlp_target(signal);
    }
    let _ = (config.service_name(), config.sampler(), config.span_metrics(), format!("{config:?}"));
}

/// The environment parsers: `text` as the value of each variable alone, then as
/// `NAME=value` lines all at once (the configuration file variable left unset).
pub(crate) fn config_env(text: &str) {
    if names_a_special_file(text) {
        return;
    }
    for &var in ENV_VARS {
        if var == PIPETEL_CONFIG {
            continue;
        }
        if let Ok(config) = Config::from_lookup(|name| (name == var).then(|| text.to_string())) {
            accepted(&config);
        }
    }
    let vars: Vec<(&str, &str)> = text.lines().filter_map(|line| line.split_once('=')).collect();
    let lookup = |name: &str| {
        if name == PIPETEL_CONFIG {
            return None;
        }
        vars.iter().rev().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_string())
    };
    if let Ok(config) = Config::from_lookup(lookup) {
        accepted(&config);
    }
}

/// The configuration file parser, over TOML text.
pub(crate) fn config_file(text: &str) {
    if names_a_special_file(text) {
        return;
    }
    if let Ok(config) = Config::from_toml_str(text, Path::new("fuzz.toml")) {
        accepted(&config);
    }
}

/// Every byte but ASCII letters and digits as `%XX`.
fn percent_encode(s: &str) -> String {
    s.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}

/// `OTEL_EXPORTER_OTLP_HEADERS`: what it accepts are valid header names and values free of
/// control characters, and written back out (values percent-encoded) they read back the same.
pub(crate) fn otlp_headers(value: &str) {
    let parse = |v: &str| {
        Config::from_lookup(|name| (name == OTEL_EXPORTER_OTLP_HEADERS).then(|| v.to_string()))
            .and_then(|config| config.otlp_target(Signal::Traces))
            .map(|target| target.headers)
    };
    let Ok(headers) = parse(value) else { return };
    for (name, value) in &headers {
        assert!(
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)),
            "accepted header name {name:?}"
        );
        assert!(!value.bytes().any(|b| b < 0x20 && b != b'\t' || b == 0x7f), "accepted header value {value:?}");
    }
    let text = headers.iter().map(|(k, v)| format!("{k}={}", percent_encode(v))).collect::<Vec<_>>().join(",");
    assert_eq!(parse(&text).expect("accepted headers, written back, parse"), headers, "written back as {text:?}");
}

/// The exposition linter over a text collector's output: what it keeps, linted again, is kept
/// whole and unchanged; it never grows the text; the OpenMetrics rewrite and a scrape that
/// already has families do not panic.
pub(crate) fn exposition_lint(text: &str) {
    use pipetel::fuzzing::lint_exposition;
    let (kept, _) = lint_exposition(text, &[], false);
    assert!(kept.len() <= text.len() + 1, "kept {} bytes of {}", kept.len(), text.len());
    let (again, refused) = lint_exposition(&kept, &[], false);
    assert_eq!(refused, None, "a kept line is refused when linted again; kept:\n{kept}");
    assert_eq!(again, kept, "linting what was kept changed it");
    let _ = lint_exposition(text, &[], true);
    let _ = lint_exposition(text, &["up", "process_cpu_seconds_total", "h"], false);
}

/// The stage a fuzzed remote report is ingested into (its seeds are reports of this stage).
pub(crate) const REMOTE_STAGE: (&str, &str) = ("fuzz", "e1");

/// A remote stage report, as a stage's owner receives it from another process
/// (`Stage::ingest_remote`, through `pipetel::fuzzing`): never a panic; a refused report is kept
/// in no part (the same bytes are refused again alike, and the owner holds nothing); an accepted
/// one puts exactly its shards' items in the owner, and the same bytes again are superseded.
pub(crate) fn remote_report(data: &[u8]) {
    use pipetel::pipeline::RemoteIngested;
    let (name, execution_id) = REMOTE_STAGE;
    let (first, again, items) = pipetel::fuzzing::ingest_remote_twice(name, execution_id, data);
    match first {
        Ok(RemoteIngested::Accepted) => {
            assert_eq!(again, Ok(RemoteIngested::Superseded), "the same report twice");
            // Per shard index, the last `items` figure of the report (a later series wins).
            let envelope = Envelope::decode(data).expect("an accepted report decodes");
            let mut expected = std::collections::BTreeMap::new();
            for snapshot in envelope.snapshots.iter().filter(|s| s.name() == "pipetel.remote_stage.shard") {
                for series in snapshot.series().filter(|r| r.labels[3] == "items") {
                    let index: u32 = series.labels[2].parse().expect("an accepted shard index");
                    expected.insert(index, series.value as u64);
                }
            }
            assert_eq!(items, expected.values().fold(0u64, |sum, v| sum.saturating_add(*v)));
        }
        Ok(other) => panic!("a fresh owner answered {other:?}"),
        Err(e) => {
            assert!(!e.to_string().is_empty());
            assert_eq!(again, Err(e), "a refused report, sent again");
            assert_eq!(items, 0, "a refused report left items behind");
        }
    }
}
