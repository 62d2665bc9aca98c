//! The environment: every variable of the settings table, read through its setting's rule into
//! its slot.

use super::table::{Slots, TABLE};
use pipetel_core::settings::{ConfigError, Origin};

/// Lays the variables `lookup` finds over `slots`. With `only`, just those variables are read
/// and an empty value is a value; otherwise every variable is read and an empty one counts as
/// unset (shells make it easy to export one by mistake).
pub(crate) fn apply(
    slots: &mut Slots,
    lookup: &dyn Fn(&str) -> Option<String>,
    only: Option<&[&str]>,
) -> Result<(), ConfigError> {
    for entry in TABLE {
        for (scope, name) in entry.variables() {
            if only.is_some_and(|only| !only.contains(&name)) {
                continue;
            }
            let Some(text) = lookup(name) else { continue };
            if only.is_none() && text.trim().is_empty() {
                continue;
            }
            (entry.read_env)(slots, scope, &text, Origin::Env(name.to_string()))?;
        }
    }
    Ok(())
}
