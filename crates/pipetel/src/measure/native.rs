//! The pull endpoint's rendering of the sites' native histograms.

use std::sync::{Arc, OnceLock};

use super::names::{FUNCTION_DURATION, FUNCTION_INPUT_SIZE, FUNCTION_OUTPUT_SIZE};
use super::site::{Site, SITES};
use crate::exposition::{scope_labels, translate, BoundsText, Format, LabelBlock, MetricType, Writer};

/// The families the pull endpoint renders from the sites' native histograms, in the order
/// of [`NativeSet`](super::site::NativeSet): OTel name, description, unit.
const NATIVE_FAMILIES: [(&str, &str, &str); 3] = [
    (FUNCTION_DURATION, "Wall time of completed calls", "s"),
    (FUNCTION_INPUT_SIZE, "Size of a call's input", "By"),
    (FUNCTION_OUTPUT_SIZE, "Size of a call's output", "By"),
];

/// Renders every site's native histograms on the pull endpoint.
struct NativeSource;

impl crate::export::ExpositionSource for NativeSource {
    fn write_exposition(&self, out: &mut String, format: Format) {
        let sites: Vec<&'static Site> = crate::sync::lock(&SITES).clone();
        write_native(&sites, out, format);
    }
}

/// Writes the native histograms of `sites`, one family per [`NATIVE_FAMILIES`] entry that
/// has a series with an observation.
pub(super) fn write_native(sites: &[&'static Site], out: &mut String, format: Format) {
    {
        let scope = scope_labels(None);
        let mut labels = String::new();
        for (which, (otel_name, help, unit)) in NATIVE_FAMILIES.iter().enumerate() {
            let of = |site: &'static Site| {
                let set = site.native.get()?;
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
            let name = translate(otel_name, unit, MetricType::Histogram);
            let bounds = BoundsText::of(first.bounds());
            let mut w = Writer::new(out, format);
            w.header(&name, "histogram", help, "");
            for (h, attrs) in series {
                labels.clear();
                let mut block = LabelBlock::new(&mut labels);
                // `function`, `module`, `stage`: already in the encoder's (sorted) order.
                for kv in attrs.base.iter() {
                    block.pair(kv.key.as_str(), &kv.value.as_str());
                }
                block.raw(&scope);
                h.write(&mut w, &name, &labels, bounds.get());
            }
        }
    }
}

/// Registers [`NativeSource`] once, for the life of the process.
pub(super) fn add_native_source() {
    static SOURCE: OnceLock<Arc<dyn crate::export::ExpositionSource>> = OnceLock::new();
    SOURCE.get_or_init(|| {
        let source: Arc<dyn crate::export::ExpositionSource> = Arc::new(NativeSource);
        crate::export::add_exposition_source(&source);
        source
    });
}
