//! Profiles: sampled CPU stacks labelled with the stage, execution, shard, phase and shard span of
//! the sampled thread, stored beside the rows store of the service (`<dir>/<stem>.stacks` next to
//! `<dir>/<stem>.jsonl`), one line per distinct (labels, stack) of an aggregation window with its
//! sample count. The profiler writes them with [`StoreWriter`](crate::StoreWriter) (the same
//! privacy, rotation and lock as the rows), `pipetel profile` reads them back, and the stage rows
//! carry [`summary`]. A `.stacks` file is not a `.jsonl` one, so [`stores_in`](crate::stores_in)
//! never mistakes it for a rows store.
//!
//! ```
//! use pipetel_rows::profile::ProfileLine;
//!
//! let line = ProfileLine {
//!     stage: Some("tokenize".into()),
//!     samples: 3,
//!     stack: vec!["main".into(), "tokenize".into()],
//!     ..ProfileLine::default()
//! };
//! assert_eq!(ProfileLine::parse(&line.to_json()), Ok(line));
//! ```

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Write as _};
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::escape::{escape_controls, escape_json_controls, is_control};
use crate::{paths, read};

/// The extension of a profile store's current file.
pub const EXTENSION: &str = "stacks";

/// The event name of a profile line.
pub const EVENT: &str = "pipeline.profile";

/// The profile store of `service` in `dir`: `<dir>/<file_stem(service)>.stacks`, beside its
/// rows store [`default_file`](crate::default_file).
pub fn profile_file(dir: &Path, service: &str) -> PathBuf {
    dir.join(format!("{}.{EXTENSION}", paths::file_stem(service)))
}

/// The profile store beside a rows store file: `x.jsonl` becomes `x.stacks`; any other name
/// gets `.stacks` appended (`x.log` becomes `x.log.stacks`), so it never names the rows file.
pub fn beside(rows_store: &Path) -> PathBuf {
    if rows_store.extension().is_some_and(|e| e == paths::EXTENSION) {
        rows_store.with_extension(EXTENSION)
    } else {
        let mut s = rows_store.as_os_str().to_owned();
        s.push(".");
        s.push(EXTENSION);
        PathBuf::from(s)
    }
}

/// The keys of a profile line, in the order [`ProfileLine::to_json`] writes them.
pub mod keys {
    /// The event name ([`EVENT`](super::EVENT)).
    pub const EVENT: &str = "event";
    /// The end of the aggregation window, milliseconds since the Unix epoch.
    pub const TIMESTAMP_MS: &str = "timestamp_ms";
    /// The host of the sampled process.
    pub const HOST: &str = "host.name";
    /// The sampled process.
    pub const PID: &str = "process.pid";
    /// The stage the sampled thread ran.
    pub const STAGE: &str = "pipeline.stage.name";
    /// The execution the sampled thread ran.
    pub const EXECUTION: &str = "pipeline.execution.id";
    /// The shard the sampled thread ran.
    pub const SHARD: &str = "pipeline.shard.index";
    /// The named phase the sampled thread was in.
    pub const PHASE: &str = "pipeline.phase";
    /// The trace of the shard span.
    pub const TRACE_ID: &str = "trace_id";
    /// The shard span.
    pub const SPAN_ID: &str = "span_id";
    /// The language of the stack: `rust` or `python`.
    pub const LANGUAGE: &str = "profile.language";
    /// CPU nanoseconds one sample stands for.
    pub const PERIOD_NS: &str = "profile.period_ns";
    /// The number of samples of this stack in the window.
    pub const SAMPLES: &str = "profile.samples";
    /// The frames joined with `;`, root first.
    pub const STACK: &str = "profile.stack";
}

/// One line of a profile store: the samples of one stack with one set of labels over one
/// aggregation window.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProfileLine {
    /// The end of the aggregation window, milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// The host of the sampled process (`host.name`).
    pub host: String,
    /// The sampled process (`process.pid`).
    pub pid: u32,
    /// The stage the thread ran (`pipeline.stage.name`); `None` for a thread outside any shard.
    pub stage: Option<String>,
    /// The execution the thread ran (`pipeline.execution.id`).
    pub execution: Option<String>,
    /// The shard the thread ran (`pipeline.shard.index`).
    pub shard: Option<u32>,
    /// The named phase the thread was in (`pipeline.phase`); `None` outside any named phase.
    pub phase: Option<String>,
    /// The shard span's trace: 32 lowercase hexadecimal digits.
    pub trace_id: Option<String>,
    /// The shard span: 16 lowercase hexadecimal digits.
    pub span_id: Option<String>,
    /// The language of the stack (`profile.language`): `rust`, or `python` (whose stacks may hold
    /// native frames).
    pub language: String,
    /// CPU nanoseconds one sample stands for (`profile.period_ns`: 1e9 / the sampling rate in Hz).
    pub period_ns: u64,
    /// The number of samples of this stack in the window (`profile.samples`).
    pub samples: u64,
    /// The frames, root first, leaf last (`profile.stack`: them joined with `;`).
    pub stack: Vec<String>,
}

impl ProfileLine {
    /// The line as one JSON object, without a newline, keys in the order of [`keys`]; absent
    /// labels are left out. A `;` or a control character inside a frame name is written as `_`,
    /// since folded stacks split on `;` and end at a newline.
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(256);
        out.push('{');
        push_str(&mut out, keys::EVENT, EVENT);
        push_num(&mut out, keys::TIMESTAMP_MS, self.timestamp_ms);
        push_str(&mut out, keys::HOST, &self.host);
        push_num(&mut out, keys::PID, u64::from(self.pid));
        for (key, value) in [(keys::STAGE, &self.stage), (keys::EXECUTION, &self.execution)] {
            if let Some(v) = value {
                push_str(&mut out, key, v);
            }
        }
        if let Some(shard) = self.shard {
            push_num(&mut out, keys::SHARD, u64::from(shard));
        }
        for (key, value) in
            [(keys::PHASE, &self.phase), (keys::TRACE_ID, &self.trace_id), (keys::SPAN_ID, &self.span_id)]
        {
            if let Some(v) = value {
                push_str(&mut out, key, v);
            }
        }
        push_str(&mut out, keys::LANGUAGE, &self.language);
        push_num(&mut out, keys::PERIOD_NS, self.period_ns);
        push_num(&mut out, keys::SAMPLES, self.samples);
        push_str(&mut out, keys::STACK, &folded_stack(&self.stack));
        out.push('}');
        out
    }

    /// Parses a line written by [`to_json`](Self::to_json). Unknown keys are ignored, and a label
    /// that is `null` counts as absent.
    ///
    /// # Errors
    /// [`ProfileLineError`] naming what is wrong: not JSON, not an object, another event, a
    /// required key missing, or a value of the wrong type or out of range (a trace or span id
    /// that is not lowercase hexadecimal of its length included).
    pub fn parse(line: &str) -> Result<ProfileLine, ProfileLineError> {
        let value: Value = serde_json::from_str(line).map_err(|e| ProfileLineError::Json(e.to_string()))?;
        let Value::Object(map) = value else { return Err(ProfileLineError::NotAnObject) };
        match map.get(keys::EVENT) {
            Some(Value::String(event)) if event == EVENT => {}
            Some(Value::String(event)) => return Err(ProfileLineError::OtherEvent(event.clone())),
            Some(_) => return Err(ProfileLineError::Wrong { key: keys::EVENT, expected: "a string" }),
            None => return Err(ProfileLineError::Missing(keys::EVENT)),
        }
        let stack = required_str(&map, keys::STACK)?;
        Ok(ProfileLine {
            timestamp_ms: required_u64(&map, keys::TIMESTAMP_MS)?,
            host: required_str(&map, keys::HOST)?,
            pid: u32_of(keys::PID, required_u64(&map, keys::PID)?)?,
            stage: optional_str(&map, keys::STAGE)?,
            execution: optional_str(&map, keys::EXECUTION)?,
            shard: optional_u64(&map, keys::SHARD)?.map(|n| u32_of(keys::SHARD, n)).transpose()?,
            phase: optional_str(&map, keys::PHASE)?,
            trace_id: hex_id(optional_str(&map, keys::TRACE_ID)?, keys::TRACE_ID, 32)?,
            span_id: hex_id(optional_str(&map, keys::SPAN_ID)?, keys::SPAN_ID, 16)?,
            language: required_str(&map, keys::LANGUAGE)?,
            period_ns: required_u64(&map, keys::PERIOD_NS)?,
            samples: required_u64(&map, keys::SAMPLES)?,
            // Control characters escaped in the JSON come back as `_`, as `to_json` writes them.
            stack: if stack.is_empty() {
                Vec::new()
            } else {
                stack.split(';').map(|f| stored_frame(f).into_owned()).collect()
            },
        })
    }
}

/// Why a line is not a profile line.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProfileLineError {
    /// Not JSON (the parser's message).
    Json(String),
    /// JSON, but not an object.
    NotAnObject,
    /// A line of another event (a row, say): its event name.
    OtherEvent(String),
    /// A required key is missing.
    Missing(&'static str),
    /// A key holds a value of the wrong type or out of range.
    Wrong {
        /// The key.
        key: &'static str,
        /// What it should hold.
        expected: &'static str,
    },
}

impl fmt::Display for ProfileLineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProfileLineError::Json(e) => write!(f, "not JSON: {e}"),
            ProfileLineError::NotAnObject => f.write_str("not a JSON object"),
            ProfileLineError::OtherEvent(event) => {
                write!(f, "event {:?} is not {EVENT:?}", escape_controls(event))
            }
            ProfileLineError::Missing(key) => write!(f, "no {key:?}"),
            ProfileLineError::Wrong { key, expected } => write!(f, "{key:?} is not {expected}"),
        }
    }
}

impl std::error::Error for ProfileLineError {}

/// Which samples to keep: every label that is set must match (`None` matches anything).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Filter {
    /// The stage (`pipeline.stage.name`).
    pub stage: Option<String>,
    /// The execution (`pipeline.execution.id`).
    pub execution: Option<String>,
    /// The shard (`pipeline.shard.index`).
    pub shard: Option<u32>,
    /// The named phase (`pipeline.phase`).
    pub phase: Option<String>,
    /// The shard span's trace, compared without regard to case.
    pub trace_id: Option<String>,
}

impl Filter {
    /// Whether `line` has every label this filter sets.
    pub fn matches(&self, line: &ProfileLine) -> bool {
        let same = |want: &Option<String>, have: &Option<String>| want.is_none() || want == have;
        same(&self.stage, &line.stage)
            && same(&self.execution, &line.execution)
            && (self.shard.is_none() || self.shard == line.shard)
            && same(&self.phase, &line.phase)
            && self
                .trace_id
                .as_ref()
                .is_none_or(|want| line.trace_id.as_ref().is_some_and(|have| want.eq_ignore_ascii_case(have)))
    }

    /// Whether the filter sets no label (and keeps every sample).
    pub fn is_empty(&self) -> bool {
        *self == Filter::default()
    }
}

/// The filter in words, safe to print: `stage tokenize, shard 3`, or `every sample` when it
/// sets nothing. Control characters in the names are escaped ([`escape_controls`]).
impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(stage) = &self.stage {
            parts.push(format!("stage {}", escape_controls(stage)));
        }
        if let Some(shard) = self.shard {
            parts.push(format!("shard {shard}"));
        }
        if let Some(phase) = &self.phase {
            parts.push(format!("phase {}", escape_controls(phase)));
        }
        if let Some(execution) = &self.execution {
            parts.push(format!("execution {}", escape_controls(execution)));
        }
        if let Some(trace) = &self.trace_id {
            parts.push(format!("trace {}", escape_controls(trace)));
        }
        if parts.is_empty() {
            f.write_str("every sample")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

/// A profile store read back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProfileRead {
    /// Its profile lines, oldest file first, in the order they were written.
    pub lines: Vec<ProfileLine>,
    /// Lines skipped: torn by a kill mid-write (or still being written), or not profile lines.
    pub skipped: usize,
}

/// Every profile line of the store `path` (`<dir>/<stem>.stacks`), its rotated files included,
/// oldest first, read under the store's lock ([`read_store`](crate::read_store)). Torn and
/// invalid lines are skipped and counted; blank lines are ignored.
///
/// # Errors
/// The directory or a file cannot be opened or read (the message names it), or the store has no
/// file at all.
pub fn read_profiles(path: &Path) -> io::Result<ProfileRead> {
    let files = read::read_store(path).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            io::Error::new(io::ErrorKind::NotFound, format!("no profile store at {}", path.display()))
        } else {
            e
        }
    })?;
    let mut out = ProfileRead::default();
    for file in &files {
        // Checked whole first: far quicker than the lossy pass on valid text, the usual case.
        let text = match std::str::from_utf8(&file.bytes) {
            Ok(text) => Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(&file.bytes),
        };
        for line in read::lines(&text) {
            match line {
                read::Line::Whole(_, l) if l.trim().is_empty() => {}
                read::Line::Whole(_, l) => match ProfileLine::parse(l) {
                    Ok(parsed) => out.lines.push(parsed),
                    Err(_) => out.skipped += 1,
                },
                read::Line::Torn(_, l) if l.trim().is_empty() => {}
                read::Line::Torn(..) => out.skipped += 1,
            }
        }
    }
    Ok(out)
}

/// One frame's share of the samples.
#[derive(Debug, Clone, PartialEq)]
pub struct TopFrame {
    /// The frame's name (as stored: no `;`, no control characters).
    pub name: String,
    /// Samples where the frame is the leaf: time spent in the frame itself.
    pub self_samples: u64,
    /// Samples where the frame is anywhere on the stack (once per stack, recursion or not): time
    /// spent in it and in what it called.
    pub total_samples: u64,
    /// `self_samples` over all samples, from 0 to 1.
    pub self_share: f64,
    /// `total_samples` over all samples, from 0 to 1.
    pub total_share: f64,
}

/// The sum of the lines' samples.
pub fn total_samples(lines: &[ProfileLine]) -> u64 {
    lines.iter().fold(0u64, |sum, l| sum.saturating_add(l.samples))
}

/// The CPU time the lines' samples stand for, in seconds (each line's samples times its period).
pub fn cpu_seconds(lines: &[ProfileLine]) -> f64 {
    lines.iter().map(|l| l.samples as f64 * l.period_ns as f64).sum::<f64>() / 1e9
}

/// The `n` frames with the most self samples (then the most total samples, then by name), with
/// their shares of all the lines' samples.
pub fn top_frames(lines: &[ProfileLine], n: usize) -> Vec<TopFrame> {
    let all = total_samples(lines);
    // Per frame: self samples, total samples, and the last line counted in its total (1-based),
    // so a frame repeated on one stack (recursion) counts once in one hash look-up per frame.
    let mut frames: HashMap<Cow<'_, str>, (u64, u64, usize)> = HashMap::new();
    for (n, line) in lines.iter().enumerate() {
        let Some(last) = line.stack.len().checked_sub(1) else { continue };
        for (depth, frame) in line.stack.iter().enumerate() {
            let entry = frames.entry(stored_frame(frame)).or_default();
            if entry.2 != n + 1 {
                entry.1 = entry.1.saturating_add(line.samples);
                entry.2 = n + 1;
            }
            if depth == last {
                entry.0 = entry.0.saturating_add(line.samples);
            }
        }
    }
    let share = |samples: u64| if all == 0 { 0.0 } else { samples as f64 / all as f64 };
    let mut out: Vec<TopFrame> = frames
        .into_iter()
        .map(|(name, (self_samples, total_samples, _))| TopFrame {
            name: name.into_owned(),
            self_samples,
            total_samples,
            self_share: share(self_samples),
            total_share: share(total_samples),
        })
        .collect();
    out.sort_by(|a, b| {
        b.self_samples.cmp(&a.self_samples).then(b.total_samples.cmp(&a.total_samples)).then(a.name.cmp(&b.name))
    });
    out.truncate(n);
    out
}

/// The lines as folded stacks, the input of flame-graph tools: `root;mid;leaf COUNT` and a
/// newline per distinct stack, the samples of equal stacks summed, sorted by stack. Lines with
/// an empty stack or no samples are left out.
pub fn folded(lines: &[ProfileLine]) -> String {
    let mut stacks: BTreeMap<String, u64> = BTreeMap::new();
    for line in lines.iter().filter(|l| !l.stack.is_empty() && l.samples > 0) {
        let count = stacks.entry(folded_stack(&line.stack)).or_default();
        *count = count.saturating_add(line.samples);
    }
    let mut out = String::new();
    for (stack, count) in stacks {
        let _ = writeln!(out, "{stack} {count}");
    }
    out
}

/// The field a stage row carries: the `n` frames with the most self samples (none without any)
/// and their shares of all samples to one decimal, e.g. `tokenize 62.1%; parse 20.3%; memchr
/// 5.0%`. Empty when the lines hold no samples.
pub fn summary(lines: &[ProfileLine], n: usize) -> String {
    let top = top_frames(lines, usize::MAX);
    let parts: Vec<String> = top
        .iter()
        .filter(|f| f.self_samples > 0)
        .take(n)
        .map(|f| format!("{} {:.1}%", f.name, f.self_share * 100.0))
        .collect();
    parts.join("; ")
}

/// A frame name as stored: `;` (the frame separator) and control characters (a newline ends a
/// folded line; the others act on terminals) written as `_`.
fn stored_frame(frame: &str) -> Cow<'_, str> {
    // Bytes first: C0 and DEL are single bytes, and C1 characters start with 0xC2.
    let suspect = frame.bytes().any(|b| b == b';' || b < 0x20 || b == 0x7f || b == 0xc2);
    if suspect && frame.chars().any(|c| c == ';' || is_control(c)) {
        frame.chars().map(|c| if c == ';' || is_control(c) { '_' } else { c }).collect::<String>().into()
    } else {
        frame.into()
    }
}

/// The frames joined with `;`, each as [`stored_frame`].
fn folded_stack(stack: &[String]) -> String {
    let mut out = String::new();
    for (i, frame) in stack.iter().enumerate() {
        if i > 0 {
            out.push(';');
        }
        out.push_str(&stored_frame(frame));
    }
    out
}

fn push_key(out: &mut String, key: &str) {
    if out.len() > 1 {
        out.push(',');
    }
    push_json_string(out, key);
    out.push(':');
}

fn push_str(out: &mut String, key: &str, value: &str) {
    push_key(out, key);
    push_json_string(out, value);
}

fn push_num(out: &mut String, key: &str, value: u64) {
    push_key(out, key);
    let _ = write!(out, "{value}");
}

/// `s` as a JSON string; DEL and C1 characters escaped too (JSON allows them raw), so a stored
/// line is safe to print.
fn push_json_string(out: &mut String, s: &str) {
    out.push_str(&escape_json_controls(&Value::from(s).to_string()));
}

fn present<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    map.get(key).filter(|v| !v.is_null())
}

fn optional_str(map: &Map<String, Value>, key: &'static str) -> Result<Option<String>, ProfileLineError> {
    match present(map, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ProfileLineError::Wrong { key, expected: "a string" }),
    }
}

fn required_str(map: &Map<String, Value>, key: &'static str) -> Result<String, ProfileLineError> {
    optional_str(map, key)?.ok_or(ProfileLineError::Missing(key))
}

fn optional_u64(map: &Map<String, Value>, key: &'static str) -> Result<Option<u64>, ProfileLineError> {
    match present(map, key) {
        None => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or(ProfileLineError::Wrong { key, expected: "a non-negative integer" }),
    }
}

fn required_u64(map: &Map<String, Value>, key: &'static str) -> Result<u64, ProfileLineError> {
    optional_u64(map, key)?.ok_or(ProfileLineError::Missing(key))
}

fn u32_of(key: &'static str, n: u64) -> Result<u32, ProfileLineError> {
    u32::try_from(n).map_err(|_| ProfileLineError::Wrong { key, expected: "an integer below 2^32" })
}

fn hex_id(id: Option<String>, key: &'static str, digits: usize) -> Result<Option<String>, ProfileLineError> {
    match id {
        Some(id) if id.len() != digits || !id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) => {
            Err(ProfileLineError::Wrong {
                key,
                expected: if digits == 32 {
                    "32 lowercase hexadecimal digits"
                } else {
                    "16 lowercase hexadecimal digits"
                },
            })
        }
        id => Ok(id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> ProfileLine {
        ProfileLine {
            timestamp_ms: 1_700_000_000_123,
            host: "worker-1".into(),
            pid: 4242,
            stage: Some("tokenize".into()),
            execution: Some("run-7".into()),
            shard: Some(3),
            phase: Some("compute".into()),
            trace_id: Some("0af7651916cd43dd8448eb211c80319c".into()),
            span_id: Some("b7ad6b7169203331".into()),
            language: "rust".into(),
            period_ns: 10_000_000,
            samples: 17,
            stack: vec!["main".into(), "run".into(), "tokenize".into()],
        }
    }

    #[test]
    fn a_line_round_trips_with_the_documented_keys_in_order() {
        let line = full();
        let json = line.to_json();
        assert_eq!(
            json,
            "{\"event\":\"pipeline.profile\",\"timestamp_ms\":1700000000123,\"host.name\":\"worker-1\",\
             \"process.pid\":4242,\"pipeline.stage.name\":\"tokenize\",\"pipeline.execution.id\":\"run-7\",\
             \"pipeline.shard.index\":3,\"pipeline.phase\":\"compute\",\
             \"trace_id\":\"0af7651916cd43dd8448eb211c80319c\",\"span_id\":\"b7ad6b7169203331\",\
             \"profile.language\":\"rust\",\"profile.period_ns\":10000000,\"profile.samples\":17,\
             \"profile.stack\":\"main;run;tokenize\"}"
        );
        assert_eq!(ProfileLine::parse(&json), Ok(line));
        // Absent labels are left out, and come back absent.
        let bare = ProfileLine { samples: 1, language: "python".into(), ..ProfileLine::default() };
        let json = bare.to_json();
        for key in [keys::STAGE, keys::EXECUTION, keys::SHARD, keys::PHASE, keys::TRACE_ID, keys::SPAN_ID] {
            assert!(!json.contains(key), "{key} in {json}");
        }
        assert_eq!(ProfileLine::parse(&json), Ok(bare));
    }

    #[test]
    fn separators_and_control_characters_in_frames_become_underscores() {
        let mut line = full();
        line.stack = vec!["a;b".into(), "c\nd\u{1b}[2J".into(), "e\u{9b}f\"g\\h".into()];
        line.stage = Some("st\u{1b}age\u{85}".into());
        let json = line.to_json();
        assert!(!json.chars().any(is_control), "{json}");
        assert!(!json.contains('\n'));
        let back = ProfileLine::parse(&json).expect("parses");
        assert_eq!(back.stack, ["a_b", "c_d_[2J", "e_f\"g\\h"]);
        // Labels keep their text exactly (escaped in the JSON, restored by the parser).
        assert_eq!(back.stage.as_deref(), Some("st\u{1b}age\u{85}"));
    }

    #[test]
    fn parse_errors_name_what_is_wrong() {
        let err = |s: &str| ProfileLine::parse(s).expect_err(s).to_string();
        assert!(err("{\"event\":\"pipeline.profile\"").starts_with("not JSON"));
        assert_eq!(err("[1]"), "not a JSON object");
        assert_eq!(err("{\"event\":\"pipeline.stage\"}"), "event \"pipeline.stage\" is not \"pipeline.profile\"");
        let without = |key: &str| {
            let mut v: Value = serde_json::from_str(&full().to_json()).expect("json");
            v.as_object_mut().expect("object").remove(key);
            v.to_string()
        };
        assert_eq!(err(&without(keys::SAMPLES)), "no \"profile.samples\"");
        assert_eq!(err(&without(keys::STACK)), "no \"profile.stack\"");
        let with = |key: &str, value: Value| {
            let mut v: Value = serde_json::from_str(&full().to_json()).expect("json");
            v.as_object_mut().expect("object").insert(key.to_string(), value);
            v.to_string()
        };
        assert!(err(&with(keys::SAMPLES, Value::from(-1))).contains("profile.samples"));
        assert!(err(&with(keys::PID, Value::from(u64::from(u32::MAX) + 1))).contains("process.pid"));
        assert!(err(&with(keys::SHARD, Value::from("3"))).contains("pipeline.shard.index"));
        assert!(err(&with(keys::TRACE_ID, Value::from("0AF7651916CD43DD8448EB211C80319C"))).contains("trace_id"));
        assert!(err(&with(keys::SPAN_ID, Value::from("b7ad"))).contains("span_id"));
        // Unknown keys are ignored; a null label is absent.
        let extra = with("profile.extra", Value::from(1));
        assert_eq!(ProfileLine::parse(&extra), Ok(full()));
        let null = with(keys::PHASE, Value::Null);
        assert_eq!(ProfileLine::parse(&null).map(|l| l.phase), Ok(None));
    }

    #[test]
    fn the_profile_store_sits_beside_the_rows_store() {
        assert_eq!(profile_file(Path::new("/d"), "my svc/1"), PathBuf::from("/d/my_svc_1.stacks"));
        let rows = paths::default_file(Path::new("/d"), "tok");
        assert_eq!(beside(&rows), profile_file(Path::new("/d"), "tok"));
        assert_eq!(beside(Path::new("/d/x.log")), PathBuf::from("/d/x.log.stacks"));
        assert_eq!(beside(Path::new("x")), PathBuf::from("x.stacks"));
    }

    fn sample(stage: &str, shard: u32, samples: u64, stack: &[&str]) -> ProfileLine {
        ProfileLine {
            stage: Some(stage.into()),
            shard: Some(shard),
            language: "rust".into(),
            period_ns: 10_000_000,
            samples,
            stack: stack.iter().map(|f| f.to_string()).collect(),
            ..ProfileLine::default()
        }
    }

    /// 10 samples: `parse` is the leaf of 6 (self 60%) and on 7 stacks' samples in all;
    /// `walk` recurses (counted once per stack for its total); `main` is on every stack and
    /// never the leaf.
    fn known() -> Vec<ProfileLine> {
        vec![
            sample("tok", 0, 4, &["main", "parse"]),
            sample("tok", 1, 2, &["main", "walk", "walk", "parse"]),
            sample("tok", 1, 1, &["main", "parse", "memchr"]),
            sample("tok", 0, 3, &["main", "walk", "walk"]),
        ]
    }

    #[test]
    fn top_frames_tell_self_time_from_total_time() {
        let top = top_frames(&known(), 10);
        let got: Vec<(&str, u64, u64)> =
            top.iter().map(|f| (f.name.as_str(), f.self_samples, f.total_samples)).collect();
        assert_eq!(got, [("parse", 6, 7), ("walk", 3, 5), ("memchr", 1, 1), ("main", 0, 10)]);
        assert!((top[0].self_share - 0.6).abs() < 1e-12 && (top[0].total_share - 0.7).abs() < 1e-12);
        assert!((top[3].total_share - 1.0).abs() < 1e-12);
        assert_eq!(top_frames(&known(), 2).len(), 2);
        assert_eq!(total_samples(&known()), 10);
        assert!((cpu_seconds(&known()) - 0.1).abs() < 1e-12);
        assert!(top_frames(&[], 5).is_empty());
    }

    #[test]
    fn folded_stacks_sum_equal_stacks_and_sort() {
        let mut lines = known();
        lines.push(sample("tok", 2, 5, &["main", "parse"]));
        lines.push(sample("tok", 2, 0, &["main", "never"]));
        lines.push(sample("tok", 2, 9, &[]));
        // A line built in memory may hold separators and control characters: folded as stored.
        lines.push(sample("tok", 2, 1, &["a;b", "c\nd\u{1b}"]));
        assert_eq!(
            folded(&lines),
            "a_b;c_d_ 1\nmain;parse 9\nmain;parse;memchr 1\nmain;walk;walk 3\nmain;walk;walk;parse 2\n"
        );
        assert_eq!(folded(&[]), "");
    }

    #[test]
    fn the_summary_names_the_top_frames_by_self_share() {
        assert_eq!(summary(&known(), 3), "parse 60.0%; walk 30.0%; memchr 10.0%");
        // Frames that are never the leaf are left out, however many are asked for.
        assert_eq!(summary(&known(), 10), "parse 60.0%; walk 30.0%; memchr 10.0%");
        assert_eq!(summary(&known(), 1), "parse 60.0%");
        let thirds = [sample("s", 0, 1, &["a"]), sample("s", 0, 2, &["b"])];
        assert_eq!(summary(&thirds, 5), "b 66.7%; a 33.3%");
        assert_eq!(summary(&[], 3), "");
    }

    #[test]
    fn a_filter_keeps_lines_with_every_label_it_sets() {
        let mut line = full();
        assert!(Filter::default().matches(&line) && Filter::default().is_empty());
        let by = |f: Filter| f.matches(&line);
        assert!(by(Filter { stage: Some("tokenize".into()), shard: Some(3), ..Filter::default() }));
        assert!(!by(Filter { stage: Some("tokenize".into()), shard: Some(4), ..Filter::default() }));
        assert!(!by(Filter { stage: Some("parse".into()), ..Filter::default() }));
        assert!(by(Filter { phase: Some("compute".into()), execution: Some("run-7".into()), ..Filter::default() }));
        assert!(!by(Filter { phase: Some("load".into()), ..Filter::default() }));
        assert!(!by(Filter { execution: Some("run-8".into()), ..Filter::default() }));
        assert!(by(Filter { trace_id: Some("0AF7651916CD43DD8448EB211C80319C".into()), ..Filter::default() }));
        assert!(!by(Filter { trace_id: Some("1af7651916cd43dd8448eb211c80319c".into()), ..Filter::default() }));
        line.shard = None;
        line.trace_id = None;
        assert!(!Filter { shard: Some(3), ..Filter::default() }.matches(&line));
        assert!(
            !Filter { trace_id: Some("0af7651916cd43dd8448eb211c80319c".into()), ..Filter::default() }.matches(&line)
        );
        let words =
            Filter { stage: Some("t\u{1b}ok".into()), shard: Some(2), phase: Some("load".into()), ..Filter::default() };
        assert_eq!(words.to_string(), "stage t\\x1bok, shard 2, phase load");
        assert_eq!(Filter::default().to_string(), "every sample");
    }

    #[test]
    fn a_rotated_store_is_read_oldest_first_and_a_torn_line_skipped() {
        let dir = std::env::temp_dir().join(format!("pipetel-rows-profile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let path = profile_file(&dir, "svc");
        // Each line is over 100 bytes: every append after the first rotates.
        let rotation = crate::Rotation { max_bytes: 100, keep: 10 };
        let mut writer = crate::StoreWriter::open_file(&path, rotation).expect("open");
        for i in 0..4 {
            writer.append(&ProfileLine { timestamp_ms: i, ..full() }.to_json()).expect("append");
        }
        writer.append("{\"event\":\"pipeline.stage\",\"pipeline.items\":1}").expect("append a row");
        drop(writer);
        assert!(crate::rotated(&path, 3).exists(), "the store rotated");
        // A kill mid-write leaves a torn last line.
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).expect("open current");
        std::io::Write::write_all(&mut f, &full().to_json().as_bytes()[..40]).expect("tear");
        let read = read_profiles(&path).expect("read");
        assert_eq!(read.lines.iter().map(|l| l.timestamp_ms).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert_eq!(read.skipped, 2, "the row and the torn line");
        let missing = read_profiles(&dir.join("none.stacks")).expect_err("no store");
        assert!(missing.to_string().contains("no profile store at"), "{missing}");
        assert!(missing.to_string().contains("none.stacks"), "{missing}");
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
