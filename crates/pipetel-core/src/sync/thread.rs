//! Thread identity.

/// The OS id of the calling thread, when the platform has one that its CPU time can be read by
/// (`/proc/self/task/<tid>/stat` on Linux); `None` elsewhere.
pub(crate) fn current_tid() -> Option<i32> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions and cannot fail.
        Some(unsafe { libc::gettid() })
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}
