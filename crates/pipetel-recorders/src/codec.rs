//! A compact, versioned binary encoding of [`Envelope`]s.
//!
//! ```text
//! envelope  = magic "PTRC" | version u8 (= 1) | source str | sequence varint
//!             | count varint | snapshot*
//! snapshot  = name str | help str | unit str | kind u8 (0 counter, 1 gauge, 2 histogram)
//!             | label-name count varint | str* | bound count varint | f64*
//!             | series count varint | label values str* (series × labels, row-major)
//!             | counter, gauge: value f64 per series
//!             | histogram: per series, bucket counts varint* (bounds + 1, per bucket, not
//!               cumulative) then sum f64
//! str       = byte length varint | UTF-8 bytes
//! varint    = unsigned LEB128, at most 10 bytes;  f64 = IEEE 754, little-endian
//! ```
//!
//! Decoding checks every length against the bytes that remain before it allocates, so a
//! message can never make the decoder allocate much more than its own size, and takes time
//! linear in the message's size (a family of more than [`MAX_LABEL_NAMES`](crate::MAX_LABEL_NAMES)
//! label names is refused as soon as the count is read); garbage,
//! truncated, trailing or wrong-version input is a [`DecodeError`] naming the byte offset, and
//! decoded snapshots pass the same validation as [`MetricSnapshot::from_columns`].

use crate::family::{Family, FamilyError, Kind};
use crate::snapshot::{Envelope, MetricSnapshot, SnapshotError};

/// The four bytes every message starts with.
pub const MAGIC: [u8; 4] = *b"PTRC";
/// The format version this build writes and reads.
pub const VERSION: u8 = 1;

/// Why bytes could not be decoded into an [`Envelope`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input does not start with [`MAGIC`].
    #[error("not a pipetel recorder message: bad magic at byte 0")]
    BadMagic,
    /// The input is of another format version.
    #[error("unsupported recorder message version {found} at byte 4 (this build reads version {supported})")]
    UnsupportedVersion {
        /// The version found.
        found: u8,
        /// The version this build reads.
        supported: u8,
    },
    /// The input ends before a field does.
    #[error("truncated input at byte {offset}: {field} needs {needed} bytes, {remaining} left")]
    Truncated {
        /// Where the field starts.
        offset: usize,
        /// The field.
        field: &'static str,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left.
        remaining: usize,
    },
    /// A count or length announces more data than the input can hold.
    #[error("{field} {value} at byte {offset} exceeds what the {remaining} remaining bytes can hold")]
    LengthOutOfRange {
        /// Where the count starts.
        offset: usize,
        /// What was counted.
        field: &'static str,
        /// The count.
        value: u64,
        /// Bytes left after it.
        remaining: usize,
    },
    /// A varint is longer than 10 bytes or overflows 64 bits.
    #[error("malformed varint at byte {offset}")]
    Varint {
        /// Where it starts.
        offset: usize,
    },
    /// A string is not UTF-8.
    #[error("invalid utf-8 in {field} at byte {offset}")]
    Utf8 {
        /// Where the string's bytes start.
        offset: usize,
        /// The field.
        field: &'static str,
    },
    /// An unknown metric kind tag.
    #[error("unknown metric kind {tag} at byte {offset}")]
    UnknownKind {
        /// Where the tag is.
        offset: usize,
        /// The tag.
        tag: u8,
    },
    /// Histogram bucket counts add up past `u64::MAX`.
    #[error("histogram bucket counts overflow at byte {offset}")]
    CountOverflow {
        /// Where the offending count is.
        offset: usize,
    },
    /// The family description is invalid.
    #[error("invalid family at byte {offset}: {source}")]
    Family {
        /// Where the family starts.
        offset: usize,
        /// Why.
        source: FamilyError,
    },
    /// The series are invalid (out of order, non-finite values...).
    #[error("invalid snapshot at byte {offset}: {source}")]
    Snapshot {
        /// Where the snapshot starts.
        offset: usize,
        /// Why.
        source: SnapshotError,
    },
    /// Bytes follow the end of the message.
    #[error("{count} trailing bytes after the message at byte {offset}")]
    TrailingBytes {
        /// Where the message ended.
        offset: usize,
        /// Bytes after it.
        count: usize,
    },
}

// The envelope's own methods for its encoding live here, beside the format, so that the data
// types in `snapshot` do not depend on the codec.
impl Envelope {
    /// The compact binary encoding (see [`crate::codec`]).
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }

    /// Decodes [`Envelope::encode`]'s output.
    ///
    /// # Errors
    /// [`DecodeError`] for garbage, truncated or wrong-version bytes.
    pub fn decode(bytes: &[u8]) -> Result<Envelope, DecodeError> {
        decode(bytes)
    }
}

/// Encodes `envelope`.
pub fn encode(envelope: &Envelope) -> Vec<u8> {
    let mut out = Vec::with_capacity(encoded_len_hint(envelope));
    encode_into(envelope, &mut out);
    out
}

fn encoded_len_hint(envelope: &Envelope) -> usize {
    let per: usize = envelope
        .snapshots
        .iter()
        .map(|s| {
            64 + s.label_values().iter().map(|l| l.len() + 1).sum::<usize>()
                + s.values().len() * 8
                + s.bucket_counts().len() * 2
                + s.sums().len() * 8
        })
        .sum();
    16 + envelope.source.len() + per
}

/// Appends the encoding of `envelope` to `out`.
pub fn encode_into(envelope: &Envelope, out: &mut Vec<u8>) {
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    put_str(out, &envelope.source);
    put_varint(out, envelope.sequence);
    put_varint(out, envelope.snapshots.len() as u64);
    for s in &envelope.snapshots {
        let f = s.family();
        put_str(out, f.name());
        put_str(out, f.help());
        put_str(out, f.unit());
        out.push(f.kind().tag());
        put_varint(out, f.label_names().len() as u64);
        for l in f.label_names() {
            put_str(out, l);
        }
        put_varint(out, f.bounds().len() as u64);
        for b in f.bounds() {
            out.extend_from_slice(&b.to_le_bytes());
        }
        put_varint(out, s.len() as u64);
        for l in s.label_values() {
            put_str(out, l);
        }
        match f.kind() {
            Kind::Counter | Kind::Gauge => {
                for v in s.values() {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            Kind::Histogram => {
                let b = f.buckets();
                for (row, sum) in s.bucket_counts().chunks_exact(b).zip(s.sums()) {
                    let mut prev = 0u64;
                    for &c in row {
                        put_varint(out, c.saturating_sub(prev));
                        prev = c;
                    }
                    out.extend_from_slice(&sum.to_le_bytes());
                }
            }
        }
    }
}

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

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError::Truncated { offset: self.pos, field, needed: n, remaining: self.remaining() });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(1, field)?[0])
    }

    fn f64(&mut self, field: &'static str) -> Result<f64, DecodeError> {
        let mut w = [0u8; 8];
        w.copy_from_slice(self.take(8, field)?);
        Ok(f64::from_le_bytes(w))
    }

    fn varint(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        let start = self.pos;
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let byte = self.u8(field)?;
            let bits = u64::from(byte & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(DecodeError::Varint { offset: start });
            }
            v |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::Varint { offset: start })
    }

    /// A count of items each taking at least `min_bytes`, checked against the remaining input.
    fn count(&mut self, field: &'static str, min_bytes: usize) -> Result<usize, DecodeError> {
        let offset = self.pos;
        let value = self.varint(field)?;
        let remaining = self.remaining();
        let fits = usize::try_from(value)
            .ok()
            .and_then(|n| n.checked_mul(min_bytes.max(1)).map(|bytes| (n, bytes)))
            .filter(|&(_, bytes)| bytes <= remaining);
        match fits {
            Some((n, _)) => Ok(n),
            None => Err(DecodeError::LengthOutOfRange { offset, field, value, remaining }),
        }
    }

    fn str(&mut self, field: &'static str) -> Result<&'a str, DecodeError> {
        let len = self.count(field, 1)?;
        let offset = self.pos;
        let bytes = self.take(len, field)?;
        std::str::from_utf8(bytes).map_err(|_| DecodeError::Utf8 { offset, field })
    }
}

/// Decodes one [`Envelope`] from exactly `bytes`.
///
/// # Errors
/// [`DecodeError`] for bad magic, another version, truncated input, counts larger than the
/// input can hold, malformed varints or UTF-8, invalid families or series, or trailing bytes.
pub fn decode(bytes: &[u8]) -> Result<Envelope, DecodeError> {
    if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
        return Err(DecodeError::BadMagic);
    }
    let mut r = Reader { buf: bytes, pos: MAGIC.len() };
    let version = r.u8("version")?;
    if version != VERSION {
        return Err(DecodeError::UnsupportedVersion { found: version, supported: VERSION });
    }
    let source = r.str("source")?.to_owned();
    let sequence = r.varint("sequence")?;
    // Smallest snapshot: three empty strings, a kind, two zero counts and a zero series count.
    let n = r.count("snapshot count", 7)?;
    let mut snapshots = Vec::with_capacity(n);
    for _ in 0..n {
        snapshots.push(decode_snapshot(&mut r)?);
    }
    if r.remaining() != 0 {
        return Err(DecodeError::TrailingBytes { offset: r.pos, count: r.remaining() });
    }
    Ok(Envelope { source, sequence, snapshots })
}

fn decode_snapshot(r: &mut Reader<'_>) -> Result<MetricSnapshot, DecodeError> {
    let start = r.pos;
    let name = r.str("family name")?;
    let help = r.str("help")?;
    let unit = r.str("unit")?;
    let tag_offset = r.pos;
    let tag = r.u8("kind")?;
    let kind = Kind::from_tag(tag).ok_or(DecodeError::UnknownKind { offset: tag_offset, tag })?;
    let n_labels = r.count("label name count", 1)?;
    // The cap before the names are read: a family of more names is refused at once.
    crate::family::check_label_count(name, n_labels).map_err(|source| DecodeError::Family { offset: start, source })?;
    let mut label_names = Vec::with_capacity(n_labels);
    for _ in 0..n_labels {
        label_names.push(r.str("label name")?);
    }
    let n_bounds = r.count("bound count", 8)?;
    let mut bounds = Vec::with_capacity(n_bounds);
    for _ in 0..n_bounds {
        bounds.push(r.f64("bound")?);
    }
    let family = Family::new(name, help, unit, kind, &label_names, &bounds)
        .map_err(|source| DecodeError::Family { offset: start, source })?;
    let arity = family.arity();
    let buckets = family.buckets();
    let per_series = match kind {
        Kind::Counter | Kind::Gauge => arity + 8,
        Kind::Histogram => arity + buckets + 8,
    };
    let n = r.count("series count", per_series)?;
    // `count` bounded n * per_series by the input length, so these cannot overflow.
    let mut labels = Vec::with_capacity(n * arity);
    for _ in 0..n * arity {
        labels.push(r.str("label value")?.to_owned());
    }
    let (mut values, mut bucket_counts, mut sums) = (Vec::new(), Vec::new(), Vec::new());
    match kind {
        Kind::Counter | Kind::Gauge => {
            values.reserve(n);
            for _ in 0..n {
                values.push(r.f64("value")?);
            }
        }
        Kind::Histogram => {
            bucket_counts.reserve(n * buckets);
            sums.reserve(n);
            for _ in 0..n {
                let mut total = 0u64;
                for _ in 0..buckets {
                    let offset = r.pos;
                    let c = r.varint("bucket count")?;
                    total = total.checked_add(c).ok_or(DecodeError::CountOverflow { offset })?;
                    bucket_counts.push(total);
                }
                sums.push(r.f64("sum")?);
            }
        }
    }
    MetricSnapshot::from_columns(family, labels, values, bucket_counts, sums)
        .map_err(|source| DecodeError::Snapshot { offset: start, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Envelope {
        let c = Family::counter("items", "items seen", "{item}", &["stage"]).expect("valid");
        let h = Family::histogram("lat", "", "s", &[], &[0.5, 1.0]).expect("valid");
        Envelope::new(
            "worker-1",
            300,
            vec![
                MetricSnapshot::from_columns(c, vec!["a".into(), "b".into()], vec![1.0, 2.0], vec![], vec![])
                    .expect("valid"),
                MetricSnapshot::from_columns(h, vec![], vec![], vec![1, 1, 300], vec![9.5]).expect("valid"),
            ],
        )
    }

    #[test]
    fn round_trips() {
        let e = sample();
        let bytes = encode(&e);
        assert_eq!(decode(&bytes), Ok(e));
    }

    #[test]
    fn rejects_wrong_magic_version_and_trailing_bytes() {
        let bytes = encode(&sample());
        assert_eq!(decode(b"PTR"), Err(DecodeError::BadMagic));
        assert_eq!(decode(b"XXXX\x01"), Err(DecodeError::BadMagic));
        let mut v2 = bytes.clone();
        v2[4] = 2;
        assert_eq!(decode(&v2), Err(DecodeError::UnsupportedVersion { found: 2, supported: 1 }));
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert_eq!(decode(&trailing), Err(DecodeError::TrailingBytes { offset: bytes.len(), count: 1 }));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = encode(&sample());
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err(), "prefix of {len} bytes");
        }
    }

    #[test]
    fn huge_counts_are_refused_before_allocating() {
        let mut bytes = MAGIC.to_vec();
        bytes.push(VERSION);
        put_str(&mut bytes, "s");
        put_varint(&mut bytes, 0);
        put_varint(&mut bytes, u64::MAX);
        let err = decode(&bytes).expect_err("huge count");
        assert!(matches!(err, DecodeError::LengthOutOfRange { field: "snapshot count", .. }));
        assert!(err.to_string().contains("byte 8"), "{err}");
        let mut overlong = MAGIC.to_vec();
        overlong.push(VERSION);
        overlong.extend_from_slice(&[0xff; 11]);
        assert!(matches!(decode(&overlong), Err(DecodeError::Varint { offset: 5 })));
    }

    #[test]
    fn invalid_series_are_refused() {
        let c = Family::counter("items", "", "", &["stage"]).expect("valid");
        let e = Envelope::new(
            "s",
            1,
            vec![MetricSnapshot::from_columns(c, vec!["a".into(), "b".into()], vec![1.0, 2.0], vec![], vec![])
                .expect("valid")],
        );
        let mut bytes = encode(&e);
        // Swap the label values so the rows are out of order.
        let a = bytes.iter().rposition(|&b| b == b'a').expect("a");
        let b = bytes.iter().rposition(|&b| b == b'b').expect("b");
        bytes.swap(a, b);
        assert!(matches!(decode(&bytes), Err(DecodeError::Snapshot { source: SnapshotError::Unordered { .. }, .. })));
    }
}
