//! The crate's concurrency primitives, and the only module with `unsafe` code: everything else
//! is `#![deny(unsafe_code)]`. Each primitive has a safe API whose soundness argument is
//! written beside its one `unsafe` block.
//!
//! - [`Published`]: a value read without a lock on a hot path, replaced rarely, every replaced
//!   value kept alive as long as the owner (the registry's OTel histograms and bound series);
//! - [`StaticCell`]: an atomic `Option<&'static T>` (call sites' resolved handles, span-metrics
//!   callsites);
//! - [`SpinLock`]: a lock for critical sections of a few nanoseconds (summary observations);
//! - [`clock`]: a cheap monotonic clock and the process-wide coarse-time thread;
//! - [`current_tid`]: the OS id of the calling thread;
//! - [`forward_downcast_raw!`]: the one `unsafe` method a
//!   `tracing` layer that wraps another layer must forward;
//! - the poison policy: [`lock`], [`read`] and [`write`].
//!
//! # Poisoning
//! A lock is poisoned when a thread panicked while holding it. pipetel recovers the guard and
//! goes on: the state behind its locks is updated by code that validates first and does not
//! panic halfway, and telemetry must never take a program down because some other thread
//! panicked. Every lock in the crate is taken through these three functions.

pub(crate) mod clock;
mod layer;
mod publish;
mod spin;
mod thread;

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

pub(crate) use layer::forward_downcast_raw;
pub(crate) use publish::{Published, StaticCell};
pub(crate) use spin::{SpinGuard, SpinLock};
pub(crate) use thread::current_tid;

/// Locks `m`, recovering from poisoning (see the [module docs](self)).
pub(crate) fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Read-locks `l`, recovering from poisoning.
pub(crate) fn read<T: ?Sized>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

/// Write-locks `l`, recovering from poisoning.
pub(crate) fn write<T: ?Sized>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}
