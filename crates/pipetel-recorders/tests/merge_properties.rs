//! Merge is associative, commutative, has the empty snapshot as identity, and merging what
//! several processes recorded equals recording everything in one.

use pipetel_recorders::{merge, Counter, Family, Gauge, Histogram, MetricSnapshot};
use proptest::prelude::*;

/// One recording: label values drawn from a small alphabet (so sources share series) and an
/// integer-valued amount (so float sums are exact and equality is exact).
type Op = (u8, u8, u16);

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec((0u8..4, 0u8..3, 0u16..1000), 0..40)
}

fn labels(op: &Op) -> [String; 2] {
    [format!("s{}", op.0), format!("d{}", op.1)]
}

fn counter_family() -> Family {
    Family::counter("items", "", "{item}", &["src", "dst"]).expect("valid family")
}

fn histogram_family() -> Family {
    Family::histogram("lat", "", "s", &["src", "dst"], &[10.0, 100.0, 500.0]).expect("valid family")
}

fn gauge_family() -> Family {
    Family::gauge("queue", "", "", &["src", "dst"]).expect("valid family")
}

/// Feeds every op to `record` as (label values, amount).
fn replay(ops: &[Op], mut record: impl FnMut(&[&str], f64)) {
    for op in ops {
        let l = labels(op);
        record(&[&l[0], &l[1]], f64::from(op.2));
    }
}

fn record_counter(ops: &[Op]) -> MetricSnapshot {
    let c = Counter::new(counter_family()).expect("counter");
    replay(ops, |l, v| c.add(l, v).expect("add"));
    c.snapshot()
}

fn record_histogram(ops: &[Op]) -> MetricSnapshot {
    let h = Histogram::new(histogram_family()).expect("histogram");
    replay(ops, |l, v| h.observe(l, v).expect("observe"));
    h.snapshot()
}

fn record_gauge(ops: &[Op]) -> MetricSnapshot {
    let g = Gauge::new(gauge_family()).expect("gauge");
    replay(ops, |l, v| g.add(l, v - 500.0).expect("add"));
    g.snapshot()
}

fn check_algebra(
    family: &Family,
    record: fn(&[Op]) -> MetricSnapshot,
    a: &[Op],
    b: &[Op],
    c: &[Op],
) -> Result<(), TestCaseError> {
    let (sa, sb, sc) = (record(a), record(b), record(c));
    let m = |s: &[MetricSnapshot]| merge(family, s).expect("compatible families");
    let empty = MetricSnapshot::empty(family.clone());

    // Associative.
    let left = m(&[m(&[sa.clone(), sb.clone()]), sc.clone()]);
    let right = m(&[sa.clone(), m(&[sb.clone(), sc.clone()])]);
    prop_assert_eq!(&left, &right);
    // Commutative.
    prop_assert_eq!(m(&[sa.clone(), sb.clone()]), m(&[sb.clone(), sa.clone()]));
    // Identity.
    prop_assert_eq!(m(&[sa.clone(), empty.clone()]), sa.clone());
    prop_assert_eq!(m(&[empty.clone(), sa.clone()]), sa.clone());
    prop_assert_eq!(m(&[]), empty);
    // Equal to recording everything in one process.
    let all: Vec<Op> = a.iter().chain(b).chain(c).copied().collect();
    prop_assert_eq!(&m(&[sa, sb, sc]), &record(&all));
    prop_assert_eq!(left, record(&all));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn counter_merge_algebra(a in ops(), b in ops(), c in ops()) {
        check_algebra(&counter_family(), record_counter, &a, &b, &c)?;
    }

    #[test]
    fn histogram_merge_algebra(a in ops(), b in ops(), c in ops()) {
        check_algebra(&histogram_family(), record_histogram, &a, &b, &c)?;
    }

    #[test]
    fn gauge_merge_algebra(a in ops(), b in ops(), c in ops()) {
        check_algebra(&gauge_family(), record_gauge, &a, &b, &c)?;
    }

    #[test]
    fn merged_histograms_stay_cumulative(a in ops(), b in ops()) {
        let f = histogram_family();
        let m = merge(&f, &[record_histogram(&a), record_histogram(&b)]).expect("merge");
        for s in m.series() {
            prop_assert!(s.bucket_counts.windows(2).all(|w| w[0] <= w[1]));
        }
        let total: u64 = m.series().map(|s| s.count()).sum();
        prop_assert_eq!(total, (a.len() + b.len()) as u64);
    }

    #[test]
    fn growth_is_never_a_reset_but_a_restart_is(a in ops(), b in ops()) {
        let before = record_counter(&a);
        let all: Vec<Op> = a.iter().chain(&b).copied().collect();
        prop_assert!(!record_counter(&all).is_reset_from(&before));
        // A restarted source that recorded only part of it again looks like a reset, as soon
        // as anything it had before is missing or smaller.
        let restarted = record_counter(&b);
        let shrank = before.series().any(|s| {
            restarted.get(s.labels).is_none_or(|r| r.value < s.value)
        });
        prop_assert_eq!(restarted.is_reset_from(&before), shrank);
    }
}
