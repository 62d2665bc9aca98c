//! Python worker processes (`python/tests/hub_worker.py`, recording with the `pipetel` Python
//! package's mstar recorders) send framed envelopes over their stdout pipes to a Rust
//! [`SnapshotHub`] reading each pipe with `spawn_reader`: three workers side by side, one of
//! them dying after 5 steps and started again with its sequence from 1. The merged totals are
//! exact, computed here independently of the Python side.
//!
//! Needs `PIPETEL_PYTHON` with the `pipetel` package installed (`scripts/test` runs
//! `scripts/test-python`, which installs it into `.venv`, before this).

use std::process::{Command, Stdio};
use std::time::Duration;

use pipetel::hub::{HubConfig, SnapshotHub};

use crate::support::python::python_binary;
use crate::support::{turn_if_peers, workspace_root, Peer};

/// `(worker index, steps)` of each run, in order; worker 1 runs twice (a restart).
const RUNS: &[(u64, u64)] = &[(0, 12), (1, 5), (2, 12), (1, 12)];

fn worker(index: u64, steps: u64) -> std::process::Child {
    let script = workspace_root().join("python/tests/hub_worker.py");
    Command::new(python_binary())
        .arg(&script)
        .args(["--source", &format!("w{index}"), "--index", &index.to_string(), "--steps", &steps.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run {} {}: {e} (set PIPETEL_PYTHON)", python_binary().display(), script.display())
        })
}

/// What worker `index` records at step `i` (the formula of `hub_worker.step_values`).
fn latency(i: u64) -> f64 {
    0.25 * (i % 5) as f64
}

fn run(hub: &SnapshotHub, runs: &[(u64, u64)]) {
    let mut children: Vec<_> = runs.iter().map(|&(index, steps)| worker(index, steps)).collect();
    let readers: Vec<_> = children
        .iter_mut()
        .map(|c| hub.spawn_reader(c.stdout.take().expect("piped stdout")).expect("reader thread"))
        .collect();
    for ((child, reader), &(_, steps)) in children.into_iter().zip(readers).zip(runs) {
        let report = reader.join().expect("reader thread");
        let out = child.wait_with_output().expect("worker exit");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "worker failed ({}): {stderr}", out.status);
        assert_eq!((report.received, report.accepted, report.refused), (steps, steps, 0), "{report:?}; {stderr}");
        assert!(report.error.is_none(), "{report:?}");
    }
}

#[test]
fn python_workers_feed_a_rust_hub_with_exact_totals_across_a_restart() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::PipetelPython]) else { return };
    let hub = SnapshotHub::new(HubConfig::default().with_stale_after(Duration::from_secs(600)));
    run(&hub, &RUNS[..3]);
    // Worker 1 again, on a new pipe, its sequence from 1: recognised as a restart at once.
    run(&hub, &RUNS[3..]);

    let sources: Vec<_> = hub.sources().into_iter().map(|s| (s.source, s.sequence, s.restarts)).collect();
    assert_eq!(sources, [("w0".into(), 12, 0), ("w1".into(), 12, 1), ("w2".into(), 12, 0)]);

    let merged = hub.snapshot();
    let family = |name: &str| {
        merged.iter().find(|s| s.name() == name).unwrap_or_else(|| panic!("no family {name} in {merged:?}"))
    };
    let steps = |f: &dyn Fn(u64, u64) -> f64| -> f64 {
        RUNS.iter().flat_map(|&(index, n)| (1..=n).map(move |i| (index, i))).map(|(index, i)| f(index, i)).sum()
    };
    let items = family("pipeline.stage.items");
    let tokenize = steps(&|index, _| 10.0 * (index + 1) as f64);
    assert_eq!(tokenize, 820.0);
    assert_eq!(items.get(&["tokenize"]).map(|s| s.value), Some(tokenize));
    assert_eq!(items.get(&["embed"]).map(|s| s.value), Some(3.0 * 41.0));

    let hist = family("task.duration");
    let series = hist.get::<&str>(&[]).expect("the histogram series");
    let le = |bound: f64| steps(&|_, i| f64::from(u8::from(latency(i) <= bound))) as u64;
    assert_eq!(series.bucket_counts, [le(0.1), le(0.5), le(1.0), 41]);
    assert_eq!(series.bucket_counts, [7, 27, 41, 41]);
    assert_eq!(series.sum, steps(&|_, i| latency(i)));
    assert_eq!(series.sum, 19.75);

    let bytes = family("pipeline.transfer.bytes");
    assert_eq!(bytes.values().iter().sum::<f64>(), steps(&|_, i| 1000.0 * i as f64));
    assert_eq!(bytes.get(&["gpu1", "gpu9", "nccl"]).map(|s| s.value), Some(1000.0 * (15 + 78) as f64));
    assert_eq!(family("pipeline.transfer.count").values().iter().sum::<f64>(), 41.0);
    assert_eq!(family("pipeline.transfer.tensors").values().iter().sum::<f64>(), 82.0);
    // Gauges: each live source's latest value.
    let queue = family("worker.queue.depth");
    assert_eq!(queue.label_values(), ["w0", "w1", "w2"]);
    assert_eq!(queue.values(), [12.0, 12.0, 12.0]);
}
