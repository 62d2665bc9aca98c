//! The process metrics of the semantic conventions on a real scrape of the pull endpoint: each
//! family present with plausible values (CPU time grows with work, memory above zero, at least
//! one thread, at least the three standard file descriptors, both context-switch types), and
//! none of them with `PIPETEL_PROCESS_METRICS=false`. Each case is one `init`, in a child process
//! of this binary, configured through the environment.
#![cfg(all(feature = "prometheus", target_os = "linux"))]

mod support;

use std::time::{Duration, Instant};

use support::{http, init_child, run_child};

const CHILD: &str = "PIPETEL_TEST_PROCESS_METRICS";
const BEGIN: &str = "----- scrape -----";

/// `init`, some CPU work and two extra threads alive, then the scrape of the endpoint printed.
#[test]
#[ignore = "a scenario its test runs in a child process (support::child::run_child)"]
fn child_scrapes_its_endpoint() {
    let Some((_, telemetry)) = init_child(CHILD) else { return };
    // Busy until the process has used 300 ms of CPU (bounded by 20 s of wall time): on a loaded
    // machine the process gets its CPU later, not less of it.
    let started = Instant::now();
    let mut x = 0u64;
    while cpu_seconds() < 0.3 && started.elapsed() < Duration::from_secs(20) {
        for _ in 0..100_000 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
    }
    let (stop, wait) = std::sync::mpsc::channel::<()>();
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let _ = tx;
            std::thread::spawn(move || {
                let _ = rx.recv_timeout(Duration::from_secs(30));
            })
        })
        .collect();
    let addr = telemetry.prometheus_addr().expect("pull endpoint").to_string();
    let (status, scrape) = http("GET", &format!("http://{addr}/metrics")).expect("scrape");
    assert_eq!(status, 200, "{scrape}");
    println!("{BEGIN}\n{scrape}");
    drop((stop, wait));
    for waiter in waiters {
        let _ = waiter.join();
    }
    drop(telemetry);
}

/// User and system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    let stat = procfs::process::Process::myself().and_then(|p| p.stat()).expect("/proc/self/stat");
    (stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64
}

fn scrape(switch: Option<&str>) -> String {
    let mut env = vec![
        (CHILD.to_string(), "1".to_string()),
        ("OTEL_METRICS_EXPORTER".into(), "prometheus".into()),
        ("OTEL_TRACES_EXPORTER".into(), "none".into()),
        ("OTEL_LOGS_EXPORTER".into(), "none".into()),
        ("PIPETEL_PROMETHEUS_HOST".into(), "127.0.0.1".into()),
        ("PIPETEL_PROMETHEUS_PORT".into(), "0".into()),
        ("PIPETEL_GPU".into(), "off".into()),
    ];
    if let Some(value) = switch {
        env.push(("PIPETEL_PROCESS_METRICS".into(), value.into()));
    }
    let run = run_child("child_scrapes_its_endpoint", &env, Duration::from_secs(60));
    assert!(run.success, "{}\n{}", run.stdout, run.stderr);
    let at = run.stdout.find(BEGIN).unwrap_or_else(|| panic!("no scrape printed:\n{}", run.stdout));
    run.stdout[at + BEGIN.len()..].to_string()
}

/// The value of the one sample of `name` (its only labels the scope's).
fn sample(text: &str, name: &str) -> f64 {
    labelled(text, name, "otel_scope_name=\"pipetel\"")
}

/// The first sample of `name` whose labels include `label`.
fn labelled(text: &str, name: &str, label: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .unwrap_or_else(|| panic!("no {name} with {label} in:\n{text}"));
    line.rsplit_once("} ")
        .and_then(|(_, v)| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no value in {line}"))
}

#[test]
fn process_metrics_are_on_the_pull_endpoint_unless_switched_off() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let on = scrape(None);
    let user = labelled(&on, "process_cpu_time_seconds_total", "cpu_mode=\"user\"");
    let system = labelled(&on, "process_cpu_time_seconds_total", "cpu_mode=\"system\"");
    assert!(user + system >= 0.3, "300 ms of CPU used shows as CPU time: user {user}, system {system}");
    let utilization = labelled(&on, "process_cpu_utilization_ratio", "cpu_mode=\"user\"");
    assert!((0.0..=1.0).contains(&utilization), "utilization {utilization}");
    assert!(utilization > 0.0, "the busy loop since init shows as utilization");
    let resident = sample(&on, "process_memory_usage_bytes");
    let virtual_bytes = sample(&on, "process_memory_virtual_bytes");
    assert!(resident > 1e6 && virtual_bytes >= resident, "resident {resident}, virtual {virtual_bytes}");
    assert!(sample(&on, "process_threads") >= 3.0, "the main thread and the two waiting ones");
    assert!(sample(&on, "process_open_file_descriptors") >= 3.0, "stdin, stdout, stderr");
    let voluntary = labelled(&on, "process_context_switches_total", "process_context_switch_type=\"voluntary\"");
    let involuntary = labelled(&on, "process_context_switches_total", "process_context_switch_type=\"involuntary\"");
    assert!(voluntary >= 1.0 && involuntary >= 0.0, "voluntary {voluntary}, involuntary {involuntary}");
    assert!(on.contains("# TYPE process_cpu_time_seconds_total counter"), "{on}");
    assert!(on.contains("# TYPE process_memory_usage_bytes gauge"), "{on}");

    let off = scrape(Some("false"));
    let left: Vec<&str> = off.lines().filter(|l| l.starts_with("process_") || l.contains(" process_")).collect();
    assert!(left.is_empty(), "PIPETEL_PROCESS_METRICS=false leaves no process metric: {left:?}");
}
