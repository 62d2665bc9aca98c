//! Runtime support of the `#[pipetel::measure]` attribute macro.

/// Paths the macro's generated code refers to; not a public API.
#[doc(hidden)]
pub mod __private {}
