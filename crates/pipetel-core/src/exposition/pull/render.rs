//! The render handle: the page a scrape gets, in the format its `Accept` header asks for.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::reader::MetricReader as _;

use super::reader::PullReader;
use crate::exposition::{Format, Page};

/// The content type of the text exposition format.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The content type of the OpenMetrics exposition (the format that carries exemplars).
pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Whether a request's `Accept` header prefers OpenMetrics: it lists
/// `application/openmetrics-text` (version 1.0.0, 0.0.1 or none) with a quality above zero
/// and at least that of any `text/plain` or wildcard range it also lists. Prometheus asks so by
/// default; `curl` (`*/*`) and a missing header get the text format.
pub fn wants_openmetrics(accept: &str) -> bool {
    let mut om: f32 = 0.0;
    let mut text: f32 = 0.0;
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default().to_ascii_lowercase();
        let (mut q, mut version_ok) = (1.0f32, true);
        for p in parts {
            let Some((k, v)) = p.split_once('=') else { continue };
            let v = v.trim().trim_matches('"');
            match k.trim().to_ascii_lowercase().as_str() {
                "q" => q = v.parse().unwrap_or(0.0),
                "version" => version_ok = matches!(v, "1.0.0" | "0.0.1"),
                _ => {}
            }
        }
        match media.as_str() {
            "application/openmetrics-text" if version_ok => om = om.max(q),
            "text/plain" | "text/*" | "*/*" => text = text.max(q),
            _ => {}
        }
    }
    om > 0.0 && om >= text
}

/// Renders the current metrics in the Prometheus text exposition format, or in OpenMetrics (with
/// exemplars), for programs that serve them from their own HTTP server. Cheap to clone.
#[derive(Clone)]
pub struct PrometheusRender {
    reader: PullReader,
    warned: Arc<AtomicBool>,
}

impl std::fmt::Debug for PrometheusRender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrometheusRender").finish_non_exhaustive()
    }
}

impl PrometheusRender {
    /// Renders what `reader` collects.
    pub fn new(reader: PullReader) -> Self {
        Self { reader, warned: Arc::new(AtomicBool::new(false)) }
    }

    /// Collects every instrument and returns the exposition text (format 0.0.4). Never
    /// panics: a collection error or a name conflict is logged once and what could be collected
    /// is returned.
    pub fn render(&self) -> String {
        self.render_in(Format::Text)
    }

    /// As [`PrometheusRender::render`], in OpenMetrics 1.0 (serve it as
    /// [`OPENMETRICS_CONTENT_TYPE`]): histogram buckets carry their exemplars (trace and span
    /// ids of a measurement made in a sampled span) and the text ends with `# EOF`.
    pub fn render_openmetrics(&self) -> String {
        self.render_in(Format::OpenMetrics)
    }

    /// The exposition a scraper sending this `Accept` header asks for, and its content type:
    /// OpenMetrics when the header prefers `application/openmetrics-text` (as Prometheus does),
    /// the text format otherwise (`None`: no header).
    pub fn render_for(&self, accept: Option<&str>) -> (String, &'static str) {
        if accept.is_some_and(wants_openmetrics) {
            (self.render_openmetrics(), OPENMETRICS_CONTENT_TYPE)
        } else {
            (self.render(), TEXT_CONTENT_TYPE)
        }
    }

    /// As [`PrometheusRender::render_for`], handing the exposition to `sink` in pieces of about
    /// 64 KiB as it is written instead of returning it: the registry's series (and the other
    /// exposition sources) are written straight from their own storage, so a page of a million
    /// series is never held whole. Returns the content type. The pull endpoint serves its
    /// responses this way (chunked, gzipped when the scraper asks).
    pub fn render_to(&self, accept: Option<&str>, mut sink: impl FnMut(&str) + 'static) -> &'static str {
        let (format, content_type) = if accept.is_some_and(wants_openmetrics) {
            (Format::OpenMetrics, OPENMETRICS_CONTENT_TYPE)
        } else {
            (Format::Text, TEXT_CONTENT_TYPE)
        };
        let mut out = String::with_capacity(crate::exposition::CHUNK + 4 * 1024);
        let mut page = Page::streamed(&mut out, format, &mut sink);
        self.render_page(&mut page);
        page.finish();
        content_type
    }

    fn render_in(&self, format: Format) -> String {
        let mut out = String::with_capacity(16 * 1024);
        self.render_page(&mut Page::new(&mut out, format));
        out
    }

    /// The page: the SDK's families (with what sources join to them), then the sources'.
    fn render_page(&self, page: &mut Page<'_>) {
        let mut rm = ResourceMetrics::default();
        if let Err(error) = self.reader.collect(&mut rm) {
            self.warn_once(&format!("collecting metrics failed: {error}"));
            page.writer().eof();
            return;
        }
        super::encode::encode(&rm, page);
        drop(rm);
        crate::exposition::write_sources(page);
        page.writer().eof();
        if let Some(c) = page.conflicts().first() {
            self.warn_once(&format!("metric dropped from the exposition: {c}"));
        }
    }

    fn warn_once(&self, message: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(target: "pipetel", "{message}");
        }
    }
}
