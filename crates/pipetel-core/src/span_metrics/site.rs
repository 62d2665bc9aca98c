//! What is resolved once per callsite: its two series.

use std::sync::Arc;

use opentelemetry::metrics::{BoundHistogram, Histogram};
use opentelemetry::KeyValue;

use super::names::{ATTR_SPAN_NAME, ATTR_SPAN_TARGET, ATTR_STATUS, SPAN_DURATION};

use crate::exposition::direct::Direct;
use crate::exposition::exemplar::{self, Exemplars, SpanIds};
use crate::sync::ticks_to_seconds;

/// What is resolved once per callsite.
#[derive(Debug)]
pub(super) struct Site {
    pub(super) ok: Series,
    pub(super) error: Series,
    /// The callsite declares `error` or `otel.status_code`, so records must be looked at.
    pub(super) status_fields: bool,
    /// The span's name and target (the series' labels).
    pub(super) name: &'static str,
    pub(super) target: &'static str,
}

/// One `span.duration` series of a callsite.
#[derive(Debug)]
pub(super) enum Series {
    /// An OTel histogram bound to the series' attributes, with the exemplars the pull
    /// endpoint's encoder finds for it.
    Otel(BoundHistogram<f64>, Arc<Exemplars>),
    /// The series' own atomics, rendered by the pull endpoint (see [`direct`](super::direct)).
    Direct(Direct),
}

impl Series {
    /// The series of one span name, target and status: bound to `histogram` with its exemplar
    /// slots when the layer records into an OTel histogram, else atomics the pull endpoint
    /// renders.
    pub(super) fn of(
        histogram: Option<&Histogram<f64>>,
        name: &'static str,
        target: &'static str,
        status: &'static str,
    ) -> Series {
        let attrs = [
            KeyValue::new(ATTR_SPAN_NAME, name),
            KeyValue::new(ATTR_SPAN_TARGET, target),
            KeyValue::new(ATTR_STATUS, status),
        ];
        match histogram {
            Some(histogram) => Series::Otel(
                histogram.bind(&attrs),
                exemplar::register(SPAN_DURATION, &attrs, crate::buckets::SECONDS_BUCKETS),
            ),
            None => Series::Direct(Direct::new(crate::buckets::SECONDS_BUCKETS, true)),
        }
    }
}

impl Series {
    /// Records a span that lasted `ticks` clock readings and ended at reading `end`, with its
    /// exemplar's ids.
    #[inline]
    pub(super) fn record(&self, ticks: u64, end: u64, ids: Option<SpanIds>) {
        match self {
            Series::Otel(histogram, exemplars) => {
                let seconds = ticks_to_seconds(ticks);
                histogram.record(seconds);
                if let Some(ids) = ids {
                    exemplars.record_at(None, seconds, ids, end);
                }
            }
            Series::Direct(h) => {
                let bucket = h.record_ticks(ticks);
                if let Some(ids) = ids {
                    h.exemplars().record_at(Some(bucket), ticks_to_seconds(ticks), ids, end);
                }
            }
        }
    }
}
