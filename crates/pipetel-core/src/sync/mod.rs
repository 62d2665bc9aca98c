//! The crate's concurrency primitives, and the only module with `unsafe` code: everything else
//! is `#![deny(unsafe_code)]`. Each primitive has a safe API whose soundness argument is
//! written beside its one `unsafe` block.
//!
//! - [`Published`]: a value read without a lock on a hot path, replaced rarely, every replaced
//!   value kept alive as long as the owner (the registry's OTel histograms and bound series);
//! - [`StaticCell`]: an atomic `Option<&'static T>` (call sites' resolved handles, span-metrics
//!   callsites);
//! - [`SpinLock`]: a lock for critical sections of a few nanoseconds (summary observations);
//! - `clock`: a cheap monotonic clock and the process-wide coarse-time thread;
//! - [`current_tid`]: the OS id of the calling thread;
//! - [`span_table_home`](span_table::span_table_home): where a span's id starts its probe in the fixed open-addressing
//!   tables of open spans (span metrics) and held-back spans (sampling gate);
//! - [`forward_downcast_raw!`]: the one `unsafe` method a
//!   `tracing` layer that wraps another layer must forward;
//! - the poison policy: [`lock`], [`read`] and [`write`].
//!
//! # Poisoning
//! A lock is poisoned when a thread panicked while holding it. pipetel recovers the guard and
//! goes on: the state behind its locks is updated by code that validates first and does not
//! panic halfway, and telemetry must never take a program down because some other thread
//! panicked. Every lock in the crate is taken through these three functions.

// Plumbing between this crate and `pipetel` (hidden from the docs): its docs name the private
// items they are written for.
#![allow(rustdoc::private_intra_doc_links)]

pub(crate) mod clock;
mod float;
mod layer;
mod poison;
mod publish;
mod span_table;
mod spin;
mod thread;

pub use clock::clock;
pub(crate) use clock::{ticks_per_second, ticks_to_seconds};
pub(crate) use float::{add_f64, load_f64};
pub(crate) use layer::forward_downcast_raw;
pub use poison::{lock, read, write};
pub(crate) use publish::{Published, StaticCell};
#[cfg(test)]
pub(crate) use span_table::SPAN_TABLE_SLOTS;
pub(crate) use span_table::{spread, SpanSlot, SpanTable};
pub(crate) use spin::{SpinGuard, SpinLock};
pub(crate) use thread::current_tid;
