//! The OTLP profiles the collector's file exporter wrote (OTLP JSON, one
//! `ExportProfilesServiceRequest` a line), read back through each request's dictionary:
//! [`received`] gives every sample with its stack of function names, values, attributes, link,
//! types and period, and the resource's service and the scope it came under.

use std::collections::BTreeMap;

use serde_json::Value;

/// One sample as the collector wrote it, read through the dictionary.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// Function names, root first.
    pub stack: Vec<String>,
    pub values: Vec<i64>,
    pub attributes: BTreeMap<String, String>,
    /// Trace and span id of its link, hex.
    pub link: Option<(String, String)>,
    /// The profile's sample type, period type and period.
    pub sample_type: (String, String),
    pub period_type: (String, String),
    pub period: i64,
    /// The resource's `service.name` and the scope's name.
    pub service: String,
    pub scope: String,
}

/// A JSON integer, written as a number or (64-bit ones) as a string.
fn int(v: &Value) -> i64 {
    v.as_i64().or_else(|| v.as_str().and_then(|s| s.parse().ok())).unwrap_or(0)
}

fn index(v: &Value) -> usize {
    usize::try_from(int(v)).unwrap_or(0)
}

/// The string table's entry `i` (`""` past its end).
fn string(d: &Value, i: &Value) -> String {
    d["stringTable"][index(i)].as_str().unwrap_or_default().to_string()
}

/// A `KeyValue` (or `KeyValueAndUnit`) as text: the collector writes the resource's keys and
/// string values as references into the string table (`keyStrindex`, `stringValueStrindex`).
fn key_value(d: &Value, kv: &Value) -> (String, String) {
    let key = kv["key"].as_str().map_or_else(|| string(d, &kv["keyStrindex"]), str::to_string);
    let v = &kv["value"];
    let value = match (v["stringValue"].as_str(), v.get("stringValueStrindex")) {
        (Some(s), _) => s.to_string(),
        (None, Some(i)) => string(d, i),
        (None, None) => int(&v["intValue"]).to_string(),
    };
    (key, value)
}

/// OTLP JSON's ids are hex; accept base64 too, as the proto3 JSON mapping writes bytes.
fn id(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_ascii_lowercase()
}

/// Every sample in the file exporter's output (one `ExportProfilesServiceRequest` a line).
pub fn received(text: &str) -> Vec<Received> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Ok(doc) = serde_json::from_str::<Value>(line) else { continue };
        let d = &doc["dictionary"];
        let string = |i: &Value| string(d, i);
        let value_type = |t: &Value| (string(&t["typeStrindex"]), string(&t["unitStrindex"]));
        for rp in doc["resourceProfiles"].as_array().into_iter().flatten() {
            let service = rp["resource"]["attributes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|a| key_value(d, a))
                .find_map(|(k, v)| (k == "service.name").then_some(v))
                .unwrap_or_default();
            for sp in rp["scopeProfiles"].as_array().into_iter().flatten() {
                let scope = sp["scope"]["name"].as_str().unwrap_or_default().to_string();
                for profile in sp["profiles"].as_array().into_iter().flatten() {
                    for sample in profile["samples"].as_array().into_iter().flatten() {
                        let stack = &d["stackTable"][index(&sample["stackIndex"])];
                        let mut names: Vec<String> = stack["locationIndices"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|l| {
                                let location = &d["locationTable"][index(l)];
                                let function = &d["functionTable"][index(&location["lines"][0]["functionIndex"])];
                                string(&function["nameStrindex"])
                            })
                            .collect();
                        names.reverse();
                        let attributes = sample["attributeIndices"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|a| key_value(d, &d["attributeTable"][index(a)]))
                            .collect();
                        let link = match index(&sample["linkIndex"]) {
                            0 => None,
                            at => Some((id(&d["linkTable"][at]["traceId"]), id(&d["linkTable"][at]["spanId"]))),
                        };
                        out.push(Received {
                            stack: names,
                            values: sample["values"].as_array().into_iter().flatten().map(int).collect(),
                            attributes,
                            link,
                            sample_type: value_type(&profile["sampleType"]),
                            period_type: value_type(&profile["periodType"]),
                            period: int(&profile["period"]),
                            service: service.clone(),
                            scope: scope.clone(),
                        });
                    }
                }
            }
        }
    }
    out
}

/// Attributes as [`Received::attributes`] holds them.
pub fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}
