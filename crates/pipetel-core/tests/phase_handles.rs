//! A phase handle (`Shard::phase_handle`): its name looked up once, entered with a guard or
//! with two calls (`enter_unguarded` / `leave`, as a binding's `__enter__` / `__exit__` do), it
//! counts the shard's time exactly as `Shard::phase` does: nesting pauses the outer phase, and
//! once the shard ended it counts nothing.

use std::thread::sleep;
use std::time::Duration;

use pipetel_core::pipeline::phase::MAX_PHASES;
use pipetel_core::pipeline::PreviousPhase;

fn seconds(named: &[(String, f64)], name: &str) -> f64 {
    named.iter().find(|(n, _)| n == name).map_or(0.0, |(_, s)| *s)
}

#[test]
fn a_phase_handle_nests_with_guards_and_with_unguarded_blocks() {
    let stage = pipetel_core::stage("phase-handles").shards(1).start();
    let shard = stage.shard(0).start();
    let decode = shard.phase_handle("decode").expect("a valid name");
    let io = shard.phase_handle("io").expect("a valid name");
    {
        let _decode = decode.enter();
        assert_eq!(shard.current_phase().as_deref(), Some("decode"));
        sleep(Duration::from_millis(30));
        {
            let _io = shard.phase("io");
            assert_eq!(shard.current_phase().as_deref(), Some("io"));
            sleep(Duration::from_millis(20));
        }
        assert_eq!(shard.current_phase().as_deref(), Some("decode"));
    }
    assert_eq!(shard.current_phase(), None);

    // Two calls per block, the same handle re-entered inside another phase.
    let outer = io.enter_unguarded();
    let inner = decode.enter_unguarded();
    let again = io.enter_unguarded();
    assert_eq!(shard.current_phase().as_deref(), Some("io"));
    io.leave(again);
    assert_eq!(shard.current_phase().as_deref(), Some("decode"));
    sleep(Duration::from_millis(20));
    decode.leave(inner);
    assert_eq!(shard.current_phase().as_deref(), Some("io"));
    io.leave(outer);
    assert_eq!(shard.current_phase(), None);

    let (named, _) = shard.phase_seconds();
    assert!((0.050..0.080).contains(&seconds(&named, "decode")), "{named:?}");
    assert!((0.020..0.040).contains(&seconds(&named, "io")), "{named:?}");
    let _row = shard.finish();
    stage.finish();
}

#[test]
fn a_phase_handle_of_an_ended_shard_counts_nothing() {
    let stage = pipetel_core::stage("phase-handle-ended").shards(1).start();
    let shard = stage.shard(0).start();
    let wait = shard.phase_handle("wait.input").expect("a valid name");
    {
        let _wait = wait.enter();
        sleep(Duration::from_millis(20));
    }
    let _row = shard.finish();
    let before = seconds(&stage.answers().phases, "wait.input");
    assert!(before >= 0.020, "{before}");
    {
        let _wait = wait.enter();
        let previous = wait.enter_unguarded();
        sleep(Duration::from_millis(30));
        wait.leave(previous);
    }
    assert_eq!(seconds(&stage.answers().phases, "wait.input"), before);
    stage.finish();
}

#[test]
fn a_phase_handle_refuses_a_bad_name_and_previous_phases_stay_in_range() {
    let stage = pipetel_core::stage("phase-handle-names").shards(1).start();
    let shard = stage.shard(0).start();
    for bad in ["", "a b", "unphased", &"x".repeat(65)] {
        let err = shard.phase_handle(bad).expect_err(bad);
        assert_eq!(err.name, bad);
    }
    let last = u8::try_from(MAX_PHASES).expect("few phases");
    assert_eq!(PreviousPhase::from_bits(last).map(PreviousPhase::to_bits), Some(last));
    assert_eq!(PreviousPhase::from_bits(last + 1), None);
    let previous = shard.phase_handle("io").expect("a valid name").enter_unguarded();
    assert_eq!(previous.to_bits(), 0, "the shard was outside any phase");
    let _row = shard.finish();
    stage.finish();
}
