//! The TOML file: every key of the settings table, of the TOML type its entry names, read
//! through the same rule as its environment variable. A TOML value becomes the text the variable would
//! hold (a list is joined with commas, a table becomes `k=v` pairs), so one rule reads both.

use std::path::Path;

use super::declare::{Entry, FileType};
use super::rule::{Redaction, REDACTED};
use super::syntax::percent_encode;
use super::table::{Slots, TABLE};
use pipetel_core::settings::{ConfigError, Origin};

use FileType::*;

/// A file key: its setting and the scope it sets (see `declare::Read`).
type Key = (&'static Entry<Slots>, usize, &'static str);

/// Every file key of the table.
fn keys() -> impl Iterator<Item = Key> {
    TABLE.iter().flat_map(|entry| entry.file_keys().map(move |(scope, key)| (entry, scope, key)))
}

fn find(key: &str) -> Option<Key> {
    keys().find(|(_, _, k)| *k == key)
}

/// The setting whose old spelling `key` is, with its new key.
fn renamed(key: &str) -> Option<(Key, &'static str)> {
    let entry = TABLE.iter().find(|e| e.old_key == Some(key))?;
    let (scope, new) = entry.file_keys().next()?;
    Some(((entry, scope, new), entry.old_key?))
}

/// Lays the file's keys over `slots`; old spellings met are noted in `deprecations`.
pub(crate) fn apply(
    slots: &mut Slots,
    deprecations: &mut Vec<String>,
    text: &str,
    path: &Path,
) -> Result<(), ConfigError> {
    let syntax = |message: String| ConfigError::FileSyntax { path: path.to_path_buf(), message };
    let table: toml::Table = toml::from_str(text).map_err(|e: toml::de::Error| syntax(syntax_error(text, &e)))?;
    let mut found = Vec::new();
    flatten(&table, "", &mut found).map_err(syntax)?;
    for (written, value) in found {
        // An old spelling sets the new key's slot; errors still name the key as written.
        let key = match renamed(&written) {
            Some(((entry, scope, new), old)) => {
                if table_has(&table, new) {
                    return Err(syntax(format!("`{old}` is the old name of `{new}`; set only `{new}`")));
                }
                deprecations
                    .push(format!("configuration file {}: key `{old}` is deprecated; use `{new}`", path.display()));
                (entry, scope, new)
            }
            None => find(&written).ok_or_else(|| syntax(format!("unknown key `{written}`")))?,
        };
        read(slots, key, value, Origin::File { path: path.to_path_buf(), key: written.clone() })?;
    }
    Ok(())
}

/// Lays one setting given in code over `slots` (`Config::with_setting`): `key` is a file key,
/// dotted or with each `.` written `_`; the value is checked as the file's would be, and errors
/// name the key as written.
pub(crate) fn apply_setting(slots: &mut Slots, key: &str, value: &toml::Value) -> Result<(), ConfigError> {
    let found = keys().find(|(_, _, k)| *k == key || underscored(k) == key);
    let Some(found) = found else {
        return Err(ConfigError::UnknownSetting { key: key.to_string(), expected: section_keys("") });
    };
    read(slots, found, value, Origin::Setting(key.to_string()))
}

/// The value as the variable's text, through the setting's rule into its slot.
fn read(slots: &mut Slots, (entry, scope, _): Key, value: &toml::Value, origin: Origin) -> Result<(), ConfigError> {
    let text = as_text(value, entry.kind)
        .map_err(|reason| ConfigError::invalid(origin.clone(), shown(value, entry.redaction), reason))?;
    (entry.read_file)(slots, scope, &text, origin)
}

/// A TOML value as an error may show it: a credential not at all, a table of headers by its names.
fn shown(value: &toml::Value, redaction: Redaction) -> String {
    match (redaction, value) {
        (Redaction::None, _) => crate::redact::redact_urls_in(&value.to_string()).into_owned(),
        (Redaction::Userinfo, toml::Value::String(text)) => crate::redact::redact_url(text).into_owned(),
        (Redaction::Userinfo, _) => crate::redact::redact_urls_in(&value.to_string()).into_owned(),
        (Redaction::HeaderValues, toml::Value::Table(t)) => {
            t.keys().map(|name| format!("{name}={REDACTED}")).collect::<Vec<_>>().join(",")
        }
        _ => REDACTED.to_string(),
    }
}

/// The parser's message and where it stopped, without the line it quotes: that line may hold a
/// header value or a token.
fn syntax_error(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim().replace('\n', " ");
    let Some(span) = e.span() else { return message };
    let before = text.get(..span.start).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("line {line}, column {column}: {message}")
}

/// A file key with each `.` written `_` (`prometheus.port` -> `prometheus_port`).
fn underscored(key: &str) -> String {
    key.replace('.', "_")
}

/// The dotted keys and their values; a table is a section unless a key takes it whole.
fn flatten<'a>(table: &'a toml::Table, prefix: &str, out: &mut Vec<(String, &'a toml::Value)>) -> Result<(), String> {
    for (name, value) in table {
        let key = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
        let takes_whole = find(&key).is_some() || renamed(&key).is_some();
        let is_section = keys().any(|(_, _, k)| k.strip_prefix(key.as_str()).is_some_and(|r| r.starts_with('.')));
        match value {
            toml::Value::Table(inner) if !takes_whole && is_section => flatten(inner, &key, out)?,
            _ if takes_whole => out.push((key, value)),
            _ if is_section => return Err(format!("`{key}` is a section: expected a table")),
            _ => return Err(format!("unknown key `{key}`; expected one of {}", section_keys(prefix))),
        }
    }
    Ok(())
}

/// The names a section holds, for the error about an unknown one.
fn section_keys(section: &str) -> String {
    let names: std::collections::BTreeSet<&str> = keys()
        .filter_map(|(_, _, k)| {
            let rest = if section.is_empty() { Some(k) } else { k.strip_prefix(section)?.strip_prefix('.') };
            rest.map(|r| r.split('.').next().unwrap_or(r))
        })
        .collect();
    names.into_iter().collect::<Vec<_>>().join(", ")
}

fn table_has(table: &toml::Table, dotted: &str) -> bool {
    let mut parts = dotted.split('.');
    let Some(first) = parts.next() else { return false };
    let mut value = table.get(first);
    for part in parts {
        value = value.and_then(|v| v.as_table()).and_then(|t| t.get(part));
    }
    value.is_some()
}

/// The text the environment variable would hold for this value, or why the type is wrong.
fn as_text(value: &toml::Value, kind: FileType) -> Result<String, String> {
    use toml::Value as V;
    let scalar = |v: &V| match v {
        V::String(s) => Some(s.clone()),
        V::Integer(i) => Some(i.to_string()),
        V::Float(f) => Some(f.to_string()),
        _ => None,
    };
    match (kind, value) {
        (Bool, V::Boolean(b)) => Ok(b.to_string()),
        (Bool, _) => Err("expected `true` or `false`".into()),
        (Int, V::Integer(i)) => Ok(i.to_string()),
        (Int, _) => Err("expected a whole number".into()),
        (Duration, V::Integer(_) | V::String(_)) => Ok(scalar(value).unwrap_or_default()),
        (Duration, _) => Err("expected a whole number or a duration such as \"1500ms\"".into()),
        (Text, V::String(s)) => Ok(s.clone()),
        (Text, _) => Err("expected a string".into()),
        (Scalar, _) => scalar(value).ok_or_else(|| "expected a string or a number".into()),
        (Buckets, V::String(name)) => Ok(name.clone()),
        (Buckets, V::Array(_)) => as_text(value, List),
        (Buckets, _) => Err("expected an array of numbers or a name such as \"telefuser\"".into()),
        (List, V::Array(items)) => {
            let items: Option<Vec<String>> = items.iter().map(|v| scalar(v).filter(|s| !s.trim().is_empty())).collect();
            items.map(|i| i.join(",")).ok_or_else(|| "expected an array of non-empty strings or numbers".into())
        }
        (List, _) => Err("expected an array".into()),
        (Table, V::Table(t)) => {
            let pairs: Option<Vec<String>> =
                t.iter().map(|(k, v)| v.as_str().map(|v| format!("{k}={}", percent_encode(v)))).collect();
            pairs.map(|p| p.join(",")).ok_or_else(|| "expected a table of strings".into())
        }
        (Table, _) => Err("expected a table".into()),
        (Switch, V::Boolean(b)) => Ok(b.to_string()),
        (Switch, V::String(s)) => Ok(s.clone()),
        (Switch, _) => Err("expected `true`, `false` or a string such as \"always\"".into()),
        (Absent, _) => Err("not a file key".into()),
    }
}

/// No two keys have the same `_` spelling, so [`apply_setting`] finds at most one.
#[cfg(test)]
pub(crate) fn underscored_keys_are_unique() -> bool {
    let spelled: std::collections::BTreeSet<String> = keys().map(|(_, _, k)| underscored(k)).collect();
    spelled.len() == keys().count()
}
