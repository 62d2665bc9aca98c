//! Scraping during heavy recording: 8 threads record flat out into the 8 shards of a stage while
//! 4 client threads scrape `/metrics` over real HTTP as fast as they can. Every scrape is a
//! complete response whose every line parses as Prometheus text; the stage and per-shard totals
//! never go backwards from one scrape to the next; after the run the exported totals equal the
//! recorded ones exactly.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const SHARDS: u32 = 8;
const SCRAPERS: usize = 4;
const LOAD: Duration = Duration::from_secs(3);
const STAGE: &str = "scraped";

/// One sample: metric name, labels in order, value.
type Sample = (String, Vec<(String, String)>, f64);

/// `GET /metrics` over a fresh connection; returns the body after checking the response is
/// complete (status 200, the announced length or a well-formed chunked body).
fn scrape(addr: SocketAddr) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect to the pull endpoint");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("read timeout");
    write!(stream, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").expect("send request");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read response");
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("end of headers");
    let head = std::str::from_utf8(&raw[..split]).expect("ASCII headers");
    let body = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status = lines.next().expect("status line");
    assert!(status.starts_with("HTTP/1.1 200"), "scrape failed: {status}");
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    assert!(headers.get("content-type").is_some_and(|t| t.starts_with("text/plain")), "{headers:?}");
    let body = if let Some(len) = headers.get("content-length") {
        let len: usize = len.parse().expect("numeric content-length");
        assert_eq!(body.len(), len, "truncated scrape: {} of {len} bytes", body.len());
        body.to_vec()
    } else {
        assert_eq!(headers.get("transfer-encoding").map(String::as_str), Some("chunked"), "{headers:?}");
        dechunk(body)
    };
    String::from_utf8(body).expect("the exposition is UTF-8")
}

/// Decodes a chunked body, asserting that it ends with the terminating zero-length chunk.
fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let eol = body.windows(2).position(|w| w == b"\r\n").expect("chunk size line");
        let size = std::str::from_utf8(&body[..eol]).expect("chunk size");
        let size = usize::from_str_radix(size.split(';').next().expect("size").trim(), 16).expect("hex chunk size");
        body = &body[eol + 2..];
        if size == 0 {
            return out;
        }
        assert!(body.len() >= size + 2, "truncated chunk");
        out.extend_from_slice(&body[..size]);
        assert_eq!(&body[size..size + 2], b"\r\n", "chunk not terminated");
        body = &body[size + 2..];
    }
}

fn is_name(s: &str, colon: bool) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || (colon && c == ':'))
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || (colon && c == ':'))
}

fn parse_value(v: &str) -> Option<f64> {
    match v {
        "NaN" => Some(f64::NAN),
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => v.parse().ok(),
    }
}

/// Parses a whole exposition strictly (every line must be a comment, a `# HELP`/`# TYPE` line
/// or a sample); panics naming the first line that is not.
fn parse(text: &str) -> Vec<Sample> {
    assert!(text.ends_with('\n'), "the exposition does not end with a newline (cut short?)");
    let mut samples = Vec::new();
    for line in text.lines() {
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            if let Some(rest) = rest.strip_prefix("TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap_or_else(|| panic!("bad TYPE line {line:?}"));
                assert!(is_name(name, true), "bad name in {line:?}");
                assert!(
                    ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                    "bad type in {line:?}"
                );
            } else if let Some(rest) = rest.strip_prefix("HELP ") {
                let name = rest.split(' ').next().expect("name");
                assert!(is_name(name, true), "bad name in {line:?}");
            }
            continue;
        }
        samples.push(parse_sample(line).unwrap_or_else(|e| panic!("unparseable line {line:?}: {e}")));
    }
    samples
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line.find(['{', ' ']).ok_or("no value")?;
    let name = &line[..name_end];
    if !is_name(name, true) {
        return Err(format!("bad metric name {name:?}"));
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(mut r) = rest.strip_prefix('{') {
        loop {
            if let Some(after) = r.strip_prefix('}') {
                r = after;
                break;
            }
            let eq = r.find('=').ok_or("label without =")?;
            let key = &r[..eq];
            if !is_name(key, false) {
                return Err(format!("bad label name {key:?}"));
            }
            r = r[eq + 1..].strip_prefix('"').ok_or("label value not quoted")?;
            let mut value = String::new();
            let mut chars = r.char_indices();
            let end = loop {
                match chars.next().ok_or("unterminated label value")? {
                    (i, '"') => break i,
                    (_, '\\') => match chars.next().ok_or("dangling escape")?.1 {
                        'n' => value.push('\n'),
                        '\\' => value.push('\\'),
                        '"' => value.push('"'),
                        c => return Err(format!("unknown escape \\{c}")),
                    },
                    (_, c) => value.push(c),
                }
            };
            labels.push((key.to_string(), value));
            r = &r[end + 1..];
            r = r.strip_prefix(',').unwrap_or(r);
        }
        rest = r;
    }
    let mut fields = rest.strip_prefix(' ').ok_or("no space before the value")?.split(' ');
    let value = fields.next().and_then(parse_value).ok_or("bad value")?;
    if let Some(ts) = fields.next() {
        ts.parse::<i64>().map_err(|_| format!("bad timestamp {ts:?}"))?;
    }
    if fields.next().is_some() {
        return Err("trailing fields".into());
    }
    Ok((name.to_string(), labels, value))
}

fn label<'a>(s: &'a Sample, key: &str) -> Option<&'a str> {
    s.1.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// The stage's total and each shard's total in one scrape.
fn totals(samples: &[Sample]) -> (Option<f64>, BTreeMap<u32, f64>) {
    let mut stage = None;
    let mut shards = BTreeMap::new();
    for s in samples.iter().filter(|s| label(s, "pipeline_stage_name") == Some(STAGE)) {
        match s.0.as_str() {
            "pipeline_stage_items_total" => stage = Some(s.2),
            "pipeline_worker_items_total" => {
                let i = label(s, "pipeline_shard_index").expect("shard index").parse().expect("numeric index");
                shards.insert(i, s.2);
            }
            _ => {}
        }
    }
    (stage, shards)
}

#[test]
fn scrapes_during_heavy_recording_are_complete_monotone_and_exact() {
    let telemetry = pipetel::init(
        pipetel::Config::default()
            .with_prometheus_host("127.0.0.1")
            .with_prometheus_port(0)
            .with_console_log(false)
            // The shards' exported totals are read after they ended.
            .with_shard_metrics(pipetel::config::ShardMetrics::All),
    )
    .expect("init");
    let addr = telemetry.prometheus_addr().expect("the pull endpoint listens");
    let stage = pipetel::stage(STAGE).execution_id("load").shards(SHARDS).start();
    let stop = AtomicBool::new(false);

    let started = Instant::now();
    let (recorded, scrapes) = std::thread::scope(|s| {
        let recorders: Vec<_> = (0..SHARDS)
            .map(|i| {
                let (stage, stop) = (&stage, &stop);
                s.spawn(move || {
                    let shard = stage.shard(i).start();
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        shard.record(1, 8);
                        n += 1;
                    }
                    shard.finish();
                    n
                })
            })
            .collect();
        let scrapers: Vec<_> = (0..SCRAPERS)
            .map(|_| {
                let stop = &stop;
                s.spawn(move || {
                    let mut last: (f64, BTreeMap<u32, f64>) = (0.0, BTreeMap::new());
                    let mut count = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        let samples = parse(&scrape(addr));
                        let (stage_total, shards) = totals(&samples);
                        let stage_total = stage_total.expect("the running stage is exported in every scrape");
                        assert!(stage_total >= last.0, "stage total went backwards: {} then {stage_total}", last.0);
                        for (i, v) in &shards {
                            let before = last.1.get(i).copied().unwrap_or(0.0);
                            assert!(*v >= before, "shard {i} went backwards: {before} then {v}");
                        }
                        last = (stage_total, shards);
                        count += 1;
                    }
                    count
                })
            })
            .collect();
        std::thread::sleep(LOAD);
        stop.store(true, Ordering::Relaxed);
        let recorded: Vec<u64> = recorders.into_iter().map(|h| h.join().expect("recorder")).collect();
        let scrapes: u32 = scrapers.into_iter().map(|h| h.join().expect("scraper")).sum();
        (recorded, scrapes)
    });
    let elapsed = started.elapsed();
    let row = stage.finish();
    let total: u64 = recorded.iter().sum();
    println!(
        "{scrapes} complete scrapes in {elapsed:?} while 8 threads recorded {total} records ({:.1} M records/s overall)",
        total as f64 / elapsed.as_secs_f64() / 1e6
    );
    assert!(scrapes >= 20, "the scrapers barely ran: {scrapes} scrapes");
    assert!(recorded.iter().all(|n| *n > 0), "{recorded:?}");
    assert_eq!(row.items, total);

    // After the run: exact totals, stage and per shard.
    let (stage_total, shards) = totals(&parse(&scrape(addr)));
    assert_eq!(stage_total, Some(total as f64), "exported stage total");
    let expected: BTreeMap<u32, f64> = (0..SHARDS).zip(recorded.iter().map(|n| *n as f64)).collect();
    assert_eq!(shards, expected, "exported shard totals");
    // f64 is exact for these totals (well below 2^53).
    assert!(total < 1 << 53);
}

#[test]
fn the_strict_parser_refuses_what_prometheus_refuses() {
    for bad in ["a{b=\"c} 1", "a{b=c} 1", "a 1 2 3", "1a 1", "a{1b=\"x\"} 1", "a{b=\"\\x\"} 1", "a NaNa"] {
        assert!(parse_sample(bad).is_err(), "{bad:?} must not parse");
    }
    let s = parse_sample("a_total{b=\"q\\\"\\\\\\n\",c=\"\"} +Inf 17").expect("valid");
    assert_eq!(s, ("a_total".into(), vec![("b".into(), "q\"\\\n".into()), ("c".into(), String::new())], f64::INFINITY));
}
