//! Collectors: metrics whose samples a callback returns at collection time, and text
//! collectors whose exposition lines join the registry's after the linter's check.

use std::collections::{BTreeMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use opentelemetry::metrics::{AsyncInstrument, Meter};
use opentelemetry::KeyValue;

use super::family::AnyFamily;
use super::kind::Kind;
use super::meta::Meta;
use super::rules::check_label_name;
use crate::exposition::Writer;

/// One sample a function collector returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// `(label name, label value)` pairs.
    pub labels: Vec<(String, String)>,
    /// The value.
    pub value: f64,
}

impl Sample {
    /// A sample with these labels.
    pub fn new<K: Into<String>, V: Into<String>>(labels: impl IntoIterator<Item = (K, V)>, value: f64) -> Self {
        Sample { labels: labels.into_iter().map(|(k, v)| (k.into(), v.into())).collect(), value }
    }
}

pub(crate) type SampleFn = dyn Fn() -> Vec<Sample> + Send + Sync;
pub(crate) type TextFn = dyn Fn() -> String + Send + Sync;

/// One checked sample of a function collector: sorted labels, the same as attributes, the value.
type Collected = (Vec<(String, String)>, Box<[KeyValue]>, f64);

/// A metric whose samples a callback returns at collection time.
pub(crate) struct FnFamily {
    pub(crate) meta: Meta,
    pub(crate) callback: Arc<SampleFn>,
}

impl FnFamily {
    /// Calls the user's callback, keeping only samples that can be exported: a panic, an
    /// invalid or duplicate label name, or a counter value that is negative or not finite
    /// drops the sample (or the whole call) with one warning.
    fn collect(&self) -> Vec<Collected> {
        let samples = match catch_unwind(AssertUnwindSafe(|| (self.callback)())) {
            Ok(s) => s,
            Err(_) => {
                self.meta.warn_once("the collector callback panicked");
                return Vec::new();
            }
        };
        let mut out = Vec::with_capacity(samples.len());
        for mut s in samples {
            let mut names = HashSet::new();
            let labels_ok =
                s.labels.iter().all(|(k, _)| check_label_name(k, self.meta.kind).is_ok() && names.insert(k.clone()));
            let value_ok = self.meta.kind != Kind::Counter || (s.value.is_finite() && s.value >= 0.0);
            if !labels_ok || !value_ok {
                self.meta.warn_once("a collector sample has an invalid label name or value and was dropped");
                continue;
            }
            s.labels.sort();
            let attrs = s.labels.iter().map(|(k, v)| KeyValue::new(k.clone(), v.clone())).collect();
            out.push((s.labels, attrs, s.value));
        }
        out
    }
}

impl AnyFamily for FnFamily {
    fn meta(&self) -> &Meta {
        &self.meta
    }
    fn as_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
    fn write_text(&self, out: &mut String) {
        let name = self.meta.exposed_name();
        let mut w = Writer::text(out);
        w.header(&name, &self.meta.kind.to_string(), &self.meta.help, &self.meta.unit);
        for (labels, _, value) in self.collect() {
            let mut sample = w.sample(&name, "");
            for (k, v) in &labels {
                sample.pair(k, v);
            }
            sample.value(value);
        }
    }
    fn reset(&self) {}
    fn bind(self: Arc<Self>, meter: &Meter, _: Option<&Meter>) {
        let weak = Arc::downgrade(&self);
        let (name, unit, help) = (self.meta.otel_name.clone(), self.meta.unit.clone(), self.meta.help.clone());
        if self.meta.kind == Kind::Counter {
            let b = meter.f64_observable_counter(name).with_unit(unit).with_description(help);
            let _ = b.with_callback(observe(weak)).build();
        } else {
            let b = meter.f64_observable_gauge(name).with_unit(unit).with_description(help);
            let _ = b.with_callback(observe(weak)).build();
        }
    }
}

/// The callback of a function collector's instrument.
fn observe(weak: Weak<FnFamily>) -> impl Fn(&dyn AsyncInstrument<f64>) + Send + Sync + 'static {
    move |obs| {
        let Some(f) = weak.upgrade().filter(|f| !f.meta.removed.load(Ordering::Acquire)) else { return };
        for (_, attrs, v) in f.collect() {
            obs.observe(v, &attrs);
        }
    }
}

/// Appends the checked output of `collectors` to `out`; `taken` holds the sample names already
/// written. Returns the first refused line (or a panic) and why, for the caller's one warning.
pub(crate) fn write_text_collectors(
    collectors: &[Arc<TextFn>],
    taken: &mut HashSet<String>,
    out: &mut String,
    format: crate::exposition::Format,
) -> Option<(String, String)> {
    let mut first = None;
    for collector in collectors {
        let refused = match catch_unwind(AssertUnwindSafe(|| collector())) {
            Ok(text) => crate::exposition::append_checked(&text, taken, out, format),
            Err(_) => Some((String::new(), "a text collector panicked".to_string())),
        };
        first = first.or(refused);
    }
    first
}

/// The sample names the families write, for the text collectors' conflict checks.
pub(crate) fn taken_names(families: &BTreeMap<String, Arc<dyn AnyFamily>>) -> HashSet<String> {
    families.values().flat_map(|f| f.meta().sample_names()).collect()
}
