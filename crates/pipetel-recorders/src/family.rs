//! Metric families: what a series is called, measured in and labelled by.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;

/// Longest accepted family name, in bytes (the OpenTelemetry instrument name limit).
pub const MAX_NAME_LEN: usize = 255;
/// Most label names one family may have (the OpenTelemetry SDK's default attribute count
/// limit). The decoder refuses a larger count as soon as it reads it, before reading the names.
pub const MAX_LABEL_NAMES: usize = 128;

/// What a family measures, which decides how its series merge and export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Kind {
    /// A monotonic total; only goes up while its process lives.
    Counter,
    /// A value that goes up and down (queue length, memory in use).
    Gauge,
    /// A distribution over fixed buckets, with a count and a sum.
    Histogram,
}

impl Kind {
    /// The lower-case name of the kind (`counter`, `gauge`, `histogram`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }

    pub(crate) fn tag(self) -> u8 {
        match self {
            Kind::Counter => 0,
            Kind::Gauge => 1,
            Kind::Histogram => 2,
        }
    }

    pub(crate) fn from_tag(tag: u8) -> Option<Kind> {
        match tag {
            0 => Some(Kind::Counter),
            1 => Some(Kind::Gauge),
            2 => Some(Kind::Histogram),
            _ => None,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a [`Family`] could not be built, or could not back a recorder.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FamilyError {
    /// The name is empty, too long, does not start with a letter or holds a character outside
    /// `[A-Za-z0-9_.-/]`.
    #[error("invalid family name {name:?}: expected a letter then letters, digits, '_', '.', '-' or '/' (at most 255 bytes)")]
    InvalidName {
        /// The rejected name.
        name: String,
    },
    /// A label name is empty or holds a character outside `[A-Za-z0-9_.]`, or starts with a digit.
    #[error(
        "invalid label name {label:?} in family {family:?}: expected a letter or '_' then letters, digits, '_' or '.'"
    )]
    InvalidLabel {
        /// The family.
        family: String,
        /// The rejected label name.
        label: String,
    },
    /// More label names than [`MAX_LABEL_NAMES`].
    #[error("family {family:?} has {count} label names, more than the {max} allowed")]
    TooManyLabels {
        /// The family.
        family: String,
        /// Label names given (or announced by an encoded family).
        count: usize,
        /// The limit, [`MAX_LABEL_NAMES`].
        max: usize,
    },
    /// A label name appears twice.
    #[error("duplicate label name {label:?} in family {family:?}")]
    DuplicateLabel {
        /// The family.
        family: String,
        /// The repeated label name.
        label: String,
    },
    /// The unit or help text holds a control character.
    #[error("invalid {field} for family {family:?}: control characters are not allowed")]
    InvalidText {
        /// The family.
        family: String,
        /// `unit` or `help`.
        field: &'static str,
    },
    /// A histogram bound is NaN or infinite (`+Inf` is always the implicit last bucket).
    #[error("histogram bound {index} of family {family:?} is not finite ({bound})")]
    NonFiniteBound {
        /// The family.
        family: String,
        /// Position of the bound.
        index: usize,
        /// The bound.
        bound: f64,
    },
    /// Histogram bounds are not strictly increasing.
    #[error("histogram bounds of family {family:?} are not strictly increasing at index {index}")]
    UnsortedBounds {
        /// The family.
        family: String,
        /// Position of the first bound not above its predecessor.
        index: usize,
    },
    /// Bucket bounds were given for a counter or a gauge.
    #[error("family {family:?} is a {kind} and cannot have histogram bounds")]
    BoundsOnNonHistogram {
        /// The family.
        family: String,
        /// Its kind.
        kind: Kind,
    },
    /// A recorder of one kind was asked to record a family of another.
    #[error("family {family:?} is a {found}, not a {expected}")]
    WrongKind {
        /// The family.
        family: String,
        /// The kind the recorder needs.
        expected: Kind,
        /// The family's kind.
        found: Kind,
    },
}

#[derive(Debug, PartialEq)]
struct FamilyInner {
    name: String,
    help: String,
    unit: String,
    kind: Kind,
    label_names: Vec<String>,
    bounds: Vec<f64>,
}

/// A metric family: name, help, unit, kind, label names and (for histograms) bucket bounds.
///
/// Built once and validated at construction, then cloned cheaply (it is shared behind an
/// [`Arc`]) into recorders and snapshots, so every snapshot carries its own description and an
/// exporter needs no prior agreement with the process that recorded it.
///
/// Names follow OpenTelemetry instrument names (`pipeline.transfer.bytes`); the unit is a UCUM
/// string (`By`, `s`, `{item}`) and may be empty.
#[derive(Clone, PartialEq)]
pub struct Family(Arc<FamilyInner>);

impl fmt::Debug for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Family")
            .field("name", &self.0.name)
            .field("kind", &self.0.kind)
            .field("unit", &self.0.unit)
            .field("label_names", &self.0.label_names)
            .field("bounds", &self.0.bounds)
            .finish()
    }
}

impl Family {
    /// A family of any kind. `bounds` must be empty unless `kind` is [`Kind::Histogram`].
    ///
    /// # Errors
    /// [`FamilyError`] when the name or a label name is invalid, a label repeats, the unit or help
    /// holds a control character, or the bounds are non-finite, not strictly increasing, or
    /// given for a counter or gauge.
    pub fn new(
        name: &str,
        help: &str,
        unit: &str,
        kind: Kind,
        label_names: &[&str],
        bounds: &[f64],
    ) -> Result<Family, FamilyError> {
        validate_name(name)?;
        for (field, text) in [("help", help), ("unit", unit)] {
            if text.chars().any(char::is_control) {
                return Err(FamilyError::InvalidText { family: name.to_owned(), field });
            }
        }
        check_label_count(name, label_names.len())?;
        // A set, not a scan of the earlier names: linear in the number of names.
        let mut seen = HashSet::with_capacity(label_names.len());
        for label in label_names {
            if !valid_label(label) {
                return Err(FamilyError::InvalidLabel { family: name.to_owned(), label: (*label).to_owned() });
            }
            if !seen.insert(*label) {
                return Err(FamilyError::DuplicateLabel { family: name.to_owned(), label: (*label).to_owned() });
            }
        }
        if kind != Kind::Histogram && !bounds.is_empty() {
            return Err(FamilyError::BoundsOnNonHistogram { family: name.to_owned(), kind });
        }
        for (index, &bound) in bounds.iter().enumerate() {
            if !bound.is_finite() {
                return Err(FamilyError::NonFiniteBound { family: name.to_owned(), index, bound });
            }
            if index > 0 && bound <= bounds[index - 1] {
                return Err(FamilyError::UnsortedBounds { family: name.to_owned(), index });
            }
        }
        Ok(Family(Arc::new(FamilyInner {
            name: name.to_owned(),
            help: help.to_owned(),
            unit: unit.to_owned(),
            kind,
            label_names: label_names.iter().map(|l| (*l).to_owned()).collect(),
            bounds: bounds.to_vec(),
        })))
    }

    /// A counter family.
    ///
    /// # Errors
    /// As [`Family::new`].
    pub fn counter(name: &str, help: &str, unit: &str, label_names: &[&str]) -> Result<Family, FamilyError> {
        Family::new(name, help, unit, Kind::Counter, label_names, &[])
    }

    /// A gauge family.
    ///
    /// # Errors
    /// As [`Family::new`].
    pub fn gauge(name: &str, help: &str, unit: &str, label_names: &[&str]) -> Result<Family, FamilyError> {
        Family::new(name, help, unit, Kind::Gauge, label_names, &[])
    }

    /// A histogram family with the given finite, strictly increasing upper bounds; a `+Inf`
    /// bucket is always added last.
    ///
    /// # Errors
    /// As [`Family::new`].
    pub fn histogram(
        name: &str,
        help: &str,
        unit: &str,
        label_names: &[&str],
        bounds: &[f64],
    ) -> Result<Family, FamilyError> {
        Family::new(name, help, unit, Kind::Histogram, label_names, bounds)
    }

    /// The family name.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The help text.
    pub fn help(&self) -> &str {
        &self.0.help
    }

    /// The unit (UCUM), possibly empty.
    pub fn unit(&self) -> &str {
        &self.0.unit
    }

    /// The kind.
    pub fn kind(&self) -> Kind {
        self.0.kind
    }

    /// The label names, in the order label values are given.
    pub fn label_names(&self) -> &[String] {
        &self.0.label_names
    }

    /// The number of labels each series has.
    pub fn arity(&self) -> usize {
        self.0.label_names.len()
    }

    /// The finite histogram upper bounds (empty for counters and gauges). Snapshots hold one
    /// more bucket than this: `+Inf`.
    pub fn bounds(&self) -> &[f64] {
        &self.0.bounds
    }

    /// Buckets per series in a snapshot: `bounds().len() + 1` for a histogram, 0 otherwise.
    pub fn buckets(&self) -> usize {
        match self.0.kind {
            Kind::Histogram => self.0.bounds.len() + 1,
            Kind::Counter | Kind::Gauge => 0,
        }
    }

    /// Whether series of `other` can be summed with series of `self`: same name, kind, unit,
    /// label names and bounds (help text may differ).
    pub fn compatible_with(&self, other: &Family) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || (self.0.name == other.0.name
                && self.0.kind == other.0.kind
                && self.0.unit == other.0.unit
                && self.0.label_names == other.0.label_names
                && bounds_equal(&self.0.bounds, &other.0.bounds))
    }

    pub(crate) fn expect_kind(&self, expected: Kind) -> Result<(), FamilyError> {
        if self.kind() == expected {
            Ok(())
        } else {
            Err(FamilyError::WrongKind { family: self.name().to_owned(), expected, found: self.kind() })
        }
    }
}

fn bounds_equal(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

fn validate_name(name: &str) -> Result<(), FamilyError> {
    let mut chars = name.chars();
    let ok = name.len() <= MAX_NAME_LEN
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'));
    if ok {
        Ok(())
    } else {
        Err(FamilyError::InvalidName { name: name.to_owned() })
    }
}

/// Refuses more than [`MAX_LABEL_NAMES`] label names for family `name`; the decoder calls it on
/// the announced count before it reads any name.
pub(crate) fn check_label_count(name: &str, count: usize) -> Result<(), FamilyError> {
    if count > MAX_LABEL_NAMES {
        return Err(FamilyError::TooManyLabels { family: name.to_owned(), count, max: MAX_LABEL_NAMES });
    }
    Ok(())
}

fn valid_label(label: &str) -> bool {
    let mut chars = label.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// Why a family could not join a [`Catalog`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// Another family with the same name but a different definition is already registered.
    #[error("family {name:?} is already registered with a different definition")]
    Conflict {
        /// The family name.
        name: String,
    },
}

/// A set of families keyed by name: what a process records, or what an exporter expects.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    families: BTreeMap<String, Family>,
}

impl Catalog {
    /// An empty catalog.
    pub fn new() -> Catalog {
        Catalog::default()
    }

    /// Adds a family and returns the registered one. Registering an identical definition again
    /// returns the existing family, so independent modules can declare the same family.
    ///
    /// # Errors
    /// [`CatalogError::Conflict`] when a family of that name exists with another definition
    /// (kind, unit, labels, bounds or help).
    pub fn register(&mut self, family: Family) -> Result<Family, CatalogError> {
        if let Some(existing) = self.families.get(family.name()) {
            if existing.compatible_with(&family) && existing.help() == family.help() {
                return Ok(existing.clone());
            }
            return Err(CatalogError::Conflict { name: family.name().to_owned() });
        }
        self.families.insert(family.name().to_owned(), family.clone());
        Ok(family)
    }

    /// The family of that name.
    pub fn get(&self, name: &str) -> Option<&Family> {
        self.families.get(name)
    }

    /// All families, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Family> + '_ {
        self.families.values()
    }

    /// Number of families.
    pub fn len(&self) -> usize {
        self.families.len()
    }

    /// Whether the catalog is empty.
    pub fn is_empty(&self) -> bool {
        self.families.is_empty()
    }
}

#[cfg(feature = "serde")]
mod serde_impl {
    use super::{Family, Kind};

    #[derive(serde::Serialize, serde::Deserialize)]
    pub(super) struct FamilyDef {
        name: String,
        #[serde(default)]
        help: String,
        #[serde(default)]
        unit: String,
        kind: Kind,
        #[serde(default)]
        label_names: Vec<String>,
        #[serde(default)]
        bounds: Vec<f64>,
    }

    impl serde::Serialize for Family {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            FamilyDef {
                name: self.name().to_owned(),
                help: self.help().to_owned(),
                unit: self.unit().to_owned(),
                kind: self.kind(),
                label_names: self.label_names().to_vec(),
                bounds: self.bounds().to_vec(),
            }
            .serialize(s)
        }
    }

    impl<'de> serde::Deserialize<'de> for Family {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Family, D::Error> {
            let def = FamilyDef::deserialize(d)?;
            let labels: Vec<&str> = def.label_names.iter().map(String::as_str).collect();
            Family::new(&def.name, &def.help, &def.unit, def.kind, &labels, &def.bounds)
                .map_err(serde::de::Error::custom)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_invalid_names_and_labels() {
        for bad in ["", "1abc", "a b", "a\u{e9}", &"a".repeat(256)] {
            assert!(matches!(Family::counter(bad, "", "", &[]), Err(FamilyError::InvalidName { .. })));
        }
        assert!(Family::counter("pipeline.transfer/bytes-x_1", "", "By", &[]).is_ok());
        let err = Family::counter("a", "", "", &["ok", "9bad"]).expect_err("bad label");
        assert_eq!(err, FamilyError::InvalidLabel { family: "a".into(), label: "9bad".into() });
        assert!(err.to_string().contains("9bad"));
        let err = Family::gauge("a", "", "", &["x", "y", "x"]).expect_err("dup");
        assert_eq!(err, FamilyError::DuplicateLabel { family: "a".into(), label: "x".into() });
        assert!(matches!(
            Family::gauge("a", "line\nbreak", "", &[]),
            Err(FamilyError::InvalidText { field: "help", .. })
        ));
    }

    #[test]
    fn rejects_bad_bounds() {
        assert!(matches!(
            Family::histogram("h", "", "s", &[], &[1.0, f64::NAN]),
            Err(FamilyError::NonFiniteBound { index: 1, .. })
        ));
        assert!(matches!(
            Family::histogram("h", "", "s", &[], &[1.0, f64::INFINITY]),
            Err(FamilyError::NonFiniteBound { index: 1, .. })
        ));
        assert!(matches!(
            Family::histogram("h", "", "s", &[], &[1.0, 2.0, 2.0]),
            Err(FamilyError::UnsortedBounds { index: 2, .. })
        ));
        assert!(matches!(
            Family::new("c", "", "", Kind::Counter, &[], &[1.0]),
            Err(FamilyError::BoundsOnNonHistogram { .. })
        ));
        let h = Family::histogram("h", "", "s", &["a"], &[0.1, 1.0]).expect("valid");
        assert_eq!(h.buckets(), 3);
        assert_eq!(h.arity(), 1);
        assert_eq!(h.kind(), Kind::Histogram);
    }

    #[test]
    fn catalog_dedups_identical_and_rejects_conflicts() {
        let mut catalog = Catalog::new();
        let a = Family::counter("x", "help", "By", &["l"]).expect("valid");
        catalog.register(a.clone()).expect("first");
        catalog.register(Family::counter("x", "help", "By", &["l"]).expect("valid")).expect("identical is fine");
        assert_eq!(catalog.len(), 1);
        let err = catalog.register(Family::gauge("x", "help", "By", &["l"]).expect("valid")).expect_err("conflict");
        assert_eq!(err, CatalogError::Conflict { name: "x".into() });
        assert_eq!(catalog.get("x"), Some(&a));
        assert!(catalog.get("y").is_none());
    }
}
