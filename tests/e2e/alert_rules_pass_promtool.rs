//! The Prometheus configuration and alert rules pass `promtool`: `check config` on
//! `otel-collector/prometheus.yml` (which loads the rules), `check rules`, and the unit tests in
//! `otel-collector/rules/pipetel-alerts.test.yml`, where each alert both fires and stays silent.
//! Each alert's tests also fail when its expression is replaced by one that never fires, so
//! every "fires" case is real.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::support::prometheus::promtool;
use crate::support::{turn_if_peers, workspace_root, Peer};

fn collector_dir() -> PathBuf {
    workspace_root().join("otel-collector")
}

fn yaml(path: &Path) -> serde_norway::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Alert names in the rules file.
fn alerts() -> Vec<String> {
    let rules = yaml(&collector_dir().join("rules/pipetel-alerts.yml"));
    rules["groups"]
        .as_sequence()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_sequence().expect("rules").iter())
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn prometheus_config_and_rules_pass_promtool_checks() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Promtool]) else { return };
    let dir = collector_dir();
    let (ok, out) = promtool(&["check", "config", "prometheus.yml"], &dir);
    assert!(ok, "promtool check config:\n{out}");
    assert!(out.contains("1 rule files found"), "prometheus.yml loads the alert rules:\n{out}");
    let (ok, out) = promtool(&["check", "rules", "rules/pipetel-alerts.yml"], &dir);
    assert!(ok, "promtool check rules:\n{out}");
    assert!(out.contains("SUCCESS: 14 rules found"), "{out}");
}

#[test]
fn every_alert_the_issue_names_is_defined_with_severity_and_summary() {
    let expected = [
        "PipetelStageFailed",
        "PipetelStageStalled",
        "PipetelShardHeartbeatMissing",
        "PipetelShardStalled",
        "PipetelStageSkewed",
        "PipetelGpuIdleWhileStageRuns",
        "PipetelWorkerMemoryNearLimit",
        "PipetelTaskFailureRatioHigh",
        "PipetelGpuXidCritical",
        "PipetelGpuXidError",
        "PipetelGpuClockThrottled",
        "PipetelGpuRowRemapFailed",
        "PipetelGpuRowRemapPending",
    ];
    let mut defined = alerts();
    defined.sort();
    let mut expected = expected.to_vec();
    expected.sort();
    assert_eq!(defined, expected);
    let rules = yaml(&collector_dir().join("rules/pipetel-alerts.yml"));
    for g in rules["groups"].as_sequence().expect("groups") {
        for r in g["rules"].as_sequence().expect("rules").iter().filter(|r| r["alert"].is_string()) {
            assert!(r["labels"]["severity"].is_string(), "{:?}: no severity", r["alert"]);
            assert!(r["annotations"]["summary"].is_string(), "{:?}: no summary", r["alert"]);
            assert!(r["annotations"]["description"].is_string(), "{:?}: no description", r["alert"]);
        }
    }
}

#[test]
fn alert_unit_tests_pass_and_cover_firing_and_silence_for_each_alert() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Promtool]) else { return };
    let dir = collector_dir().join("rules");
    let (ok, out) = promtool(&["test", "rules", "pipetel-alerts.test.yml"], &dir);
    assert!(ok, "promtool test rules:\n{out}");
    assert!(out.contains("SUCCESS"), "{out}");

    // Each alert has a case where it fires and one where it is silent.
    let tests = yaml(&dir.join("pipetel-alerts.test.yml"));
    let mut cases: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for t in tests["tests"].as_sequence().expect("tests") {
        for a in t["alert_rule_test"].as_sequence().into_iter().flatten() {
            let name = a["alertname"].as_str().expect("alertname").to_string();
            let firing = a["exp_alerts"].as_sequence().is_some_and(|e| !e.is_empty());
            let entry = cases.entry(name).or_default();
            if firing {
                entry.0 += 1;
            } else {
                entry.1 += 1;
            }
        }
    }
    for alert in alerts() {
        let (fires, silent) = cases.get(&alert).copied().unwrap_or_default();
        assert!(fires > 0 && silent > 0, "{alert}: {fires} firing and {silent} silent cases");
    }
}

#[test]
fn the_unit_tests_catch_an_alert_that_never_fires() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Promtool]) else { return };
    let src = collector_dir().join("rules");
    let rules = std::fs::read_to_string(src.join("pipetel-alerts.yml")).expect("rules");
    let tests = std::fs::read_to_string(src.join("pipetel-alerts.test.yml")).expect("tests");
    for alert in alerts() {
        let dir = std::env::temp_dir().join(format!("pipetel-alert-mutant-{}-{alert}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        // Replace this alert's expression with one that never returns a series.
        let mut doc: serde_norway::Value = serde_norway::from_str(&rules).expect("rules YAML");
        for g in doc["groups"].as_sequence_mut().expect("groups") {
            for r in g["rules"].as_sequence_mut().expect("rules") {
                if r["alert"].as_str() == Some(alert.as_str()) {
                    r["expr"] = serde_norway::Value::String("vector(1) == 0".into());
                }
            }
        }
        std::fs::write(dir.join("pipetel-alerts.yml"), serde_norway::to_string(&doc).expect("YAML")).expect("write");
        std::fs::write(dir.join("pipetel-alerts.test.yml"), &tests).expect("write");
        let (ok, out) = promtool(&["test", "rules", "pipetel-alerts.test.yml"], &dir);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(!ok, "the unit tests pass although {alert} never fires:\n{out}");
        assert!(out.contains(&format!("alertname: {alert}")), "the failure names {alert}:\n{out}");
    }
}
