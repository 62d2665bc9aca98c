//! A trace-id-ratio sampler keeps or drops whole traces: the collector receives some of the
//! quickstart's `run_batch` traces, each with both children, and no span whose parent it did
//! not receive (children of dropped spans are held back at creation, see `pipetel::sampling`).

use std::collections::HashSet;
use std::time::Duration;

use crate::support::{blocks, example_pushing, turn_if_peers, Block, Collector, Peer, Process};

#[test]
fn ratio_sampling_keeps_or_drops_whole_traces() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Rotel]) else { return };
    const BATCHES: usize = 40;
    let mut collector = Collector::start();
    let mut cmd = example_pushing("quickstart", &collector.endpoint("grpc"), "grpc");
    cmd.env("OTEL_TRACES_SAMPLER", "traceidratio").env("OTEL_TRACES_SAMPLER_ARG", "0.5").args([
        "--batches",
        &BATCHES.to_string(),
        "--interval-ms",
        "5",
    ]);
    let (code, out) = Process::spawn("quickstart", cmd).wait(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("Ok(())"), "{out}");
    collector.wait_for_output("Name: quickstart.items", Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(500));
    collector.stop();
    let out = collector.output();

    let spans = blocks(&out, "Span");
    let field = |s: &Block, k: &str| s.get(k).unwrap_or_default().to_string();
    let roots: Vec<_> = spans.iter().filter(|s| s.get("Name") == Some("run_batch")).collect();
    // Binomial(40, 0.5): outside 5..=35 with probability below 1e-6.
    assert!((5..=35).contains(&roots.len()), "{} of {BATCHES} traces kept:\n{out}", roots.len());
    let ids: HashSet<String> = spans.iter().map(|s| field(s, "ID")).collect();
    for s in &spans {
        let parent = field(s, "Parent ID");
        assert!(parent.is_empty() || ids.contains(&parent), "orphan span {s:?}");
    }
    for root in &roots {
        let id = field(root, "ID");
        let mut children: Vec<String> =
            spans.iter().filter(|s| s.get("Parent ID") == Some(id.as_str())).map(|s| field(s, "Name")).collect();
        children.sort();
        assert_eq!(children, ["index", "tokenize"], "children of kept trace {id}");
    }
    assert_eq!(spans.len(), roots.len() * 3, "only whole traces arrive:\n{out}");
}
