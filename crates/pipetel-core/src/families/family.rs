//! The declaration of a family: [`Family`] and its [`Instrument`].

use opentelemetry::metrics::{AsyncInstrumentBuilder, HistogramBuilder, InstrumentBuilder};

use crate::exposition::{translate, MetricType};

/// The OTel instrument a family is recorded with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Instrument {
    /// A monotonic sum (`_total` on the Prometheus page).
    Counter,
    /// A non-monotonic sum.
    UpDownCounter,
    /// A last value.
    Gauge,
    /// A histogram (`_bucket`, `_sum`, `_count`).
    Histogram,
}

impl Instrument {
    /// The word the reference uses for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Instrument::Counter => "counter",
            Instrument::UpDownCounter => "up-down counter",
            Instrument::Gauge => "gauge",
            Instrument::Histogram => "histogram",
        }
    }

    pub(crate) fn metric_type(self) -> MetricType {
        match self {
            Instrument::Counter => MetricType::Counter,
            Instrument::UpDownCounter => MetricType::UpDownSum,
            Instrument::Gauge => MetricType::Gauge,
            Instrument::Histogram => MetricType::Histogram,
        }
    }
}

/// One metric family as pipetel declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Family {
    /// The OTel instrument name.
    pub name: &'static str,
    /// The instrument it is recorded with.
    pub instrument: Instrument,
    /// The UCUM unit (`s`, `By`, `1`, `{item}`).
    pub unit: &'static str,
    /// What a value means (the instrument's description, the page's `# HELP`).
    pub description: &'static str,
    /// The attribute keys its series carry.
    pub attributes: &'static [&'static str],
}

impl Family {
    /// A family: its OTel name, instrument, UCUM unit, description and attributes (the tables of
    /// this crate and of `pipetel-gpu` are made of these).
    pub const fn new(
        name: &'static str,
        instrument: Instrument,
        unit: &'static str,
        description: &'static str,
        attributes: &'static [&'static str],
    ) -> Self {
        Family { name, instrument, unit, description, attributes }
    }

    /// The family's name on the Prometheus page, as the OTel → Prometheus rules translate it
    /// (unit suffix, `_ratio` for unit `1` gauges, `_total` for counters).
    pub fn prometheus_name(&self) -> String {
        translate(self.name, self.unit, self.instrument.metric_type())
    }

    /// [`Family::prometheus_name`] for the family under `prefix` (a service prefix).
    pub fn prometheus_name_under(&self, prefix: &str) -> String {
        if prefix.is_empty() {
            return self.prometheus_name();
        }
        translate(&format!("{prefix}.{}", self.name), self.unit, self.instrument.metric_type())
    }

    /// The name a Prometheus-style registry declares the family with: the page's name
    /// without the `_total` the registry adds to counters.
    pub(crate) fn registry_name(&self) -> String {
        let kind = match self.instrument {
            Instrument::Counter => MetricType::UpDownSum,
            other => other.metric_type(),
        };
        translate(self.name, self.unit, kind)
    }

    /// The instrument builder with the family's unit and description set.
    pub(crate) fn describe<B: Describe>(&self, builder: B) -> B {
        builder.describe(self.unit, self.description)
    }
}

/// Declares a table of families: a `pub const` per entry (`NAME = "otel.name", Instrument,
/// "unit", attributes, "description";`, the description on a line of its own when the entry does
/// not fit on one) and `ALL`, every family in the order given (the reference's). A const's doc is
/// the entry's `///` lines, or its description when it has none.
macro_rules! families {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident = $otel:literal, $instrument:ident, $unit:literal, $attributes:expr, $description:literal;
    )+) => {
        $(
            $crate::families::family::family_const!(
                [$($doc)*] $description,
                $name = $crate::families::Family::new(
                    $otel,
                    $crate::families::Instrument::$instrument,
                    $unit,
                    $description,
                    $attributes,
                )
            );
        )+

        /// Every family of the table, in the reference's order.
        pub const ALL: &[$crate::families::Family] = &[$($name),+];
    };
}

/// One family's `pub const`, documented by its `///` lines or, without any, by its description.
macro_rules! family_const {
    ([] $description:literal, $name:ident = $family:expr) => {
        #[doc = $description]
        pub const $name: $crate::families::Family = $family;
    };
    ([$($doc:literal)+] $description:literal, $name:ident = $family:expr) => {
        $(#[doc = $doc])+
        pub const $name: $crate::families::Family = $family;
    };
}
pub(crate) use families;
pub(crate) use family_const;

/// An OTel instrument builder the family's unit and description can be set on.
pub(crate) trait Describe: Sized {
    fn describe(self, unit: &'static str, description: &'static str) -> Self;
}

impl<T> Describe for InstrumentBuilder<'_, T> {
    fn describe(self, unit: &'static str, description: &'static str) -> Self {
        self.with_unit(unit).with_description(description)
    }
}

impl<T> Describe for HistogramBuilder<'_, T> {
    fn describe(self, unit: &'static str, description: &'static str) -> Self {
        self.with_unit(unit).with_description(description)
    }
}

impl<I, M> Describe for AsyncInstrumentBuilder<'_, I, M> {
    fn describe(self, unit: &'static str, description: &'static str) -> Self {
        self.with_unit(unit).with_description(description)
    }
}
