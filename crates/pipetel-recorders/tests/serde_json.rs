//! JSON through serde round-trips envelopes and validates what it reads.
#![cfg(feature = "serde")]

use pipetel_recorders::{Counter, EdgeTransfers, Envelope, Family, Histogram};

fn envelope() -> Envelope {
    let c = Counter::new(Family::counter("items", "Items", "{item}", &["stage"]).expect("valid")).expect("counter");
    c.add(&["a"], 3.0).expect("add");
    c.inc(&["b"]).expect("inc");
    let h = Histogram::new(Family::histogram("lat", "", "s", &[], &[0.5, 1.0]).expect("valid")).expect("histogram");
    h.observe(&[], 0.7).expect("observe");
    let mut e = EdgeTransfers::new("tcp");
    let (a, b) = (e.endpoint("a"), e.endpoint("b"));
    e.record(a, b, 1024, 2, 0.25);
    let mut snapshots = vec![c.snapshot(), h.snapshot()];
    snapshots.extend(e.snapshot());
    Envelope::new("worker-7", 42, snapshots)
}

#[test]
fn json_round_trips() {
    let e = envelope();
    let json = serde_json::to_string(&e).expect("serialize");
    assert!(json.contains("\"kind\":\"histogram\""), "{json}");
    assert!(json.contains("\"bucket_counts\":[0,1,1]"), "{json}");
    let back: Envelope = serde_json::from_str(&json).expect("deserialize");
    assert_eq!(back, e);
}

#[test]
fn json_is_validated() {
    let bad_order = r#"{"source":"w","sequence":1,"snapshots":[{"family":{"name":"c","kind":"counter","label_names":["l"]},"label_values":["b","a"],"values":[1.0,2.0]}]}"#;
    let err = serde_json::from_str::<Envelope>(bad_order).expect_err("unordered rows");
    assert!(err.to_string().contains("out of order"), "{err}");
    let bad_family = r#"{"name":"9c","kind":"counter","label_names":[]}"#;
    let err = serde_json::from_str::<Family>(bad_family).expect_err("bad name");
    assert!(err.to_string().contains("9c"), "{err}");
}
