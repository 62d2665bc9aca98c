//! Row field names and attribute keys: one prefix (`pipeline.`) for every standard field, and
//! user counters under `pipeline.counter.<key>`.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

// The row schema is `pipetel-rows`'s (one table for the library, the tool and Python).
pub use pipetel_rows::fields::{
    BYTES, BYTE_RATE, COUNTER_NAME, COUNTER_PREFIX, CPU_PERCENT, CPU_PERCENT_AVG, CPU_TIME, ELAPSED, EXECUTION_ID,
    ITEMS, ITEM_RATE, MEMORY_AVG, MEMORY_CURRENT, MEMORY_PEAK, NAMESPACE, PHASE_NAME, REASON, SHARDS_FAILED,
    SHARDS_RETRIED, SHARDS_SUCCEEDED, SHARD_INDEX, SHARD_STATE, STAGE_NAME, STATUS, TOTAL_SHARDS,
};

/// Longest counter key accepted, in bytes.
pub const MAX_COUNTER_KEY_LEN: usize = 128;

/// A user counter key, validated once at registration so recording can never fail on it.
///
/// Keys are `/`-separated segments, as Zephyr's `stage_counters` spell them
/// (`zephyr/item_count`, `zephyr/worker/cpu_pct_average`): each segment is one or more ASCII
/// letters, digits, `_`, `-` or `.`; no empty segment (no leading, trailing or doubled `/`); at
/// most [`MAX_COUNTER_KEY_LEN`] bytes in all. In rows the key keeps its `/`:
/// `pipeline.counter.zephyr/item_count` (an OTel attribute key may hold any string, and keeping
/// the key as given means `a/b` and `a.b` never collide). In metrics it is the value of the
/// `pipeline.counter.name` attribute of `pipeline.stage.counters`, never part of a name.
///
/// ```
/// use pipetel_core::pipeline::CounterKey;
/// let skipped = CounterKey::new("rows_skipped").expect("valid key");
/// assert_eq!(skipped.row_field(), "pipeline.counter.rows_skipped");
/// let zephyr = CounterKey::new("zephyr/worker/cpu_pct_average").expect("valid key");
/// assert_eq!(zephyr.row_field(), "pipeline.counter.zephyr/worker/cpu_pct_average");
/// assert!(CounterKey::new("Rows Skipped").is_err());
/// assert!(CounterKey::new("zephyr//items").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct CounterKey {
    name: Arc<str>,
    field: Arc<str>,
}

/// A counter key that is refused: empty, too long, an empty segment, or a character outside
/// ASCII letters, digits, `_`, `-`, `.` and the `/` separator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid counter key {key:?}: {why}; expected `/`-separated segments of ASCII letters, digits, `_`, `-` or `.` (e.g. `zephyr/item_count`), at most 128 bytes")]
pub struct KeyError {
    /// The refused key.
    pub key: String,
    /// What is wrong with it.
    pub why: &'static str,
}

fn segment_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

impl CounterKey {
    /// Validates `name`.
    ///
    /// # Errors
    /// [`KeyError`] naming the key and what is wrong with it.
    pub fn new(name: &str) -> Result<Self, KeyError> {
        let why = if name.is_empty() {
            Some("it is empty")
        } else if name.len() > MAX_COUNTER_KEY_LEN {
            Some("it is longer than 128 bytes")
        } else if name.split('/').any(str::is_empty) {
            Some("it has an empty segment (a leading, trailing or doubled `/`)")
        } else if !name.chars().all(|c| c == '/' || segment_char(c)) {
            Some("it has a character that is not allowed")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(KeyError { key: name.to_string(), why });
        }
        Ok(Self { name: Arc::from(name), field: Arc::from(format!("{COUNTER_PREFIX}{name}")) })
    }

    /// The key as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The field name in rows: `pipeline.counter.<key>`, `/` kept.
    pub fn row_field(&self) -> &str {
        &self.field
    }
}

impl fmt::Debug for CounterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CounterKey({})", self.name)
    }
}

impl fmt::Display for CounterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// The value of a user counter: an integer or a float (Zephyr's `stage_counters` hold both,
/// `zephyr/item_count: 1200`, `zephyr/worker/cpu_pct_average: 78.3`).
///
/// Summing: `Int + Int` stays `Int` (saturating), anything with a `Float` is a `Float`. Floats
/// must be finite: [`Shard::add`](super::Shard::add) refuses NaN and ±∞ (a warning naming the
/// key, once per key), [`Shard::try_add`](super::Shard::try_add) and [`CounterValue::float`]
/// return an error.
///
/// ```
/// use pipetel_core::pipeline::CounterValue;
/// assert_eq!(CounterValue::from(2u64) + CounterValue::from(3u64), CounterValue::Int(5));
/// assert_eq!(CounterValue::from(2u64) + CounterValue::from(0.5), CounterValue::Float(2.5));
/// assert!(CounterValue::float(f64::NAN).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CounterValue {
    /// An integer count (rows carry it as an int attribute).
    Int(i64),
    /// A finite float (rows carry it as a double attribute).
    Float(f64),
}

/// A counter value that is refused: NaN or infinite.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid value {value} for counter {key:?}: counter values must be finite")]
pub struct CounterValueError {
    /// The counter it was meant for (empty when not known).
    pub key: String,
    /// The refused value.
    pub value: f64,
}

impl CounterValue {
    /// A float value, checked.
    ///
    /// # Errors
    /// [`CounterValueError`] when `v` is NaN or infinite.
    pub fn float(v: f64) -> Result<Self, CounterValueError> {
        if v.is_finite() {
            Ok(CounterValue::Float(v))
        } else {
            Err(CounterValueError { key: String::new(), value: v })
        }
    }

    /// The value as a float.
    pub fn as_f64(self) -> f64 {
        match self {
            CounterValue::Int(i) => i as f64,
            CounterValue::Float(f) => f,
        }
    }

    /// Whether it is finite (an `Int` always is).
    pub fn is_finite(self) -> bool {
        match self {
            CounterValue::Int(_) => true,
            CounterValue::Float(f) => f.is_finite(),
        }
    }

    /// The value checked for `key`.
    pub(crate) fn checked(self, key: &str) -> Result<Self, CounterValueError> {
        match self {
            CounterValue::Float(f) if !f.is_finite() => Err(CounterValueError { key: key.to_string(), value: f }),
            v => Ok(v),
        }
    }
}

impl Default for CounterValue {
    fn default() -> Self {
        CounterValue::Int(0)
    }
}

impl std::ops::Add for CounterValue {
    type Output = CounterValue;

    fn add(self, rhs: CounterValue) -> CounterValue {
        match (self, rhs) {
            (CounterValue::Int(a), CounterValue::Int(b)) => CounterValue::Int(a.saturating_add(b)),
            (a, b) => CounterValue::Float(a.as_f64() + b.as_f64()),
        }
    }
}

impl fmt::Display for CounterValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CounterValue::Int(i) => write!(f, "{i}"),
            CounterValue::Float(x) => write!(f, "{x}"),
        }
    }
}

impl From<u64> for CounterValue {
    /// Saturates at `i64::MAX`.
    fn from(v: u64) -> Self {
        CounterValue::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<usize> for CounterValue {
    /// Saturates at `i64::MAX`.
    fn from(v: usize) -> Self {
        CounterValue::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

macro_rules! int_from {
    ($($t:ty),*) => {$(
        impl From<$t> for CounterValue {
            fn from(v: $t) -> Self {
                CounterValue::Int(i64::from(v))
            }
        }
    )*};
}
int_from!(i64, i32, u32, u16, u8);

impl From<f64> for CounterValue {
    /// Unchecked: a non-finite value is refused where it is recorded.
    fn from(v: f64) -> Self {
        CounterValue::Float(v)
    }
}

impl From<f32> for CounterValue {
    /// Unchecked: a non-finite value is refused where it is recorded.
    fn from(v: f32) -> Self {
        CounterValue::Float(f64::from(v))
    }
}

/// Counter sums in first-use order, indexed by key: adding is one hash lookup, so summing n
/// entries takes time linear in n (a scan of the list per entry would be quadratic, and a
/// remote report chooses how many keys it sends).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct CounterSums {
    list: Vec<(String, CounterValue)>,
    at: HashMap<String, usize>,
}

impl CounterSums {
    /// Sums starting from `entries` (a key repeated there is summed).
    pub(crate) fn from_entries(entries: impl IntoIterator<Item = (String, CounterValue)>) -> Self {
        let mut sums = CounterSums::default();
        for (k, v) in entries {
            sums.add(&k, v);
        }
        sums
    }

    /// Adds `value` to `key`'s sum, appending the key when it is new.
    pub(crate) fn add(&mut self, key: &str, value: CounterValue) {
        match self.at.get(key) {
            Some(&i) => self.list[i].1 = self.list[i].1 + value,
            None => {
                self.at.insert(key.to_string(), self.list.len());
                self.list.push((key.to_string(), value));
            }
        }
    }

    /// Distinct keys.
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// The sums in first-use order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &(String, CounterValue)> + '_ {
        self.list.iter()
    }

    /// The sums in first-use order.
    pub(crate) fn into_vec(self) -> Vec<(String, CounterValue)> {
        self.list
    }
}

/// Logs once per key that a counter value or key was refused.
pub(crate) fn warn_refused_once(key: &str, error: &dyn std::error::Error) {
    static WARNED: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    if crate::sync::lock(&WARNED).insert(key.to_string()) {
        tracing::warn!(target: "pipetel", counter = key, "counter value refused, not recorded: {error}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zephyr_keys_are_accepted_with_their_slashes_kept() {
        for ok in ["zephyr/item_count", "zephyr/worker/cpu_pct_average", "rows_skipped", "A-b.c/9"] {
            let k = CounterKey::new(ok).expect(ok);
            assert_eq!(k.name(), ok);
            assert_eq!(k.row_field(), format!("pipeline.counter.{ok}"));
        }
        assert!(CounterKey::new(&"x".repeat(MAX_COUNTER_KEY_LEN)).is_ok());
    }

    #[test]
    fn bad_keys_are_refused_naming_the_key_and_the_fault() {
        let cases = [
            ("", "empty"),
            ("/zephyr", "empty segment"),
            ("zephyr/", "empty segment"),
            ("zephyr//items", "empty segment"),
            ("has space", "character"),
            ("tab\tkey", "character"),
            ("caf\u{e9}", "character"),
            ("new\nline", "character"),
        ];
        for (bad, why) in cases {
            let err = CounterKey::new(bad).expect_err(bad);
            let msg = err.to_string();
            assert!(msg.contains(&format!("{bad:?}")) && msg.contains(why), "{bad:?}: {msg}");
        }
        let long = "x".repeat(MAX_COUNTER_KEY_LEN + 1);
        assert!(CounterKey::new(&long).expect_err("long").to_string().contains("longer than 128"));
    }

    #[test]
    fn ints_stay_ints_and_any_float_makes_a_float() {
        let mut sum = CounterSums::default();
        sum.add("a", CounterValue::from(3u64));
        sum.add("a", CounterValue::from(4i32));
        sum.add("b", CounterValue::from(1u64));
        sum.add("b", CounterValue::from(0.25));
        sum.add("c", CounterValue::from(-2i64));
        assert_eq!(sum.len(), 3);
        assert_eq!(
            sum.into_vec(),
            vec![
                ("a".to_string(), CounterValue::Int(7)),
                ("b".to_string(), CounterValue::Float(1.25)),
                ("c".to_string(), CounterValue::Int(-2))
            ]
        );
        assert_eq!(CounterValue::from(u64::MAX), CounterValue::Int(i64::MAX));
        assert_eq!(CounterValue::Int(i64::MAX) + CounterValue::Int(1), CounterValue::Int(i64::MAX));
    }

    #[test]
    fn non_finite_values_are_refused_naming_the_counter() {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(CounterValue::float(bad).is_err());
            let err = CounterValue::from(bad).checked("zephyr/cpu").expect_err("refused");
            assert!(err.to_string().contains("\"zephyr/cpu\""), "{err}");
        }
        assert_eq!(CounterValue::from(78.3).checked("k"), Ok(CounterValue::Float(78.3)));
    }

    #[test]
    fn the_stores_typed_fields_are_these_keys() {
        assert_eq!(pipetel_rows::TEXT_FIELDS[..6], [NAMESPACE, STAGE_NAME, EXECUTION_ID, STATUS, SHARD_STATE, REASON]);
        assert_eq!(
            pipetel_rows::FLOAT_FIELDS[..6],
            [ELAPSED, ITEM_RATE, BYTE_RATE, CPU_TIME, CPU_PERCENT, CPU_PERCENT_AVG]
        );
        for float in ["pipeline.phase.decode.seconds", "pipeline.shard.elapsed.p75", "pipeline.shard.item_rate.max"] {
            assert!(pipetel_rows::fields::is_float_field(float), "{float}");
        }
        for not_float in ["pipeline.phase..seconds", "pipeline.phase.name", ITEMS] {
            assert!(!pipetel_rows::fields::is_float_field(not_float), "{not_float}");
        }
    }
}
