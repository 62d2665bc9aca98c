//! Hooks for tests of programs that use pipetel (feature `testing`): they let a test act or
//! wait on an event instead of on time. Not for production code; they may change in any release.

/// Takes one round of worker samples now (instead of waiting a sample interval): every running
/// shard gets its sample row and its gauges move.
pub fn sample_now() {
    crate::pipeline::sample_now();
}

/// Frames the progress display has drawn with a live line.
pub fn progress_redraws() -> u64 {
    crate::pipeline::progress_redraws()
}

/// Stage entries currently exported (finished ones until their retention ends).
pub fn exported_stage_count() -> usize {
    crate::pipeline::exported_stage_count()
}
