//! One labelled series: its label values, kept in one allocation beside its cell.

use std::sync::Arc;

use opentelemetry::KeyValue;

use crate::exposition::LabelBlock;
use crate::limits::{self, OVERFLOW_LABELS, OVERFLOW_MARK};

/// Separates the label values in a series' key: a byte no UTF-8 text contains, so the joined
/// values identify the label set exactly.
const SEP: u8 = 0xFF;

/// Key bytes kept inside the series itself.
const INLINE: usize = 30;

/// A series' key: inside the series when short (most are), so reading a series for a scrape
/// touches one allocation, not two.
enum Key {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl Key {
    fn new(joined: Vec<u8>) -> Self {
        match u8::try_from(joined.len()) {
            Ok(len) if joined.len() <= INLINE => {
                let mut bytes = [0u8; INLINE];
                bytes[..joined.len()].copy_from_slice(&joined);
                Key::Inline { len, bytes }
            }
            _ => Key::Heap(joined.into_boxed_slice()),
        }
    }
}

impl std::ops::Deref for Key {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            Key::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Key::Heap(b) => b,
        }
    }
}

/// One labelled series: its label values and its cell, nothing else (no per-series `String`s,
/// no OTel attribute copy; see [`Series::attrs`]).
pub(crate) struct Series<C> {
    /// Label values in the declared order of the names, joined by [`SEP`] ([`OVERFLOW_MARK`]s
    /// for the overflow series).
    key: Key,
    pub(crate) cell: C,
}

impl<C> Series<C> {
    /// A series of the label values `joined` (see [`join`]) around `cell`.
    pub(super) fn new(joined: Vec<u8>, cell: C) -> Self {
        Series { key: Key::new(joined), cell }
    }

    /// The label values, in the declared order of the family's `n` label names.
    pub(crate) fn values(&self, n: usize) -> impl Iterator<Item = &str> + '_ {
        self.key.split(|b| *b == SEP).take(n).map(|v| std::str::from_utf8(v).unwrap_or_default())
    }

    fn is_overflow(&self, n: usize) -> bool {
        n > 0 && self.values(1).next() == Some(OVERFLOW_MARK)
    }

    /// The series' OTel attributes (for push exporters' instruments), made on demand.
    pub(crate) fn attrs(&self, names: &[String]) -> Vec<KeyValue> {
        if self.is_overflow(names.len()) {
            return limits::overflow_attributes().into();
        }
        names.iter().zip(self.values(names.len())).map(|(k, v)| KeyValue::new(k.clone(), v.to_string())).collect()
    }

    /// Writes the series' labels: in the declared order, or when `sorted`, sorted by name, as
    /// the pull endpoint's encoder writes an OTel data point's attributes. The overflow series
    /// has the single label `otel_metric_overflow="true"`.
    pub(crate) fn write_labels(&self, names: &[String], sorted: bool, block: &mut LabelBlock<'_>) {
        let n = names.len();
        if self.is_overflow(n) {
            block.raw(OVERFLOW_LABELS);
        } else if sorted && names.windows(2).any(|w| w[0] > w[1]) {
            let mut pairs: Vec<(&String, &str)> = names.iter().zip(self.values(n)).collect();
            pairs.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for (k, v) in pairs {
                block.pair(k, v);
            }
        } else {
            for (k, v) in names.iter().zip(self.values(n)) {
                block.pair(k, v);
            }
        }
    }
}

/// A series in its family's set, found by its key.
pub(super) struct Entry<C>(pub(super) Arc<Series<C>>);

impl<C> std::borrow::Borrow<[u8]> for Entry<C> {
    fn borrow(&self) -> &[u8] {
        &self.0.key[..]
    }
}

impl<C> std::hash::Hash for Entry<C> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.key[..].hash(state);
    }
}

impl<C> PartialEq for Entry<C> {
    fn eq(&self, other: &Self) -> bool {
        self.0.key[..] == other.0.key[..]
    }
}

impl<C> Eq for Entry<C> {}

/// Label values joined into a series key.
pub(super) fn join<'a>(values: impl Iterator<Item = &'a str> + Clone) -> Vec<u8> {
    let len = values.clone().map(|v| v.len() + 1).sum::<usize>().saturating_sub(1);
    let mut key = Vec::with_capacity(len);
    for (i, v) in values.enumerate() {
        if i > 0 {
            key.push(SEP);
        }
        key.extend_from_slice(v.as_bytes());
    }
    key
}
