//! What the multiprocess directory's reader does with one envelope file, and what must hold:
//! shared by the libFuzzer target (`fuzz_targets/multiprocess_envelope.rs`) and the stable
//! replay test (`tests/multiprocess_corpus.rs`). The Python package's `merged_page` decodes
//! each `*.envelope` file whole (`Envelope.decode`, this crate's decoder behind the binding),
//! then reads every snapshot's family (kind, unit `<type>:<family>`, help, label names) and
//! every series' label values and value. Every check panics on a finding.

use pipetel_recorders::{codec, Kind, MAX_LABEL_NAMES};

/// Decodes `data` as a worker's file and walks it as the merged page does: never a panic; each
/// series has one value per label name and a value of its kind; a histogram's buckets are
/// cumulative; a family has at most `MAX_LABEL_NAMES` label names; and what decodes re-encodes
/// to bytes that decode to the same envelope.
pub(crate) fn multiprocess_envelope(data: &[u8]) {
    let Ok(envelope) = codec::decode(data) else { return };
    for snapshot in &envelope.snapshots {
        let family = snapshot.family();
        let names = family.label_names();
        assert!(names.len() <= MAX_LABEL_NAMES, "{} label names", names.len());
        let (_kind, _family) = family.unit().split_once(':').unwrap_or(("", family.unit()));
        let _ = family.help().len();
        let mut rows = 0;
        for series in snapshot.series() {
            rows += 1;
            assert_eq!(series.labels.len(), names.len(), "family {:?}", family.name());
            assert!(series.value.is_finite(), "series {:?} of {:?}: {}", series.labels, family.name(), series.value);
            if family.kind() == Kind::Counter {
                assert!(series.value >= 0.0, "counter {:?}: {}", family.name(), series.value);
            }
        }
        assert_eq!(rows, snapshot.len());
        if family.kind() == Kind::Histogram {
            for row in snapshot.bucket_counts().chunks(family.buckets()) {
                assert!(row.windows(2).all(|w| w[0] <= w[1]), "buckets of {:?} not cumulative", family.name());
            }
        }
    }
    let again = codec::encode(&envelope);
    assert_eq!(codec::decode(&again).as_ref(), Ok(&envelope), "a decoded file does not round-trip");
}
