//! The `custom_exporter` example plugs exporters written in the program into `init_with` in
//! place of the built-in ones: each prints what it was handed, and what it printed is the run's
//! spans, log records (the application's event and the stage row) and stage metrics.

use std::time::Duration;

use crate::support::{example_command, Process};

#[test]
fn the_plugged_exporters_print_the_runs_spans_logs_and_metrics() {
    let mut cmd = example_command("custom_exporter");
    cmd.args(["--shards", "3", "--items", "100"]);
    let (code, out) = Process::spawn("custom_exporter", cmd).wait(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{out}");
    for shard in 0..3 {
        assert!(out.contains(&format!("span shard {shard} of tokenize")), "shard {shard}'s span:\n{out}");
    }
    assert!(out.contains("span stage tokenize"), "the stage's span:\n{out}");
    assert!(out.contains("stage tokenize finished"), "the application's event as a log record:\n{out}");
    assert!(out.contains("metric pipeline.stage.items 300"), "the stage's items:\n{out}");
    assert!(out.contains("metric pipeline.stage.bytes 19200"), "the stage's bytes:\n{out}");
}
