//! Exported totals equal recorded totals exactly: 8 threads × 1,000,000 records.

const THREADS: u32 = 8;
const RECORDS: u64 = 1_000_000;

fn value(text: &str, prefix: &str, needle: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.starts_with(prefix) && l.contains(needle))
        .unwrap_or_else(|| panic!("{prefix} {needle} missing:\n{text}"));
    line.rsplit(' ').next().and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("bad value in {line}"))
}

#[test]
fn eight_threads_times_a_million_records_export_exactly() {
    // Every shard keeps its worker series after it ended (by default only running shards have one).
    let config = pipetel::Config::default()
        .with_prometheus_port(0)
        .with_console_log(false)
        .with_shard_metrics(pipetel::config::ShardMetrics::All);
    let telemetry = pipetel::init(config).expect("init");
    let stage = pipetel::stage("exact").execution_id("x").shards(THREADS).start();
    std::thread::scope(|s| {
        for i in 0..THREADS {
            let stage = &stage;
            s.spawn(move || {
                let shard = stage.shard(i).start();
                for _ in 0..RECORDS {
                    shard.record(1, 3);
                }
                shard.finish();
            });
        }
    });
    let row = stage.finish();
    assert_eq!((row.items, row.bytes), (u64::from(THREADS) * RECORDS, 3 * u64::from(THREADS) * RECORDS));
    let text = telemetry.prometheus_render().expect("render").render();
    assert_eq!(value(&text, "pipeline_stage_items_total{", "exact"), u64::from(THREADS) * RECORDS);
    assert_eq!(value(&text, "pipeline_stage_bytes_total{", "exact"), 3 * u64::from(THREADS) * RECORDS);
    for i in 0..THREADS {
        assert_eq!(value(&text, "pipeline_worker_items_total{", &format!("pipeline_shard_index=\"{i}\"")), RECORDS);
    }
}
