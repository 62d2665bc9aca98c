//! Transfers between pipeline endpoints (stages, devices, hosts): bytes, transfers, tensors
//! and seconds per (source, destination) edge.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::family::{Family, FamilyError};
use crate::snapshot::MetricSnapshot;

/// The default namespace of the edge-transfer families.
pub const DEFAULT_NAMESPACE: &str = "pipeline.transfer";
/// Label naming the sending endpoint.
pub const LABEL_SRC: &str = "pipeline.transfer.src";
/// Label naming the receiving endpoint.
pub const LABEL_DST: &str = "pipeline.transfer.dst";
/// Label naming the transport (`tcp`, `shm`, `nccl`...).
pub const LABEL_TRANSPORT: &str = "pipeline.transfer.transport";

/// Pending records folded at once when [`EdgeTransfers::record`] fills its columns.
pub const DEFAULT_COLUMN_CAPACITY: usize = 4096;

/// An endpoint registered with [`EdgeTransfers::endpoint`]; only meaningful to the
/// [`EdgeTransfers`] that issued it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Endpoint(u32);

#[derive(Debug, Clone, Copy, Default)]
struct Totals {
    bytes: u64,
    transfers: u64,
    tensors: u64,
    seconds: f64,
}

/// The four edge-transfer families of one namespace.
#[derive(Debug, Clone)]
pub struct EdgeFamilies {
    /// `<ns>.bytes` (`By`): bytes moved.
    pub bytes: Family,
    /// `<ns>.count` (`{transfer}`): transfers (calls to [`EdgeTransfers::record`]).
    pub transfers: Family,
    /// `<ns>.tensors` (`{tensor}`): tensors moved.
    pub tensors: Family,
    /// `<ns>.duration` (`s`): seconds spent transferring (a counter).
    pub seconds: Family,
}

impl EdgeFamilies {
    /// The families under `namespace` (e.g. [`DEFAULT_NAMESPACE`]), labelled by [`LABEL_SRC`],
    /// [`LABEL_DST`] and [`LABEL_TRANSPORT`].
    ///
    /// # Errors
    /// [`FamilyError::InvalidName`] when `namespace` does not make valid family names.
    pub fn new(namespace: &str) -> Result<EdgeFamilies, FamilyError> {
        let labels = [LABEL_SRC, LABEL_DST, LABEL_TRANSPORT];
        let family = |suffix: &str, help: &str, unit: &str| {
            Family::counter(&format!("{namespace}.{suffix}"), help, unit, &labels)
        };
        Ok(EdgeFamilies {
            bytes: family("bytes", "Bytes moved between pipeline endpoints", "By")?,
            transfers: family("count", "Transfers between pipeline endpoints", "{transfer}")?,
            tensors: family("tensors", "Tensors moved between pipeline endpoints", "{tensor}")?,
            seconds: family("duration", "Seconds spent transferring between pipeline endpoints", "s")?,
        })
    }

    /// The families in snapshot order: bytes, transfers, tensors, seconds.
    pub fn all(&self) -> [&Family; 4] {
        [&self.bytes, &self.transfers, &self.tensors, &self.seconds]
    }
}

/// The latest snapshots handed over by [`EdgeTransfers::publish`].
#[derive(Debug, Clone, PartialEq)]
pub struct Published {
    /// 1 for the first publication, then one more each time.
    pub generation: u64,
    /// The snapshots, in [`EdgeFamilies::all`] order.
    pub snapshots: Arc<[MetricSnapshot]>,
}

/// A handle other threads read published edge snapshots through; cheap to clone.
///
/// A reader gets either nothing or a whole, immutable snapshot list: publication swaps one
/// [`Arc`] under a lock held only for the swap.
#[derive(Debug, Clone, Default)]
pub struct EdgeReader(Arc<Mutex<Option<Published>>>);

impl EdgeReader {
    /// The latest publication, if any.
    pub fn latest(&self) -> Option<Published> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// Edge-transfer recorder for one transport.
///
/// [`record`](EdgeTransfers::record) only appends to preallocated columns: no map lookup, no
/// string handling and no allocation in steady state. Endpoints are named once with
/// [`endpoint`](EdgeTransfers::endpoint). The columns are folded into per-edge totals by
/// [`snapshot`](EdgeTransfers::snapshot), or when they fill up (every
/// [`DEFAULT_COLUMN_CAPACITY`] records by default), so memory stays bounded by the number of
/// edges. Totals are cumulative.
///
/// Not thread-safe by design: one recorder per thread. Every mutation takes `&mut self`, so
/// the compiler enforces a single writer; other threads read through an [`EdgeReader`].
#[derive(Debug)]
pub struct EdgeTransfers {
    transport: String,
    families: EdgeFamilies,
    names: Vec<String>,
    ids: HashMap<String, u32>,
    src: Vec<u32>,
    dst: Vec<u32>,
    nbytes: Vec<u64>,
    tensors: Vec<u64>,
    seconds: Vec<f64>,
    edges: HashMap<(u32, u32), usize>,
    totals: Vec<((u32, u32), Totals)>,
    /// Indices into `totals` sorted by (src name, dst name); re-sorted only when edges appear.
    order: Vec<usize>,
    /// `totals.len()` when `order` was last sorted.
    sorted_edges: usize,
    published: EdgeReader,
    generation: u64,
}

impl EdgeTransfers {
    /// A recorder for `transport` under [`DEFAULT_NAMESPACE`].
    pub fn new(transport: &str) -> EdgeTransfers {
        match EdgeFamilies::new(DEFAULT_NAMESPACE) {
            Ok(families) => EdgeTransfers::with_families(transport, families, DEFAULT_COLUMN_CAPACITY),
            // The default namespace is a valid name; this arm is unreachable.
            Err(_) => unreachable!("the default namespace makes valid family names"),
        }
    }

    /// A recorder for `transport` with the given families, folding every `column_capacity`
    /// records (at least 1).
    pub fn with_families(transport: &str, families: EdgeFamilies, column_capacity: usize) -> EdgeTransfers {
        let cap = column_capacity.max(1);
        EdgeTransfers {
            transport: transport.to_owned(),
            families,
            names: Vec::new(),
            ids: HashMap::new(),
            src: Vec::with_capacity(cap),
            dst: Vec::with_capacity(cap),
            nbytes: Vec::with_capacity(cap),
            tensors: Vec::with_capacity(cap),
            seconds: Vec::with_capacity(cap),
            edges: HashMap::new(),
            totals: Vec::new(),
            order: Vec::new(),
            sorted_edges: 0,
            published: EdgeReader::default(),
            generation: 0,
        }
    }

    /// The transport label value.
    pub fn transport(&self) -> &str {
        &self.transport
    }

    /// The families this recorder snapshots.
    pub fn families(&self) -> &EdgeFamilies {
        &self.families
    }

    /// The endpoint called `name`, registered on first use. Call it once per endpoint, outside
    /// the hot path.
    pub fn endpoint(&mut self, name: &str) -> Endpoint {
        if let Some(&id) = self.ids.get(name) {
            return Endpoint(id);
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_owned());
        self.ids.insert(name.to_owned(), id);
        Endpoint(id)
    }

    /// Records one transfer of `nbytes` bytes in `tensors` tensors from `src` to `dst`, taking
    /// `seconds` (negative or non-finite durations count as zero).
    #[inline]
    pub fn record(&mut self, src: Endpoint, dst: Endpoint, nbytes: u64, tensors: u64, seconds: f64) {
        if self.src.len() == self.src.capacity() {
            self.fold();
        }
        self.src.push(src.0);
        self.dst.push(dst.0);
        self.nbytes.push(nbytes);
        self.tensors.push(tensors);
        self.seconds.push(seconds);
    }

    fn fold(&mut self) {
        let rows = self.src.iter().zip(&self.dst).zip(&self.nbytes).zip(&self.tensors).zip(&self.seconds);
        for ((((&s, &d), &b), &t), &secs) in rows {
            let slot = *self.edges.entry((s, d)).or_insert_with(|| {
                self.totals.push(((s, d), Totals::default()));
                self.totals.len() - 1
            });
            let total = &mut self.totals[slot].1;
            total.bytes = total.bytes.saturating_add(b);
            total.transfers = total.transfers.saturating_add(1);
            total.tensors = total.tensors.saturating_add(t);
            if secs.is_finite() && secs > 0.0 {
                total.seconds += secs;
            }
        }
        self.src.clear();
        self.dst.clear();
        self.nbytes.clear();
        self.tensors.clear();
        self.seconds.clear();
    }

    /// Folds pending records and returns cumulative snapshots, one row per (src, dst) edge, in
    /// [`EdgeFamilies::all`] order: bytes, transfers, tensors, seconds.
    pub fn snapshot(&mut self) -> Vec<MetricSnapshot> {
        self.fold();
        let names = &self.names;
        let name = |id: u32| names.get(id as usize).map(String::as_str);
        if self.sorted_edges != self.totals.len() {
            self.sorted_edges = self.totals.len();
            let totals = &self.totals;
            // Edges naming an endpoint of another recorder have no name here and are skipped.
            let mut order: Vec<usize> = (0..totals.len())
                .filter(|&i| name(totals[i].0 .0).is_some() && name(totals[i].0 .1).is_some())
                .collect();
            order.sort_by_key(|&i| (name(totals[i].0 .0), name(totals[i].0 .1)));
            self.order = order;
        }
        let rows: Vec<(&str, &str, Totals)> = self
            .order
            .iter()
            .filter_map(|&i| {
                let ((s, d), t) = self.totals[i];
                Some((name(s)?, name(d)?, t))
            })
            .collect();
        let labels: Arc<[String]> =
            rows.iter().flat_map(|(s, d, _)| [(*s).to_owned(), (*d).to_owned(), self.transport.clone()]).collect();
        let column = |f: &Family, pick: fn(&Totals) -> f64| {
            MetricSnapshot::from_trusted(
                f.clone(),
                labels.clone(),
                rows.iter().map(|r| pick(&r.2)).collect(),
                Vec::new(),
                Vec::new(),
            )
        };
        vec![
            column(&self.families.bytes, |t| t.bytes as f64),
            column(&self.families.transfers, |t| t.transfers as f64),
            column(&self.families.tensors, |t| t.tensors as f64),
            column(&self.families.seconds, |t| t.seconds),
        ]
    }

    /// Takes a snapshot and hands it, whole, to every [`EdgeReader`] of this recorder; returns
    /// its generation.
    pub fn publish(&mut self) -> u64 {
        let snapshots: Arc<[MetricSnapshot]> = self.snapshot().into();
        self.generation += 1;
        let published = Published { generation: self.generation, snapshots };
        *self.published.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(published);
        self.generation
    }

    /// A reader of what [`publish`](EdgeTransfers::publish) hands over, for another thread.
    pub fn reader(&self) -> EdgeReader {
        self.published.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_one_row_per_edge() {
        let mut e = EdgeTransfers::with_families("tcp", EdgeFamilies::new(DEFAULT_NAMESPACE).expect("valid"), 3);
        let (a, b, c) = (e.endpoint("a"), e.endpoint("b"), e.endpoint("c"));
        assert_eq!(e.endpoint("a"), a);
        for _ in 0..5 {
            e.record(b, c, 100, 2, 0.5);
        }
        e.record(a, b, 7, 1, f64::NAN);
        e.record(a, b, 3, 1, -1.0);
        let snaps = e.snapshot();
        assert_eq!(snaps.len(), 4);
        let names: Vec<_> = snaps.iter().map(MetricSnapshot::name).collect();
        assert_eq!(
            names,
            [
                "pipeline.transfer.bytes",
                "pipeline.transfer.count",
                "pipeline.transfer.tensors",
                "pipeline.transfer.duration"
            ]
        );
        assert_eq!(snaps[0].label_values(), ["a", "b", "tcp", "b", "c", "tcp"]);
        assert_eq!(snaps[0].values(), [10.0, 500.0]);
        assert_eq!(snaps[1].values(), [2.0, 5.0]);
        assert_eq!(snaps[2].values(), [2.0, 10.0]);
        assert_eq!(snaps[3].values(), [0.0, 2.5]);
        // Cumulative across snapshots.
        e.record(a, b, 1, 1, 1.0);
        assert_eq!(e.snapshot()[0].values(), [11.0, 500.0]);
    }

    #[test]
    fn steady_state_record_does_not_grow_columns() {
        let mut e = EdgeTransfers::with_families("shm", EdgeFamilies::new("x").expect("valid"), 8);
        let (a, b) = (e.endpoint("a"), e.endpoint("b"));
        let cap = e.src.capacity();
        for i in 0..1000 {
            e.record(a, b, i, 1, 0.0);
        }
        assert_eq!(e.src.capacity(), cap);
        assert_eq!(e.totals.len(), 1);
        assert_eq!(e.snapshot()[1].values(), [1000.0]);
    }

    #[test]
    fn foreign_endpoints_are_skipped() {
        let mut other = EdgeTransfers::new("tcp");
        for i in 0..5 {
            other.endpoint(&i.to_string());
        }
        let far = other.endpoint("4");
        let mut e = EdgeTransfers::new("tcp");
        let a = e.endpoint("a");
        e.record(a, far, 1, 1, 1.0);
        e.record(a, a, 1, 1, 1.0);
        assert_eq!(e.snapshot()[0].label_values(), ["a", "a", "tcp"]);
    }

    #[test]
    fn publish_hands_whole_snapshots_to_other_threads() {
        let mut e = EdgeTransfers::new("tcp");
        let reader = e.reader();
        assert!(reader.latest().is_none());
        let (a, b) = (e.endpoint("a"), e.endpoint("b"));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watcher = {
            let (reader, stop) = (reader.clone(), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut seen = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Acquire) {
                    if let Some(p) = reader.latest() {
                        // Whole: every family present, all with the same rows, bytes = 10 × transfers.
                        assert_eq!(p.snapshots.len(), 4);
                        let bytes = p.snapshots[0].values().first().copied().unwrap_or(0.0);
                        let count = p.snapshots[1].values().first().copied().unwrap_or(0.0);
                        assert_eq!(bytes, 10.0 * count);
                        assert!(p.generation >= seen);
                        seen = p.generation;
                    }
                }
                seen
            })
        };
        for _ in 0..2000 {
            e.record(a, b, 10, 1, 0.001);
            e.publish();
        }
        stop.store(true, std::sync::atomic::Ordering::Release);
        let seen = watcher.join().expect("watcher");
        assert!(seen <= 2000);
        let last = reader.latest().expect("published");
        assert_eq!(last.generation, 2000);
        assert_eq!(last.snapshots[1].values(), [2000.0]);
    }
}
