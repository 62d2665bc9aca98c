//! The exposition-source contract: what the pull endpoint renders beside the OTel families —
//! the registry's direct families, the snapshot hub's histograms, measured functions' and span
//! metrics' direct histograms, the stage table's families. A producer implements
//! [`ExpositionSource`] and registers it with [`add_exposition_source`]; the endpoint's render
//! (and `PrometheusRender::render`) calls [`join_sources`] on the encoder's families, then
//! [`write_sources`] after them.

use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

use super::page::Page;

/// Extra families for the Prometheus exposition, appended after the OTel families on every
/// scrape and by `PrometheusRender::render`.
pub(crate) trait ExpositionSource: Send + Sync {
    /// Appends this source's families to `page`, in its format: complete families (`# HELP`,
    /// `# TYPE`, samples) whose names no OTel instrument on the page has, unless this source
    /// joined its series to that family (see [`ExpositionSource::join`]; [`Page::encoded`]
    /// tells).
    fn write_exposition(&self, page: &mut Page<'_>);

    /// Adds this source's series to families the OTel encoder has for `page`, before they are
    /// written, so that the page has one family of a name where a source's family and an OTel
    /// instrument share it. A family of the name but of another type is not joined: it goes
    /// to [`Page::conflict`]. Most sources join nothing (the default).
    fn join(&self, families: &mut [EncodedFamily<'_>], page: &mut Page<'_>) {
        let _ = (families, page);
    }
}

/// A family the OTel encoder has for a page, not yet written: its exposition name, its
/// Prometheus type and its sample lines (written in the page's format).
pub(crate) struct EncodedFamily<'a> {
    /// The exposition name.
    pub(crate) name: &'a str,
    /// The Prometheus type.
    pub(crate) kind: &'static str,
    /// The sample lines so far.
    pub(crate) body: &'a mut String,
}

static SOURCES: RwLock<Vec<Weak<dyn ExpositionSource>>> = RwLock::new(Vec::new());

/// Registers a source for as long as it lives (sources are held weakly: dropping the `Arc`
/// removes it from later scrapes).
pub(crate) fn add_exposition_source(source: &Arc<dyn ExpositionSource>) {
    let mut sources = crate::sync::write(&SOURCES);
    sources.retain(|s| s.strong_count() > 0);
    sources.push(Arc::downgrade(source));
}

/// A source for the life of the process: the items of a static list (measured functions' and
/// span metrics' callsites), written by `write` at each render.
pub(crate) struct ListSource<T: 'static> {
    pub(crate) list: &'static Mutex<Vec<&'static T>>,
    pub(crate) write: fn(&[&'static T], &mut Page<'_>),
}

impl<T: Sync> ListSource<T> {
    /// Registers the source once, kept in `slot` for the life of the process; later calls with
    /// the same `slot` do nothing.
    pub(crate) fn add_once(self, slot: &'static OnceLock<Arc<dyn ExpositionSource>>) {
        slot.get_or_init(|| {
            let source: Arc<dyn ExpositionSource> = Arc::new(self);
            add_exposition_source(&source);
            source
        });
    }
}

impl<T: Sync> ExpositionSource for ListSource<T> {
    fn write_exposition(&self, page: &mut Page<'_>) {
        let items: Vec<&'static T> = crate::sync::lock(self.list).clone();
        (self.write)(&items, page);
    }
}

fn live() -> Vec<Arc<dyn ExpositionSource>> {
    crate::sync::read(&SOURCES).iter().filter_map(Weak::upgrade).collect()
}

/// Notes the encoder's `families` on `page` and lets every live source join them.
pub(crate) fn join_sources(families: &mut [EncodedFamily<'_>], page: &mut Page<'_>) {
    for family in families.iter() {
        page.note_encoded(family.name);
    }
    for source in live() {
        source.join(families, page);
    }
}

/// Appends every live source's families to `page`.
pub(crate) fn write_sources(page: &mut Page<'_>) {
    for source in live() {
        source.write_exposition(page);
    }
}
