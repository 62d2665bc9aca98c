//! The types' auto traits say what the docs say: recorders move between threads but are not
//! shared; snapshots and transport handles are shared freely.

use pipetel_recorders::{
    Catalog, Counter, EdgeReader, EdgeTransfers, Envelope, Family, Gauge, Histogram, MetricSnapshot, Receiver, Sender,
};

fn send<T: Send>() {}
fn send_sync<T: Send + Sync>() {}

#[test]
fn recorders_are_send_snapshots_are_send_and_sync() {
    send::<Counter>();
    send::<Gauge>();
    send::<Histogram>();
    send::<EdgeTransfers>();
    send::<Sender>();
    send::<Receiver>();
    send_sync::<Family>();
    send_sync::<Catalog>();
    send_sync::<MetricSnapshot>();
    send_sync::<Envelope>();
    send_sync::<EdgeReader>();
}

#[test]
fn per_thread_recorders_merge_to_the_total() {
    let family = Family::counter("items", "", "", &["worker"]).expect("valid");
    let snapshots: Vec<MetricSnapshot> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let family = family.clone();
                s.spawn(move || {
                    let c = Counter::new(family).expect("counter");
                    for i in 0..1000 {
                        let label = if i % 2 == 0 { "even" } else { "odd" };
                        c.inc(&[label]).expect("inc");
                    }
                    c.add(&[&format!("t{t}")], 1.0).expect("add");
                    c.snapshot()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    let total = pipetel_recorders::merge(&family, &snapshots).expect("merge");
    assert_eq!(total.get(&["even"]).map(|s| s.value), Some(2000.0));
    assert_eq!(total.get(&["odd"]).map(|s| s.value), Some(2000.0));
    assert_eq!(total.len(), 6);
}
