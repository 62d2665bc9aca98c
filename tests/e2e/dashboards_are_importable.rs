//! The Grafana dashboards are importable as they are and provisioned at start: current schema,
//! `__inputs` for import, the data source as a variable (never a hard-coded uid), unique panel
//! ids, a query and a unit on every panel, the template variables each dashboard needs, every
//! variable a query uses defined, and links that resolve to the other dashboards' uids.

use std::collections::{BTreeMap, BTreeSet};

use crate::support::{docs_text, workspace_root};
use serde_json::Value;

/// Each dashboard and the template variables it must offer.
const DASHBOARDS: [(&str, &[&str]); 5] = [
    ("pipeline-stages", &["datasource", "job", "instance", "execution_id", "stage"]),
    ("workers-shards", &["datasource", "job", "instance", "execution_id", "stage", "shard"]),
    ("gpus", &["datasource", "job", "instance", "gpu"]),
    ("service", &["datasource", "job", "instance", "prefix"]),
    ("functions-spans", &["datasource", "job", "instance", "function", "span"]),
];

fn load(name: &str) -> Value {
    let path = workspace_root().join(format!("dashboards/{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every panel, rows' nested panels included.
fn panels(d: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    let mut stack: Vec<&Value> = d["panels"].as_array().expect("panels").iter().collect();
    while let Some(p) = stack.pop() {
        stack.extend(p["panels"].as_array().into_iter().flatten());
        out.push(p);
    }
    out
}

/// Every value under a key named `key`, anywhere in `v`.
fn find_key<'a>(v: &'a Value, key: &str, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if k == key {
                    out.push(x);
                }
                find_key(x, key, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| find_key(x, key, out)),
        _ => {}
    }
}

/// The `$name` / `${name}` references in a string, Grafana's `$__` built-ins left out.
fn variable_refs(s: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' {
            let braced = b.get(i + 1) == Some(&b'{');
            let start = i + 1 + usize::from(braced);
            let mut j = start;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            let name = &s[start..j];
            if !name.is_empty() && !name.starts_with("__") {
                out.insert(name.to_string());
            }
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn dashboards_are_importable_with_a_datasource_variable_queries_and_units() {
    let mut uids = BTreeMap::new();
    for (name, _) in DASHBOARDS {
        let d = load(name);
        let uid = d["uid"].as_str().unwrap_or_else(|| panic!("{name}: no uid")).to_string();
        assert!(uids.insert(uid.clone(), name).is_none(), "uid {uid} used twice");
    }

    for (name, required_vars) in DASHBOARDS {
        let d = load(name);
        assert!(d["schemaVersion"].as_u64().is_some_and(|v| v >= 39), "{name}: schemaVersion {}", d["schemaVersion"]);
        assert!(d["id"].is_null(), "{name}: a fixed numeric id blocks import next to another copy");
        assert!(d["title"].as_str().is_some_and(|t| t.starts_with("pipetel / ")), "{name}: title {}", d["title"]);
        assert!(d["tags"].as_array().is_some_and(|t| t.iter().any(|x| x == "pipetel")), "{name}: tag pipetel");
        assert!(d["description"].as_str().is_some_and(|t| !t.is_empty()), "{name}: no description");

        // Import: one Prometheus input; the data source variable picks the chosen one.
        let inputs = d["__inputs"].as_array().unwrap_or_else(|| panic!("{name}: no __inputs"));
        assert_eq!(inputs.len(), 1, "{name}: __inputs {inputs:?}");
        assert_eq!(inputs[0]["name"], "DS_PROMETHEUS", "{name}");
        assert_eq!(inputs[0]["pluginId"], "prometheus", "{name}");
        let vars = d["templating"]["list"].as_array().unwrap_or_else(|| panic!("{name}: no templating"));
        let ds = vars.iter().find(|v| v["name"] == "datasource").unwrap_or_else(|| panic!("{name}: no datasource var"));
        assert_eq!(ds["type"], "datasource", "{name}");
        assert_eq!(ds["query"], "prometheus", "{name}");
        assert_eq!(ds["current"]["value"], "${DS_PROMETHEUS}", "{name}: import should preselect the chosen source");

        let defined: BTreeSet<String> =
            vars.iter().map(|v| v["name"].as_str().expect("variable name").to_string()).collect();
        for v in required_vars {
            assert!(defined.contains(*v), "{name}: variable {v} missing (has {defined:?})");
        }

        // Every data source reference is the variable: no uid of one particular Grafana.
        let mut refs = Vec::new();
        find_key(&d["panels"], "datasource", &mut refs);
        find_key(&d["templating"], "datasource", &mut refs);
        assert!(!refs.is_empty(), "{name}: no datasource references");
        for r in refs {
            let uid = r["uid"].as_str().unwrap_or_else(|| panic!("{name}: datasource reference {r} without uid"));
            assert!(uid == "${datasource}" || uid == "$datasource", "{name}: hard-coded datasource {r}");
            assert_eq!(r["type"], "prometheus", "{name}: {r}");
        }

        // Panels: unique ids, a position, a query and a unit each; every variable used defined.
        let all = panels(&d);
        let mut ids = BTreeSet::new();
        let mut used = BTreeSet::new();
        let mut queries = 0;
        for p in &all {
            let id = p["id"].as_u64().unwrap_or_else(|| panic!("{name}: panel without id: {}", p["title"]));
            assert!(ids.insert(id), "{name}: panel id {id} used twice");
            for k in ["x", "y", "w", "h"] {
                assert!(p["gridPos"][k].is_u64(), "{name}: panel {} gridPos.{k}", p["title"]);
            }
            if p["type"] == "row" {
                continue;
            }
            let title = p["title"].as_str().unwrap_or_default();
            assert!(!title.is_empty(), "{name}: panel {id} has no title");
            let unit = p["fieldConfig"]["defaults"]["unit"].as_str().unwrap_or_default();
            assert!(!unit.is_empty(), "{name}: panel {title:?} has no unit");
            let targets = p["targets"].as_array().unwrap_or_else(|| panic!("{name}: panel {title:?} has no targets"));
            assert!(!targets.is_empty(), "{name}: panel {title:?} has no query");
            let mut ref_ids = BTreeSet::new();
            for t in targets {
                let expr = t["expr"].as_str().unwrap_or_default();
                assert!(!expr.trim().is_empty(), "{name}: panel {title:?} has an empty query");
                assert!(ref_ids.insert(t["refId"].as_str().unwrap_or_default()), "{name}: {title:?}: refId twice");
                used.extend(variable_refs(expr));
                queries += 1;
                // Latency over time links to traces: a range quantile of a histogram shows its
                // exemplars (the pull endpoint serves them in OpenMetrics).
                if expr.starts_with("histogram_quantile(") && t["range"] == true {
                    assert_eq!(t["exemplar"], true, "{name}: {title:?}: a latency query without exemplars");
                }
            }
        }
        assert!(queries >= 8, "{name}: only {queries} queries");
        for v in vars {
            used.extend(variable_refs(v["definition"].as_str().unwrap_or_default()));
        }
        let undefined: Vec<&String> = used.iter().filter(|u| !defined.contains(*u)).collect();
        assert!(undefined.is_empty(), "{name}: queries use undefined variables {undefined:?}");

        // Links: to each other dashboard, all resolving to a uid that exists.
        let mut linked = BTreeSet::new();
        let mut urls = Vec::new();
        find_key(&d, "url", &mut urls);
        for u in urls.iter().filter_map(|u| u.as_str()) {
            if let Some(rest) = u.strip_prefix("/d/") {
                let uid = rest.split(['/', '?']).next().unwrap_or_default();
                assert!(uids.contains_key(uid), "{name}: link {u} names no dashboard uid ({:?})", uids.keys());
                linked.insert(uid.to_string());
            }
        }
        let own = d["uid"].as_str().expect("uid");
        for uid in uids.keys().filter(|u| u.as_str() != own) {
            assert!(linked.contains(uid), "{name}: no link to {uid}");
        }
        for l in d["links"].as_array().expect("links") {
            assert_eq!(l["includeVars"], true, "{name}: link {l} loses the variables");
            assert_eq!(l["keepTime"], true, "{name}: link {l} loses the time range");
        }
    }
}

#[test]
fn provisioning_loads_the_dashboards_and_the_prometheus_datasource() {
    let root = workspace_root();
    let read = |p: &str| -> serde_norway::Value {
        let text = std::fs::read_to_string(root.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
        serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{p}: {e}"))
    };
    let ds = read("dashboards/provisioning/datasources/pipetel.yaml");
    let list = ds["datasources"].as_sequence().expect("datasources");
    let prom: Vec<_> = list.iter().filter(|d| d["type"] == "prometheus").collect();
    assert_eq!(prom.len(), 1, "{list:?}");
    assert_eq!(prom[0]["isDefault"], true, "the dashboards' variable starts on the default source");
    for kind in ["tempo", "loki"] {
        assert!(list.iter().any(|d| d["type"] == kind), "no {kind} data source");
    }

    let providers = read("dashboards/provisioning/dashboards/pipetel.yaml");
    let p = &providers["providers"][0];
    assert_eq!(p["type"], "file");
    let path = p["options"]["path"].as_str().expect("provider path");
    // The compose file mounts dashboards/ exactly where the provider looks.
    let compose = read("otel-collector/docker-compose.yaml");
    let volumes = compose["services"]["grafana"]["volumes"].as_sequence().expect("grafana volumes");
    let mounts: Vec<&str> = volumes.iter().filter_map(|v| v.as_str()).collect();
    assert!(mounts.iter().any(|m| m.starts_with(&format!("../dashboards:{path}"))), "{mounts:?} vs {path}");
    assert!(mounts.iter().any(|m| m.starts_with("../dashboards/provisioning:/etc/grafana/provisioning")), "{mounts:?}");
}

#[test]
fn variable_references_are_found() {
    assert_eq!(
        variable_refs("rate(${prefix}_x{job=~\"$job\"}[$__rate_interval]) $instance"),
        BTreeSet::from(["prefix".to_string(), "job".to_string(), "instance".to_string()])
    );
}

/// Metrics of the docs' tables that no panel shows, and why.
const NOT_ON_A_DASHBOARD: [&str; 2] = [
    // Opt-in before Hopper (PIPETEL_GPU_PCIE_THROUGHPUT): a panel would show "No data" for
    // everyone on older GPUs who did not opt in.
    "hw_gpu_pcie_throughput_bytes_per_second",
    // Only with `output_size = ...` on #[pipetel::measure]; no example measures it.
    "function_output_size_bytes",
];

#[test]
fn every_metric_the_docs_list_is_on_a_dashboard() {
    let readme = docs_text();
    let mut listed = BTreeSet::new();
    for line in readme.lines().filter(|l| l.starts_with("| `")) {
        let Some(col) = line.split('|').nth(3) else { continue };
        // A label (the DCGM table's attribute rows), not a metric.
        if col.trim_start().starts_with("label ") {
            continue;
        }
        for name in col.split('`').skip(1).step_by(2) {
            let metric = ["pipeline_", "hw_", "function_", "span_", "service_", "pipetel_"];
            if metric.iter().any(|p| name.starts_with(p)) {
                listed.insert(name.to_string());
            }
        }
    }
    assert!(listed.len() >= 30, "the docs' metric tables: {listed:?}");
    let mut exprs = String::new();
    for (name, _) in DASHBOARDS {
        let d = load(name);
        let mut found = Vec::new();
        find_key(&d, "expr", &mut found);
        for e in found.iter().filter_map(|e| e.as_str()) {
            // The service dashboard's metric prefix, at its default.
            exprs.push_str(&e.replace("${prefix}", "service"));
            exprs.push('\n');
        }
    }
    for m in &listed {
        let shown = exprs.contains(m.as_str());
        if NOT_ON_A_DASHBOARD.contains(&m.as_str()) {
            assert!(!shown, "{m} is on a dashboard now: drop it from NOT_ON_A_DASHBOARD");
        } else {
            assert!(shown, "the docs list {m}, but no dashboard panel queries it");
        }
    }
}
