//! A page of the exposition being written: the text, its format, where it goes when it is
//! streamed, and what the OTel encoder already put on it. The pull endpoint's render hands one
//! to the encoder and then to every [exposition source](super::ExpositionSource); nothing
//! about a render travels beside it.

use super::text::{Format, Sink, Writer};

/// One exposition being written (see the [module docs](self)).
pub(crate) struct Page<'a> {
    out: &'a mut String,
    format: Format,
    sink: Option<Sink<'a>>,
    /// Exposition names of the families the OTel encoder has on this page, sorted.
    encoded: Vec<String>,
    /// Families left out of the page, and why (the render logs the first).
    conflicts: Vec<String>,
}

impl<'a> Page<'a> {
    /// A page of `format` written into `out`, whole.
    pub(crate) fn new(out: &'a mut String, format: Format) -> Self {
        Page { out, format, sink: None, encoded: Vec::new(), conflicts: Vec::new() }
    }

    /// A page of `format` written into `out` and handed to `sink` whenever `out` holds
    /// [`CHUNK`](super::CHUNK) bytes or more after a sample line (then emptied), the rest at
    /// [`Page::finish`]: the page reaches the sink in order, never whole in memory.
    pub(crate) fn streamed(out: &'a mut String, format: Format, sink: Sink<'a>) -> Self {
        Page { out, format, sink: Some(sink), encoded: Vec::new(), conflicts: Vec::new() }
    }

    /// The page's format.
    pub(crate) fn format(&self) -> Format {
        self.format
    }

    /// A writer appending to the page (and handing a streamed page on as it goes).
    pub(crate) fn writer(&mut self) -> Writer<'_> {
        let sink = self.sink.as_mut().map(|s| &mut **s as Sink<'_>);
        Writer::streaming(self.out, self.format, sink)
    }

    /// The page's text, for text appended as it is (already checked, in the page's format); it
    /// is handed on with the next writer's sample line, or at [`Page::finish`].
    pub(crate) fn text(&mut self) -> &mut String {
        self.out
    }

    /// Notes that the OTel encoder has a family named `name` on this page.
    pub(super) fn note_encoded(&mut self, name: &str) {
        if let Err(i) = self.encoded.binary_search_by(|n| n.as_str().cmp(name)) {
            self.encoded.insert(i, name.to_string());
        }
    }

    /// Whether the OTel encoder has a family named `name` on this page: a source that joined
    /// its series to that family (see [`ExpositionSource::join`](super::ExpositionSource::join))
    /// leaves its own out.
    pub(crate) fn encoded(&self, name: &str) -> bool {
        self.encoded.binary_search_by(|n| n.as_str().cmp(name)).is_ok()
    }

    /// Leaves a family out of the page, saying why.
    pub(crate) fn conflict(&mut self, why: String) {
        self.conflicts.push(why);
    }

    /// The families left out of the page, and why, in the order they were.
    pub(crate) fn conflicts(&self) -> &[String] {
        &self.conflicts
    }

    /// Ends a streamed page: hands the sink what is left. (A page written whole is complete as
    /// it is.)
    pub(crate) fn finish(self) {
        if let Some(sink) = self.sink {
            if !self.out.is_empty() {
                sink(self.out);
                self.out.clear();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::CHUNK;
    use super::*;

    #[test]
    fn a_streamed_page_reaches_its_sink_in_order_and_whole() {
        let mut chunks = Vec::<String>::new();
        let mut out = String::new();
        let mut other = String::new();
        {
            let mut sink = |text: &str| chunks.push(text.to_string());
            let mut page = Page::streamed(&mut out, Format::Text, &mut sink);
            let mut w = page.writer();
            for i in 0..10_000u64 {
                w.sample("m", "").with_raw("k=\"v\"").value(i);
            }
            // Another string is never handed on, however long.
            let mut w = Writer::text(&mut other);
            for i in 0..10_000u64 {
                w.sample("o", "").value(i);
            }
            page.finish();
        }
        assert!(out.is_empty(), "the rest was handed on at the end");
        assert!(chunks.len() > 1 && chunks.iter().all(|c| c.len() <= CHUNK + 64), "{} chunks", chunks.len());
        let page: String = chunks.concat();
        let expected: String = (0..10_000).map(|i| format!("m{{k=\"v\"}} {i}\n")).collect();
        assert_eq!(page, expected);
        assert_eq!(other.lines().count(), 10_000);
        // A page written whole hands nothing on.
        let mut whole = String::new();
        let mut page = Page::new(&mut whole, Format::Text);
        let mut w = page.writer();
        for i in 0..10_000u64 {
            w.sample("m", "").value(i);
        }
        page.finish();
        assert_eq!(whole.lines().count(), 10_000);
    }

    #[test]
    fn the_page_knows_the_encoders_families_and_its_conflicts() {
        let mut out = String::new();
        let mut page = Page::new(&mut out, Format::OpenMetrics);
        for name in ["b_total", "a", "b_total"] {
            page.note_encoded(name);
        }
        assert!(page.encoded("a") && page.encoded("b_total") && !page.encoded("b"));
        page.conflict("x (gauge) conflicts".into());
        assert_eq!(page.conflicts(), ["x (gauge) conflicts"]);
        assert_eq!(page.format(), Format::OpenMetrics);
    }
}
