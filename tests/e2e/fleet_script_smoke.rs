//! `scripts/fleet --smoke`: two nodes (an agent each), each with an owner process of three stages
//! whose shards run in the two workers of the other node (the remote-shard API, reports through
//! files), two gateways running `gateway-stores.yaml` behind the agents' loadbalancing exporters,
//! and the three stores. The script itself checks what it prints (rows, data points and spans
//! sent vs stored, stage totals in VictoriaMetrics and in the rows store against the owners'
//! totals and their remote workers' sums) and exits non-zero on any loss; asserted here: it
//! succeeded, every line of figures is there with nothing lost, and none of the agents' sends to
//! the gateways ran out of time (counted in the agents' logs: with the loadbalancing exporter's
//! own 5 s default deadline, a send waiting on the gateway's remote write was cut and sent again
//! 90–100 times per run). The script runs as from a clean clone: without the `*_BIN` variables
//! of the examples, so it builds them itself (`cargo build -p pipetel-examples`).

use std::process::Command;

use crate::support::otelcol::otelcol_binary;
use crate::support::stores::store_binaries;
use crate::support::{turn, workspace_root};

#[test]
fn a_smoke_fleet_loses_nothing() {
    let _turn = turn(module_path!());
    let Some(stores) = store_binaries(module_path!()) else { return };
    let out = Command::new(workspace_root().join("scripts/fleet"))
        .arg("--smoke")
        .env("PIPETEL_OTELCOL_BIN", otelcol_binary())
        .env("PIPETEL_VICTORIA_METRICS_BIN", &stores.victoria_metrics)
        .env("PIPETEL_VICTORIA_LOGS_BIN", &stores.victoria_logs)
        .env("PIPETEL_JAEGER_BIN", &stores.jaeger)
        // The examples as a clean clone gets them: the script builds them itself.
        .env_remove("PIPETEL_PIPELINE_BIN")
        .env_remove("PIPETEL_REMOTE_SHARDS_BIN")
        .output()
        .expect("run scripts/fleet");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "scripts/fleet --smoke failed:\n{text}");
    assert!(
        text.contains("fleet: building the examples: build --quiet --message-format=json -p pipetel-examples"),
        "the script built the examples itself:\n{text}"
    );
    for kind in ["rows:", "points:", "spans:"] {
        let line = text.lines().find(|l| l.starts_with(kind)).unwrap_or_else(|| panic!("no {kind} line:\n{text}"));
        assert!(line.contains(", lost 0"), "{line}\n{text}");
        let sent: u64 =
            line.split("sent ").nth(1).and_then(|r| r.split(',').next()).and_then(|n| n.parse().ok()).unwrap_or(0);
        assert!(sent > 0, "nothing sent: {line}");
    }
    let totals = text.lines().find(|l| l.starts_with("totals:")).unwrap_or_else(|| panic!("no totals line:\n{text}"));
    // Two owners of three stages each.
    assert!(totals.contains("6 of 6 stage totals equal"), "{totals}");
    let timeouts =
        text.lines().find(|l| l.starts_with("timeouts:")).unwrap_or_else(|| panic!("no timeouts line:\n{text}"));
    assert!(timeouts.contains("timed out 0 times"), "{timeouts}\n{text}");
    for line in ["rate:", "delay:", "cpu:"] {
        assert!(text.lines().any(|l| l.starts_with(line)), "no {line} line:\n{text}");
    }
}
