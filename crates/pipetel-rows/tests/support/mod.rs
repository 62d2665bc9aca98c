//! Helpers of this crate's integration tests.

pub(crate) mod together;
