//! Label-value lookup without allocation: a hash of the borrowed values picks a chain of
//! series whose stored values are compared in place.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

const NONE: u32 = u32::MAX;
const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// Most series one recorder holds; past it new label values are refused rather than letting a
/// runaway label grow memory without bound.
pub(crate) const MAX_SERIES: usize = (u32::MAX - 1) as usize;

/// The keys are already hashes: pass them through.
#[derive(Default)]
pub(crate) struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

#[inline]
fn mix(h: u64, word: u64) -> u64 {
    (h.rotate_left(5) ^ word).wrapping_mul(SEED)
}

/// A fast, non-cryptographic hash of a row of label values (labels are chosen by the program,
/// not by an adversary).
#[inline]
pub(crate) fn hash_row<S: AsRef<str>>(values: &[S]) -> u64 {
    let mut h = 0u64;
    for v in values {
        let bytes = v.as_ref().as_bytes();
        h = mix(h, bytes.len() as u64);
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            h = mix(h, u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            h = mix(h, u64::from_le_bytes(w));
        }
    }
    h
}

/// Series of one recorder, in insertion order, with their label values stored flat.
#[derive(Debug, Default)]
pub(crate) struct SeriesIndex {
    arity: usize,
    labels: Vec<String>,
    heads: HashMap<u64, u32, BuildHasherDefault<PassThrough>>,
    next: Vec<u32>,
    /// Series sorted by label values, rebuilt only when series were added since the last sort.
    order: Vec<u32>,
}

impl SeriesIndex {
    pub(crate) fn new(arity: usize) -> SeriesIndex {
        SeriesIndex { arity, ..SeriesIndex::default() }
    }

    pub(crate) fn len(&self) -> usize {
        self.next.len()
    }

    pub(crate) fn row(&self, i: usize) -> &[String] {
        &self.labels[i * self.arity..(i + 1) * self.arity]
    }

    /// The series for `values` (whose length the caller checked), created if new. `None` only
    /// when the recorder already holds [`MAX_SERIES`] series.
    #[inline]
    pub(crate) fn find_or_insert(&mut self, values: &[&str]) -> Option<usize> {
        let h = hash_row(values);
        let mut cursor = self.heads.get(&h).copied().unwrap_or(NONE);
        while cursor != NONE {
            let i = cursor as usize;
            let row = &self.labels[i * self.arity..(i + 1) * self.arity];
            if row.iter().zip(values).all(|(a, b)| a == b) {
                return Some(i);
            }
            cursor = self.next[i];
        }
        let i = self.len();
        if i >= MAX_SERIES {
            return None;
        }
        let head = self.heads.insert(h, i as u32).unwrap_or(NONE);
        self.next.push(head);
        self.labels.extend(values.iter().map(|v| (*v).to_owned()));
        Some(i)
    }

    /// Sorts [`SeriesIndex::order`] if series were added since the last sort.
    pub(crate) fn sort(&mut self) {
        if self.order.len() != self.len() {
            self.order = (0..self.len() as u32).collect();
            let (labels, arity) = (&self.labels, self.arity);
            self.order.sort_unstable_by(|&a, &b| {
                let (a, b) = (a as usize, b as usize);
                labels[a * arity..(a + 1) * arity].cmp(&labels[b * arity..(b + 1) * arity])
            });
        }
    }

    /// Series indices sorted by label values, as of the last [`SeriesIndex::sort`].
    pub(crate) fn order(&self) -> &[u32] {
        &self.order
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_existing_and_orders_by_labels() {
        let mut idx = SeriesIndex::new(2);
        assert_eq!(idx.find_or_insert(&["b", "x"]), Some(0));
        assert_eq!(idx.find_or_insert(&["a", "y"]), Some(1));
        assert_eq!(idx.find_or_insert(&["b", "x"]), Some(0));
        // Same concatenation, different split: must be a different series.
        assert_eq!(idx.find_or_insert(&["bx", ""]), Some(2));
        idx.sort();
        assert_eq!(idx.order(), &[1, 0, 2]);
        assert_eq!(idx.row(2), ["bx".to_owned(), String::new()]);
    }

    #[test]
    fn walks_collision_chains() {
        let mut idx = SeriesIndex::new(1);
        for i in 0..3u32 {
            idx.labels.push(i.to_string());
            idx.next.push(if i == 0 { NONE } else { i - 1 });
        }
        // Chain 2 -> 1 -> 0 under the hash of "0": the lookup must walk past "2" and "1".
        idx.heads.insert(hash_row(&["0"]), 2);
        assert_eq!(idx.find_or_insert(&["0"]), Some(0));
        assert_eq!(idx.len(), 3);
    }
}
