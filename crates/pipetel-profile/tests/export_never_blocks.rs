//! An exporter that does not answer (a collector gone silent) holds up no shard's or stage's
//! end: the export runs on a thread of its own. One test per process: the profiler is
//! process-wide.

use std::hint::black_box;
use std::sync::mpsc;
use std::time::Duration;

use pipetel_core::pipeline::stage;
use pipetel_rows::profile::ProfileLine;

#[inline(never)]
fn spin_for_export(rounds: u64) -> u64 {
    let mut x = 1u64;
    for i in 0..rounds * 300_000 {
        x = black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
    }
    x
}

#[test]
fn a_stuck_exporter_holds_up_no_shard_or_stage_end_and_gets_every_batch_once_it_answers() {
    // The exporter blocks until the test lets it go, as a request to a silent collector does
    // until its timeout; what it got is reported on `got`.
    let (release, released) = mpsc::channel::<()>();
    let (got, batches) = mpsc::channel::<Vec<ProfileLine>>();
    let mut stuck = true;
    let export: pipetel_profile::Export = Box::new(move |lines| {
        if stuck {
            let _ = released.recv();
            stuck = false;
        }
        let _ = got.send(lines.to_vec());
    });
    let settings = pipetel_profile::Settings { hz: 250, store: None, ..Default::default() };
    let profiler = pipetel_profile::start(settings, Some(export)).expect("the profiler starts");

    // Three stages end one after the other, each flushing a batch to the stuck exporter.
    let (done, ended) = mpsc::channel::<u64>();
    let work = std::thread::spawn(move || {
        for name in ["first", "second", "third"] {
            let s = stage(name).shards(1).start();
            let shard = s.shard(0).start();
            black_box(spin_for_export(150));
            shard.finish();
            s.finish();
            let _ = done.send(1);
        }
    });
    for n in 0..3 {
        // Generous: the work is 150 ms of CPU per stage; a stage end waiting for the exporter
        // would wait for ever, since the exporter is released only after all three ended.
        if let Err(e) = ended.recv_timeout(Duration::from_secs(60)) {
            // Let the exporter go, so the failure is reported rather than the test hanging.
            let _ = release.send(());
            panic!("stage {n} did not end while the exporter was stuck: {e}");
        }
    }
    work.join().expect("the stages ran");
    assert!(batches.try_recv().is_err(), "the exporter is still stuck in its first batch");

    release.send(()).expect("the exporter waits");
    drop(profiler);
    let got: Vec<ProfileLine> = batches.try_iter().flatten().collect();
    for name in ["first", "second", "third"] {
        let samples: u64 = got.iter().filter(|l| l.stage.as_deref() == Some(name)).map(|l| l.samples).sum();
        assert!(samples > 0, "stage {name}'s samples reached the exporter once it answered: {samples}");
    }
}
