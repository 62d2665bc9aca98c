//! The profiler against real shards: each sample carries the stage, shard and phase its thread
//! ran. One test per process: the profiler is process-wide.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use pipetel_core::pipeline::stage;
use pipetel_rows::profile::{read_profiles, ProfileLine};

/// Work that takes about `rounds` × 1 ms of CPU here; its own name, never inlined.
#[inline(never)]
fn spin_alpha(rounds: u64) -> u64 {
    spin(rounds)
}

#[inline(never)]
fn spin_beta(rounds: u64) -> u64 {
    spin(rounds)
}

#[inline(never)]
fn spin_left(rounds: u64) -> u64 {
    spin(rounds)
}

#[inline(never)]
fn spin_right(rounds: u64) -> u64 {
    spin(rounds)
}

#[inline(always)]
fn spin(rounds: u64) -> u64 {
    let mut x = 1u64;
    for i in 0..rounds * 300_000 {
        x = black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
    }
    x
}

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pipetel-profile-labels-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

fn samples(lines: &[ProfileLine], keep: impl Fn(&ProfileLine) -> bool) -> u64 {
    lines.iter().filter(|l| keep(l)).map(|l| l.samples).sum()
}

fn has(line: &ProfileLine, function: &str) -> bool {
    line.stack.iter().any(|f| f.ends_with(function))
}

fn leaf_is(line: &ProfileLine, function: &str) -> bool {
    line.stack.last().is_some_and(|f| f.ends_with(function))
}

#[test]
fn samples_carry_the_stage_shard_and_phase_their_thread_ran() {
    let dir = scratch();
    let store = dir.join("labels.stacks");
    let settings = pipetel_profile::Settings {
        hz: 250,
        store: Some(store.clone()),
        host: "test-host".into(),
        ..Default::default()
    };
    let profiler = pipetel_profile::start(settings, None).expect("the profiler starts");

    // Two stages at once, each shard on its own thread, spinning in a function of its own.
    let alpha = stage("alpha").execution_id("run-1").shards(1).start();
    let beta = stage("beta").execution_id("run-1").shards(1).start();
    std::thread::scope(|s| {
        s.spawn(|| {
            let shard = alpha.shard(0).start();
            black_box(spin_alpha(800));
            shard.finish();
        });
        s.spawn(|| {
            let shard = beta.shard(0).start();
            black_box(spin_beta(800));
            shard.finish();
        });
    });
    alpha.finish();
    beta.finish();

    // A planted 50/50 workload: the same work in two phases.
    let gamma = stage("gamma").execution_id("run-1").shards(1).start();
    std::thread::scope(|s| {
        s.spawn(|| {
            let shard = gamma.shard(3).start();
            for _ in 0..8 {
                {
                    let _p = shard.phase("left");
                    black_box(spin_left(100));
                }
                {
                    let _p = shard.phase("right");
                    black_box(spin_right(100));
                }
            }
            shard.finish();
        });
    });
    gamma.finish();
    std::thread::sleep(Duration::from_millis(50));
    let dropped = profiler.dropped();
    drop(profiler);

    let read = read_profiles(&store).expect("the store reads back");
    assert_eq!(read.skipped, 0, "every line parses");
    let lines = read.lines;
    let of = |stage: &'static str| move |l: &ProfileLine| l.stage.as_deref() == Some(stage);

    // The spinning function carries most of its stage's samples, and none of the other's.
    for (name, own, other) in [("alpha", "spin_alpha", "spin_beta"), ("beta", "spin_beta", "spin_alpha")] {
        let total = samples(&lines, of(name));
        let own_leaf = samples(&lines, |l| of(name)(l) && (leaf_is(l, own) || has(l, own)));
        assert!(total >= 50, "stage {name}: {total} samples (dropped {dropped})");
        assert!(own_leaf * 10 >= total * 8, "stage {name}: {own} in {own_leaf} of {total} samples");
        assert_eq!(samples(&lines, |l| of(name)(l) && has(l, other)), 0, "{other} never in stage {name}");
        assert!(lines
            .iter()
            .filter(|l| of(name)(l))
            .all(|l| l.shard == Some(0) && l.execution.as_deref() == Some("run-1")));
    }

    // Phases split the samples as they split the work: 50/50 within 10 %.
    let left = samples(&lines, |l| of("gamma")(l) && l.phase.as_deref() == Some("left"));
    let right = samples(&lines, |l| of("gamma")(l) && l.phase.as_deref() == Some("right"));
    assert!(left + right >= 100, "gamma: {left} + {right} samples");
    let share = left as f64 / (left + right) as f64;
    eprintln!("gamma: left {left}, right {right} samples ({share:.3}); {} lines, dropped {dropped}", lines.len());
    assert!((0.4..=0.6).contains(&share), "left {left}, right {right}: share {share:.3}");
    // And each phase's samples sit in its own function.
    assert_eq!(samples(&lines, |l| l.phase.as_deref() == Some("left") && has(l, "spin_right")), 0);
    assert_eq!(samples(&lines, |l| l.phase.as_deref() == Some("right") && has(l, "spin_left")), 0);
    assert!(lines.iter().filter(|l| of("gamma")(l)).all(|l| l.shard == Some(3)));

    // Every line names the host, the process, the language and the period.
    assert!(lines.iter().all(|l| l.host == "test-host" && l.pid == std::process::id() && l.language == "rust"));
    assert!(lines.iter().all(|l| l.period_ns == 4_000_000));
    if std::env::var_os("PIPETEL_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
