//! The native module `pipetel._pipetel` behind the `pipetel` Python package.
//!
//! Everything Python sees is re-exported (and documented) by the concept modules of
//! `python/pipetel/` (`registry`, `recorders`, `pipeline`, `tracing`) and `__init__.py`, with
//! type stubs in `python/pipetel/_pipetel.pyi`. This crate binds the Rust crates; it adds no
//! behaviour of its own beyond turning arguments into Rust values and Rust errors into Python
//! exceptions.
//!
//! # Modules
//! Start-up: [`init`] (with `plugged`: the application's own OpenTelemetry Python exporters as
//! exporters of the Rust providers). Spans and stages: [`attributes`] (Python values as
//! attribute values),
//! [`context`] (the current span, the `Span` class, `traceparent`), [`pipeline`] (the stage and
//! shard handles), [`span`] (`pipetel.span` and what `parent=` names), [`zephyr`] (Marin
//! Zephyr's explicit rows), [`logs`] (Python `logging` records as OTel log records), [`http`] (the ASGI and WSGI
//! middleware's spans and metrics). TeleFuser's metrics: [`registry`], [`service`]. mstar's recorders:
//! [`recorders`], [`hub`], [`multiprocess`] (a worker's page read back and the workers' pages
//! merged). Progress in Jupyter: [`notebook`] (which `init` calls). Within each group a module
//! imports only from those before it (and every module from [`errors`]), so no two modules
//! import each other.
//!
//! # Errors and panics
//! Every Rust error becomes an exception of the `pipetel.PipetelError` hierarchy carrying the Rust
//! error's message unchanged ([`errors`]). Every entry point runs under a panic guard, so a
//! Rust panic becomes `pipetel.InternalError` instead of unwinding into Python.

// `unsafe` is denied but for one fenced, argued site (`hub::dup_file`).
#![deny(unsafe_code)]

use pyo3::prelude::*;

pub mod args;
pub mod attributes;
pub mod bench;
pub mod context;
pub mod errors;
pub mod http;
pub mod hub;
pub mod init;
pub mod logs;
pub mod multiprocess;
pub mod notebook;
pub mod pipeline;
mod plugged;
mod profile;
pub mod recorders;
pub mod registry;
pub mod rows;
pub mod service;
pub mod span;
pub mod zephyr;

/// The extension's Rust allocations go through mimalloc: a span's data is made on the Python
/// thread and freed on the exporter's, which the system allocator serves slowly (about a fifth
/// of a span's cost measured with it).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A module's `register`: adds its functions, classes or exception types to the native module.
type Register = fn(&Bound<'_, PyModule>) -> PyResult<()>;

/// The module initialiser: registers the exception types, functions and classes, module by
/// module.
#[pymodule]
fn _pipetel(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    let registers: [Register; 16] = [
        errors::register,
        recorders::register,
        registry::register,
        service::register,
        init::register,
        context::register,
        span::register,
        logs::register,
        http::register,
        pipeline::register,
        zephyr::register,
        hub::register,
        bench::register,
        rows::register,
        multiprocess::register,
        notebook::register,
    ];
    registers.iter().try_for_each(|register| register(m))
}
