//! Envelopes of about 1 MiB built to make a decoder slow: a family announcing far more label
//! names than allowed, and many families at the limit. Each is refused with the error naming the
//! family and the count, or decodes to exactly what was encoded. Decoding is linear in the size
//! of the input; the time of each case is printed (not asserted: machines differ), and
//! docs/src/reliability.md records it:
//!
//! ```sh
//! cargo test --release -p pipetel-recorders --test hostile_envelopes -- --nocapture
//! ```

use std::time::Instant;

use pipetel_recorders::codec::{self, MAGIC, VERSION};
use pipetel_recorders::{DecodeError, Envelope, FamilyError, MAX_LABEL_NAMES};

const MIB: usize = 1 << 20;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// The envelope header for `snapshots` snapshots; returns the bytes.
fn header(snapshots: usize) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.push(VERSION);
    put_str(&mut out, "hostile");
    put_varint(&mut out, 1);
    put_varint(&mut out, snapshots as u64);
    out
}

/// A gauge family `name` with `labels` label names and no series, appended to `out`.
fn put_family(out: &mut Vec<u8>, name: &str, labels: &[String]) {
    put_str(out, name);
    put_str(out, "");
    put_str(out, "");
    out.push(1); // gauge
    put_varint(out, labels.len() as u64);
    for l in labels {
        put_str(out, l);
    }
    put_varint(out, 0); // bounds
    put_varint(out, 0); // series
}

fn timed<T>(what: &str, bytes: &[u8], f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = f();
    eprintln!("{what}: {} bytes in {:.3} ms", bytes.len(), started.elapsed().as_secs_f64() * 1e3);
    out
}

#[test]
fn a_family_announcing_too_many_label_names_is_refused_at_the_count() {
    // About 1 MiB of distinct label names in one family: before the limit, the duplicate check
    // compared each name with all earlier ones (about 10^10 comparisons here).
    let names: Vec<String> = (0..MIB / 8).map(|i| format!("l{i:06}")).collect();
    let mut bytes = header(1);
    let family_at = bytes.len();
    put_family(&mut bytes, "wide", &names);
    assert!(bytes.len() >= MIB, "{} bytes", bytes.len());
    let err = timed("1 MiB, one family of 131072 label names", &bytes, || codec::decode(&bytes))
        .expect_err("too many label names");
    assert_eq!(
        err,
        DecodeError::Family {
            offset: family_at,
            source: FamilyError::TooManyLabels { family: "wide".into(), count: names.len(), max: MAX_LABEL_NAMES },
        }
    );
    assert!(err.to_string().contains("\"wide\" has 131072 label names, more than the 128 allowed"), "{err}");
}

#[test]
fn a_family_at_the_limit_is_refused_for_a_late_duplicate_and_kept_without_one() {
    let mut names: Vec<String> = (0..MAX_LABEL_NAMES).map(|i| format!("l{i:03}")).collect();
    let mut ok = header(1);
    put_family(&mut ok, "at_limit", &names);
    let envelope = codec::decode(&ok).expect("128 distinct names decode");
    assert_eq!(envelope.snapshots[0].family().label_names(), names.as_slice());

    names[MAX_LABEL_NAMES - 1] = "l000".into();
    let mut dup = header(1);
    put_family(&mut dup, "at_limit", &names);
    let err = codec::decode(&dup).expect_err("duplicate");
    assert!(
        matches!(&err, DecodeError::Family { source: FamilyError::DuplicateLabel { family, label }, .. }
            if family == "at_limit" && label == "l000"),
        "{err}"
    );

    let mut over = header(1);
    names.push("extra".into());
    put_family(&mut over, "over", &names);
    assert!(matches!(
        codec::decode(&over),
        Err(DecodeError::Family { source: FamilyError::TooManyLabels { count: 129, max: 128, .. }, .. })
    ));
}

#[test]
fn a_mebibyte_of_families_at_the_label_limit_decodes_whole() {
    let names: Vec<String> = (0..MAX_LABEL_NAMES).map(|i| format!("label_{i:03}")).collect();
    let mut one = Vec::new();
    put_family(&mut one, "f00000", &names);
    let families = MIB / one.len() + 1;
    let mut bytes = header(families);
    for f in 0..families {
        put_family(&mut bytes, &format!("f{f:05}"), &names);
    }
    assert!(bytes.len() >= MIB, "{} bytes", bytes.len());
    let envelope: Envelope =
        timed(&format!("1 MiB, {families} families of 128 label names"), &bytes, || codec::decode(&bytes))
            .expect("valid families decode");
    assert_eq!(envelope.snapshots.len(), families);
    assert!(envelope.snapshots.iter().all(|s| s.family().label_names() == names.as_slice() && s.is_empty()));
    assert_eq!(codec::encode(&envelope), bytes, "re-encodes to the same bytes");
}

#[test]
fn a_mebibyte_of_series_with_many_labels_decodes_whole() {
    // Label values dominate: 128 labels, one-byte values, as many series as fit in 1 MiB.
    let names: Vec<String> = (0..MAX_LABEL_NAMES).map(|i| format!("l{i:03}")).collect();
    let family =
        pipetel_recorders::Family::gauge("rows", "", "", &names.iter().map(String::as_str).collect::<Vec<_>>())
            .expect("valid family");
    let gauge = pipetel_recorders::Gauge::new(family).expect("gauge");
    let series = MIB / (2 * MAX_LABEL_NAMES + 8);
    for i in 0..series {
        let mut values: Vec<String> = vec!["x".into(); MAX_LABEL_NAMES];
        values[0] = format!("{i:05}");
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        gauge.set(&refs, i as f64).expect("set");
    }
    let bytes = Envelope::new("hostile", 1, vec![gauge.snapshot()]).encode();
    assert!(bytes.len() >= MIB * 9 / 10, "{} bytes", bytes.len());
    let envelope = timed(&format!("1 MiB, {series} series of 128 labels"), &bytes, || codec::decode(&bytes))
        .expect("valid series decode");
    assert_eq!(envelope.snapshots[0].len(), series);
    assert_eq!(
        envelope.snapshots[0]
            .get(&{
                let mut v = vec!["x"; MAX_LABEL_NAMES];
                v[0] = "00007";
                v
            })
            .map(|s| s.value),
        Some(7.0)
    );
}
