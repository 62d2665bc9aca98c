//! The README's configuration table stays true: every variable pipetel reads has a row.

#[test]
fn every_environment_variable_has_a_readme_row() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).expect("README.md");
    for var in pipetel::config::ENV_VARS {
        assert!(readme.contains(&format!("| `{var}` |")), "README has no table row for {var}");
    }
}

#[test]
fn every_stage_and_worker_metric_has_a_readme_row() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).expect("README.md");
    for (name, unit, _) in pipetel::pipeline::METRICS {
        assert!(readme.contains(&format!("| `{name}` | `{unit}` |")), "README has no metric row for {name} ({unit})");
    }
}

#[test]
fn the_readme_prometheus_names_are_the_exported_ones() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).expect("README.md");
    let telemetry =
        pipetel::init(pipetel::Config::default().with_prometheus_port(0).with_console_log(false)).expect("init");
    let stage = pipetel::stage("readme").shards(2).start();
    let shard = stage.shard(0).start();
    shard.record(1, 1);
    shard.add(&pipetel::pipeline::CounterKey::new("readme/items").expect("key"), 1u64);
    pipetel::pipeline::__sample_now();
    std::thread::sleep(std::time::Duration::from_millis(20));
    pipetel::pipeline::__sample_now();
    let running = stage.shard(1).start();
    shard.finish();
    let text = telemetry.prometheus_render().expect("render").render();
    running.finish();
    stage.finish();
    let text = format!("{text}{}", telemetry.prometheus_render().expect("render").render());
    for (name, _, _) in pipetel::pipeline::METRICS {
        let row = readme.lines().find(|l| l.starts_with(&format!("| `{name}` |"))).expect("row");
        let prom = row.split('|').nth(3).expect("prometheus column").trim().trim_matches('`');
        assert!(
            text.contains(&format!("# TYPE {prom} ")),
            "README says {name} is exported as {prom}, not found in:\n{text}"
        );
    }
}
