//! The docs' tables stay true: every variable pipetel reads has a row in the configuration
//! reference, every stage and worker metric a row under the Prometheus name it is exported as.

/// The user documentation as one text: README.md, then the book's pages (`docs/src/*.md`).
fn docs_text() -> String {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut pages: Vec<std::path::PathBuf> = std::fs::read_dir(format!("{root}/docs/src"))
        .expect("docs/src")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    pages.insert(0, format!("{root}/README.md").into());
    pages
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_environment_variable_has_a_reference_row() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/src/configuration.md"))
        .expect("docs/src/configuration.md");
    for var in pipetel::config::ENV_VARS {
        assert!(readme.contains(&format!("| `{var}` |")), "docs/src/configuration.md has no table row for {var}");
    }
}

#[test]
fn every_stage_and_worker_metric_has_a_docs_row() {
    let readme = docs_text();
    for (name, unit, _) in pipetel::pipeline::METRICS {
        assert!(
            readme.contains(&format!("| `{name}` | `{unit}` |")),
            "the docs have no metric row for {name} ({unit})"
        );
    }
}

#[test]
fn the_documented_prometheus_names_are_the_exported_ones() {
    let readme = docs_text();
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
            "the docs say {name} is exported as {prom}, not found in:\n{text}"
        );
    }
}
