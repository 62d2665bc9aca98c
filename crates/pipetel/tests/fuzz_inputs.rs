//! The fuzz targets of `crates/pipetel/fuzz` on stable: each target's committed seed corpus plus
//! deterministic mutations of it, judged by the same checks (`fuzz/checks.rs`) a fuzzing run
//! makes, so CI exercises every target on every run. Valid seeds must stay valid, or the corpus
//! has drifted from the format and stopped exercising the accepting paths.

use std::path::{Path, PathBuf};

use pipetel::recorders::{Counter, Envelope, Family, FrameWriter, Gauge, Histogram};

#[path = "../fuzz/checks.rs"]
mod checks;
#[path = "../fuzz/mutate.rs"]
mod mutate;

use mutate::{mutations, Rng};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target)
}

/// The seeds of `target`, sorted by name.
fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir(target);
    let out = mutate::read_seeds(&dir);
    assert!(out.len() >= 4, "{target}: {} seeds", out.len());
    out
}

/// The seeds of `target` that must be accepted (named `valid-*`).
fn valid_seeds(target: &str) -> impl Iterator<Item = (String, Vec<u8>)> {
    seeds(target).into_iter().filter(|(name, _)| name.starts_with("valid-"))
}

/// Runs `check` on every seed and its mutations, and asserts that more than `least` inputs ran.
fn replay(target: &str, cap: usize, random: usize, least: usize, check: impl Fn(&[u8])) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut cases = 0;
    for (_, seed) in seeds(target) {
        check(&seed);
        mutations(&seed, &mut rng, cap, random, |input| {
            cases += 1;
            check(input);
        });
    }
    assert!(cases > least, "{target}: {cases} inputs");
}

fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap_or("")
}

fn frames(envelopes: &[Envelope]) -> Vec<u8> {
    let mut w = FrameWriter::new(Vec::new());
    for e in envelopes {
        w.send(e).expect("write to a vec");
    }
    w.into_inner()
}

/// The hub's seeds: streams of frames as workers send them (growth, a restart, every kind, more
/// sources than the fuzzed hub takes, a family clash) and broken streams.
fn hub_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let counter = || {
        Counter::new(Family::counter("pipeline.stage.items", "Items", "{item}", &["stage"]).expect("valid"))
            .expect("counter")
    };
    let items = counter();
    items.add(&["tokenize"], 10.0).expect("add");
    let first = Envelope::new("worker-1", 1, vec![items.snapshot()]);
    items.add(&["tokenize"], 5.0).expect("add");
    items.add(&["d\u{e9}tokenize"], 1.0).expect("add");
    let second = Envelope::new("worker-1", 2, vec![items.snapshot()]);
    let restarted = counter();
    restarted.add(&["tokenize"], 2.0).expect("add");
    let after_restart = Envelope::new("worker-1", 1, vec![restarted.snapshot()]);

    let g = Gauge::new(Family::gauge("queue.size", "Queue", "{task}", &[]).expect("valid")).expect("gauge");
    g.set(&[], -3.5).expect("set");
    let h = Histogram::new(
        Family::histogram("task.duration", "Duration", "s", &["op"], &[0.005, 0.1, 1.0]).expect("valid"),
    )
    .expect("histogram");
    for (i, v) in [0.001, 0.05, 0.5, 5.0].iter().enumerate() {
        h.observe(&[if i % 2 == 0 { "read" } else { "write" }], *v).expect("observe");
    }
    let kinds = Envelope::new("worker-2", 7, vec![items.snapshot(), g.snapshot(), h.snapshot()]);
    let many: Vec<Envelope> =
        (0..5).map(|i| Envelope::new(format!("w{i}"), 1, vec![items.snapshot(), g.snapshot()])).collect();
    let clash = Counter::new(Family::counter("queue.size", "Queue", "{task}", &[]).expect("valid")).expect("counter");
    clash.inc(&[]).expect("inc");
    let clashing = Envelope::new("worker-3", 1, vec![clash.snapshot()]);

    let mut truncated = frames(std::slice::from_ref(&first));
    truncated.truncate(truncated.len() - 3);
    let mut bad_payload = frames(std::slice::from_ref(&first));
    bad_payload.extend_from_slice(&5u32.to_le_bytes());
    bad_payload.extend_from_slice(b"hello");
    bad_payload.extend(frames(std::slice::from_ref(&second)));
    vec![
        ("valid-growth.bin", frames(&[first.clone(), second.clone()])),
        ("valid-restart.bin", frames(&[first.clone(), second.clone(), after_restart, second.clone()])),
        ("valid-kinds.bin", frames(&[kinds])),
        ("garbage-too-many-sources.bin", frames(&many)),
        ("garbage-family-clash.bin", frames(&[Envelope::new("worker-2", 1, vec![g.snapshot()]), clashing])),
        ("garbage-truncated.bin", truncated),
        ("garbage-huge-length.bin", [&u32::MAX.to_le_bytes()[..], b"PTRC\x01"].concat()),
        ("garbage-bad-payload.bin", bad_payload),
    ]
}

#[test]
fn hub_frames() {
    let dir = corpus_dir("hub_frames");
    if std::env::var_os("PIPETEL_REGENERATE_CORPUS").is_some() {
        std::fs::create_dir_all(&dir).expect("corpus dir");
        for (name, bytes) in hub_seeds() {
            std::fs::write(dir.join(name), bytes).expect("write seed");
        }
    }
    for (name, bytes) in hub_seeds() {
        let committed = std::fs::read(dir.join(name)).unwrap_or_default();
        assert_eq!(committed, bytes, "seed {name} is stale: PIPETEL_REGENERATE_CORPUS=1 rewrites it");
    }
    for (name, bytes) in valid_seeds("hub_frames") {
        let hub = pipetel::hub::SnapshotHub::with_meter(
            pipetel::hub::HubConfig::default(),
            pipetel::opentelemetry::global::meter("fuzz-test"),
        );
        let report = hub.read_stream(&bytes[..]);
        assert!(report.refused == 0 && report.error.is_none() && report.accepted > 0, "{name}: {report:?}");
    }
    replay("hub_frames", 400, 400, 3000, checks::hub_frames);
}

/// The remote report's seeds: reports of the fuzzed stage as a remote view makes them (finished
/// and running shards, int and float counters), and refused ones (another stage, cut short, an
/// unknown state).
fn remote_seeds() -> Vec<(&'static str, Vec<u8>)> {
    use pipetel::pipeline::{CounterKey, Stage};
    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let (name, execution_id) = checks::REMOTE_STAGE;
    let view = Stage::remote(name, execution_id, PARENT).expect("remote view");
    let (items, cpu) = (CounterKey::new("zephyr/item_count").expect("key"), CounterKey::new("cpu").expect("key"));
    let first = view.shard(0).start();
    first.record(10, 100);
    first.add(&items, 10u64);
    first.finish();
    let second = view.shard(1).start();
    second.record(5, 50);
    second.add(&cpu, 0.5);
    let running = view.remote_report("w1").encode();
    second.fail("bad input");
    let done = view.remote_report("w1").encode();
    let other = Stage::remote("other", execution_id, PARENT).expect("remote view");
    other.shard(0).start().finish();
    let other = other.remote_report("w2").encode();
    let family = Family::gauge("pipetel.remote_stage.shard", "", "", &["stage", "execution_id", "shard", "field"])
        .expect("valid");
    let bad = Gauge::new(family).expect("gauge");
    bad.set(&[name, execution_id, "0", "state"], 7.0).expect("set");
    let bad_state = Envelope::new("w3", 1, vec![bad.snapshot()]).encode();
    vec![
        ("valid-running.bin", running),
        ("valid-done.bin", done.clone()),
        ("garbage-other-stage.bin", other),
        ("garbage-truncated.bin", done[..done.len() - 5].to_vec()),
        ("garbage-bad-state.bin", bad_state),
    ]
}

/// A remote report as its series with each shard's `elapsed` (the run's own timing) at zero, or,
/// for bytes that do not decode, their length: what a committed seed must still match.
fn timeless(bytes: &[u8]) -> Result<Vec<(String, Vec<String>, u64)>, usize> {
    let envelope = Envelope::decode(bytes).map_err(|_| bytes.len())?;
    Ok(envelope
        .snapshots
        .iter()
        .flat_map(|snap| {
            snap.series().map(move |s| {
                let elapsed = s.labels.last().is_some_and(|l| l == "elapsed");
                (snap.name().to_string(), s.labels.to_vec(), if elapsed { 0 } else { s.value.to_bits() })
            })
        })
        .collect())
}

#[test]
fn remote_report() {
    let dir = corpus_dir("remote_report");
    if std::env::var_os("PIPETEL_REGENERATE_CORPUS").is_some() {
        std::fs::create_dir_all(&dir).expect("corpus dir");
        for (name, bytes) in remote_seeds() {
            std::fs::write(dir.join(name), bytes).expect("write seed");
        }
    }
    for (name, bytes) in remote_seeds() {
        let committed = std::fs::read(dir.join(name)).unwrap_or_default();
        assert_eq!(
            timeless(&committed),
            timeless(&bytes),
            "seed {name} is stale: PIPETEL_REGENERATE_CORPUS=1 rewrites it"
        );
    }
    let (name, execution_id) = checks::REMOTE_STAGE;
    for (seed, bytes) in seeds("remote_report") {
        let stage = pipetel::stage(name).execution_id(execution_id).start();
        let outcome = stage.ingest_remote(&bytes);
        assert_eq!(outcome.is_ok(), seed.starts_with("valid-"), "{seed}: {outcome:?}");
        stage.finish();
    }
    replay("remote_report", 300, 300, 2000, checks::remote_report);
}

#[test]
fn config_env() {
    for (name, bytes) in valid_seeds("config_env") {
        let lines: Vec<(String, String)> = text(&bytes)
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
            .collect();
        let config = pipetel::Config::from_lookup(|n| lines.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()));
        assert!(config.is_ok(), "{name}: {config:?}");
    }
    // Each input is read by every variable alone: fewer mutations, the same coverage.
    replay("config_env", 24, 40, 500, |b| checks::config_env(text(b)));
}

#[test]
fn config_file() {
    for (name, bytes) in valid_seeds("config_file") {
        let config = pipetel::Config::from_toml_str(text(&bytes), Path::new(&name));
        assert!(config.is_ok(), "{name}: {config:?}");
    }
    replay("config_file", 300, 400, 3000, |b| checks::config_file(text(b)));
}

#[test]
fn otlp_headers() {
    for (name, bytes) in seeds("otlp_headers") {
        let config = pipetel::Config::from_lookup(|n| {
            (n == pipetel::config::OTEL_EXPORTER_OTLP_HEADERS).then(|| text(&bytes).to_string())
        });
        assert_eq!(config.is_ok(), name.starts_with("valid-"), "{name}: {config:?}");
    }
    replay("otlp_headers", 300, 600, 3000, |b| checks::otlp_headers(text(b)));
}

#[test]
fn exposition_lint() {
    for (name, bytes) in seeds("exposition_lint") {
        let (kept, refused) = pipetel::fuzzing::lint_exposition(text(&bytes), &[], false);
        if name.starts_with("valid-") {
            assert_eq!(refused, None, "{name}");
        } else {
            assert!(refused.is_some(), "{name}: nothing refused, kept:\n{kept}");
        }
    }
    replay("exposition_lint", 400, 800, 3000, |b| checks::exposition_lint(text(b)));
}
