//! `pipetel top --endpoint URL`: the pipeline's stage and worker families read from Prometheus
//! pull endpoints (the text exposition; names are the OTel names with `.` → `_`, the unit's
//! suffix and `_total` on counters, labels the attribute names with `.` → `_`). Metrics carry
//! less than rows: no stage start (no elapsed time, no ETA), stragglers and stalls as counts,
//! and no shard state, so a shard counts as running while its stage is active and its heartbeat
//! is fresh. Rates are the change between two scrapes.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use pipetel_rows::fields as f;

use super::frame::{Frame, LostLine, ShardLine, StageLine, SLOWEST};
use crate::lost::{LostRule, LOST_AFTER_INTERVALS};

/// The longest wait for an endpoint to connect and for each read of its answer.
const TIMEOUT: Duration = Duration::from_secs(5);
/// The most bytes of an endpoint's answer read.
const MAX_BYTES: u64 = 64 << 20;

/// One sample of the text exposition.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub(crate) name: String,
    pub(crate) labels: Vec<(String, String)>,
    pub(crate) value: f64,
}

impl Sample {
    fn label(&self, name: &str) -> &str {
        self.labels.iter().find(|(k, _)| k == name).map_or("", |(_, v)| v.as_str())
    }
}

/// The label a row field becomes.
fn label(field: &str) -> String {
    field.replace('.', "_")
}

/// The samples of the `pipeline_stage_*` and `pipeline_worker_*` families in `text`; other
/// families, comments and lines that do not parse are skipped.
pub(crate) fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| l.starts_with("pipeline_stage_") || l.starts_with("pipeline_worker_"))
        .filter_map(parse_line)
        .collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let name_end = line.find(['{', ' '])?;
    let name = line[..name_end].to_string();
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices();
        let mut key = String::new();
        loop {
            let (i, c) = chars.next()?;
            match c {
                '}' => {
                    rest = &inner[i + 1..];
                    break;
                }
                ',' | ' ' => {}
                '=' => {
                    if chars.next()?.1 != '"' {
                        return None;
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next()?.1 {
                            '"' => break,
                            '\\' => match chars.next()?.1 {
                                'n' => value.push('\n'),
                                other => value.push(other),
                            },
                            other => value.push(other),
                        }
                    }
                    labels.push((std::mem::take(&mut key), value));
                }
                other => key.push(other),
            }
        }
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample { name, labels, value })
}

/// `GET url` over plain HTTP/1.0 (no chunked answers), its body when the status is 200.
fn get(url: &str) -> io::Result<String> {
    let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("{url}: {why}"));
    let rest = url.strip_prefix("http://").ok_or_else(|| bad("not an http:// URL"))?;
    let (authority, path) = rest.find('/').map_or((rest, "/"), |i| (&rest[..i], &rest[i..]));
    let addrs: Vec<_> = authority
        .to_socket_addrs()
        .or_else(|_| (authority, 80).to_socket_addrs())
        .map_err(|e| bad(&format!("cannot resolve {authority} ({e})")))?
        .collect();
    let mut last = bad("no address");
    let mut stream = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, TIMEOUT) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = io::Error::new(e.kind(), format!("{url}: cannot connect ({e})")),
        }
    }
    let mut stream = stream.ok_or(last)?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {authority}\r\nAccept: text/plain\r\nUser-Agent: pipetel-top\r\n\r\n"
    )?;
    let mut body = Vec::new();
    stream
        .take(MAX_BYTES + 1)
        .read_to_end(&mut body)
        .map_err(|e| io::Error::new(e.kind(), format!("{url}: reading the answer failed ({e})")))?;
    if body.len() as u64 > MAX_BYTES {
        return Err(bad(&format!("the answer is over {MAX_BYTES} bytes")));
    }
    let text = String::from_utf8_lossy(&body);
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| bad("not an HTTP answer"))?;
    let status = head.split_whitespace().nth(1).unwrap_or("");
    if status != "200" {
        return Err(bad(&format!("status {status}")));
    }
    Ok(body.to_string())
}

/// A shard's items at the previous scrape, for its rate.
type Prev = HashMap<(String, String, Option<u64>), (f64, u64)>;

/// The endpoints and what their previous scrapes left.
pub(crate) struct Endpoints {
    urls: Vec<String>,
    prev: Prev,
    /// Per endpoint: the time of its last answer and the active stages it served then.
    last_ok: HashMap<String, (u64, Vec<(String, String)>)>,
}

impl Endpoints {
    pub(crate) fn new(urls: Vec<String>) -> Endpoints {
        Endpoints { urls, prev: HashMap::new(), last_ok: HashMap::new() }
    }

    /// Scrapes every endpoint and builds the frame as of `rule.now_ms`.
    pub(crate) fn frame(&mut self, rule: &LostRule) -> Frame {
        let now = rule.now_ms;
        let mut frame = Frame { at_ms: now, source: self.urls.join(" "), ..Frame::default() };
        let mut stages: HashMap<(String, String), StageLine> = HashMap::new();
        let mut shards: Vec<ShardLine> = Vec::new();
        let mut prev = Prev::new();
        let fresh_ms = rule.default.as_millis() as f64 * f64::from(LOST_AFTER_INTERVALS);
        let (l_stage, l_exec, l_shard, l_state) =
            (label(f::STAGE_NAME), label(f::EXECUTION_ID), label(f::SHARD_INDEX), label(f::SHARD_STATE));
        for url in &self.urls {
            let samples = match get(url) {
                Ok(text) => parse(&text),
                Err(e) => {
                    frame.notes.push(format!("endpoint {e}"));
                    if let Some((last, keys)) = self.last_ok.get(url) {
                        for (stage, execution) in keys {
                            frame.lost_stages.push(LostLine {
                                stage: stage.clone(),
                                execution: execution.clone(),
                                shard: None,
                                last_ms: *last,
                            });
                        }
                    }
                    continue;
                }
            };
            let host = url.trim_start_matches("http://").split('/').next().unwrap_or("").to_string();
            let key = |s: &Sample| (s.label(&l_stage).to_string(), s.label(&l_exec).to_string());
            let active: Vec<(String, String)> =
                samples.iter().filter(|s| s.name == "pipeline_stage_active" && s.value >= 1.0).map(key).collect();
            self.last_ok.insert(url.clone(), (now, active.clone()));
            let worker_items: HashMap<(String, String, &str), f64> = samples
                .iter()
                .filter(|w| w.name == "pipeline_worker_items_total")
                .map(|w| {
                    let (stage, exec) = key(w);
                    ((stage, exec, w.label(&l_shard)), w.value)
                })
                .collect();
            for k in &active {
                stages.entry(k.clone()).or_insert_with(|| StageLine {
                    stage: k.0.clone(),
                    execution: k.1.clone(),
                    ..StageLine::default()
                });
            }
            for s in &samples {
                let k = key(s);
                let Some(line) = stages.get_mut(&k) else { continue };
                let v = s.value.max(0.0);
                let max = |slot: &mut u64| *slot = (*slot).max(v as u64);
                match s.name.as_str() {
                    "pipeline_stage_shards" => match s.label(&l_state) {
                        "done" => max(&mut line.done),
                        "failed" => max(&mut line.failed),
                        "running" => max(&mut line.running),
                        "pending" => max(&mut line.pending),
                        _ => {}
                    },
                    "pipeline_stage_items_total" => {
                        max(&mut line.items);
                        let p = (k.0.clone(), k.1.clone(), None);
                        if let Some((items, at)) = self.prev.get(&p).filter(|(_, at)| now > *at) {
                            line.rate = Some((s.value - items).max(0.0) * 1000.0 / (now - at) as f64);
                        }
                        prev.insert(p, (s.value, now));
                    }
                    "pipeline_stage_skew_ratio" | "pipeline_stage_skew" => line.skew = Some(s.value),
                    "pipeline_stage_skewed_ratio" | "pipeline_stage_skewed" => line.skewed = s.value >= 1.0,
                    "pipeline_stage_stragglers_total" => max(&mut line.stragglers),
                    "pipeline_stage_stalls_total" => max(&mut line.stalls),
                    "pipeline_worker_heartbeat_seconds" => {
                        let Ok(shard) = s.label(&l_shard).parse::<u64>() else { continue };
                        if now as f64 - s.value * 1000.0 > fresh_ms {
                            continue;
                        }
                        let items = worker_items.get(&(k.0.clone(), k.1.clone(), s.label(&l_shard))).copied();
                        let mut rate = None;
                        if let Some(items) = items {
                            let p = (k.0.clone(), k.1.clone(), Some(shard));
                            if let Some((before, at)) = self.prev.get(&p).filter(|(_, at)| now > *at) {
                                rate = Some((items - before).max(0.0) * 1000.0 / (now - at) as f64);
                            }
                            prev.insert(p, (items, now));
                        }
                        shards.push(ShardLine {
                            stage: k.0.clone(),
                            execution: k.1.clone(),
                            shard,
                            host: Some(host.clone()),
                            rate,
                            state: "running".into(),
                            ..ShardLine::default()
                        });
                    }
                    _ => {}
                }
            }
        }
        self.prev = prev;
        for line in stages.values_mut() {
            line.total = line.done + line.failed + line.running + line.pending;
        }
        frame.stages = stages.into_values().collect();
        frame.stages.sort_by(|a, b| (&a.stage, &a.execution).cmp(&(&b.stage, &b.execution)));
        // Slowest: the lowest rate first (shards without a rate yet last).
        shards.sort_by(|a, b| {
            a.rate.unwrap_or(f64::INFINITY).total_cmp(&b.rate.unwrap_or(f64::INFINITY)).then(a.shard.cmp(&b.shard))
        });
        shards.truncate(SLOWEST);
        frame.slowest = shards;
        frame
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_parses_into_the_pipeline_samples() {
        let text = "# HELP pipeline_stage_active x\n# TYPE pipeline_stage_active gauge\n\
            pipeline_stage_active{pipeline_namespace=\"pipeline\",pipeline_stage_name=\"a \\\"b\\\"\",pipeline_execution_id=\"r\"} 1\n\
            pipeline_worker_items_total{pipeline_stage_name=\"a\",pipeline_shard_index=\"3\"} 12 1700000000000\n\
            process_cpu_seconds_total 4\n\
            pipeline_stage_items_total 2.5e3\n\
            pipeline_stage_bad{x=\"unterminated} 1\n";
        let s = parse(text);
        assert_eq!(s.len(), 3, "{s:?}");
        assert_eq!(s[0].label("pipeline_stage_name"), "a \"b\"");
        assert_eq!(s[0].value, 1.0);
        assert_eq!((s[1].label("pipeline_shard_index"), s[1].value), ("3", 12.0));
        assert_eq!((s[2].name.as_str(), s[2].value), ("pipeline_stage_items_total", 2500.0));
    }

    #[test]
    fn an_endpoint_that_does_not_answer_is_a_note_not_an_error() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
        let mut e = Endpoints::new(vec![format!("http://127.0.0.1:{port}/metrics")]);
        let f = e.frame(&LostRule::now(None));
        assert_eq!(f.notes.len(), 1, "{:?}", f.notes);
        assert!(f.notes[0].contains(&format!("127.0.0.1:{port}")), "{:?}", f.notes);
    }
}
