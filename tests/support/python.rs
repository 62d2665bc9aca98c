//! The Python `prometheus_client` text parser, as an independent reader of expositions.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::peers::Peer;

/// The Python interpreter with `prometheus_client`: `PIPETEL_PYTHON`, or the workspace's `.venv`
/// ([`Peer::Python`]).
pub fn python_binary() -> PathBuf {
    Peer::Python.binary()
}

/// Label values of `metric` samples, as the Python `prometheus_client` text parser reads them.
pub fn python_label_values(exposition: &str, metric: &str, label: &str) -> Vec<String> {
    let python = python_binary();
    let script = format!(
        "import json, sys\nfrom prometheus_client.parser import text_string_to_metric_families\n\
         out = []\nfor fam in text_string_to_metric_families(sys.stdin.read()):\n    for s in fam.samples:\n        \
         if s.name == {metric:?} and {label:?} in s.labels:\n            out.append(s.labels[{label:?}])\n\
         print(json.dumps(out))\n"
    );
    let mut child = Command::new(&python)
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run {} (set PIPETEL_PYTHON; scripts/test installs it): {e}", python.display())
        });
    child.stdin.take().expect("stdin").write_all(exposition.as_bytes()).expect("write exposition");
    let out = child.wait_with_output().expect("python output");
    assert!(out.status.success(), "the Python parser refused the exposition: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON list of label values")
}
