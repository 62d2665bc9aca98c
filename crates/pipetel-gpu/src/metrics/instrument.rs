//! The instrument declarations both tables of GPU instruments are written in.

use opentelemetry::KeyValue;

use pipetel_core::families::Instrument as FamilyInstrument;

use crate::source::DeviceSample;

/// How a GPU instrument aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A last value.
    Gauge,
    /// A monotonic sum.
    Counter,
    /// Up-down counter: the conventions' instrument for state sets (0 / 1 per state).
    UpDown,
}

impl Kind {
    pub(super) const fn instrument(self) -> FamilyInstrument {
        match self {
            Kind::Gauge => FamilyInstrument::Gauge,
            Kind::Counter => FamilyInstrument::Counter,
            Kind::UpDown => FamilyInstrument::UpDownCounter,
        }
    }
}

/// One instrument: its name, unit and description, and what it reports of each answering
/// device.
pub(super) struct Instrument<T: 'static> {
    pub(super) name: &'static str,
    pub(super) unit: &'static str,
    pub(super) description: &'static str,
    pub(super) kind: Kind,
    pub(super) values: Values<T>,
}

pub(super) const fn instrument<T>(
    kind: Kind,
    name: &'static str,
    unit: &'static str,
    description: &'static str,
    values: Values<T>,
) -> Instrument<T> {
    Instrument { name, unit, description, kind, values }
}

/// One value of a device, when it reports it.
pub(super) type Read<T> = fn(&DeviceSample) -> Option<T>;

/// Reports series of a device through `emit(value, extra attributes)`.
pub(super) type Each<T> = fn(&DeviceSample, &mut dyn FnMut(T, &[KeyValue]));

/// What an instrument reports of each answering device.
pub(super) enum Values<T: 'static> {
    /// One value, in a series without an extra attribute.
    One(Read<T>),
    /// One value per value of the attribute `key`: `(attribute value, the value)`.
    By(&'static str, &'static [(&'static str, Read<T>)]),
    /// The entries of a list the device has (XID codes, throttle reasons), each reported
    /// through `emit(value, the value of the attribute key)`.
    List(&'static str, fn(&DeviceSample, &mut dyn FnMut(T, opentelemetry::Value))),
    /// Series with any of the declared extra attributes (MIG instances, processes), each
    /// reported through `emit(value, its extra attributes)`.
    Series(&'static [&'static str], Each<T>),
}

impl<T> Values<T> {
    /// The attributes each series has beside the device's identity.
    pub(super) fn attributes(&'static self) -> &'static [&'static str] {
        match self {
            Values::One(_) => &[],
            Values::By(key, _) | Values::List(key, _) => std::slice::from_ref(key),
            Values::Series(keys, _) => keys,
        }
    }

    /// Reports the values of `d` through `emit(value, extra attribute)`.
    pub(super) fn emit(&self, d: &DeviceSample, emit: &mut dyn FnMut(T, &[KeyValue])) {
        match self {
            Values::One(read) => {
                if let Some(v) = read(d) {
                    emit(v, &[]);
                }
            }
            Values::By(key, reads) => {
                for (label, read) in *reads {
                    if let Some(v) = read(d) {
                        emit(v, &[KeyValue::new(*key, *label)]);
                    }
                }
            }
            Values::List(key, each) => each(d, &mut |v, label| emit(v, &[KeyValue::new(*key, label)])),
            Values::Series(_, each) => each(d, emit),
        }
    }
}

/// An instrument of any value type.
pub(super) enum AnyInstrument {
    F64(Instrument<f64>),
    U64(Instrument<u64>),
    I64(Instrument<i64>),
}
