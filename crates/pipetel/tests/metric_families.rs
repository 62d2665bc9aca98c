//! The metric family tables stay true: the checked-in reference is the one they generate, and
//! the pull endpoint serves each family under the Prometheus name the table gives, with no
//! attribute the table does not declare.

use std::collections::BTreeSet;

use pipetel::families;

#[test]
#[cfg_attr(not(feature = "gpu"), ignore = "the reference lists the GPU families, which need the gpu feature")]
fn the_checked_in_metrics_reference_is_the_generated_one() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/src/metrics-reference.md");
    let generated = families::reference_with(vec![pipetel::gpu::reference_table()]);
    if std::env::var_os("PIPETEL_BLESS").is_some() {
        std::fs::write(path, &generated).expect("write the reference");
    }
    let checked_in = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "docs/src/metrics-reference.md is stale: run `PIPETEL_BLESS=1 cargo test -p pipetel --all-features --test metric_families`"
    );
}

#[test]
fn every_table_names_each_family_once() {
    let mut seen = BTreeSet::new();
    #[cfg_attr(not(feature = "gpu"), allow(unused_mut))]
    let mut tables = families::tables();
    #[cfg(feature = "gpu")]
    tables.push(pipetel::gpu::reference_table());
    for table in tables {
        for f in &table.families {
            assert!(seen.insert(f.name), "{} is declared twice", f.name);
            assert!(!f.description.is_empty(), "{} has no description", f.name);
        }
    }
}

/// The label keys of `family`'s sample lines on `page`.
#[cfg(feature = "prometheus")]
fn label_keys(page: &str, family: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for line in page.lines().filter(|l| !l.starts_with('#')) {
        let Some((name, rest)) = line.split_once('{') else { continue };
        let base = name.trim_end_matches("_bucket").trim_end_matches("_sum").trim_end_matches("_count");
        if base != family && name != family {
            continue;
        }
        let labels = rest.rsplit_once('}').map_or("", |(l, _)| l);
        for pair in labels.split("\",") {
            if let Some((k, _)) = pair.split_once('=') {
                keys.insert(k.trim_start_matches(',').to_string());
            }
        }
    }
    keys
}

#[test]
#[cfg(feature = "prometheus")]
fn the_page_serves_each_pipeline_and_service_family_under_its_tables_name_and_attributes() {
    // One `init` per process: the pipeline and the service families are checked on its page.
    let telemetry =
        pipetel::init(pipetel::Config::default().with_prometheus_port(0).with_console_log(false)).expect("init");
    let service = pipetel::ServiceMetrics::new("famsvc").expect("service metrics");
    let task = service.task_created();
    task.started();
    task.completed();
    let stage = pipetel::stage("families").shards(2).start();
    let shard = stage.shard(0).start();
    shard.record(1, 1);
    shard.add(&pipetel::pipeline::CounterKey::new("families/items").expect("key"), 1u64);
    // Worker series exist for running shards (`PIPETEL_SHARD_METRICS=running`, the default):
    // shard 1 runs through the first page, sampled twice for its CPU utilization.
    let running = stage.shard(1).start();
    let _phase = running.phase("decode");
    // A GPU reading, so the stage's GPU families are served (without a GPU there are none).
    pipetel::pipeline::gpu::set_gpu_reader(Some(Box::new(|| {
        Some(pipetel::pipeline::gpu::GpuUse {
            busy: 0.5,
            sm_active: Some(0.4),
            tensor_active: Some(0.2),
            memory_bytes: 1 << 30,
            energy_joules: 10.0,
        })
    })));
    pipetel::testing::sample_now();
    std::thread::sleep(std::time::Duration::from_millis(20));
    pipetel::testing::sample_now();
    shard.finish();
    // Shard 0 again: a retry.
    stage.shard(0).start().finish();
    let first = telemetry.prometheus_render().expect("render").render();
    drop(_phase);
    running.finish();
    stage.finish();
    let page = format!("{first}{}", telemetry.prometheus_render().expect("render").render());
    for f in families::pipeline::ALL {
        let prom = f.prometheus_name();
        assert!(page.contains(&format!("# TYPE {prom} ")), "{} is not served as {prom}:\n{page}", f.name);
        let declared: BTreeSet<String> = f.attributes.iter().map(|a| a.replace('.', "_")).collect();
        for key in label_keys(&page, &prom) {
            assert!(
                declared.contains(&key) || key.starts_with("otel_scope_") || key == "le",
                "{} ({prom}) has label {key}, which its table does not declare ({declared:?})",
                f.name
            );
        }
    }
    let retries = page
        .lines()
        .find(|l| l.starts_with("pipeline_stage_retries_total{") && l.contains("\"families\""))
        .unwrap_or_else(|| panic!("no retries series:\n{page}"));
    assert!(retries.ends_with(" 1"), "one retry of shard 0: {retries}");
    for f in families::service::ALL {
        let prom = f.prometheus_name_under("famsvc");
        assert!(page.contains(&format!("# TYPE {prom} ")), "{} is not served as {prom}:\n{page}", f.name);
    }
}
