//! The multiprocess merge (Python's `pipetel.multiprocess`): a worker's page read back into
//! recorder snapshots ([`page_snapshots`]), and the sum of many workers' snapshots written as
//! one text page ([`Merge`]) through this module's [`Writer`], with its escaping and number
//! rules, so the merged page cannot drift from the pull endpoint's.
//!
//! The snapshots a worker writes are one family per sample name: a counter for what is summed
//! over every worker (counters, histogram buckets, `_sum` and `_count`, summary `_sum` and
//! `_count`), a gauge for what is summed over live workers (gauges, untyped samples); summary
//! quantiles and `_created` samples are left out (they cannot be summed). The family's unit
//! carries `<type>:<family name>` of the page, its labels the union of the sample's label names
//! (sorted), an absent label written as the empty string.
//!
//! Files are not trusted ([`Merge::add`]): a series whose type, metric or label names are not
//! those of the text format is skipped, and label values and help are escaped on the page.

use std::collections::{BTreeMap, HashMap};

use pipetel_recorders::{Counter, Envelope, Family, Gauge, Kind, MetricSnapshot};

use super::lint::{is_label_name, is_metric_name, labels as scan_labels};
use super::Writer;

/// The Prometheus types a worker's page may declare.
const KINDS: [&str; 5] = ["counter", "gauge", "histogram", "summary", "untyped"];

/// One sample of a text exposition, as [`read_page`] reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct PageSample {
    /// The sample's name (`x_bucket`, `x_total`, ...).
    pub sample: String,
    /// The family it belongs to: its `# TYPE` name.
    pub family: String,
    /// The family's type (`untyped` when none was declared).
    pub kind: String,
    /// The family's help, unescaped.
    pub help: String,
    /// Label names and values (unescaped), in the order written.
    pub labels: Vec<(String, String)>,
    /// The value.
    pub value: f64,
}

/// The samples of a text exposition (0.0.4), label values and help unescaped (the strings they
/// stand for). Comments other than `# HELP` and `# TYPE`, blank lines and lines that are not
/// samples are skipped.
///
/// # Errors
/// The line, when a sample's labels or value cannot be read.
pub fn read_page(text: &str) -> Result<Vec<PageSample>, String> {
    let mut types: HashMap<&str, &str> = HashMap::new();
    let mut helps: HashMap<&str, String> = HashMap::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let Some((name, kind)) = rest.split_once(' ') {
                types.insert(name, kind.trim());
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            helps.insert(name, unescape(help));
            continue;
        }
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((sample, labels, value)) = sample_line(line)? else { continue };
        let (mut family, mut kind) = (sample, types.get(sample).copied());
        if kind.is_none() {
            for suffix in ["_total", "_bucket", "_sum", "_count", "_created"] {
                if let Some(base) = sample.strip_suffix(suffix) {
                    if let Some(k) = types.get(base) {
                        (family, kind) = (base, Some(*k));
                        break;
                    }
                }
            }
        }
        out.push(PageSample {
            sample: sample.to_owned(),
            family: family.to_owned(),
            kind: kind.unwrap_or("untyped").to_owned(),
            help: helps.get(family).cloned().unwrap_or_default(),
            labels,
            value,
        });
    }
    Ok(out)
}

/// A sample line's name, labels and value; `None` when the line is not a sample.
#[allow(clippy::type_complexity)]
fn sample_line(line: &str) -> Result<Option<(&str, Vec<(String, String)>, f64)>, String> {
    let end = line.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')).unwrap_or(line.len());
    let name = &line[..end];
    if !is_metric_name(name) {
        return Ok(None);
    }
    let mut rest = &line[end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let mut pairs = Vec::new();
        rest = scan_labels(after, &mut pairs).map_err(|why| format!("cannot read the labels of {line:?}: {why}"))?;
        labels = pairs.into_iter().map(|(k, v)| (k.to_owned(), unescape(v))).collect();
    }
    if !rest.starts_with(char::is_whitespace) {
        return Ok(None);
    }
    let mut fields = rest.split_whitespace();
    let (Some(value), None) = (fields.next(), fields.nth(1)) else { return Ok(None) };
    let value = parse_value(value).ok_or_else(|| format!("cannot read the value of {line:?}"))?;
    Ok(Some((name, labels, value)))
}

/// A sample value as Prometheus writes it (`+Inf`, `NaN`, decimals, exponents).
fn parse_value(v: &str) -> Option<f64> {
    match v {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => v.parse().ok(),
    }
}

/// Help text or a label value of the text format as the string it stands for.
fn unescape(v: &str) -> String {
    if !v.contains('\\') {
        return v.to_owned();
    }
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        match (c, c == '\\') {
            (_, true) => match chars.next() {
                Some('n') => out.push('\n'),
                Some(e) => out.push(e),
                None => out.push('\\'),
            },
            (c, false) => out.push(c),
        }
    }
    out
}

/// Whether a sample is summed over every worker (`Some(true)`), over live workers
/// (`Some(false)`), or left out (`None`).
fn cumulative(sample: &PageSample) -> Option<bool> {
    if sample.sample.ends_with("_created") {
        return None;
    }
    match sample.kind.as_str() {
        "counter" | "histogram" => Some(true),
        "summary" => (!sample.labels.iter().any(|(k, _)| k == "quantile")).then_some(true),
        _ => Some(false),
    }
}

/// A worker's page as the recorder snapshots it writes (see the module documentation), sorted
/// by sample name. A sample whose name cannot name a family, or whose value a recorder refuses
/// (a negative or non-finite counter, a non-finite gauge), is left out.
///
/// # Errors
/// As [`read_page`].
pub fn page_snapshots(text: &str) -> Result<Vec<MetricSnapshot>, String> {
    struct Group {
        family: String,
        kind: String,
        help: String,
        cumulative: bool,
        points: Vec<(Vec<(String, String)>, f64)>,
    }
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    for s in read_page(text)? {
        let Some(cumulative) = cumulative(&s) else { continue };
        let group = groups.entry(s.sample).or_insert_with(|| Group {
            family: s.family,
            kind: s.kind,
            help: s.help,
            cumulative,
            points: Vec::new(),
        });
        group.points.push((s.labels, s.value));
    }
    let mut snapshots = Vec::with_capacity(groups.len());
    for (sample, g) in groups {
        let mut names: Vec<&str> = g.points.iter().flat_map(|(l, _)| l.iter().map(|(k, _)| k.as_str())).collect();
        names.sort_unstable();
        names.dedup();
        let help = g.help.replace(['\t', '\n'], " ");
        let unit = format!("{}:{}", g.kind, g.family);
        let kind = if g.cumulative { Kind::Counter } else { Kind::Gauge };
        let Ok(family) = Family::new(&sample, &help, &unit, kind, &names, &[]) else { continue };
        let snapshot = if g.cumulative {
            let Ok(counter) = Counter::new(family) else { continue };
            for (labels, value) in &g.points {
                let _ = counter.add(&row(&names, labels), value.max(0.0));
            }
            counter.snapshot()
        } else {
            let Ok(gauge) = Gauge::new(family) else { continue };
            for (labels, value) in &g.points {
                let _ = gauge.set(&row(&names, labels), *value);
            }
            gauge.snapshot()
        };
        snapshots.push(snapshot);
    }
    Ok(snapshots)
}

/// The values of `labels` in the order of `names`, an absent one the empty string.
fn row<'a>(names: &[&str], labels: &'a [(String, String)]) -> Vec<&'a str> {
    names.iter().map(|n| labels.iter().find(|(k, _)| k == n).map_or("", |(_, v)| v.as_str())).collect()
}

/// The label pairs of one merged series, empty values left out.
type SeriesKey = Vec<(String, String)>;

/// One family of the merged page.
struct MergedFamily {
    kind: String,
    help: String,
    /// Sample name → series → value.
    samples: BTreeMap<String, HashMap<SeriesKey, f64>>,
}

/// The sum of workers' snapshots (see the module documentation), written as one page by
/// [`Merge::page`].
#[derive(Default)]
pub struct Merge {
    families: BTreeMap<String, MergedFamily>,
}

impl Merge {
    /// An empty merge.
    pub fn new() -> Merge {
        Merge::default()
    }

    /// Adds one worker's envelope: its counters always, its gauges when `live`. Returns `false`
    /// when a series was skipped because its type, metric or label names are not the text
    /// format's (a planted or foreign file), for the caller's warning.
    pub fn add(&mut self, envelope: &Envelope, live: bool) -> bool {
        let mut valid = true;
        for snap in &envelope.snapshots {
            let fam = snap.family();
            let (kind, family) = fam.unit().split_once(':').unwrap_or(("", fam.unit()));
            let names = fam.label_names();
            if !KINDS.contains(&kind)
                || !is_metric_name(family)
                || !is_metric_name(snap.name())
                || !names.iter().all(|n| is_label_name(n))
            {
                valid = false;
                continue;
            }
            let summed = match fam.kind() {
                Kind::Counter => true,
                Kind::Gauge => false,
                Kind::Histogram => {
                    valid = false;
                    continue;
                }
            };
            if !summed && !live {
                continue;
            }
            let merged = self.families.entry(family.to_owned()).or_insert_with(|| MergedFamily {
                kind: kind.to_owned(),
                help: fam.help().to_owned(),
                samples: BTreeMap::new(),
            });
            let into = merged.samples.entry(snap.name().to_owned()).or_default();
            for (i, value) in snap.values().iter().enumerate() {
                let key: SeriesKey = names
                    .iter()
                    .zip(snap.row(i))
                    .filter(|(_, v)| !v.is_empty())
                    .map(|(n, v)| (n.clone(), v.clone()))
                    .collect();
                *into.entry(key).or_insert(0.0) += value;
            }
        }
        valid
    }

    /// The merged page, text format 0.0.4: families by name; in each, samples by name with
    /// `_sum` then `_count` last; series by their labels other than `le`, then by `le` as a
    /// number.
    pub fn page(&self) -> String {
        let mut out = String::new();
        let mut w = Writer::text(&mut out);
        for (name, family) in &self.families {
            w.header(name, &family.kind, &family.help, "");
            let mut samples: Vec<&String> = family.samples.keys().collect();
            samples.sort_by_key(|s| (s.ends_with("_count"), s.ends_with("_sum"), *s));
            for sample in samples {
                let mut series: Vec<(&SeriesKey, f64)> = family.samples[sample].iter().map(|(k, v)| (k, *v)).collect();
                series.sort_by(|a, b| order(a.0).partial_cmp(&order(b.0)).unwrap_or(std::cmp::Ordering::Equal));
                for (key, value) in series {
                    let mut s = w.sample(sample, "");
                    for (k, v) in key {
                        s.pair(k, v);
                    }
                    s.value(value);
                }
            }
        }
        out
    }
}

/// The order of a histogram's series: labels other than `le`, then `le` as a number (a bound
/// that is not one after the numbers).
fn order(key: &SeriesKey) -> (Vec<&(String, String)>, f64) {
    let bound = key.iter().find(|(k, _)| k == "le").map_or(f64::INFINITY, |(_, v)| match parse_value(v) {
        Some(b) if !b.is_nan() => b,
        _ => f64::INFINITY,
    });
    (key.iter().filter(|(k, _)| k != "le").collect(), bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(source: &str, page: &str) -> Envelope {
        Envelope::new(source.to_owned(), 1, page_snapshots(page).expect("a page"))
    }

    #[test]
    fn a_page_read_back_is_the_page() {
        let page = "# HELP req_total Requests \\\\ served\n# TYPE req_total counter\n\
                    req_total{path=\"a\\\"b\\\\c\\nd\"} 2\n";
        let samples = read_page(page).expect("a page");
        assert_eq!(samples[0].labels, [("path".to_owned(), "a\"b\\c\nd".to_owned())]);
        assert_eq!(samples[0].help, "Requests \\ served");
        let mut merge = Merge::new();
        assert!(merge.add(&envelope("w", page), false));
        assert_eq!(merge.page(), page);
    }

    #[test]
    fn counters_sum_over_all_gauges_over_live_and_quantiles_are_left_out() {
        let page = "# TYPE jobs_total counter\njobs_total{queue=\"a\"} 5\n# TYPE busy gauge\nbusy 1\n\
                    # TYPE lat histogram\nlat_bucket{le=\"10\"} 3\nlat_bucket{le=\"+Inf\"} 3\nlat_bucket{le=\"0.5\"} 2\n\
                    lat_sum 2.5\nlat_count 3\n# TYPE rpc summary\nrpc{quantile=\"0.5\"} 0.2\nrpc_sum 4\nrpc_count 8\n\
                    jobs_created 17\n";
        let mut merge = Merge::new();
        assert!(merge.add(&envelope("live", page), true));
        assert!(merge.add(&envelope("dead", page), false));
        assert_eq!(
            merge.page(),
            "# TYPE busy gauge\nbusy 1\n# TYPE jobs_total counter\njobs_total{queue=\"a\"} 10\n\
             # TYPE lat histogram\nlat_bucket{le=\"0.5\"} 4\nlat_bucket{le=\"10\"} 6\nlat_bucket{le=\"+Inf\"} 6\n\
             lat_sum 5\nlat_count 6\n# TYPE rpc summary\nrpc_sum 8\nrpc_count 16\n"
        );
    }

    #[test]
    fn foreign_names_are_skipped_and_values_escaped() {
        let bad = Family::counter("ok_total", "", "counter:bad name", &[]).expect("a family");
        let c = Counter::new(bad).expect("a counter");
        c.add(&[], 1.0).expect("recorded");
        let hostile = Family::counter("x_total", "a\\b", "counter:x_total", &["path"]).expect("a family");
        let h = Counter::new(hostile).expect("a counter");
        h.add(&["q\"} 1\nevil 1"], 3.0).expect("recorded");
        let mut merge = Merge::new();
        assert!(!merge.add(&Envelope::new(String::from("w"), 1, vec![c.snapshot(), h.snapshot()]), true));
        assert_eq!(
            merge.page(),
            "# HELP x_total a\\\\b\n# TYPE x_total counter\nx_total{path=\"q\\\"} 1\\nevil 1\"} 3\n"
        );
    }

    #[test]
    fn malformed_labels_are_an_error_and_other_lines_skipped() {
        assert!(read_page("a{b=c} 1\n").is_err());
        assert!(read_page("a{b=\"c\"} x\n").is_err());
        assert_eq!(read_page("not a sample line at all\n# comment\n\na 1 1700000000\n").expect("a page").len(), 1);
    }
}
