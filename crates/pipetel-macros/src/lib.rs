//! The function attribute macro of pipetel; use it as `pipetel::measure`.
//!
//! This crate only rewrites the function: every path it generates points into
//! `::pipetel::__private`, so users depend on `pipetel` alone and the runtime (instrument
//! handles, the call guard) lives beside the rest of pipetel's metrics code. Parsing and
//! checking the options (`attr`) is kept apart from code generation (`expand`), so a misuse is
//! reported as a compile error pointing at the offending option before any code is produced.

// Every public item is documented (also set for the workspace; here it travels with the source).
#![warn(missing_docs)]
#![forbid(unsafe_code)]

use proc_macro::TokenStream;

mod attr;
mod expand;

/// Measures a function: opens a `tracing` span (as `#[tracing::instrument]` does) and records
/// how often it ran, how often it failed, how many calls run now and how long they took.
///
/// ```
/// #[pipetel::measure(stage = "tokenize", skip(batch), input_size = batch.len(), output_size = ret.len())]
/// fn tokenize(batch: &[u8]) -> Result<Vec<u32>, String> {
///     if batch.is_empty() {
///         return Err("empty batch".into());
///     }
///     Ok(batch.iter().map(|b| u32::from(*b)).collect())
/// }
///
/// #[pipetel::measure(level = "debug")]
/// async fn fetch(url: &str) -> std::io::Result<String> {
///     Ok(url.to_owned())
/// }
///
/// # fn main() {
/// assert_eq!(tokenize(b"ab"), Ok(vec![97, 98]));
/// # }
/// ```
///
/// Works on sync and async functions, free functions and methods. The generated code refers to
/// `::pipetel` only, so a crate using it needs no other dependency.
///
/// # Metrics
/// Instruments come from the global meter provider (scope `pipetel`), resolved once per
/// function. All carry `function` (the function's name), `module` (`module_path!()`) and, with
/// the `stage` option, `stage`.
///
/// | metric | kind | unit | recorded |
/// |---|---|---|---|
/// | `function.calls` | counter | `{call}` | on entry (an async fn: on its first poll) |
/// | `function.errors` | counter | `{error}` | on `Err` (`error.type=err`) or a panic (`error.type=panic`) |
/// | `function.in_flight` | up-down counter | `{call}` | +1 on entry, −1 on every exit: return, panic, future dropped |
/// | `function.duration` | histogram | `s` | wall time of every call that returned or panicked |
/// | `function.input.size` | histogram | `By` | with `input_size` |
/// | `function.output.size` | histogram | `By` | with `output_size` |
///
/// An `Err` is recognised when the return type is written as a path ending in `Result`
/// (`Result<T, E>`, `io::Result<T>`, ...). A panic is counted and then continues unchanged.
/// A future dropped before completion only leaves `function.in_flight`; it is neither an error
/// nor a duration. On failure the span's `error` field (added by the macro unless `fields`
/// declares one) is recorded as `true`, which pipetel's span metrics count as `status=error`.
///
/// # Options
/// | option | meaning |
/// |---|---|
/// | `name = "..."` | the span's name (default: the function's name; the `function` label stays the function's name) |
/// | `target = "..."` | the span's target (default: the module path) |
/// | `level = "info"` / `level = Level::INFO` | the span's level (default `info`); metrics are recorded at any level |
/// | `skip(a, b)`, `skip_all` | arguments not recorded as span fields (all others are, by `Debug` or as plain values) |
/// | `fields(k = v, ...)` | extra span fields, as in `tracing::span!` |
/// | `stage = "..."` | the `stage` label |
/// | `buckets = [0.01, 0.1, 1.0]` | bounds of `function.duration` in seconds (default `pipetel::buckets::SECONDS_BUCKETS`); OTel keeps one layout per metric, so the first function to create `function.duration` decides and a differing one is logged as a warning |
/// | `input_size = expr` | a size evaluated on the arguments at entry (any primitive number; negative counts as 0) |
/// | `output_size = expr` | a size evaluated on the return value, bound as `ret` (a reference); for a `Result` return type `ret` is the `Ok` value and nothing is recorded on `Err`. The closure form `output_size = \|v: &T\| v.len()` is accepted too |
///
/// # Handles and `pipetel::init`
/// The first call resolves the instruments; `pipetel::init` makes every function resolve them
/// again, so calls made before `init` do not leave the function on no-op instruments. A
/// program that installs its own meter provider instead must do so before the first call.
///
/// # Errors
/// A compile error names the problem: an unknown or repeated option, `input_size` on a function
/// without arguments, `output_size` on one returning `()`, a `skip` of a missing parameter,
/// a bad level or bucket list, a `const fn`, or an item that is not a function with a body.
#[proc_macro_attribute]
pub fn measure(args: TokenStream, item: TokenStream) -> TokenStream {
    expand_with(expand::Runtime::Pipetel, args, item)
}

/// The same attribute for code that depends on `pipetel-core` alone: its expansion names
/// `::pipetel_core::__private`. `pipetel_core::measure` is this attribute.
#[proc_macro_attribute]
pub fn measure_core(args: TokenStream, item: TokenStream) -> TokenStream {
    expand_with(expand::Runtime::Core, args, item)
}

fn expand_with(runtime: expand::Runtime, args: TokenStream, item: TokenStream) -> TokenStream {
    match expand::expand(runtime, args.into(), item.into()) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}
