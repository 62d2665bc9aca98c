//! Finished stages' series are dropped after the retention: 10,000 short stages leave the
//! exposition and the process's memory flat.

use std::time::Duration;

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    status.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()).unwrap_or(0) * 4096
}

#[test]
fn ten_thousand_short_stages_keep_memory_flat() {
    let telemetry = pipetel::init(
        pipetel::Config::default().with_prometheus_port(0).with_console_log(false).with_stage_retention(Duration::ZERO),
    )
    .expect("init");
    let render = telemetry.prometheus_render().expect("render");
    let mut sizes = Vec::new();
    let mut rss = Vec::new();
    for round in 0..10 {
        for i in 0..1_000 {
            // Ten stage names, each run many times: every run has its own execution id, whose
            // series must go once the run is past its retention.
            let stage =
                pipetel::stage(format!("short-{}", i % 10)).execution_id(format!("run-{round}-{i}")).shards(1).start();
            let shard = stage.shard(0).start();
            shard.record(1, 1);
            shard.finish();
            stage.finish();
        }
        sizes.push(render.render().len());
        rss.push(rss_bytes());
    }
    assert!(pipetel::testing::exported_stage_count() <= 1, "finished stages were not dropped");
    let (first, last) = (sizes[1], sizes[9]);
    // Per stage name (not per run) the page keeps the run and shard-duration histograms: ten names'
    // worth, well under this bound; every run's series would be megabytes.
    assert!(first < 128 * 1024, "finished runs are still exported: {first} bytes");
    assert!(last <= first + 1024, "the exposition grew from {first} to {last} bytes: {sizes:?}");
    if cfg!(target_os = "linux") {
        let growth = rss[9].saturating_sub(rss[1]);
        assert!(growth < 16 * 1024 * 1024, "memory grew by {growth} bytes over 9,000 stages: {rss:?}");
    }
}
