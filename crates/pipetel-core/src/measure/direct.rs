//! The pull endpoint's rendering of the sites' direct histograms.

use std::sync::{Arc, OnceLock};

use super::site::{Site, SITES};
use crate::exposition::{BoundsText, ExpositionSource, ListSource, MetricType, OwnFamily, Page};
use crate::families::{function as fam, Family};

/// The families the pull endpoint renders from the sites' direct histograms, in the order
/// of [`DirectSet`](super::site::DirectSet).
const NATIVE_FAMILIES: [&Family; 3] = [&fam::DURATION, &fam::INPUT_SIZE, &fam::OUTPUT_SIZE];

/// Writes the direct histograms of `sites`, one family per [`NATIVE_FAMILIES`] entry that
/// has a series with an observation.
pub(super) fn write_direct(sites: &[&'static Site], page: &mut Page<'_>) {
    for (which, f) in NATIVE_FAMILIES.iter().enumerate() {
        let of = |site: &'static Site| {
            let set = site.direct.get()?;
            let attrs = site.attrs.get()?;
            let h = match which {
                0 => Some(&set.duration),
                1 => set.input.as_ref(),
                _ => set.output.as_ref(),
            }?;
            Some((h, attrs))
        };
        let mut series = sites.iter().filter_map(|s| of(s)).peekable();
        let Some((first, _)) = series.peek() else { continue };
        let bounds = BoundsText::of(first.bounds());
        let mut family = OwnFamily::new(page.writer(), f.name, f.unit, MetricType::Histogram, f.description);
        for (h, attrs) in series {
            // `function`, `module`, `stage`: already in the encoder's (sorted) order.
            let s = family.series(|labels| {
                for kv in attrs.base.iter() {
                    labels.pair(kv.key.as_str(), &kv.value.as_str());
                }
            });
            h.write(s.writer, s.name, s.labels, bounds.get());
        }
    }
}

/// Registers the sites' direct histograms ([`write_direct`]) as an exposition source once, for
/// the life of the process.
pub(super) fn add_direct_source() {
    static SOURCE: OnceLock<Arc<dyn ExpositionSource>> = OnceLock::new();
    ListSource { list: &SITES, write: write_direct }.add_once(&SOURCE);
}
