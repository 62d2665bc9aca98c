//! The stage handle.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt as _;

use super::answers::StageAnswers;
use super::findings::{stage_answers, stage_extra};
use super::keys::CounterKey;
use super::remote::{self, RemoteIngested, RemoteReportError};
use super::row::{stage_fields, StageStat, StageStatus};
use super::runtime::{answer_settings, close_span, emit_stage_row, namespaces, retention};
use super::shard::{Parent, ShardBuilder};
use super::table::{end_state, stage_meta, table, StageInner};
use crate::sampling::span_context;

/// Starts describing a stage; [`StageBuilder::start`] makes it run.
///
/// ```
/// let stage = pipetel_core::stage("tokenize").execution_id("run-42").shards(2).start();
/// std::thread::scope(|s| {
///     for i in 0..2 {
///         let stage = &stage;
///         s.spawn(move || {
///             let shard = stage.shard(i).start();
///             shard.record(100, 4096);
///             shard.finish();
///         });
///     }
/// });
/// let row = stage.finish();
/// assert_eq!((row.items, row.bytes, row.total_shards), (200, 8192, 2));
/// ```
pub fn stage(name: impl Into<String>) -> StageBuilder {
    StageBuilder { name: name.into(), execution_id: None, shards: 0, counters: Vec::new() }
}

/// Describes a stage before it starts.
#[derive(Debug, Clone)]
#[must_use = "a stage runs only once `start()` is called"]
pub struct StageBuilder {
    name: String,
    execution_id: Option<String>,
    shards: u32,
    counters: Vec<CounterKey>,
}

impl StageBuilder {
    crate::field_setters::field_setters! {
        /// The execution id (one run of the stage); a UUID is generated when not given.
        pub fn execution_id(execution_id: impl Into<String>) = Some(execution_id.into());
        /// The total number of shards (for progress: pending = total − started).
        pub fn shards(shards: u32);
    }

    /// Declares a user counter that shards add to with [`Shard::add`](super::Shard::add).
    pub fn counter(mut self, key: CounterKey) -> Self {
        if !self.counters.contains(&key) {
            self.counters.push(key);
        }
        self
    }

    /// Starts the stage: its span opens and its metrics appear.
    pub fn start(self) -> Stage {
        let execution_id = self.execution_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let meta = stage_meta(namespaces(), &self.name, &execution_id);
        let span = tracing::info_span!(
            target: "pipetel",
            "pipeline.stage",
            otel.name = %format!("stage {}", self.name),
            pipeline.namespace = meta.namespace,
            pipeline.stage.name = %self.name,
            pipeline.execution.id = %execution_id,
            pipeline.shards.total = i64::from(self.shards),
            error = tracing::field::Empty,
        );
        let inner = Arc::new(StageInner::new(meta, self.shards, self.counters));
        table().add(inner.clone(), retention());
        Stage { inner, parent: Parent::Local(span), remote: false, reports: AtomicU64::new(0) }
    }
}

/// A running stage. `Send + Sync`: share it by reference (scoped threads) or in an `Arc`.
/// Dropped without [`Stage::finish`] (early return, `?`, panic), it ends as `failed` and its
/// row is still emitted.
pub struct Stage {
    inner: Arc<StageInner>,
    parent: Parent,
    remote: bool,
    /// Sequence of this handle's remote reports.
    reports: AtomicU64,
}

impl std::fmt::Debug for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stage")
            .field("name", &self.inner.meta.name)
            .field("execution_id", &self.inner.meta.execution_id)
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

impl Stage {
    /// Continues a stage started in another process, from the `traceparent` string its
    /// [`Stage::traceparent`] gave: shards started here are children of that stage's span and
    /// report under the same name and execution id. A remote view emits no stage row and no
    /// stage metrics (`pipeline.stage.*`; the owning process does, so a backend summing over
    /// processes counts each shard once): send its [`Stage::remote_report`] to the owner, whose
    /// [`Stage::ingest_remote`] counts these shards in its row and metrics. Its shards' worker
    /// rows and worker metrics are exported by this process.
    ///
    /// # Errors
    /// [`RemoteStageError`] when `traceparent` is not a valid W3C `traceparent` value.
    pub fn remote(
        name: impl Into<String>,
        execution_id: impl Into<String>,
        traceparent: &str,
    ) -> Result<Stage, RemoteStageError> {
        let mut carrier = std::collections::HashMap::new();
        carrier.insert("traceparent".to_string(), traceparent.trim().to_string());
        let cx = opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier);
        {
            use opentelemetry::trace::TraceContextExt;
            if !cx.span().span_context().is_valid() {
                return Err(RemoteStageError { traceparent: traceparent.to_string() });
            }
        }
        let (name, execution_id) = (name.into(), execution_id.into());
        let inner =
            Arc::new(StageInner::new(stage_meta(namespaces(), &name, &execution_id), 0, Vec::new()).into_view());
        table().add(inner.clone(), retention());
        Ok(Stage { inner, parent: Parent::Remote(cx), remote: true, reports: AtomicU64::new(0) })
    }

    /// A report of this process's shards of the stage, for the owning process's
    /// [`Stage::ingest_remote`]: an [`Envelope`](pipetel_recorders::Envelope) from `source` (an
    /// id unique to this process, e.g. `<host>-<pid>`) holding each shard index's cumulative
    /// items, bytes, state, attempts and user counters. Send its bytes (`.encode()`, or a
    /// [`FrameWriter`](pipetel_recorders::FrameWriter)) however you like — a pipe, a socket, a
    /// file, the channel the snapshot hub reads — as often as you like, and once more after the
    /// last shard ended: each report is cumulative and numbered, so the owner keeps the latest.
    pub fn remote_report(&self, source: &str) -> pipetel_recorders::Envelope {
        let sequence = self.reports.fetch_add(1, Ordering::Relaxed) + 1;
        remote::report(&self.inner.meta.name, &self.inner.meta.execution_id, source, sequence, &self.inner.shards())
    }

    /// Takes a [`Stage::remote_report`] sent by another process: its shards count in this
    /// stage's row (items, bytes, counters, `shards_succeeded` / `shards_failed` /
    /// `shards_retried`) and stage metrics (`pipeline.stage.items`, `.bytes`, `.shards`,
    /// `.errors`, `.counter`). Per (source, shard index) the report with the highest sequence
    /// wins; an older or repeated one is [`RemoteIngested::Superseded`]. Worker rows and worker
    /// metrics stay with the process that ran the shard.
    ///
    /// # Errors
    /// [`RemoteReportError`] when the bytes do not decode, belong to another stage or execution,
    /// hold other families or invalid series, or exceed the limits (4096 sources; per source,
    /// 65,536 shards and 262,144 counter series held over all its reports; 1024 counter keys per
    /// shard); nothing of a refused report is kept. Decoding and checking take time linear in
    /// the report's size.
    pub fn ingest_remote(&self, bytes: &[u8]) -> Result<RemoteIngested, RemoteReportError> {
        let envelope =
            pipetel_recorders::Envelope::decode(bytes).map_err(|e| RemoteReportError::Decode(e.to_string()))?;
        self.ingest_remote_envelope(&envelope)
    }

    /// [`Stage::ingest_remote`] for an envelope already decoded (from a
    /// [`FrameReader`](pipetel_recorders::FrameReader) or a [`channel`](pipetel_recorders::channel)).
    ///
    /// # Errors
    /// As [`Stage::ingest_remote`].
    pub fn ingest_remote_envelope(
        &self,
        envelope: &pipetel_recorders::Envelope,
    ) -> Result<RemoteIngested, RemoteReportError> {
        let mut into = crate::sync::lock(&self.inner.remote);
        remote::ingest(&self.inner.meta.name, &self.inner.meta.execution_id, envelope, &mut into)
    }

    /// The stage's answers as of now: its finished shards' distribution and skew, stragglers,
    /// stalls and phases (the stage row carries the same figures when it ends).
    pub fn answers(&self) -> StageAnswers {
        stage_answers(&self.inner, answer_settings().skew_min)
    }

    /// The stage name.
    pub fn name(&self) -> &str {
        &self.inner.meta.name
    }

    /// The execution id.
    pub fn execution_id(&self) -> &str {
        &self.inner.meta.execution_id
    }

    /// Describes shard `index` of this stage; `.start()` it on the thread that runs it.
    pub fn shard(&self, index: u32) -> ShardBuilder<'_> {
        ShardBuilder::new(&self.inner, &self.parent, index)
    }

    /// The stage's trace context as a W3C `traceparent` value, to hand to another process
    /// ([`Stage::remote`]); `None` when traces are not exported.
    pub fn traceparent(&self) -> Option<String> {
        let cx = match &self.parent {
            // The span's own context, or its unsampled parent's when sampling held it back.
            Parent::Local(span) => match span_context(span) {
                Some(sc) => opentelemetry::Context::new().with_remote_span_context(sc),
                None => return None,
            },
            Parent::Remote(cx) => cx.clone(),
        };
        let mut carrier = std::collections::HashMap::new();
        opentelemetry_sdk::propagation::TraceContextPropagator::new().inject_context(&cx, &mut carrier);
        carrier.remove("traceparent")
    }

    /// The stage's `tracing` span, to enter around work that should appear under it.
    pub fn span(&self) -> Option<&tracing::Span> {
        match &self.parent {
            Parent::Local(span) => Some(span),
            Parent::Remote(_) => None,
        }
    }

    /// Ends the stage as succeeded and returns its row — also when some shards failed: shards
    /// may be retried, so a failed attempt does not decide the stage. The row counts them:
    /// `shards_failed` (shards whose last attempt failed), `shards_succeeded` and
    /// `shards_retried`. Use [`Stage::finish_strict`] to end failed when a shard's last attempt
    /// failed.
    pub fn finish(self) -> StageStat {
        self.end(StageStatus::Succeeded, None)
    }

    /// Ends the stage as failed when any shard's last attempt failed (reason `"<n> of <m>
    /// shards failed"`), as succeeded otherwise, and returns its row.
    pub fn finish_strict(self) -> StageStat {
        if self.inner.any_shard_failed() {
            let o = self.inner.aggregate(StageStatus::Failed, None);
            let started = o.shards_succeeded + o.shards_failed;
            let reason = format!("{} of {} shards failed", o.shards_failed, started.max(o.total_shards));
            self.end(StageStatus::Failed, Some(reason))
        } else {
            self.end(StageStatus::Succeeded, None)
        }
    }

    /// Ends the stage as failed and returns its row.
    pub fn fail(self, reason: impl Into<String>) -> StageStat {
        self.end(StageStatus::Failed, Some(reason.into()))
    }

    fn end(&self, status: StageStatus, reason: Option<String>) -> StageStat {
        if !end_state(&self.inner.state, status == StageStatus::Failed) {
            // Already ended (finish after a drop path cannot happen; kept for safety).
            return self.inner.aggregate(status, reason);
        }
        *crate::sync::lock(&self.inner.finished_at) = Some(Instant::now());
        if status == StageStatus::Failed {
            self.inner.stage_errors.fetch_add(1, Ordering::Relaxed);
        }
        let row = self.inner.aggregate(status, reason);
        if self.remote {
            return row;
        }
        if let Parent::Local(span) = &self.parent {
            let mut extra = stage_extra(&self.answers());
            let meta = &self.inner.meta;
            if let Some((samples, top)) = super::profile::stage_summary(&meta.name, &meta.execution_id) {
                use pipetel_rows::fields as f;
                extra.push((f::PROFILE_SAMPLES.into(), i64::try_from(samples).unwrap_or(i64::MAX).into()));
                extra.push((f::PROFILE_TOP.into(), top.into()));
            }
            close_span(span, stage_fields(self.inner.meta.namespace, &row), &extra, row.reason.as_deref());
            let sc = span_context(span);
            emit_stage_row(&row, extra, sc.as_ref());
        }
        row
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        if self.remote {
            // A remote view has no row of its own; it just stops being exported.
            if end_state(&self.inner.state, false) {
                *crate::sync::lock(&self.inner.finished_at) = Some(Instant::now());
            }
            return;
        }
        if self.inner.is_running() {
            let reason = if std::thread::panicking() { "panicked" } else { "dropped without finish()" };
            let _ = self.end(StageStatus::Failed, Some(reason.to_string()));
        }
    }
}

/// A `traceparent` value that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid traceparent {traceparent:?}: expected the W3C form 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>"
)]
pub struct RemoteStageError {
    /// The refused value.
    pub traceparent: String,
}
