//! What the OTLP exporters failed to deliver, one ledger per exporter, for the flush and
//! shutdown reports.

use std::sync::Arc;

use super::delivery::Ledger;
#[cfg(feature = "otlp")]
use super::delivery::{Explained, Tracked};
#[cfg(feature = "otlp")]
use crate::config::OtlpTarget;

/// The delivery ledgers of the OTLP exporters, kept for the flush and shutdown reports.
#[derive(Default, Clone)]
pub(crate) struct Ledgers(Vec<Arc<Ledger>>);

impl Ledgers {
    /// Wraps an OTLP exporter so that what it fails to deliver is counted in a new ledger, with
    /// the cause its transport kept.
    #[cfg(feature = "otlp")]
    pub(crate) fn track<E>(
        &mut self,
        exporter: Explained<E>,
        signal: &'static str,
        items: &'static str,
        target: &OtlpTarget,
    ) -> Tracked<E> {
        let ledger = Ledger::new(signal, items, target.endpoint.clone());
        self.0.push(ledger.clone());
        Tracked::new(exporter, &ledger)
    }

    /// Enters one provider's flush or shutdown outcome, with what its exporters failed to
    /// deliver since the last report: a batch processor drops a failed batch and still answers
    /// `Ok`, and a periodic reader says only "failed", so the ledger is what names the loss and
    /// its cause.
    pub(crate) fn push_outcome(
        &self,
        errors: &mut Vec<String>,
        what: &str,
        r: opentelemetry_sdk::error::OTelSdkResult,
    ) {
        use opentelemetry_sdk::error::OTelSdkError;
        let lost: Vec<String> = self.0.iter().filter(|l| l.signal() == what).filter_map(|l| l.report()).collect();
        match r {
            Ok(()) | Err(OTelSdkError::AlreadyShutdown) => {}
            Err(OTelSdkError::InternalFailure(_)) if !lost.is_empty() => {}
            Err(e) => errors.push(format!("{what}: {e}")),
        }
        errors.extend(lost);
    }
}
