//! Cumulative, columnar snapshots of one family, and their merge.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::Arc;

use crate::family::{Family, Kind};

/// Why columns do not form a valid [`MetricSnapshot`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// A column has the wrong length for the number of series.
    #[error("column {column} of family {family:?} has {got} entries, expected {expected}")]
    ColumnLength {
        /// The family.
        family: String,
        /// `labels`, `values`, `bucket_counts` or `sums`.
        column: &'static str,
        /// Entries expected.
        expected: usize,
        /// Entries found.
        got: usize,
    },
    /// Label rows are not strictly increasing (unsorted or repeated).
    #[error("series {series} of family {family:?} is out of order or repeats the label values of its predecessor")]
    Unordered {
        /// The family.
        family: String,
        /// Position of the offending series.
        series: usize,
    },
    /// A value is not finite, or a counter value is negative.
    #[error("series {series} of family {family:?} has an invalid value ({value})")]
    InvalidValue {
        /// The family.
        family: String,
        /// Position of the series.
        series: usize,
        /// The value.
        value: f64,
    },
    /// Cumulative bucket counts decrease within a series.
    #[error("bucket counts of series {series} of family {family:?} are not cumulative")]
    NotCumulative {
        /// The family.
        family: String,
        /// Position of the series.
        series: usize,
    },
}

/// One series of a snapshot, borrowed.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Series<'a> {
    /// Label values, in the order of [`Family::label_names`].
    pub labels: &'a [String],
    /// The counter or gauge value; for a histogram, its count (the `+Inf` bucket) as `f64`.
    pub value: f64,
    /// Cumulative bucket counts of a histogram, one per bound then `+Inf` (= count); empty
    /// for counters and gauges.
    pub bucket_counts: &'a [u64],
    /// The sum of a histogram's observations; `0.0` for counters and gauges.
    pub sum: f64,
}

impl Series<'_> {
    /// A histogram's count (`+Inf` bucket); 0 for counters and gauges.
    pub fn count(&self) -> u64 {
        self.bucket_counts.last().copied().unwrap_or(0)
    }
}

/// A cumulative snapshot of one family: every series since the recorder was created, in
/// columns.
///
/// Series are sorted by label values (strictly increasing), which makes snapshots canonical:
/// two snapshots of the same data compare equal, lookups are binary searches and merges are
/// linear. Columns:
///
/// | column | length | content |
/// | --- | --- | --- |
/// | [`label_values`](MetricSnapshot::label_values) | series × arity | row-major label values |
/// | [`values`](MetricSnapshot::values) | series (counter, gauge) or 0 | totals / current values |
/// | [`bucket_counts`](MetricSnapshot::bucket_counts) | series × (bounds + 1) (histogram) or 0 | cumulative counts, `+Inf` last = count |
/// | [`sums`](MetricSnapshot::sums) | series (histogram) or 0 | sum of observations |
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSnapshot {
    family: Family,
    series: usize,
    /// Shared so that clones are cheap and families with the same rows (edge transfers) hold
    /// one copy.
    labels: Arc<[String]>,
    values: Vec<f64>,
    bucket_counts: Vec<u64>,
    sums: Vec<f64>,
}

impl MetricSnapshot {
    /// A snapshot of `family` with no series.
    pub fn empty(family: Family) -> MetricSnapshot {
        MetricSnapshot {
            family,
            series: 0,
            labels: Arc::from(Vec::new()),
            values: Vec::new(),
            bucket_counts: Vec::new(),
            sums: Vec::new(),
        }
    }

    /// A snapshot from its columns (see the table on [`MetricSnapshot`]), validated. The number
    /// of series is `values.len()` for counters and gauges, `sums.len()` for histograms.
    ///
    /// # Errors
    /// [`SnapshotError`] when a column has the wrong length, label rows are not strictly
    /// increasing, a value is not finite (or a counter is negative), or bucket counts are not
    /// cumulative.
    pub fn from_columns(
        family: Family,
        label_values: Vec<String>,
        values: Vec<f64>,
        bucket_counts: Vec<u64>,
        sums: Vec<f64>,
    ) -> Result<MetricSnapshot, SnapshotError> {
        let snapshot = MetricSnapshot::new(family, label_values.into(), values, bucket_counts, sums);
        snapshot.validate()?;
        Ok(snapshot)
    }

    /// Built by this crate from data it maintains; validated only in debug builds.
    pub(crate) fn from_trusted(
        family: Family,
        labels: Arc<[String]>,
        values: Vec<f64>,
        bucket_counts: Vec<u64>,
        sums: Vec<f64>,
    ) -> MetricSnapshot {
        let snapshot = MetricSnapshot::new(family, labels, values, bucket_counts, sums);
        debug_assert_eq!(snapshot.validate(), Ok(()));
        snapshot
    }

    /// Unchecked; the number of series is `values.len()` for counters and gauges,
    /// `sums.len()` for histograms.
    fn new(family: Family, labels: Arc<[String]>, values: Vec<f64>, bucket_counts: Vec<u64>, sums: Vec<f64>) -> Self {
        let series = match family.kind() {
            Kind::Counter | Kind::Gauge => values.len(),
            Kind::Histogram => sums.len(),
        };
        MetricSnapshot { family, series, labels, values, bucket_counts, sums }
    }

    fn validate(&self) -> Result<(), SnapshotError> {
        let f = &self.family;
        let name = || f.name().to_owned();
        let n = self.series;
        let arity = f.arity();
        let hist = f.kind() == Kind::Histogram;
        let checks = [
            ("labels", self.labels.len(), n.checked_mul(arity)),
            ("values", self.values.len(), Some(if hist { 0 } else { n })),
            ("bucket_counts", self.bucket_counts.len(), n.checked_mul(f.buckets())),
            ("sums", self.sums.len(), Some(if hist { n } else { 0 })),
        ];
        for (column, got, expected) in checks {
            if Some(got) != expected {
                return Err(SnapshotError::ColumnLength {
                    family: name(),
                    column,
                    expected: expected.unwrap_or(usize::MAX),
                    got,
                });
            }
        }
        for i in 1..n {
            if self.row(i - 1) >= self.row(i) {
                return Err(SnapshotError::Unordered { family: name(), series: i });
            }
        }
        let invalid = |series: usize, value: f64| SnapshotError::InvalidValue { family: name(), series, value };
        match f.kind() {
            Kind::Counter => {
                if let Some(i) = self.values.iter().position(|v| !(v.is_finite() && *v >= 0.0)) {
                    return Err(invalid(i, self.values[i]));
                }
            }
            Kind::Gauge => {
                if let Some(i) = self.values.iter().position(|v| !v.is_finite()) {
                    return Err(invalid(i, self.values[i]));
                }
            }
            Kind::Histogram => {
                if let Some(i) = self.sums.iter().position(|v| !v.is_finite()) {
                    return Err(invalid(i, self.sums[i]));
                }
                let b = f.buckets();
                for (i, row) in self.bucket_counts.chunks_exact(b).enumerate() {
                    if row.windows(2).any(|w| w[0] > w[1]) {
                        return Err(SnapshotError::NotCumulative { family: name(), series: i });
                    }
                }
            }
        }
        Ok(())
    }

    /// The family this snapshot belongs to (name, help, unit, kind, labels, bounds).
    pub fn family(&self) -> &Family {
        &self.family
    }

    /// The family name.
    pub fn name(&self) -> &str {
        self.family.name()
    }

    /// The family kind.
    pub fn kind(&self) -> Kind {
        self.family.kind()
    }

    /// Number of series.
    pub fn len(&self) -> usize {
        self.series
    }

    /// Whether there are no series.
    pub fn is_empty(&self) -> bool {
        self.series == 0
    }

    /// All label values, row-major: series `i` holds `[i * arity, (i + 1) * arity)`.
    pub fn label_values(&self) -> &[String] {
        &self.labels
    }

    /// Counter or gauge values, one per series (empty for histograms).
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// Cumulative histogram bucket counts, `bounds + 1` per series, `+Inf` last (empty for
    /// counters and gauges).
    pub fn bucket_counts(&self) -> &[u64] {
        &self.bucket_counts
    }

    /// Histogram sums, one per series (empty for counters and gauges).
    pub fn sums(&self) -> &[f64] {
        &self.sums
    }

    /// Label values of series `i`.
    ///
    /// # Panics
    /// When `i >= self.len()`.
    pub fn row(&self, i: usize) -> &[String] {
        let a = self.family.arity();
        &self.labels[i * a..(i + 1) * a]
    }

    fn series_at(&self, i: usize) -> Series<'_> {
        let labels = self.row(i);
        match self.family.kind() {
            Kind::Counter | Kind::Gauge => Series { labels, value: self.values[i], bucket_counts: &[], sum: 0.0 },
            Kind::Histogram => {
                let b = self.family.buckets();
                let bucket_counts = &self.bucket_counts[i * b..(i + 1) * b];
                Series {
                    labels,
                    value: bucket_counts.last().copied().unwrap_or(0) as f64,
                    bucket_counts,
                    sum: self.sums[i],
                }
            }
        }
    }

    /// The series, in label order.
    pub fn series(&self) -> impl ExactSizeIterator<Item = Series<'_>> + '_ {
        (0..self.series).map(move |i| self.series_at(i))
    }

    /// The series with exactly these label values.
    pub fn get<S: AsRef<str>>(&self, labels: &[S]) -> Option<Series<'_>> {
        let a = self.family.arity();
        if labels.len() != a {
            return None;
        }
        let (mut lo, mut hi) = (0, self.series);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match cmp_row(self.row(mid), labels) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Some(self.series_at(mid)),
            }
        }
        None
    }

    /// Whether going from `earlier` to `self` cannot be growth of the same counters: some
    /// counter value or histogram bucket went down, or a series disappeared. That is what a
    /// restarted source looks like (its recorders start again from zero); an exporter then
    /// carries the previous totals forward, as Prometheus does for counter resets.
    ///
    /// Always `false` for gauges and when the families differ in kind.
    pub fn is_reset_from(&self, earlier: &MetricSnapshot) -> bool {
        let kind = self.kind();
        if kind == Kind::Gauge || kind != earlier.kind() {
            return false;
        }
        let mut j = 0;
        for old in earlier.series() {
            while j < self.series && self.row(j) < old.labels {
                j += 1;
            }
            if j == self.series || self.row(j) != old.labels {
                return true;
            }
            let new = self.series_at(j);
            let down = match kind {
                Kind::Histogram => {
                    new.bucket_counts.len() != old.bucket_counts.len()
                        || new.bucket_counts.iter().zip(old.bucket_counts).any(|(n, o)| n < o)
                }
                Kind::Counter | Kind::Gauge => new.value < old.value,
            };
            if down {
                return true;
            }
        }
        false
    }

    /// The columns, by value. The label column may be shared with clones of this snapshot.
    pub fn into_columns(self) -> Columns {
        Columns {
            family: self.family,
            label_values: self.labels,
            values: self.values,
            bucket_counts: self.bucket_counts,
            sums: self.sums,
        }
    }
}

/// A snapshot's columns, by value (see [`MetricSnapshot::into_columns`] and the table on
/// [`MetricSnapshot`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Columns {
    /// The family.
    pub family: Family,
    /// Label values, row-major.
    pub label_values: Arc<[String]>,
    /// Counter or gauge values.
    pub values: Vec<f64>,
    /// Cumulative histogram bucket counts.
    pub bucket_counts: Vec<u64>,
    /// Histogram sums.
    pub sums: Vec<f64>,
}

fn cmp_row<S: AsRef<str>>(row: &[String], labels: &[S]) -> Ordering {
    for (a, b) in row.iter().zip(labels) {
        match a.as_str().cmp(b.as_ref()) {
            Ordering::Equal => {}
            other => return other,
        }
    }
    row.len().cmp(&labels.len())
}

/// Why snapshots could not be merged.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    /// A snapshot's family differs from the target family in name, kind, unit, labels or
    /// bounds.
    #[error("snapshot {index} is of family {found:?} ({kind}), which does not match family {family:?}")]
    FamilyMismatch {
        /// The target family.
        family: String,
        /// Position of the snapshot.
        index: usize,
        /// That snapshot's family name.
        found: String,
        /// That snapshot's kind.
        kind: Kind,
    },
}

/// One snapshot summing the series of `snapshots` that share label values (counter and gauge
/// values, histogram bucket counts and sums); series found in only one snapshot are kept as
/// they are. The result carries `family`.
///
/// Merge is associative and commutative (exactly so for integer-valued floats; otherwise up to
/// floating-point rounding), the empty snapshot is its identity, and merging the snapshots of
/// several processes equals recording everything in one. Bucket counts saturate at `u64::MAX`.
///
/// # Errors
/// [`MergeError::FamilyMismatch`] when a snapshot is not of a family
/// [compatible](Family::compatible_with) with `family`.
pub fn merge(family: &Family, snapshots: &[MetricSnapshot]) -> Result<MetricSnapshot, MergeError> {
    for (index, s) in snapshots.iter().enumerate() {
        if !family.compatible_with(&s.family) {
            return Err(MergeError::FamilyMismatch {
                family: family.name().to_owned(),
                index,
                found: s.name().to_owned(),
                kind: s.kind(),
            });
        }
    }
    match snapshots {
        [] => return Ok(MetricSnapshot::empty(family.clone())),
        [one] => {
            let mut out = one.clone();
            out.family = family.clone();
            return Ok(out);
        }
        _ => {}
    }
    // Each input is sorted: a k-way merge through a heap of each input's next row. Equal rows
    // pop in input order (the index breaks ties), so float sums are added in a fixed order.
    let total: usize = snapshots.iter().map(MetricSnapshot::len).sum();
    let mut cursors = vec![0usize; snapshots.len()];
    let mut heap: BinaryHeap<Reverse<(&[String], usize)>> =
        snapshots.iter().enumerate().filter(|(_, s)| !s.is_empty()).map(|(k, s)| Reverse((s.row(0), k))).collect();

    let arity = family.arity();
    let buckets = family.buckets();
    let hist = family.kind() == Kind::Histogram;
    let mut labels: Vec<String> = Vec::with_capacity(total * arity);
    let mut values = Vec::new();
    let mut bucket_counts = Vec::new();
    let mut sums = Vec::new();
    let mut last: Option<&[String]> = None;
    while let Some(Reverse((row, k))) = heap.pop() {
        if last != Some(row) {
            last = Some(row);
            labels.extend_from_slice(row);
            if hist {
                bucket_counts.resize(bucket_counts.len() + buckets, 0u64);
                sums.push(0.0);
            } else {
                values.push(0.0);
            }
        }
        let snap = &snapshots[k];
        let i = cursors[k];
        if hist {
            let src = &snap.bucket_counts[i * buckets..(i + 1) * buckets];
            let start = bucket_counts.len() - buckets;
            for (d, c) in bucket_counts[start..].iter_mut().zip(src) {
                *d = d.saturating_add(*c);
            }
            if let Some(sum) = sums.last_mut() {
                *sum += snap.sums[i];
            }
        } else if let Some(v) = values.last_mut() {
            *v += snap.values[i];
        }
        cursors[k] = i + 1;
        if i + 1 < snap.len() {
            heap.push(Reverse((snap.row(i + 1), k)));
        }
    }
    Ok(MetricSnapshot::from_trusted(family.clone(), labels.into(), values, bucket_counts, sums))
}

/// What one source sends at a time: its id, a sequence number that grows with each message, and
/// the cumulative snapshots of its families.
///
/// An exporter keeps the latest envelope per source (a lower sequence is stale and ignored), so
/// losing, repeating or reordering envelopes never corrupts a total.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// Who sent it (a worker name, a process id).
    pub source: String,
    /// Grows by at least one per envelope from one source.
    pub sequence: u64,
    /// Cumulative snapshots, at most one per family.
    pub snapshots: Vec<MetricSnapshot>,
}

impl Envelope {
    /// An envelope.
    pub fn new(source: impl Into<String>, sequence: u64, snapshots: Vec<MetricSnapshot>) -> Envelope {
        Envelope { source: source.into(), sequence, snapshots }
    }
}

#[cfg(feature = "serde")]
mod serde_impl {
    use super::MetricSnapshot;
    use crate::family::Family;

    #[derive(serde::Serialize, serde::Deserialize)]
    struct SnapshotDef {
        family: Family,
        #[serde(default)]
        label_values: Vec<String>,
        #[serde(default)]
        values: Vec<f64>,
        #[serde(default)]
        bucket_counts: Vec<u64>,
        #[serde(default)]
        sums: Vec<f64>,
    }

    impl serde::Serialize for MetricSnapshot {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeStruct;
            let mut st = s.serialize_struct("MetricSnapshot", 5)?;
            st.serialize_field("family", &self.family)?;
            st.serialize_field("label_values", &*self.labels)?;
            st.serialize_field("values", &self.values)?;
            st.serialize_field("bucket_counts", &self.bucket_counts)?;
            st.serialize_field("sums", &self.sums)?;
            st.end()
        }
    }

    impl<'de> serde::Deserialize<'de> for MetricSnapshot {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<MetricSnapshot, D::Error> {
            let def = SnapshotDef::deserialize(d)?;
            MetricSnapshot::from_columns(def.family, def.label_values, def.values, def.bucket_counts, def.sums)
                .map_err(serde::de::Error::custom)
        }
    }

    #[derive(serde::Serialize, serde::Deserialize)]
    #[serde(remote = "super::Envelope")]
    struct EnvelopeDef {
        source: String,
        sequence: u64,
        snapshots: Vec<MetricSnapshot>,
    }

    impl serde::Serialize for super::Envelope {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            EnvelopeDef::serialize(self, s)
        }
    }

    impl<'de> serde::Deserialize<'de> for super::Envelope {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<super::Envelope, D::Error> {
            EnvelopeDef::deserialize(d)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter(labels: &[&str]) -> Family {
        Family::counter("c", "", "", labels).expect("valid family")
    }

    fn snap(f: &Family, rows: &[(&[&str], f64)]) -> MetricSnapshot {
        MetricSnapshot::from_columns(
            f.clone(),
            rows.iter().flat_map(|(l, _)| l.iter().map(|s| (*s).to_owned())).collect(),
            rows.iter().map(|(_, v)| *v).collect(),
            vec![],
            vec![],
        )
        .expect("valid snapshot")
    }

    #[test]
    fn from_columns_validates() {
        let f = counter(&["a"]);
        let err = MetricSnapshot::from_columns(f.clone(), vec!["b".into(), "a".into()], vec![1.0, 2.0], vec![], vec![])
            .expect_err("unordered");
        assert_eq!(err, SnapshotError::Unordered { family: "c".into(), series: 1 });
        let err =
            MetricSnapshot::from_columns(f.clone(), vec!["a".into()], vec![], vec![], vec![]).expect_err("lengths");
        assert!(matches!(err, SnapshotError::ColumnLength { column: "labels", .. }));
        let err = MetricSnapshot::from_columns(f.clone(), vec!["a".into()], vec![-1.0], vec![], vec![])
            .expect_err("negative counter");
        assert!(matches!(err, SnapshotError::InvalidValue { series: 0, .. }));
        let h = Family::histogram("h", "", "s", &[], &[1.0]).expect("valid");
        let err = MetricSnapshot::from_columns(h, vec![], vec![], vec![3, 2], vec![1.0]).expect_err("not cumulative");
        assert!(matches!(err, SnapshotError::NotCumulative { series: 0, .. }));
    }

    #[test]
    fn get_and_series_expose_rows() {
        let f = counter(&["a", "b"]);
        let s = snap(&f, &[(&["x", "1"], 1.0), (&["x", "2"], 5.0), (&["y", "0"], 2.0)]);
        assert_eq!(s.len(), 3);
        assert_eq!(s.get(&["x", "2"]).map(|r| r.value), Some(5.0));
        assert_eq!(s.get(&["x", "3"]), None);
        assert_eq!(s.get(&["x"]), None);
        let rows: Vec<_> = s.series().map(|r| (r.labels.join("/"), r.value)).collect();
        assert_eq!(rows, [("x/1".into(), 1.0), ("x/2".into(), 5.0), ("y/0".into(), 2.0)]);
    }

    #[test]
    fn columns_round_trip() {
        let f = counter(&["a"]);
        let s = snap(&f, &[(&["x"], 1.0), (&["y"], 2.0)]);
        let c = s.clone().into_columns();
        assert_eq!(c.values, [1.0, 2.0]);
        let back = MetricSnapshot::from_columns(c.family, c.label_values.to_vec(), c.values, c.bucket_counts, c.sums)
            .expect("valid");
        assert_eq!(back, s);
    }

    #[test]
    fn merge_sums_shared_rows() {
        let f = counter(&["a"]);
        let a = snap(&f, &[(&["x"], 1.0), (&["z"], 3.0)]);
        let b = snap(&f, &[(&["y"], 10.0), (&["z"], 4.0)]);
        let m = merge(&f, &[a, b]).expect("merge");
        assert_eq!(m, snap(&f, &[(&["x"], 1.0), (&["y"], 10.0), (&["z"], 7.0)]));
    }

    #[test]
    fn merge_rejects_other_families() {
        let f = counter(&["a"]);
        let g = Family::gauge("c", "", "", &["a"]).expect("valid");
        let err = merge(&f, &[MetricSnapshot::empty(g)]).expect_err("mismatch");
        assert!(err.to_string().contains("gauge"));
    }

    #[test]
    fn detects_resets() {
        let f = counter(&["a"]);
        let before = snap(&f, &[(&["x"], 5.0), (&["y"], 1.0)]);
        assert!(!snap(&f, &[(&["x"], 5.0), (&["y"], 2.0)]).is_reset_from(&before));
        assert!(!snap(&f, &[(&["w"], 1.0), (&["x"], 6.0), (&["y"], 1.0)]).is_reset_from(&before));
        assert!(snap(&f, &[(&["x"], 4.0), (&["y"], 2.0)]).is_reset_from(&before));
        assert!(snap(&f, &[(&["x"], 5.0)]).is_reset_from(&before));
        assert!(MetricSnapshot::empty(f.clone()).is_reset_from(&before));
        let g = Family::gauge("g", "", "", &[]).expect("valid");
        let high = MetricSnapshot::from_columns(g.clone(), vec![], vec![9.0], vec![], vec![]).expect("valid");
        let low = MetricSnapshot::from_columns(g, vec![], vec![1.0], vec![], vec![]).expect("valid");
        assert!(!low.is_reset_from(&high));
    }
}
