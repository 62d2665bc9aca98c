//! The syntax of the settings: how a value's text becomes a value (the lexers) and which values
//! a setting accepts (the checks). Each returns only the reason; the caller names the origin.
//! `rule.rs` pairs one lexer with one check per setting.
//!
//! Durations use the one grammar of `pipetel_recorders::duration` (`500ms`, `5s`, `2m`, `1h`),
//! where a bare number keeps the unit each setting has always documented.

// A check takes `&T` of the stored type, `&String` and `&Vec<_>` included.
#![allow(clippy::ptr_arg)]

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use pipetel_recorders::duration::{self, BareUnit};

use super::defaults::MIN_SAMPLE_INTERVAL;
use super::values::{ExporterName, Propagator, SamplerConfig};
pub(crate) use pipetel_core::settings::syntax::{
    boolean, bucket_bounds, buckets, names, service_prefix, span_targets, split_list,
};

// ----- lexers: text to value -----

pub(crate) fn text(v: &str) -> Result<String, String> {
    Ok(v.to_string())
}

pub(crate) fn trimmed(v: &str) -> Result<String, String> {
    Ok(v.trim().to_string())
}

pub(crate) fn file(v: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(v))
}

pub(crate) fn byte_size(v: &str) -> Result<u64, String> {
    let t = v.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = (&t[..split], t[split..].trim());
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" | "k" => 1 << 10,
        "mib" | "m" => 1 << 20,
        "gib" | "g" => 1 << 30,
        _ => return Err("expected a size in bytes, e.g. `67108864` or `64MiB` (units: KiB, MiB, GiB)".into()),
    };
    let n: u64 = digits.parse().map_err(|_| "expected a size in bytes, e.g. `67108864` or `64MiB`".to_string())?;
    n.checked_mul(scale).ok_or_else(|| "size too large".to_string())
}

pub(crate) fn rows_keep(v: &str) -> Result<u32, String> {
    v.trim().parse::<u32>().map_err(|_| "expected a whole number of rotated files to keep".to_string())
}

pub(crate) fn from_str<T: std::str::FromStr>(v: &str) -> Result<T, String>
where
    T::Err: fmt::Display,
{
    v.parse::<T>().map_err(|e| e.to_string())
}

pub(crate) fn millis(v: &str) -> Result<Duration, String> {
    duration::parse(v, BareUnit::Millis).map_err(|e| e.to_string())
}

#[cfg(feature = "gpu")]
pub(crate) fn seconds(v: &str) -> Result<Duration, String> {
    duration::parse(v, BareUnit::Seconds).map_err(|e| e.to_string())
}

pub(crate) fn port(v: &str) -> Result<u16, String> {
    v.trim().parse::<u16>().map_err(|_| "expected a port number between 0 and 65535".to_string())
}

pub(crate) fn whole(v: &str) -> Result<usize, String> {
    v.trim().parse::<usize>().map_err(|_| "expected a whole number".to_string())
}

pub(crate) fn profile_hz(hz: &u32) -> Result<(), String> {
    let max = pipetel_profile::MAX_HZ;
    if (1..=max).contains(hz) {
        Ok(())
    } else {
        Err(format!("expected a whole number of samples per CPU second between 1 and {max}"))
    }
}

pub(crate) fn count(v: &str) -> Result<u32, String> {
    v.trim().parse::<u32>().map_err(|_| "expected a whole number between 0 and 4294967295".to_string())
}

pub(crate) fn number(v: &str) -> Result<f64, String> {
    v.trim().parse::<f64>().map_err(|_| "expected a number within [0, 1]".to_string())
}

/// Keeps the first of equal items, in order.
pub(crate) fn dedup<T: PartialEq>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// A comma list of exporter names, or `none` alone.
pub(crate) fn exporters<T: ExporterName>(v: &str) -> Result<Vec<T>, String>
where
    T::Err: fmt::Display,
{
    none_or_list(v, |name| name == "none", "exporters")
}

/// A comma list of propagators (case-insensitive), or `none` alone (no propagator).
pub(crate) fn propagators(v: &str) -> Result<Vec<Propagator>, String> {
    none_or_list(v, |name| name.eq_ignore_ascii_case("none"), "propagators")
}

/// A comma list of values, the first of equal ones kept, or `none` alone (spelled as `is_none`
/// accepts); `none` among other names is an error naming `what` the list holds.
fn none_or_list<T: FromStr + PartialEq>(v: &str, is_none: fn(&str) -> bool, what: &str) -> Result<Vec<T>, String>
where
    T::Err: fmt::Display,
{
    let mut out = Vec::new();
    let mut saw_none = false;
    for name in split_list(v) {
        if is_none(name) {
            saw_none = true;
            continue;
        }
        out.push(name.parse::<T>().map_err(|e| e.to_string())?);
    }
    if saw_none && !out.is_empty() {
        return Err(format!("`none` cannot be combined with other {what}"));
    }
    Ok(dedup(out))
}

/// `k=v,k2=v2` with percent-encoded values (the W3C baggage-like format of the OTel spec).
pub(crate) fn key_values(v: &str) -> Result<Vec<(String, String)>, String> {
    pairs(v, false)
}

/// `name=value,name2=value2` as [`key_values`] reads it, with reasons that name the header but
/// never quote a value: a value (or an item without `=`) may be a bearer token.
pub(crate) fn header_pairs(v: &str) -> Result<Vec<(String, String)>, String> {
    pairs(v, true)
}

fn pairs(v: &str, secret_values: bool) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (n, item) in split_list(v).enumerate() {
        let Some((k, val)) = item.split_once('=') else {
            return Err(if secret_values {
                format!("item {} is not a name=value pair", n + 1)
            } else {
                format!("`{item}` is not a key=value pair")
            });
        };
        let k = k.trim();
        if k.is_empty() {
            return Err(if secret_values {
                format!("item {} has an empty header name", n + 1)
            } else {
                format!("`{item}` has an empty key")
            });
        }
        let val = percent_decode(val.trim()).ok_or_else(|| {
            if secret_values {
                format!("the value of header `{k}` has a malformed percent-encoding")
            } else {
                format!("`{item}` has a malformed percent-encoding")
            }
        })?;
        out.push((k.to_string(), val));
    }
    Ok(out)
}

pub(crate) fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The inverse of the value decoding in [`key_values`]: the file's tables become the
/// environment's text, so one rule reads both.
pub(crate) fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub(crate) fn host(v: &str) -> Result<String, String> {
    let v = v.trim();
    if v.is_empty() {
        return Err("empty host".into());
    }
    let bare = v.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<std::net::IpAddr>().is_ok() {
        return Ok(bare.to_string());
    }
    let valid = v.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !label.starts_with('-')
    });
    if valid {
        Ok(v.to_string())
    } else {
        Err("expected a host name or an IP address".into())
    }
}

pub(crate) fn basic_auth(v: &str) -> Result<(String, String), String> {
    let (user, password) = v.split_once(':').ok_or("expected user:password")?;
    Ok((user.to_string(), password.to_string()))
}

// ----- checks: the values each setting accepts -----

pub(crate) fn any<T>(_: &T) -> Result<(), String> {
    Ok(())
}

pub(crate) fn positive(d: &Duration) -> Result<(), String> {
    if d.is_zero() {
        return Err("must be greater than zero".into());
    }
    Ok(())
}

pub(crate) fn at_least_one(n: &usize) -> Result<(), String> {
    if *n == 0 {
        return Err("must be at least 1".into());
    }
    Ok(())
}

/// The words a `-`-joined instance-id recipe is made of, each standing for its placeholder.
const INSTANCE_ID_WORDS: [&str; 3] = ["hostname", "pid", "pod"];

/// What an instance id is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IdPart {
    Text(String),
    Hostname,
    Pid,
    Pod,
}

/// `PIPETEL_INSTANCE_ID` as parts: `None` for `random` (a fresh UUID per process); a recipe of
/// the words `hostname`, `pid`, `pod` joined with `-` (`hostname-pid`); or a literal in which
/// `{hostname}`, `{pid}` and `{pod}` are replaced. At most 255 characters, no control
/// characters, no other `{...}`.
pub(crate) fn instance_id_template(v: &str) -> Result<Option<Vec<IdPart>>, String> {
    let v = v.trim();
    if v.is_empty() {
        return Err("empty; expected `random`, a recipe such as `hostname-pid`, or a literal id".into());
    }
    if v.chars().count() > 255 {
        return Err("longer than 255 characters".into());
    }
    if v.chars().any(char::is_control) {
        return Err("control characters are not allowed".into());
    }
    if v.eq_ignore_ascii_case("random") {
        return Ok(None);
    }
    let word = |w: &str| match w {
        "hostname" => Some(IdPart::Hostname),
        "pid" => Some(IdPart::Pid),
        "pod" => Some(IdPart::Pod),
        _ => None,
    };
    if v.split('-').all(|w| INSTANCE_ID_WORDS.contains(&w)) {
        let mut parts = Vec::new();
        for (i, w) in v.split('-').enumerate() {
            if i > 0 {
                parts.push(IdPart::Text("-".into()));
            }
            parts.extend(word(w));
        }
        return Ok(Some(parts));
    }
    let mut parts = Vec::new();
    let mut rest = v;
    while let Some(open) = rest.find(['{', '}']) {
        if rest[open..].starts_with('}') {
            return Err("a `}` without its `{`".into());
        }
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            return Err("a `{` without its `}`".into());
        };
        if open > 0 {
            parts.push(IdPart::Text(rest[..open].to_string()));
        }
        let name = &rest[open + 1..close];
        parts.push(
            word(name).ok_or_else(|| {
                format!("unknown placeholder `{{{name}}}`; expected {{hostname}}, {{pid}} or {{pod}}")
            })?,
        );
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        parts.push(IdPart::Text(rest.to_string()));
    }
    Ok(Some(parts))
}

pub(crate) fn sample_interval(d: &Duration) -> Result<(), String> {
    if *d < MIN_SAMPLE_INTERVAL {
        return Err("must be at least 100 ms".into());
    }
    Ok(())
}

/// Whether an endpoint names no scheme (`collector:4317`): `url` would read `collector` as one.
pub(crate) fn schemeless(endpoint: &str) -> bool {
    !endpoint.contains("://")
}

pub(crate) fn endpoint(v: &String) -> Result<(), String> {
    let v = v.trim();
    if schemeless(v) && !v.is_empty() {
        // `host:port` as the OTLP spec allows for gRPC: checked as the URL it will become.
        let url = url::Url::parse(&format!("http://{v}")).map_err(|e| format!("not a URL or host:port: {e}"))?;
        if url.host_str().is_none_or(str::is_empty) {
            return Err("the endpoint has no host".into());
        }
        return Ok(());
    }
    let url = url::Url::parse(v).map_err(|e| format!("not a URL: {e}"))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(format!("scheme must be http or https, not `{}`", url.scheme()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("the URL has no host".into());
    }
    Ok(())
}

pub(crate) fn header_name(k: &str) -> Result<(), String> {
    let ok = !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("`{k}` is not a valid header name"))
    }
}

pub(crate) fn headers(pairs: &Vec<(String, String)>) -> Result<(), String> {
    for (k, val) in pairs {
        header_name(k)?;
        if val.bytes().any(|b| b < 0x20 && b != b'\t' || b == 0x7f) {
            return Err(format!("the value of header `{k}` contains control characters"));
        }
    }
    Ok(())
}

/// A readable file holding at least one PEM block whose label ends with `label`.
pub(crate) fn pem_file(p: &PathBuf, label: &str) -> Result<(), String> {
    if p.as_os_str().is_empty() {
        return Err("empty path".into());
    }
    let text = std::fs::read(p).map_err(|e| format!("cannot read the file: {e}"))?;
    let text = String::from_utf8_lossy(&text);
    let found = text
        .lines()
        .any(|l| l.trim().strip_prefix("-----BEGIN ").is_some_and(|rest| rest.trim_end_matches('-').ends_with(label)));
    if found {
        Ok(())
    } else {
        Err(format!("the file holds no PEM `{label}` block"))
    }
}

pub(crate) fn url_path(v: &String) -> Result<(), String> {
    let v = v.trim();
    if !v.starts_with('/') {
        return Err("must start with `/`".into());
    }
    if v.chars().any(|c| c.is_whitespace() || c == '?' || c == '#') {
        return Err("must not contain whitespace, `?` or `#`".into());
    }
    Ok(())
}

pub(crate) fn token(v: &String) -> Result<(), String> {
    let v = v.trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("a token must be non-empty visible ASCII without spaces".into());
    }
    Ok(())
}

pub(crate) fn basic_auth_pair((user, password): &(String, String)) -> Result<(), String> {
    if user.is_empty() || password.is_empty() {
        return Err("expected user:password, both non-empty".into());
    }
    if user.contains(':') {
        return Err("the user must not contain `:`".into());
    }
    if user.chars().chain(password.chars()).any(char::is_control) {
        return Err("control characters are not allowed".into());
    }
    Ok(())
}

pub(crate) fn ratio(r: &f64) -> Result<(), String> {
    if (0.0..=1.0).contains(r) {
        Ok(())
    } else {
        Err("ratio must be within [0, 1]".into())
    }
}

pub(crate) fn sampler(s: &SamplerConfig) -> Result<(), String> {
    s.ratio().map_or(Ok(()), |r| ratio(&r))
}

/// `EnvFilter` directives (`RUST_LOG`, the traces and logs filters).
pub(crate) fn env_filter(v: &String) -> Result<(), String> {
    parse_filter(v).map(drop)
}

/// Builds the `EnvFilter` of `directives`. Each comma-separated directive is trimmed first:
/// the directive parser slices the untrimmed text at offsets of the trimmed one, which panics
/// when white space precedes a multi-byte character (`" aé=info"`). Any other panic of the
/// parser is caught and reported as an invalid filter, never passed on to the program.
pub(crate) fn parse_filter(directives: &str) -> Result<tracing_subscriber::EnvFilter, String> {
    let directives: Vec<&str> = directives.split(',').map(str::trim).collect();
    let directives = directives.join(",");
    std::panic::catch_unwind(|| tracing_subscriber::EnvFilter::builder().parse(&directives))
        .map_err(|_| "not a valid filter: the directive parser failed on it".to_string())?
        .map_err(|e| format!("not a valid filter: {e}"))
}

pub(crate) fn cardinality(n: &usize) -> Result<(), String> {
    match *n {
        0 => Err("must be at least 1".into()),
        n if n > 10_000_000 => Err("must be at most 10000000".into()),
        _ => Ok(()),
    }
}

pub(crate) fn namespace(v: &String) -> Result<(), String> {
    let v = v.trim();
    let ok = !v.is_empty()
        && v.len() <= 64
        && v.starts_with(|c: char| c.is_ascii_lowercase())
        && v.split('.').all(|part| {
            !part.is_empty() && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        });
    if ok {
        Ok(())
    } else {
        Err("expected lower-case letters, digits and `_`, in dot-separated parts, starting with a letter".into())
    }
}

pub(crate) fn span_allow(names: &Vec<String>) -> Result<(), String> {
    if names.iter().any(|n| n.trim().is_empty()) {
        return Err("the span metrics allow list holds an empty span name".into());
    }
    Ok(())
}

#[cfg(feature = "gpu")]
pub(crate) fn gpu_poll_interval(d: &Duration) -> Result<(), String> {
    if *d < pipetel_gpu::MIN_POLL_INTERVAL {
        return Err("must be at least 1 s".into());
    }
    Ok(())
}

#[cfg(feature = "gpu")]
pub(crate) fn library(p: &PathBuf) -> Result<(), String> {
    if p.as_os_str().is_empty() {
        return Err("empty path; leave it out for the default library".into());
    }
    Ok(())
}
