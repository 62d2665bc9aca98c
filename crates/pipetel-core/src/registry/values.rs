//! What counters and gauges share: one number per series, written, bound and observed alike.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use opentelemetry::metrics::{AsyncInstrumentBuilder, Meter};

use super::family::{Cell, Family};
use crate::exposition::{MetricType, OwnFamily, Page, Writer};

/// Writes a family of one number per series (a counter, a gauge) as `kind` under `name`.
pub(crate) fn write_values<C: Cell>(f: &Family<C>, name: &str, kind: &str, value: fn(&C) -> f64, out: &mut String) {
    let mut w = Writer::text(out);
    w.header(name, kind, &f.meta.help, &f.meta.unit);
    f.each_sorted(|s| {
        let mut sample = w.sample(name, "");
        s.write_labels(&f.meta.labels, false, &mut sample);
        sample.value(value(&s.cell));
    });
}

/// Writes a counter or gauge family on the pull endpoint's page, as its encoder writes the
/// family's OTel instrument (`kind`) of pipetel's meter: the translated name, labels sorted by
/// name and followed by the scope labels, nothing at all before the first series.
pub(crate) fn write_values_pull<C: Cell>(f: &Family<C>, kind: MetricType, value: fn(&C) -> f64, page: &mut Page<'_>) {
    if f.is_empty() {
        return;
    }
    let mut family = OwnFamily::new(page.writer(), &f.meta.otel_name, &f.meta.unit, kind, &f.meta.help);
    if family.name().is_empty() {
        return;
    }
    f.each(|s| family.sample(|labels| s.write_labels(&f.meta.labels, true, labels), value(&s.cell)));
}

/// Binds a counter or gauge family: with push exporters (or fixed meters), its observable
/// instrument `build` makes on `meter`, read by the pull endpoint and push exporters alike;
/// with the pull endpoint alone, no instrument: the endpoint renders the family directly and
/// the SDK keeps no second copy of every series.
pub(crate) fn bind_values<C: Cell>(
    family: Arc<Family<C>>,
    meter: &Meter,
    push_only: Option<&Meter>,
    build: impl FnOnce(&Arc<Family<C>>, &Meter),
) {
    if push_only.is_some() {
        family.meta.direct.store(false, Ordering::Release);
        build(&family, meter);
    } else {
        family.meta.direct.store(true, Ordering::Release);
    }
}

/// `builder`, an observable instrument of `family`, with the family's unit and help, observing
/// `value` of every series while the family is exported.
pub(crate) fn observing<'a, C: Cell, I>(
    family: &Arc<Family<C>>,
    builder: AsyncInstrumentBuilder<'a, I, f64>,
    value: fn(&C) -> f64,
) -> AsyncInstrumentBuilder<'a, I, f64> {
    let weak = Arc::downgrade(family);
    builder.with_unit(family.meta.unit.clone()).with_description(family.meta.help.clone()).with_callback(move |obs| {
        let Some(family) = weak.upgrade() else { return };
        if !family.meta.removed.load(Ordering::Acquire) {
            family.each(|s| obs.observe(value(&s.cell), &s.attrs(&family.meta.labels)));
        }
    })
}

/// The `Cell` items of a kind of one number per series (counters, gauges): no options, no
/// state per family, written and bound with the functions above, every series read by the
/// cell's `value`. The kind's `new` and `reset` follow it in the `impl`.
macro_rules! value_cell {
    ($kind:ident, $type_name:literal, $builder:ident) => {
        const KIND: super::kind::Kind = super::kind::Kind::$kind;
        type Spec = ();
        fn spec(_: &str, _: &super::opts::Opts, _: &std::sync::Arc<[f64]>) -> Result<(), super::error::RegistryError> {
            Ok(())
        }
        type Shared = ();
        fn write(f: &super::family::Family<Self>, out: &mut String) {
            super::values::write_values(f, &f.meta.exposed_name(), $type_name, Self::value, out);
        }
        fn write_pull(f: &super::family::Family<Self>, page: &mut crate::exposition::Page<'_>) {
            super::values::write_values_pull(f, crate::exposition::MetricType::$kind, Self::value, page);
        }
        fn bind(
            family: std::sync::Arc<super::family::Family<Self>>,
            meter: &opentelemetry::metrics::Meter,
            push_only: Option<&opentelemetry::metrics::Meter>,
        ) {
            super::values::bind_values(family, meter, push_only, |family, meter| {
                let builder = meter.$builder(family.meta.otel_name.clone());
                let _ = super::values::observing(family, builder, Self::value).build();
            });
        }
    };
}
pub(crate) use value_cell;
