//! The setters of the sampling profiler (`PIPETEL_PROFILE`, `PIPETEL_PROFILE_HZ`).

use super::rule::{AnySlot, Set};
use super::table::Rules;
use super::Config;
use pipetel_core::settings::ProfileMode;

impl Config {
    /// Turns the sampling profiler on (`ProfileMode::Cpu`) or off: with `cpu`, every thread's
    /// stack is sampled [`Config::with_profile_hz`] times per CPU second, each sample labelled
    /// with the stage, shard, phase and span its thread ran.
    pub fn with_profile(mut self, mode: ProfileMode) -> Self {
        *AnySlot::at(&mut self.slots.profile, 0) = Some(Set::code(mode, "with_profile", Rules::profile));
        self
    }

    /// Sets the profiler's samples per CPU second (1 to 1000; 99 by default). A rate out of range
    /// is refused by `init`, naming this setter.
    pub fn with_profile_hz(mut self, hz: u32) -> Self {
        *AnySlot::at(&mut self.slots.profile_hz, 0) = Some(Set::code(hz, "with_profile_hz", Rules::profile_hz));
        self
    }
}
