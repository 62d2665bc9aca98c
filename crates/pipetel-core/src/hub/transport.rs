//! Transport helpers: frames read from a stream, envelopes pumped from an in-process channel.

use std::collections::HashSet;
use std::io::Read;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pipetel_recorders::{Envelope, FrameError, FrameReader, Receiver, RecvError};

use super::outcome::{HubError, Ingested};
use super::snapshot_hub::SnapshotHub;

/// What a transport helper did, returned when its thread ends.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct TransportReport {
    /// Envelopes (or frames) received.
    pub received: u64,
    /// Of those, accepted as the latest (including restarts).
    pub accepted: u64,
    /// Of those, recognised as restarts.
    pub restarts: u64,
    /// Of those, ignored as late or repeated.
    pub ignored: u64,
    /// Of those, refused as invalid (each logged).
    pub refused: u64,
    /// The stream error that ended a reader early (the stream is then out of step), if any.
    pub error: Option<FrameError>,
}

impl TransportReport {
    fn count(&mut self, outcome: &Result<Ingested, HubError>) {
        self.received += 1;
        match outcome {
            Ok(Ingested::Accepted) => self.accepted += 1,
            Ok(Ingested::Restarted) => {
                self.accepted += 1;
                self.restarts += 1;
            }
            Ok(Ingested::Superseded | Ingested::Duplicate) => self.ignored += 1,
            Err(error) => {
                self.refused += 1;
                // The first refusal names the problem; a flood of them must not flood the log.
                if self.refused == 1 {
                    tracing::warn!(target: "pipetel", %error, "snapshot hub refused an envelope");
                }
            }
        }
    }
}

impl SnapshotHub {
    /// Starts a thread that reads length-prefixed frames ([`pipetel_recorders::FrameWriter`])
    /// from `reader` until it ends, ingesting each. The stream counts as new for each source:
    /// until an envelope of a source is accepted on it, envelopes of that source are ingested
    /// with [`SnapshotHub::ingest_on_new_stream`]. Invalid envelopes are counted and logged and
    /// the stream read on; a broken stream (truncated frame, oversized length, I/O error) ends
    /// the thread with the error in its report.
    ///
    /// # Errors
    /// The I/O error of the operating system refusing a thread.
    pub fn spawn_reader<R: Read + Send + 'static>(&self, reader: R) -> std::io::Result<JoinHandle<TransportReport>> {
        let hub = self.clone();
        std::thread::Builder::new().name("pipetel-hub-reader".into()).spawn(move || hub.read_stream(reader))
    }

    /// Reads length-prefixed frames from `reader` on this thread until it ends; as
    /// [`SnapshotHub::spawn_reader`].
    pub fn read_stream<R: Read>(&self, reader: R) -> TransportReport {
        let mut frames = FrameReader::new(reader);
        let mut report = TransportReport::default();
        let mut settled: HashSet<String> = HashSet::new();
        loop {
            match frames.read_frame() {
                Ok(None) => break,
                Ok(Some(payload)) => {
                    let outcome = Envelope::decode(&payload).map_err(HubError::from).and_then(|envelope| {
                        let source = envelope.source.clone();
                        let fresh = !settled.contains(&source);
                        let outcome = self.ingest_at(envelope, fresh, Instant::now());
                        if fresh && matches!(outcome, Ok(Ingested::Accepted | Ingested::Restarted)) {
                            settled.insert(source);
                        }
                        outcome
                    });
                    report.count(&outcome);
                }
                Err(error) => {
                    tracing::warn!(target: "pipetel", %error, "snapshot stream broken; reading stopped");
                    report.error = Some(error);
                    break;
                }
            }
        }
        report
    }

    /// Ingests every envelope queued on an in-process [`pipetel_recorders::channel`] now,
    /// without waiting; returns what it did.
    pub fn pump(&self, receiver: &Receiver) -> TransportReport {
        let mut report = TransportReport::default();
        for envelope in receiver.drain() {
            let outcome = self.ingest(envelope);
            report.count(&outcome);
        }
        report
    }

    /// Starts a thread that ingests envelopes from an in-process [`pipetel_recorders::channel`]
    /// as they arrive, until every sender is gone.
    ///
    /// # Errors
    /// The I/O error of the operating system refusing a thread.
    pub fn spawn_pump(&self, receiver: Receiver) -> std::io::Result<JoinHandle<TransportReport>> {
        let hub = self.clone();
        std::thread::Builder::new().name("pipetel-hub-pump".into()).spawn(move || {
            let mut report = TransportReport::default();
            loop {
                match receiver.recv_timeout(Duration::from_secs(3600)) {
                    Ok(envelope) => {
                        let outcome = hub.ingest(envelope);
                        report.count(&outcome);
                    }
                    Err(RecvError::Timeout) => {}
                    Err(_) => break,
                }
            }
            report
        })
    }
}
