//! What is read from the registry of built-in exporters, [`BUILT_IN`]: the exporter enums' names (`FromStr`, `Display`, the "expected one of ..." error), each chosen exporter's
//! builder (or the error naming the feature it needs), whether it pushes, whether it needs the
//! gRPC runtime.

use std::fmt;
use std::str::FromStr;

use super::entry::{BuildLogs, BuildMetrics, BuildSpans, BuiltIn, Serves};
use super::BUILT_IN;
use crate::config::{LogExporter, MetricExporter, OtlpTarget, ParseValueError, Signal, TraceExporter};
use crate::error::InitError;

/// One signal's exporter enum, read through the registry.
pub(crate) trait Chosen: Copy + PartialEq + fmt::Debug + Sized + 'static {
    /// The signal's builder type.
    type Build: Copy + 'static;
    /// The signal.
    const SIGNAL: Signal;
    /// What `entry` does for this signal, when it serves it.
    fn serves(entry: &'static BuiltIn) -> Option<&'static Serves<Self, Self::Build>>;
}

impl Chosen for MetricExporter {
    type Build = BuildMetrics;
    const SIGNAL: Signal = Signal::Metrics;
    fn serves(entry: &'static BuiltIn) -> Option<&'static Serves<Self, Self::Build>> {
        entry.metrics.as_ref()
    }
}

impl Chosen for TraceExporter {
    type Build = BuildSpans;
    const SIGNAL: Signal = Signal::Traces;
    fn serves(entry: &'static BuiltIn) -> Option<&'static Serves<Self, Self::Build>> {
        entry.traces.as_ref()
    }
}

impl Chosen for LogExporter {
    type Build = BuildLogs;
    const SIGNAL: Signal = Signal::Logs;
    fn serves(entry: &'static BuiltIn) -> Option<&'static Serves<Self, Self::Build>> {
        entry.logs.as_ref()
    }
}

/// The entry whose variant for `V`'s signal is `chosen`.
pub(crate) fn entry<V: Chosen>(chosen: V) -> Option<(&'static BuiltIn, &'static Serves<V, V::Build>)> {
    BUILT_IN.iter().find_map(|entry| V::serves(entry).filter(|serves| serves.variant == chosen).map(|s| (*entry, s)))
}

/// The builder of `chosen`.
///
/// # Errors
/// [`InitError::FeatureDisabled`] naming the feature it needs, in a build without it.
pub(crate) fn builder<V: Chosen>(chosen: V) -> Result<V::Build, InitError> {
    let Some((entry, serves)) = entry(chosen) else {
        // A variant without its entry; `every_variant_has_its_entry` keeps this from happening.
        return Err(InitError::Exporter {
            signal: V::SIGNAL,
            exporter: "built-in",
            reason: format!("{chosen:?} is not in the registry of built-in exporters"),
        });
    };
    serves.build.ok_or_else(|| entry.disabled())
}

/// Whether `chosen` reads the meter provider on its own (see [`BuiltIn::pushes`]).
pub(crate) fn pushes<V: Chosen>(chosen: V) -> bool {
    entry(chosen).is_some_and(|(entry, _)| entry.pushes)
}

/// Whether any of `chosen`, sending to `target`, needs pipetel's Tokio runtime.
pub(crate) fn needs_runtime<V: Chosen>(chosen: &[V], target: &OtlpTarget) -> bool {
    chosen.iter().any(|c| entry(*c).is_some_and(|(entry, _)| (entry.needs_runtime)(target)))
}

/// The names `V`'s signal takes, in the registry's order, and `none`.
fn allowed<V: Chosen>() -> String {
    let names: Vec<&str> = BUILT_IN.iter().filter(|entry| V::serves(entry).is_some()).map(|entry| entry.name).collect();
    format!("{}, none", names.join(", "))
}

/// One exporter name (`none` is a list's business, not a name).
fn parse<V: Chosen>(text: &str) -> Result<V, ParseValueError> {
    let name = text.trim();
    let found = BUILT_IN.iter().filter(|entry| entry.name == name).find_map(|entry| V::serves(entry));
    found.map(|serves| serves.variant).ok_or_else(|| {
        ParseValueError::new(format!("unknown exporter `{name}`; expected a comma list of {}", allowed::<V>()))
    })
}

/// `FromStr` and `Display` of the exporter enums, from the registry.
macro_rules! names_from_registry {
    ($($ty:ident)+) => {$(
        impl fmt::Display for $ty {
            /// The name [`FromStr`] reads.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(entry(*self).map_or("unregistered", |(entry, _)| entry.name))
            }
        }

        impl FromStr for $ty {
            type Err = ParseValueError;

            /// One exporter name (`none` is a list's business, not a name).
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                parse(s)
            }
        }
    )+};
}

names_from_registry!(TraceExporter MetricExporter LogExporter);

/// The exporters guide's list of built-in exporters (`docs/src/exporters.md`, between its
/// markers): one row per entry.
#[cfg(test)]
pub(crate) fn guide_list() -> String {
    let mut out = String::from("| name | exporter | signals | cargo feature |\n|---|---|---|---|\n");
    for entry in BUILT_IN {
        let signals: Vec<&str> = [
            entry.metrics.as_ref().map(|_| "metrics"),
            entry.traces.as_ref().map(|_| "traces"),
            entry.logs.as_ref().map(|_| "logs"),
        ]
        .into_iter()
        .flatten()
        .collect();
        out.push_str(&format!(
            "| `{}` | {} | {} | `{}` |\n",
            entry.name,
            entry.summary,
            signals.join(", "),
            entry.feature
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// A variant's name, through the exporter enum's `FromStr` and `Display` and through the
    /// configuration's reader of `exporters.<signal>` (the file's and `OTEL_*_EXPORTER`'s rule).
    fn reachable<V: Chosen + FromStr + fmt::Display>(
        entry: &BuiltIn,
        serves: &Serves<V, V::Build>,
        key: &str,
        read: fn(&Config) -> Vec<V>,
    ) {
        assert_eq!(entry.name.parse::<V>().ok(), Some(serves.variant), "{} for {}", entry.name, V::SIGNAL);
        assert_eq!(serves.variant.to_string(), entry.name);
        let config = Config::default().with_setting(key, toml::Value::Array(vec![entry.name.into()]));
        let config = config.unwrap_or_else(|e| panic!("`{}` in `{key}`: {e}", entry.name));
        assert_eq!(read(&config), vec![serves.variant], "`{}` in `{key}`", entry.name);
        let (found, _) = super::entry(serves.variant).expect("the variant finds its entry");
        assert_eq!(found.name, entry.name, "two entries claim {:?}", serves.variant);
    }

    #[test]
    fn every_entry_is_reachable_from_its_names() {
        for entry in BUILT_IN {
            assert!(entry.metrics.is_some() || entry.traces.is_some() || entry.logs.is_some(), "{}", entry.name);
            assert_eq!(BUILT_IN.iter().filter(|e| e.name == entry.name).count(), 1, "`{}` twice", entry.name);
            if let Some(serves) = &entry.metrics {
                reachable(entry, serves, "exporters.metrics", Config::metrics_exporters);
            }
            if let Some(serves) = &entry.traces {
                reachable(entry, serves, "exporters.traces", Config::traces_exporters);
            }
            if let Some(serves) = &entry.logs {
                reachable(entry, serves, "exporters.logs", Config::logs_exporters);
            }
        }
    }

    #[test]
    fn an_unknown_name_lists_the_signals_exporters() {
        let error = |r: Result<(), ParseValueError>| r.err().map(|e| e.to_string());
        let metrics = error("kafka".parse::<MetricExporter>().map(|_| ()));
        let want = "unknown exporter `kafka`; expected a comma list of prometheus, otlp, console, none";
        assert_eq!(metrics.as_deref(), Some(want));
        let traces = error(" prometheus ".parse::<TraceExporter>().map(|_| ()));
        let want = "unknown exporter `prometheus`; expected a comma list of otlp, console, none";
        assert_eq!(traces.as_deref(), Some(want));
        let logs = error("".parse::<LogExporter>().map(|_| ()));
        assert_eq!(logs.as_deref(), Some("unknown exporter ``; expected a comma list of otlp, console, none"));
    }

    #[test]
    fn pushing_and_the_runtime_come_from_the_entries() {
        assert!(!pushes(MetricExporter::Prometheus));
        assert!(pushes(MetricExporter::Otlp) && pushes(MetricExporter::Console));
        let mut target = Config::default().resolve().expect("defaults resolve").metrics.otlp;
        target.protocol = crate::config::OtlpProtocol::Grpc;
        assert!(needs_runtime(&[MetricExporter::Prometheus, MetricExporter::Otlp], &target));
        assert!(!needs_runtime(&[MetricExporter::Prometheus, MetricExporter::Console], &target));
        target.protocol = crate::config::OtlpProtocol::HttpProtobuf;
        assert!(!needs_runtime(&[TraceExporter::Otlp], &target));
    }

    /// Each exporter's builder exists exactly when its feature is compiled in; without it, the
    /// error names the exporter and the feature.
    #[test]
    fn a_missing_feature_is_named() {
        let compiled = |feature: &str| match feature {
            "prometheus" => Some(cfg!(feature = "prometheus")),
            "otlp" => Some(cfg!(feature = "otlp")),
            "console" => Some(cfg!(feature = "console")),
            _ => None,
        };
        for entry in BUILT_IN {
            let built = [
                entry.metrics.as_ref().map(|s| s.build.is_some()),
                entry.traces.as_ref().map(|s| s.build.is_some()),
                entry.logs.as_ref().map(|s| s.build.is_some()),
            ];
            let built: Vec<bool> = built.into_iter().flatten().collect();
            assert!(built.iter().all(|b| *b == built[0]), "{}: built for some signals only", entry.name);
            if let Some(compiled) = compiled(entry.feature) {
                assert_eq!(built[0], compiled, "{}", entry.name);
            }
            let text = entry.disabled().to_string();
            assert_eq!(
                text,
                format!(
                    "the {} exporter is not built in; enable the `{}` feature of pipetel",
                    entry.name, entry.feature
                )
            );
        }
        #[cfg(not(feature = "otlp"))]
        assert!(matches!(
            builder(TraceExporter::Otlp),
            Err(InitError::FeatureDisabled { exporter: "otlp", feature: "otlp" })
        ));
    }

    /// The exporters guide lists every entry (written from the registry between its markers);
    /// `PIPETEL_BLESS=1` rewrites the list.
    #[test]
    fn exporters_guide_lists_every_built_in() {
        const START: &str = "<!-- built-in exporters: start -->\n";
        const END: &str = "<!-- built-in exporters: end -->";
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/src/exporters.md");
        let guide = std::fs::read_to_string(path).expect("docs/src/exporters.md");
        let (Some(start), Some(end)) = (guide.find(START), guide.find(END)) else {
            panic!("docs/src/exporters.md has no `{START}` ... `{END}` markers");
        };
        let fresh = format!("{}{}{}", &guide[..start + START.len()], guide_list(), &guide[end..]);
        if std::env::var("PIPETEL_BLESS").is_ok_and(|v| v == "1") {
            std::fs::write(path, &fresh).expect("write docs/src/exporters.md");
            return;
        }
        assert!(
            guide == fresh,
            "docs/src/exporters.md's list of built-in exporters is stale: rewrite it with \
             `PIPETEL_BLESS=1 cargo test -p pipetel --all-features --lib export::registry`"
        );
        for entry in BUILT_IN {
            assert!(guide.contains(&format!("| `{}` |", entry.name)), "{}", entry.name);
        }
    }
}
