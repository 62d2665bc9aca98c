//! Profile lines as one OTLP profiles request (`opentelemetry.proto.profiles.v1development`):
//! one resource, one scope (`pipetel`), one profile per aggregation window and sampling period,
//! and the dictionary every profile of the request shares.
//!
//! A line's labels become its sample's attributes (`pipeline.stage.name`,
//! `pipeline.execution.id`, `pipeline.shard.index`, `pipeline.phase`, `profile.language`, and
//! `host.name` / `process.pid` where they are not the resource's), its shard span the sample's
//! link, its stack a stack of locations, one function each: leaf first, as the proto has it
//! (the line holds the root first). The sample's one value is the line's sample count; the
//! profile's sample type is `samples` / `count`, its period `cpu` / `nanoseconds` times the
//! line's period.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

use opentelemetry::Value;
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope};
use opentelemetry_proto::tonic::profiles::v1development::{
    Function, KeyValueAndUnit, Line, Link, Location, Mapping, Profile, ProfilesDictionary, ResourceProfiles, Sample,
    ScopeProfiles, Stack, ValueType,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::transform::common::tonic::Attributes;
use pipetel_rows::profile::{keys, ProfileLine};

/// The scope every profile is sent under.
pub(crate) const SCOPE: &str = "pipetel";

/// The request carrying `lines` for `resource`. Lines with no frame or no sample are left out.
pub(crate) fn request(resource: &opentelemetry_sdk::Resource, lines: &[ProfileLine]) -> ExportProfilesServiceRequest {
    let host = resource_text(resource, keys::HOST);
    let pid = resource_text(resource, keys::PID);
    let mut dictionary = Dictionary::new();
    // One profile per (window end, period): a profile has one collection time and one period.
    let mut windows: BTreeMap<(u64, u64), Vec<Sample>> = BTreeMap::new();
    for line in lines.iter().filter(|l| !l.stack.is_empty() && l.samples > 0) {
        let mut attributes = Vec::new();
        let mut attribute = |key: &str, value: any_value::Value| attributes.push(dictionary.attribute(key, value));
        let text = |s: &str| any_value::Value::StringValue(s.to_string());
        if let Some(stage) = &line.stage {
            attribute(keys::STAGE, text(stage));
        }
        if let Some(execution) = &line.execution {
            attribute(keys::EXECUTION, text(execution));
        }
        if let Some(shard) = line.shard {
            attribute(keys::SHARD, any_value::Value::IntValue(i64::from(shard)));
        }
        if let Some(phase) = &line.phase {
            attribute(keys::PHASE, text(phase));
        }
        if !line.language.is_empty() {
            attribute(keys::LANGUAGE, text(&line.language));
        }
        // Lines of another process (a worker's, sent through this one) say whose they are.
        if !line.host.is_empty() && host.as_deref() != Some(line.host.as_str()) {
            attribute(keys::HOST, text(&line.host));
        }
        if pid.as_deref() != Some(line.pid.to_string().as_str()) {
            attribute(keys::PID, any_value::Value::IntValue(i64::from(line.pid)));
        }
        let sample = Sample {
            stack_index: dictionary.stack(&line.stack),
            attribute_indices: attributes,
            link_index: dictionary.link(line.trace_id.as_deref(), line.span_id.as_deref()),
            values: vec![i64::try_from(line.samples).unwrap_or(i64::MAX)],
            timestamps_unix_nano: Vec::new(),
        };
        windows.entry((line.timestamp_ms, line.period_ns)).or_default().push(sample);
    }
    let sample_type =
        ValueType { type_strindex: dictionary.string("samples"), unit_strindex: dictionary.string("count") };
    let period_type =
        ValueType { type_strindex: dictionary.string("cpu"), unit_strindex: dictionary.string("nanoseconds") };
    let profiles = windows
        .into_iter()
        .map(|((timestamp_ms, period_ns), samples)| Profile {
            sample_type: Some(sample_type),
            samples,
            time_unix_nano: timestamp_ms.saturating_mul(1_000_000),
            duration_nano: 0,
            period_type: Some(period_type),
            period: i64::try_from(period_ns).unwrap_or(i64::MAX),
            profile_id: uuid::Uuid::new_v4().as_bytes().to_vec(),
            ..Profile::default()
        })
        .collect();
    let attributes = Attributes::from(resource.iter().map(|(k, v)| opentelemetry::KeyValue::new(k.clone(), v.clone())));
    ExportProfilesServiceRequest {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(Resource { attributes: attributes.0, ..Resource::default() }),
            scope_profiles: vec![ScopeProfiles {
                scope: Some(InstrumentationScope {
                    name: SCOPE.to_string(),
                    version: env!("CARGO_PKG_VERSION").to_string(),
                    ..InstrumentationScope::default()
                }),
                profiles,
                schema_url: String::new(),
            }],
            schema_url: resource.schema_url().unwrap_or_default().to_string(),
        }],
        dictionary: Some(dictionary.into_proto()),
    }
}

/// A resource attribute as text (`process.pid` is an integer there).
fn resource_text(resource: &opentelemetry_sdk::Resource, key: &'static str) -> Option<String> {
    match resource.get(&opentelemetry::Key::from_static_str(key))? {
        Value::String(s) => Some(s.to_string()),
        Value::I64(i) => Some(i.to_string()),
        other => Some(other.to_string()),
    }
}

/// A table whose entries are told apart by value: an entry's index, adding it the first time.
/// Index 0 holds the zero value, as the proto requires of every table.
struct Table<K, V> {
    index: HashMap<K, i32>,
    items: Vec<V>,
}

impl<K: Eq + Hash, V: Default> Table<K, V> {
    fn new() -> Self {
        Table { index: HashMap::new(), items: vec![V::default()] }
    }

    fn get(&mut self, key: K, make: impl FnOnce() -> V) -> i32 {
        if let Some(&at) = self.index.get(&key) {
            return at;
        }
        // Past i32::MAX entries (more than a request could carry) the zero value stands in.
        let Ok(at) = i32::try_from(self.items.len()) else { return 0 };
        self.items.push(make());
        self.index.insert(key, at);
        at
    }
}

/// The dictionary of one request: every table deduplicated, nothing unreferenced.
struct Dictionary {
    strings: Table<String, String>,
    functions: Table<i32, Function>,
    locations: Table<i32, Location>,
    stacks: Table<Vec<i32>, Stack>,
    links: Table<(Vec<u8>, Vec<u8>), Link>,
    attributes: Table<(i32, String), KeyValueAndUnit>,
}

impl Dictionary {
    fn new() -> Self {
        Dictionary {
            strings: Table::new(),
            functions: Table::new(),
            locations: Table::new(),
            stacks: Table::new(),
            links: Table::new(),
            attributes: Table::new(),
        }
    }

    fn string(&mut self, s: &str) -> i32 {
        if s.is_empty() {
            return 0;
        }
        self.strings.get(s.to_string(), || s.to_string())
    }

    /// The location of a frame: one line, in the function of that name.
    fn frame(&mut self, name: &str) -> i32 {
        let name = self.string(name);
        let function = self.functions.get(name, || Function {
            name_strindex: name,
            system_name_strindex: name,
            ..Function::default()
        });
        self.locations.get(function, || Location {
            lines: vec![Line { function_index: function, ..Line::default() }],
            ..Location::default()
        })
    }

    /// `frames` root first, as the line holds them; the stack leaf first, as the proto has it.
    fn stack(&mut self, frames: &[String]) -> i32 {
        let locations: Vec<i32> = frames.iter().rev().map(|f| self.frame(f)).collect();
        self.stacks.get(locations.clone(), || Stack { location_indices: locations })
    }

    /// The link to the shard span; 0 (none) without both ids or with an id that is not hex of
    /// the right length.
    fn link(&mut self, trace_id: Option<&str>, span_id: Option<&str>) -> i32 {
        let (Some(trace), Some(span)) = (trace_id.and_then(|t| hex(t, 16)), span_id.and_then(|s| hex(s, 8))) else {
            return 0;
        };
        self.links.get((trace.clone(), span.clone()), || Link { trace_id: trace, span_id: span })
    }

    fn attribute(&mut self, key: &str, value: any_value::Value) -> i32 {
        let key = self.string(key);
        let identity = match &value {
            any_value::Value::StringValue(s) => format!("s{s}"),
            other => format!("{other:?}"),
        };
        self.attributes.get((key, identity), || KeyValueAndUnit {
            key_strindex: key,
            value: Some(AnyValue { value: Some(value) }),
            unit_strindex: 0,
        })
    }

    fn into_proto(self) -> ProfilesDictionary {
        ProfilesDictionary {
            mapping_table: vec![Mapping::default()],
            location_table: self.locations.items,
            function_table: self.functions.items,
            link_table: self.links.items,
            string_table: self.strings.items,
            attribute_table: self.attributes.items,
            stack_table: self.stacks.items,
        }
    }
}

/// `text` as `len` bytes, when it is exactly `2 * len` hexadecimal digits and not all zero (an
/// all-zero id is invalid in OTLP).
fn hex(text: &str, len: usize) -> Option<Vec<u8>> {
    if text.len() != 2 * len || !text.is_ascii() {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..len).map(|i| u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()).collect();
    bytes.filter(|b| b.iter().any(|&x| x != 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(stack: &[&str], samples: u64) -> ProfileLine {
        ProfileLine {
            timestamp_ms: 1_700_000_000_000,
            host: "h1".into(),
            pid: 42,
            stage: Some("tokenize".into()),
            execution: Some("e1".into()),
            shard: Some(3),
            phase: Some("io".into()),
            trace_id: Some("0af7651916cd43dd8448eb211c80319c".into()),
            span_id: Some("b7ad6b7169203331".into()),
            language: "rust".into(),
            period_ns: 10_000_000,
            samples,
            stack: stack.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn resource() -> opentelemetry_sdk::Resource {
        opentelemetry_sdk::Resource::builder_empty()
            .with_attributes([
                opentelemetry::KeyValue::new("service.name", "svc"),
                opentelemetry::KeyValue::new("host.name", "h1"),
                opentelemetry::KeyValue::new("process.pid", 42_i64),
            ])
            .build()
    }

    /// Every frame of a sample's stack by name, root first again.
    fn frames(d: &ProfilesDictionary, sample: &Sample) -> Vec<String> {
        let stack = &d.stack_table[sample.stack_index as usize];
        let mut names: Vec<String> = stack
            .location_indices
            .iter()
            .map(|&l| {
                let function = d.location_table[l as usize].lines[0].function_index;
                d.string_table[d.function_table[function as usize].name_strindex as usize].clone()
            })
            .collect();
        names.reverse();
        names
    }

    fn attributes(d: &ProfilesDictionary, sample: &Sample) -> BTreeMap<String, String> {
        sample
            .attribute_indices
            .iter()
            .map(|&a| {
                let kv = &d.attribute_table[a as usize];
                let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                    Some(any_value::Value::StringValue(s)) => s.clone(),
                    Some(any_value::Value::IntValue(i)) => i.to_string(),
                    other => format!("{other:?}"),
                };
                (d.string_table[kv.key_strindex as usize].clone(), value)
            })
            .collect()
    }

    #[test]
    fn stacks_labels_and_links_round_trip_through_the_dictionary() {
        let lines = [line(&["main", "run", "tokenize"], 7), line(&["main", "run", "parse"], 2)];
        let request = request(&resource(), &lines);
        let d = request.dictionary.clone().expect("dictionary");
        let scope = &request.resource_profiles[0].scope_profiles[0];
        assert_eq!(scope.scope.as_ref().map(|s| s.name.as_str()), Some(SCOPE));
        assert_eq!(scope.profiles.len(), 1, "one window, one period: one profile");
        let profile = &scope.profiles[0];
        assert_eq!(profile.period, 10_000_000);
        assert_eq!(profile.time_unix_nano, 1_700_000_000_000_000_000);
        let st = profile.sample_type.expect("sample type");
        let pt = profile.period_type.expect("period type");
        let s = |i: i32| d.string_table[i as usize].as_str();
        assert_eq!((s(st.type_strindex), s(st.unit_strindex)), ("samples", "count"));
        assert_eq!((s(pt.type_strindex), s(pt.unit_strindex)), ("cpu", "nanoseconds"));
        let got: Vec<(Vec<String>, Vec<i64>)> =
            profile.samples.iter().map(|smp| (frames(&d, smp), smp.values.clone())).collect();
        assert_eq!(
            got,
            [
                (vec!["main".to_string(), "run".into(), "tokenize".into()], vec![7]),
                (vec!["main".to_string(), "run".into(), "parse".into()], vec![2]),
            ]
        );
        // Leaf first in the proto.
        let first = &d.stack_table[profile.samples[0].stack_index as usize];
        let leaf = d.location_table[first.location_indices[0] as usize].lines[0].function_index;
        assert_eq!(s(d.function_table[leaf as usize].name_strindex), "tokenize");
        let labels = attributes(&d, &profile.samples[0]);
        let want: BTreeMap<String, String> = [
            ("pipeline.stage.name", "tokenize"),
            ("pipeline.execution.id", "e1"),
            ("pipeline.shard.index", "3"),
            ("pipeline.phase", "io"),
            ("profile.language", "rust"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(labels, want, "the resource's host and pid are not repeated");
        let link = &d.link_table[profile.samples[0].link_index as usize];
        assert_eq!(link.trace_id.len(), 16);
        assert_eq!(link.span_id, [0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31]);
        assert_eq!(profile.samples[0].link_index, profile.samples[1].link_index, "one link, shared");
        // main and run are one location each, shared by both stacks.
        assert_eq!(d.location_table.len(), 1 + 4);
        assert_eq!(d.function_table.len(), 1 + 4);
        let resource = request.resource_profiles[0].resource.clone().unwrap_or_default();
        assert!(resource.attributes.iter().any(|kv| kv.key == "service.name"));
    }

    #[test]
    fn every_table_starts_with_its_zero_value() {
        let d = request(&resource(), &[line(&["a"], 1)]).dictionary.expect("dictionary");
        assert_eq!(d.string_table[0], "");
        assert_eq!(d.mapping_table, [Mapping::default()]);
        assert_eq!(d.location_table[0], Location::default());
        assert_eq!(d.function_table[0], Function::default());
        assert_eq!(d.link_table[0], Link::default());
        assert_eq!(d.attribute_table[0], KeyValueAndUnit::default());
        assert_eq!(d.stack_table[0], Stack::default());
    }

    #[test]
    fn windows_and_periods_make_profiles_and_odd_lines_are_handled() {
        let mut other_window = line(&["a"], 1);
        other_window.timestamp_ms += 1_000;
        let mut other_period = line(&["a"], 1);
        other_period.period_ns = 1_000_000;
        let mut unlabelled = line(&["a", "b"], 4);
        unlabelled.stage = None;
        unlabelled.execution = None;
        unlabelled.shard = None;
        unlabelled.phase = None;
        unlabelled.trace_id = Some("not hex".into());
        unlabelled.span_id = None;
        unlabelled.pid = 7;
        let empty = line(&[], 3);
        let none = line(&["a"], 0);
        let request = request(&resource(), &[line(&["a"], 1), other_window, other_period, unlabelled, empty, none]);
        let d = request.dictionary.clone().expect("dictionary");
        let profiles = &request.resource_profiles[0].scope_profiles[0].profiles;
        assert_eq!(profiles.len(), 3, "{profiles:?}");
        let all: Vec<&Sample> = profiles.iter().flat_map(|p| &p.samples).collect();
        assert_eq!(all.len(), 4, "the empty stack and the zero count are left out");
        let odd = all.iter().find(|s| s.values == [4]).expect("the unlabelled line");
        assert_eq!(odd.link_index, 0, "no link from a bad id");
        let labels = attributes(&d, odd);
        assert_eq!(labels.get("process.pid").map(String::as_str), Some("7"), "another process says so: {labels:?}");
        assert!(!labels.contains_key("pipeline.stage.name"));
        let ids: std::collections::HashSet<&Vec<u8>> = profiles.iter().map(|p| &p.profile_id).collect();
        assert_eq!(ids.len(), 3, "each profile its own id");
    }

    #[test]
    fn hex_ids() {
        assert_eq!(hex("00ff", 2), Some(vec![0, 255]));
        assert_eq!(hex("0000", 2), None, "all-zero ids are invalid");
        assert_eq!(hex("0g00", 2), None);
        assert_eq!(hex("00f", 2), None);
        assert_eq!(hex("é0", 1), None);
    }
}
