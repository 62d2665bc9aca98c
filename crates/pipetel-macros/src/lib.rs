//! The function attribute macro of pipetel; use it as `pipetel::measure`.
