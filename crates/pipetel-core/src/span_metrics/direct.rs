//! The pull endpoint's rendering of the callsites whose series are [`Series::Direct`].

use std::sync::{Arc, Mutex, OnceLock};

use super::site::{Series, Site};
use crate::exposition::{BoundsText, ExpositionSource, ListSource, MetricType, OwnFamily, Page};
use crate::families::span::DURATION;

/// Every direct callsite resolved so far, in resolution order.
static SITES: Mutex<Vec<&'static Site>> = Mutex::new(Vec::new());

/// Adds `site` to what the pull endpoint renders, when its series are direct.
pub(super) fn add(site: &'static Site) {
    if !matches!(site.ok, Series::Direct(_)) {
        return;
    }
    static SOURCE: OnceLock<Arc<dyn ExpositionSource>> = OnceLock::new();
    ListSource { list: &SITES, write }.add_once(&SOURCE);
    crate::sync::lock(&SITES).push(site);
}

/// Writes `span.duration` for `sites` as the pull endpoint's encoder writes the OTel
/// histogram: labels `span_name`, `span_target`, `status` (sorted) and pipetel's scope.
pub(super) fn write(sites: &[&'static Site], page: &mut Page<'_>) {
    let series = |site: &'static Site| {
        [(&site.ok, "ok"), (&site.error, "error")].into_iter().filter_map(move |(series, status)| match series {
            Series::Direct(h) => Some((site, h, status)),
            _ => None,
        })
    };
    let mut all = sites.iter().flat_map(|s| series(s)).peekable();
    let Some((_, first, _)) = all.peek() else { return };
    let bounds = BoundsText::of(first.bounds());
    let mut family =
        OwnFamily::new(page.writer(), DURATION.name, DURATION.unit, MetricType::Histogram, DURATION.description);
    for (site, h, status) in all {
        let s = family.series(|labels| {
            labels.pair("span_name", site.name).pair("span_target", site.target).pair("status", status);
        });
        h.write(s.writer, s.name, s.labels, bounds.get());
    }
}
