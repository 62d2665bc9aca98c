//! Four processes of one service write rows through the real pipeline into one default store at
//! once, with a rotation size of a few rows: `pipetel rows` reads back every row each wrote,
//! none torn, none lost, none twice. The store is private: its directory 0700, its files 0600.
//! (Before rotation was locked, processes sharing a `service.name` each rotated the shared file
//! on their own byte count and renamed each other's files away: rows went missing.)

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

#[path = "../../pipetel-rows/tests/support/together.rs"]
mod together;

use together::{run_together, wait_for_go};

const CHILD: &str = "PIPETEL_CLI_TEST_MANY_CHILD";
const GO: &str = "PIPETEL_CLI_TEST_MANY_GO";
const TEST: &str = "four_processes_of_one_service_share_a_store_losing_nothing";
const SERVICE: &str = "many";
const PROCESSES: usize = 4;
const STAGES: usize = 60;
const SHARDS: u32 = 3;

/// The child: waits for the go file (so the four overlap), then runs its stages through the real
/// pipeline, configured from the environment like any service.
fn run_stages(index: usize, go: &Path) {
    wait_for_go(go, Duration::from_secs(60));
    let _telemetry = pipetel::init(
        pipetel::Config::from_env()
            .expect("config")
            .with_prometheus_port(0)
            .with_prometheus_host("127.0.0.1")
            .with_console_log(false),
    )
    .expect("init");
    for s in 0..STAGES {
        let stage =
            pipetel::stage(format!("p{index}-s{s}")).execution_id(format!("run-{index}")).shards(SHARDS).start();
        for i in 0..SHARDS {
            let shard = stage.shard(i).start();
            shard.record(u64::from(i) + 1, 10);
            shard.finish();
        }
        stage.finish();
    }
}

#[test]
fn four_processes_of_one_service_share_a_store_losing_nothing() {
    if let Ok(index) = std::env::var(CHILD) {
        let go = std::env::var_os(GO).expect("go file");
        run_stages(index.parse().expect("index"), Path::new(&go));
        return;
    }
    let base = std::env::temp_dir().join(format!("pipetel-cli-many-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).expect("base dir");
    // Created by the writers themselves.
    let dir = base.join("state").join("rows");
    let go = base.join("go");
    run_together(TEST, CHILD, PROCESSES, &go, |c| {
        c.env(GO, &go)
            .env("PIPETEL_ROWS_DIR", &dir)
            .env("OTEL_SERVICE_NAME", SERVICE)
            .env("PIPETEL_ROWS_MAX_BYTES", "4096")
            .env("PIPETEL_ROWS_KEEP", "1000")
            // No sample rows: the rows each process writes are exactly known.
            .env("PIPETEL_SAMPLE_INTERVAL", "1h")
            .env_remove("PIPETEL_ROWS_FILE")
            .env_remove("PIPETEL_CONFIG");
    });

    let out = Command::new(env!("CARGO_BIN_EXE_pipetel"))
        .args(["rows", "--json", "--service", SERVICE, "--dir"])
        .arg(&dir)
        .env_remove("PIPETEL_ROWS_FILE")
        .output()
        .expect("run pipetel");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.is_empty(), "no torn or malformed line: {stderr}");
    let mut seen: HashMap<(String, String, Option<u64>, String), usize> = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let row: serde_json::Value = serde_json::from_str(line).expect("a whole JSON row");
        let s = |k: &str| row[k].as_str().unwrap_or_default().to_string();
        *seen
            .entry((s("pipeline.stage.name"), s("event"), row["pipeline.shard.index"].as_u64(), s("pipeline.status")))
            .or_default() += 1;
    }
    let mut missing = Vec::new();
    for p in 0..PROCESSES {
        for s in 0..STAGES {
            let stage = format!("p{p}-s{s}");
            let mut expect = vec![(stage.clone(), "pipeline.stage".to_string(), None, "succeeded".to_string())];
            for i in 0..u64::from(SHARDS) {
                for status in ["start", "end"] {
                    expect.push((stage.clone(), "pipeline.worker".to_string(), Some(i), status.to_string()));
                }
            }
            missing.extend(expect.into_iter().filter(|k| seen.remove(k) != Some(1)));
        }
    }
    let rows = PROCESSES * STAGES * (1 + 2 * SHARDS as usize);
    assert!(
        missing.is_empty() && seen.is_empty(),
        "of {rows} rows, missing or repeated: {} (first {:?}); unexpected: {seen:?}",
        missing.len(),
        missing.first()
    );

    let files: Vec<_> = std::fs::read_dir(&dir).expect("list").map(|e| e.expect("entry").path()).collect();
    assert!(files.len() > 20, "the store rotated many times: {} files", files.len());
    assert_eq!(std::fs::metadata(&dir).expect("stat").mode() & 0o777, 0o700, "{}", dir.display());
    for f in &files {
        assert_eq!(std::fs::metadata(f).expect("stat").mode() & 0o777, 0o600, "{}", f.display());
    }
    let _ = std::fs::remove_dir_all(&base);
}
