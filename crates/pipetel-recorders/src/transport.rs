//! Two small ways to carry [`Envelope`]s: length-prefixed frames over any byte stream (pipes,
//! Unix sockets, TCP) and an in-process channel.
//!
//! Frames are a 4-byte little-endian payload length followed by the payload (one encoded
//! envelope). A reader refuses frames longer than its limit before reading them, and reads the
//! payload incrementally, so a corrupt length cannot make it allocate more than the bytes that
//! actually arrive.

use std::io::{self, Read, Write};
use std::sync::mpsc;
use std::time::Duration;

use crate::codec::{self, DecodeError};
use crate::snapshot::Envelope;

/// The default largest frame a [`FrameReader`] accepts: 64 MiB.
pub const DEFAULT_MAX_FRAME_LEN: usize = 64 << 20;

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The stream failed.
    #[error("frame stream failed: {0}")]
    Io(#[from] io::Error),
    /// The stream ended inside a frame.
    #[error("stream ended inside a frame: {got} of {expected} bytes of the {part}")]
    Truncated {
        /// `length prefix` or `payload`.
        part: &'static str,
        /// Bytes expected.
        expected: usize,
        /// Bytes received.
        got: usize,
    },
    /// The length prefix exceeds the reader's limit.
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// The announced length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The payload is not a valid envelope.
    #[error("invalid frame payload: {0}")]
    Decode(#[from] DecodeError),
}

/// Writes length-prefixed frames to a byte stream.
#[derive(Debug)]
pub struct FrameWriter<W> {
    inner: W,
    buf: Vec<u8>,
}

impl<W: Write> FrameWriter<W> {
    /// A writer over `inner`. Frames are written with one `write_all` each; wrap `inner` in a
    /// `BufWriter` only if you flush it.
    pub fn new(inner: W) -> FrameWriter<W> {
        FrameWriter { inner, buf: Vec::new() }
    }

    /// Encodes `envelope` and writes it as one frame, then flushes.
    ///
    /// # Errors
    /// The stream's error; [`io::ErrorKind::InvalidInput`] for an encoding over 4 GiB.
    pub fn send(&mut self, envelope: &Envelope) -> io::Result<()> {
        self.buf.clear();
        self.buf.extend_from_slice(&[0; 4]);
        codec::encode_into(envelope, &mut self.buf);
        let len = u32::try_from(self.buf.len() - 4)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame over 4 GiB"))?;
        self.buf[..4].copy_from_slice(&len.to_le_bytes());
        self.inner.write_all(&self.buf)?;
        self.inner.flush()
    }

    /// Writes `payload` (typically [`Envelope::encode`]'s output) as one frame, then flushes.
    ///
    /// # Errors
    /// The stream's error; [`io::ErrorKind::InvalidInput`] for a payload over 4 GiB.
    pub fn write_frame(&mut self, payload: &[u8]) -> io::Result<()> {
        let len = u32::try_from(payload.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame over 4 GiB"))?;
        self.inner.write_all(&len.to_le_bytes())?;
        self.inner.write_all(payload)?;
        self.inner.flush()
    }

    /// The underlying stream.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    /// Gives the stream back.
    pub fn into_inner(self) -> W {
        self.inner
    }
}

/// Reads length-prefixed frames from a byte stream.
#[derive(Debug)]
pub struct FrameReader<R> {
    inner: R,
    max: usize,
    /// Set after an error that leaves the stream out of step; iteration then stops.
    broken: bool,
}

impl<R: Read> FrameReader<R> {
    /// A reader over `inner` accepting frames up to [`DEFAULT_MAX_FRAME_LEN`].
    pub fn new(inner: R) -> FrameReader<R> {
        FrameReader { inner, max: DEFAULT_MAX_FRAME_LEN, broken: false }
    }

    /// Sets the largest accepted frame.
    pub fn with_max_frame_len(mut self, max: usize) -> FrameReader<R> {
        self.max = max;
        self
    }

    /// The next frame's payload, or `None` when the stream ends cleanly between frames.
    ///
    /// # Errors
    /// [`FrameError::Io`], [`FrameError::Truncated`] when the stream ends inside a frame,
    /// [`FrameError::TooLarge`] when the length prefix exceeds the limit (the stream is then
    /// out of step and should be dropped).
    pub fn read_frame(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        let frame = self.read_frame_inner();
        self.broken |= frame.is_err();
        frame
    }

    fn read_frame_inner(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        let mut prefix = [0u8; 4];
        let got = read_full(&mut self.inner, &mut prefix)?;
        if got == 0 {
            return Ok(None);
        }
        if got < 4 {
            return Err(FrameError::Truncated { part: "length prefix", expected: 4, got });
        }
        let len = u32::from_le_bytes(prefix) as usize;
        if len > self.max {
            return Err(FrameError::TooLarge { len, max: self.max });
        }
        let mut payload = Vec::with_capacity(len.min(64 << 10));
        let got = (&mut self.inner).take(len as u64).read_to_end(&mut payload)?;
        if got < len {
            return Err(FrameError::Truncated { part: "payload", expected: len, got });
        }
        Ok(Some(payload))
    }

    /// The next envelope, or `None` when the stream ends cleanly between frames.
    ///
    /// # Errors
    /// As [`FrameReader::read_frame`], and [`FrameError::Decode`] for an invalid payload (the
    /// stream stays in step: the next call reads the next frame).
    pub fn recv(&mut self) -> Result<Option<Envelope>, FrameError> {
        match self.read_frame()? {
            None => Ok(None),
            Some(payload) => Ok(Some(codec::decode(&payload)?)),
        }
    }

    /// The underlying stream.
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }

    /// Gives the stream back.
    pub fn into_inner(self) -> R {
        self.inner
    }
}

impl<R: Read> Iterator for FrameReader<R> {
    type Item = Result<Envelope, FrameError>;

    /// Envelopes until the stream ends; stops after an I/O, truncation or size error.
    fn next(&mut self) -> Option<Self::Item> {
        if self.broken {
            return None;
        }
        self.recv().transpose()
    }
}

/// Reads until `buf` is full or the stream ends; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Why [`Sender::send`] did not deliver; the envelope comes back.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The channel holds `capacity` envelopes already. Snapshots are cumulative, so dropping
    /// this one loses nothing the next one will not carry.
    #[error("snapshot channel is full; envelope from {:?} dropped", .0.source)]
    Full(Envelope),
    /// The receiver is gone.
    #[error("snapshot channel receiver is gone; envelope from {:?} dropped", .0.source)]
    Disconnected(Envelope),
}

/// Why [`Receiver::recv_timeout`] returned nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecvError {
    /// Nothing arrived in time.
    #[error("no snapshot arrived in time")]
    Timeout,
    /// Every sender is gone and the channel is empty.
    #[error("every snapshot sender is gone")]
    Disconnected,
}

/// The sending half of [`channel`]: cloneable, never blocks.
#[derive(Debug, Clone)]
pub struct Sender(mpsc::SyncSender<Envelope>);

impl Sender {
    /// Queues `envelope` without blocking.
    ///
    /// # Errors
    /// [`SendError::Full`] when the channel is at capacity, [`SendError::Disconnected`] when
    /// the receiver is gone; both give the envelope back.
    pub fn send(&self, envelope: Envelope) -> Result<(), SendError> {
        self.0.try_send(envelope).map_err(|e| match e {
            mpsc::TrySendError::Full(e) => SendError::Full(e),
            mpsc::TrySendError::Disconnected(e) => SendError::Disconnected(e),
        })
    }
}

/// The receiving half of [`channel`].
#[derive(Debug)]
pub struct Receiver(mpsc::Receiver<Envelope>);

impl Receiver {
    /// The next envelope if one is queued.
    pub fn try_recv(&self) -> Option<Envelope> {
        self.0.try_recv().ok()
    }

    /// The next envelope, waiting up to `timeout`.
    ///
    /// # Errors
    /// [`RecvError::Timeout`] when nothing arrived, [`RecvError::Disconnected`] when every
    /// sender is gone and nothing is queued.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Envelope, RecvError> {
        self.0.recv_timeout(timeout).map_err(|e| match e {
            mpsc::RecvTimeoutError::Timeout => RecvError::Timeout,
            mpsc::RecvTimeoutError::Disconnected => RecvError::Disconnected,
        })
    }

    /// Every envelope queued now, without waiting.
    pub fn drain(&self) -> impl Iterator<Item = Envelope> + '_ {
        self.0.try_iter()
    }
}

/// A bounded in-process channel of envelopes holding at most `capacity` (at least 1) of them.
/// Senders never block: when it is full, the newest envelope is handed back.
pub fn channel(capacity: usize) -> (Sender, Receiver) {
    let (tx, rx) = mpsc::sync_channel(capacity.max(1));
    (Sender(tx), Receiver(rx))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::Family;
    use crate::snapshot::MetricSnapshot;

    fn envelope(seq: u64) -> Envelope {
        let f = Family::counter("items", "", "", &[]).expect("valid");
        Envelope::new(
            "w",
            seq,
            vec![MetricSnapshot::from_columns(f, vec![], vec![seq as f64], vec![], vec![]).expect("valid")],
        )
    }

    #[test]
    fn frames_round_trip_over_a_stream() {
        let mut w = FrameWriter::new(Vec::new());
        w.send(&envelope(1)).expect("send");
        w.write_frame(&envelope(2).encode()).expect("write");
        let bytes = w.into_inner();
        let got: Vec<_> = FrameReader::new(&bytes[..]).map(|r| r.expect("frame").sequence).collect();
        assert_eq!(got, [1, 2]);
    }

    #[test]
    fn bad_frames_are_errors() {
        let mut w = FrameWriter::new(Vec::new());
        w.send(&envelope(1)).expect("send");
        let bytes = w.into_inner();
        let mut r = FrameReader::new(&bytes[..bytes.len() - 1]);
        assert!(matches!(r.read_frame(), Err(FrameError::Truncated { part: "payload", .. })));
        let mut r = FrameReader::new(&bytes[..2]);
        assert!(matches!(r.read_frame(), Err(FrameError::Truncated { part: "length prefix", got: 2, .. })));
        let huge = [0xff, 0xff, 0xff, 0xff, 1, 2, 3];
        let mut r = FrameReader::new(&huge[..]).with_max_frame_len(1024);
        let err = r.next().expect("an item").expect_err("too large");
        assert!(err.to_string().contains("4294967295"), "{err}");
        assert!(r.next().is_none(), "a stream out of step ends the iteration");
        // A garbage payload is a decode error, and the next frame still reads.
        let mut w = FrameWriter::new(Vec::new());
        w.write_frame(b"garbage").expect("write");
        w.send(&envelope(3)).expect("send");
        let bytes = w.into_inner();
        let mut r = FrameReader::new(&bytes[..]);
        assert!(matches!(r.recv(), Err(FrameError::Decode(DecodeError::BadMagic))));
        assert_eq!(r.recv().expect("next").map(|e| e.sequence), Some(3));
        assert!(r.recv().expect("end").is_none());
    }

    #[test]
    fn channel_drops_when_full_and_reports_disconnects() {
        let (tx, rx) = channel(2);
        tx.send(envelope(1)).expect("room");
        tx.clone().send(envelope(2)).expect("room");
        assert!(matches!(tx.send(envelope(3)), Err(SendError::Full(e)) if e.sequence == 3));
        let got: Vec<_> = rx.drain().map(|e| e.sequence).collect();
        assert_eq!(got, [1, 2]);
        assert_eq!(rx.recv_timeout(Duration::from_millis(1)), Err(RecvError::Timeout));
        drop(tx);
        assert_eq!(rx.recv_timeout(Duration::from_millis(1)), Err(RecvError::Disconnected));
        let (tx, rx) = channel(1);
        drop(rx);
        assert!(matches!(tx.send(envelope(4)), Err(SendError::Disconnected(_))));
    }
}
