//! Label values as callers pass them: pairs or maps.

use std::collections::{BTreeMap, HashMap};

/// Label values, as a list of pairs or a map: `&[("method", "GET")]`, `vec![..]`, a `HashMap`
/// or a `BTreeMap` of strings.
pub trait Labels {
    /// The `(name, value)` pairs.
    fn label_pairs(&self) -> Vec<(&str, &str)>;
}

impl<K: AsRef<str>, V: AsRef<str>> Labels for [(K, V)] {
    fn label_pairs(&self) -> Vec<(&str, &str)> {
        self.iter().map(|(k, v)| (k.as_ref(), v.as_ref())).collect()
    }
}
impl<K: AsRef<str>, V: AsRef<str>, const N: usize> Labels for [(K, V); N] {
    fn label_pairs(&self) -> Vec<(&str, &str)> {
        self.as_slice().label_pairs()
    }
}
impl<K: AsRef<str>, V: AsRef<str>> Labels for Vec<(K, V)> {
    fn label_pairs(&self) -> Vec<(&str, &str)> {
        self.as_slice().label_pairs()
    }
}
impl<K: AsRef<str>, V: AsRef<str>, S> Labels for HashMap<K, V, S> {
    fn label_pairs(&self) -> Vec<(&str, &str)> {
        self.iter().map(|(k, v)| (k.as_ref(), v.as_ref())).collect()
    }
}
impl<K: AsRef<str>, V: AsRef<str>> Labels for BTreeMap<K, V> {
    fn label_pairs(&self) -> Vec<(&str, &str)> {
        self.iter().map(|(k, v)| (k.as_ref(), v.as_ref())).collect()
    }
}
impl<T: Labels + ?Sized> Labels for &T {
    fn label_pairs(&self) -> Vec<(&str, &str)> {
        (**self).label_pairs()
    }
}
