//! `Config::resolve`: every value checked once, by its setting's rule and naming its origin,
//! and the whole turned into the plain `Settings` each part of `init` reads.

use std::path::PathBuf;
use std::time::Duration;

use std::fmt;

use super::builder::Config;
use super::otlp::OtlpTarget;
use super::rule::{certificate_and_key, One, Set, Slot, REDACTED};
use super::syntax::{instance_id_template, IdPart};
use super::table::{Defaults, PIPETEL_PROMETHEUS_TLS_CERT, PIPETEL_PROMETHEUS_TLS_KEY};
use super::values::{
    ExemplarFilter, HistogramAggregation, LogExporter, LogFormat, MetricExporter, MetricTemporality, Propagator,
    SamplerConfig, Signal, TraceExporter,
};
use pipetel_core::settings::PipelineSettings;
use pipetel_core::settings::{ConfigError, Sourced};
use pipetel_core::settings::{ServiceMetricsConfig, SpanMetricsConfig};

/// The configuration resolved into plain values, grouped by what each part of `init` builds.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Every signal a no-op (`OTEL_SDK_DISABLED`).
    pub(crate) sdk_disabled: bool,
    /// The global text-map propagators, in order (`OTEL_PROPAGATORS`); empty: none.
    pub(crate) propagators: Vec<Propagator>,
    /// The resource every signal carries.
    pub(crate) resource: ResourceSettings,
    /// The meter provider's readers and exporters.
    pub(crate) metrics: MetricsSettings,
    /// The tracer provider's sampler and exporters.
    pub(crate) traces: TracesSettings,
    /// The logger provider's exporters.
    pub(crate) logs: LogsSettings,
    /// Where profiles go over OTLP; `None` when no endpoint applies to them (neither the generic
    /// one nor their own is set).
    pub(crate) profiles_otlp: Option<OtlpTarget>,
    /// The `tracing` subscriber.
    pub(crate) subscriber: SubscriberSettings,
    /// Stage and worker telemetry.
    pub(crate) pipeline: PipelineSettings,
    /// Service metrics switches, prefix and default buckets.
    pub(crate) service: ServiceMetricsConfig,
    /// The span-metrics layer; the origin is its filter's.
    pub(crate) span_metrics: Sourced<SpanMetricsConfig>,
    /// GPU telemetry.
    #[cfg(feature = "gpu")]
    pub(crate) gpu: pipetel_gpu::GpuConfig,
    /// The sampling profiler and its rate (samples per CPU second).
    pub(crate) profile: (pipetel_core::settings::ProfileMode, u32),
    /// Upper bound of flush and shutdown.
    pub(crate) shutdown_timeout: Duration,
    /// Most attribute sets kept per metric instrument (SDK views, registry, pipeline).
    pub(crate) cardinality_limit: usize,
    /// Deprecated spellings met while reading, to log once a subscriber exists.
    pub(crate) deprecations: Vec<String>,
}

/// The resource's attributes from the configuration.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResourceSettings {
    /// `service.name`: set in code or `OTEL_SERVICE_NAME`, else `service.name` among the
    /// resource attributes, else `unknown_service:<exe>`.
    pub(crate) service_name: String,
    /// `service.version`, when given.
    pub(crate) service_version: Option<String>,
    /// The other attributes the user gave (`service.name` taken out, and `service.instance.id`
    /// when `instance_id` is set). They win over every detected attribute.
    pub(crate) attributes: Vec<(String, String)>,
    /// `service.instance.id` made by `PIPETEL_INSTANCE_ID`; `None`: the one among `attributes`,
    /// else a random UUID.
    pub(crate) instance_id: Option<String>,
    /// `k8s.*` attributes from the downward-API variables, when `KUBERNETES_SERVICE_HOST` is set.
    pub(crate) kubernetes: Vec<(String, String)>,
}

/// What the meter provider is built with.
#[derive(Debug, Clone)]
// The push exporters read the interval and temporality; without them nothing does.
#[cfg_attr(not(any(feature = "otlp", feature = "console")), allow(dead_code))]
pub(crate) struct MetricsSettings {
    /// The metric exporters in effect.
    pub(crate) exporters: Vec<MetricExporter>,
    /// The pull endpoint (used when `exporters` holds [`MetricExporter::Prometheus`]).
    pub(crate) prometheus: PrometheusSettings,
    /// The OTLP target (used when `exporters` holds [`MetricExporter::Otlp`]).
    pub(crate) otlp: OtlpTarget,
    /// Interval of pushed exports.
    pub(crate) export_interval: Duration,
    /// Which measurements may carry an exemplar.
    pub(crate) exemplar_filter: ExemplarFilter,
    /// Temporality of the OTLP exports (the pull reader is always cumulative).
    pub(crate) temporality: MetricTemporality,
    /// Aggregation of histograms that name no other.
    pub(crate) histogram_aggregation: HistogramAggregation,
    /// Export the process metrics (`PIPETEL_PROCESS_METRICS`).
    pub(crate) process_metrics: bool,
}

/// The span limits the tracer provider applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SpanLimitsSettings {
    /// Most attributes per span.
    pub(crate) attributes_per_span: u32,
    /// Most events per span.
    pub(crate) events_per_span: u32,
    /// Most links per span.
    pub(crate) links_per_span: u32,
    /// Most attributes per span event.
    pub(crate) attributes_per_event: u32,
    /// Most attributes per span link.
    pub(crate) attributes_per_link: u32,
}

/// A batch processor's settings, defaults filled in (they are the SDK's, which would otherwise
/// read the process environment itself, past `Config::from_lookup` and `Config::default`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchSettings {
    /// Delay between two exports.
    pub(crate) schedule_delay: Duration,
    /// Most items queued; more are dropped.
    pub(crate) max_queue_size: usize,
    /// Most items per export.
    pub(crate) max_export_batch_size: usize,
}

/// The Prometheus pull endpoint. Its `Debug` output redacts the credentials.
#[derive(Clone)]
pub(crate) struct PrometheusSettings {
    /// Host it binds to.
    pub(crate) host: String,
    /// Port (`0` picks a free one).
    pub(crate) port: u16,
    /// Path it serves.
    pub(crate) path: String,
    /// A bearer token it requires.
    pub(crate) bearer_token: Option<String>,
    /// A basic-auth user and password it requires.
    pub(crate) basic_auth: Option<(String, String)>,
    /// Certificate chain and key for HTTPS; the origin is the certificate's.
    pub(crate) tls: Option<Sourced<(PathBuf, PathBuf)>>,
}

impl fmt::Debug for PrometheusSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrometheusSettings")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("path", &self.path)
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| REDACTED))
            .field("basic_auth", &self.basic_auth.as_ref().map(|(user, _)| (user, REDACTED)))
            .field("tls", &self.tls)
            .finish()
    }
}

/// What the tracer provider is built with.
#[derive(Debug, Clone)]
pub(crate) struct TracesSettings {
    /// The trace exporters in effect.
    pub(crate) exporters: Vec<TraceExporter>,
    /// The sampler.
    pub(crate) sampler: SamplerConfig,
    /// The OTLP target (used when `exporters` holds [`TraceExporter::Otlp`]); its timeout is
    /// bounded by `OTEL_BSP_EXPORT_TIMEOUT`.
    pub(crate) otlp: OtlpTarget,
    /// The span limits.
    pub(crate) limits: SpanLimitsSettings,
    /// The batch span processor.
    pub(crate) batch: BatchSettings,
    /// The `EnvFilter` directives of the spans exported (and measured by `span.duration`),
    /// independent of the console's (`PIPETEL_TRACES_FILTER`).
    pub(crate) filter: Sourced<String>,
}

/// What the logger provider is built with.
#[derive(Debug, Clone)]
pub(crate) struct LogsSettings {
    /// The log exporters in effect.
    pub(crate) exporters: Vec<LogExporter>,
    /// The OTLP target (used when `exporters` holds [`LogExporter::Otlp`]); its timeout is
    /// bounded by `OTEL_BLRP_EXPORT_TIMEOUT`.
    pub(crate) otlp: OtlpTarget,
    /// The batch log record processor.
    pub(crate) batch: BatchSettings,
    /// The `EnvFilter` directives of the events exported as log records, independent of the
    /// console's (`PIPETEL_LOGS_FILTER`).
    pub(crate) filter: Sourced<String>,
}

/// The `tracing` subscriber `init` installs.
#[derive(Debug, Clone)]
pub(crate) struct SubscriberSettings {
    /// The filter directives, and where they came from.
    pub(crate) log_filter: Sourced<String>,
    /// Print events to stderr.
    pub(crate) console: bool,
    /// The console's line format (`PIPETEL_LOG_FORMAT`).
    pub(crate) format: LogFormat,
}

impl Config {
    /// Checks every value with its setting's rule (values set in code included) and the settings
    /// that go together, and resolves the whole into plain `Settings`: defaults filled in, the
    /// exporters in effect chosen, each signal's OTLP target resolved.
    ///
    /// # Errors
    /// The first value that is refused, naming where it came from (setter, variable or file key).
    pub(crate) fn resolve(&self) -> Result<Settings, ConfigError> {
        self.slots.check_all()?;
        let tls = certificate_and_key(
            self.slots.prometheus_tls_cert.as_ref(),
            self.slots.prometheus_tls_key.as_ref(),
            format!("needs a key too ({PIPETEL_PROMETHEUS_TLS_KEY} or prometheus.tls_key)"),
            format!("needs a certificate too ({PIPETEL_PROMETHEUS_TLS_CERT} or prometheus.tls_cert)"),
        )?
        .map(|(cert, key)| Sourced::new((cert.value.clone(), key.value.clone()), cert.origin.clone()));
        let metrics_exporters = self.metrics_exporters();
        if let Some(set) = &self.slots.histogram_aggregation {
            if set.value == HistogramAggregation::Base2Exponential
                && metrics_exporters.contains(&MetricExporter::Prometheus)
            {
                return Err(ConfigError::invalid(
                    set.origin.clone(),
                    "base2_exponential_bucket_histogram",
                    "the aggregation applies to every reader and the Prometheus pull endpoint cannot render \
                     exponential histograms; drop `prometheus` from the metric exporters or keep \
                     explicit_bucket_histogram",
                ));
            }
        }
        Ok(Settings {
            sdk_disabled: self.sdk_disabled(),
            propagators: self.propagators(),
            resource: self.resource_settings()?,
            metrics: MetricsSettings {
                exporters: metrics_exporters,
                prometheus: PrometheusSettings {
                    host: self.prometheus_host().to_string(),
                    port: self.prometheus_port(),
                    path: self.prometheus_path().to_string(),
                    bearer_token: self.prometheus_bearer_token().map(str::to_string),
                    basic_auth: self.prometheus_basic_auth().map(|(u, p)| (u.to_string(), p.to_string())),
                    tls,
                },
                otlp: bounded(self.otlp_target(Signal::Metrics)?, self.metric_export_timeout()),
                export_interval: self.metric_export_interval(),
                exemplar_filter: self.exemplar_filter(),
                temporality: self.metric_temporality(),
                histogram_aggregation: self.histogram_aggregation(),
                process_metrics: self.process_metrics(),
            },
            traces: TracesSettings {
                exporters: self.traces_exporters(),
                sampler: self.sampler(),
                otlp: bounded(
                    self.otlp_target(Signal::Traces)?,
                    self.slots
                        .bsp_export_timeout
                        .value()
                        .copied()
                        .unwrap_or(const { Defaults::bsp_export_timeout.get() }),
                ),
                limits: self.span_limits(),
                batch: batch(
                    (&self.slots.bsp_schedule_delay, const { Defaults::bsp_schedule_delay.get() }),
                    (&self.slots.bsp_max_queue_size, const { Defaults::bsp_max_queue_size.get() }),
                    (&self.slots.bsp_max_export_batch_size, const { Defaults::bsp_max_export_batch_size.get() }),
                )?,
                filter: Sourced::new(self.traces_filter().to_string(), self.slots.traces_filter.origin()),
            },
            logs: LogsSettings {
                exporters: self.logs_exporters(),
                otlp: bounded(
                    self.otlp_target(Signal::Logs)?,
                    self.slots
                        .blrp_export_timeout
                        .value()
                        .copied()
                        .unwrap_or(const { Defaults::blrp_export_timeout.get() }),
                ),
                batch: batch(
                    (&self.slots.blrp_schedule_delay, const { Defaults::blrp_schedule_delay.get() }),
                    (&self.slots.blrp_max_queue_size, const { Defaults::blrp_max_queue_size.get() }),
                    (&self.slots.blrp_max_export_batch_size, const { Defaults::blrp_max_export_batch_size.get() }),
                )?,
                filter: Sourced::new(self.logs_filter().to_string(), self.slots.logs_filter.origin()),
            },
            profiles_otlp: self.profiles_otlp_target()?,
            subscriber: SubscriberSettings {
                log_filter: Sourced::new(self.log_filter().to_string(), self.slots.log_filter.origin()),
                console: self.console_log(),
                format: self.log_format(),
            },
            pipeline: PipelineSettings {
                namespace: self.namespace().to_string(),
                sample_interval: self.sample_interval(),
                retention: self.stage_retention(),
                rows_file: self.slots.rows_file.as_ref().map(|s| Sourced::new(s.value.clone(), s.origin.clone())),
                metrics: self.stage_metrics(),
                counter_metrics: self.stage_counter_metrics(),
                rows: self.rows_enabled(),
                rows_dir: self.slots.rows_dir.as_ref().map(|s| Sourced::new(s.value.clone(), s.origin.clone())),
                rows_rotation: pipetel_rows::Rotation { max_bytes: self.rows_max_bytes(), keep: self.rows_keep() },
                progress: self.progress(),
                answers: pipetel_core::settings::AnswerSettings {
                    skew_min: self.skew_min(),
                    stall_timeout: self.stall_timeout(),
                    stall_action: self.stall_action(),
                    shard_metrics: self.shard_metrics(),
                },
            },
            service: self.service_metrics(),
            span_metrics: Sourced::new(self.span_metrics(), self.slots.span_metrics_filter.origin()),
            #[cfg(feature = "gpu")]
            gpu: self.gpu(),
            profile: (self.profile(), self.profile_hz()),
            shutdown_timeout: self.shutdown_timeout(),
            cardinality_limit: self.cardinality_limit(),
            deprecations: self.deprecations.clone(),
        })
    }

    /// `OTEL_SERVICE_NAME` (or code) beats `service.name` in `OTEL_RESOURCE_ATTRIBUTES`, which
    /// beats the default; `PIPETEL_INSTANCE_ID` (other than `random`) beats `service.instance.id`
    /// there in the same way.
    fn resource_settings(&self) -> Result<ResourceSettings, ConfigError> {
        let from_attributes =
            self.resource_attributes().iter().find(|(k, _)| k == "service.name").map(|(_, v)| v.clone());
        let service_name = match (self.slots.service_name.value(), from_attributes) {
            (Some(name), _) => name.clone(),
            (None, Some(name)) => name,
            (None, None) => self.service_name(),
        };
        let k8s = &self.slots;
        let in_cluster = k8s.k8s_service_host.value().is_some_and(|h| !h.trim().is_empty());
        let kubernetes: Vec<(String, String)> = if in_cluster {
            [
                ("k8s.pod.name", &k8s.k8s_pod_name),
                ("k8s.pod.uid", &k8s.k8s_pod_uid),
                ("k8s.namespace.name", &k8s.k8s_namespace_name),
                ("k8s.node.name", &k8s.k8s_node_name),
                ("k8s.container.name", &k8s.k8s_container_name),
            ]
            .into_iter()
            .filter_map(|(key, slot)| {
                slot.value().map(|v| v.trim()).filter(|v| !v.is_empty()).map(|v| (key.to_string(), v.to_string()))
            })
            .collect()
        } else {
            Vec::new()
        };
        let pod = kubernetes.iter().find(|(k, _)| k == "k8s.pod.name").map(|(_, v)| v.as_str());
        let instance_id = match &self.slots.instance_id {
            Some(set) => expand_instance_id(set, pod)?,
            None => None,
        };
        let attributes = self
            .resource_attributes()
            .iter()
            .filter(|(k, _)| k != "service.name" && !(instance_id.is_some() && k == "service.instance.id"))
            .cloned()
            .collect();
        Ok(ResourceSettings {
            service_name,
            service_version: self.service_version().map(str::to_string),
            attributes,
            instance_id,
            kubernetes,
        })
    }
}

/// The instance id `set` describes, made now: `None` for `random`. `{pod}` without
/// `K8S_POD_NAME` is the host name (which Kubernetes sets to the pod's name).
fn expand_instance_id(set: &Set<String>, pod: Option<&str>) -> Result<Option<String>, ConfigError> {
    let parts = instance_id_template(&set.value)
        .map_err(|reason| ConfigError::invalid(set.origin.clone(), set.value.clone(), reason))?;
    let Some(parts) = parts else { return Ok(None) };
    let hostname = || gethostname::gethostname().to_string_lossy().into_owned();
    let mut id = String::new();
    for part in parts {
        match part {
            IdPart::Text(text) => id.push_str(&text),
            IdPart::Hostname => id.push_str(&hostname()),
            IdPart::Pid => id.push_str(&std::process::id().to_string()),
            IdPart::Pod => id.push_str(&pod.map_or_else(hostname, str::to_string)),
        }
    }
    Ok(Some(id))
}

/// `target` with its timeout no longer than the signal's export timeout: the batch processors
/// and the periodic reader of SDK 0.33 leave the bound to the exporter.
fn bounded(mut target: OtlpTarget, export_timeout: Duration) -> OtlpTarget {
    target.timeout = target.timeout.min(export_timeout);
    target
}

impl Config {
    /// Each limit from its own variable, else `OTEL_ATTRIBUTE_COUNT_LIMIT` for attribute counts,
    /// else its default.
    fn span_limits(&self) -> SpanLimitsSettings {
        let s = &self.slots;
        let general = s.attribute_count_limit.value().copied();
        let general = general.unwrap_or(const { Defaults::attribute_count_limit.get() });
        let or = |own: &One<u32>, default: u32| own.value().copied().unwrap_or(default);
        SpanLimitsSettings {
            attributes_per_span: or(&s.span_attribute_count_limit, general),
            events_per_span: or(&s.span_event_count_limit, const { Defaults::span_event_count_limit.get() }),
            links_per_span: or(&s.span_link_count_limit, const { Defaults::span_link_count_limit.get() }),
            attributes_per_event: or(&s.event_attribute_count_limit, general),
            attributes_per_link: or(&s.link_attribute_count_limit, general),
        }
    }
}

/// One batch processor's values, each a slot with its default; a batch size above the queue size
/// is an error naming it.
fn batch(
    (schedule_delay, default_delay): (&One<Duration>, Duration),
    (max_queue_size, default_queue): (&One<usize>, usize),
    (max_export_batch_size, default_batch): (&One<usize>, usize),
) -> Result<BatchSettings, ConfigError> {
    let queue = max_queue_size.value().copied().unwrap_or(default_queue);
    if let Some(batch) = max_export_batch_size {
        if batch.value > queue {
            let reason = format!("must not exceed the queue size ({queue})");
            return Err(ConfigError::invalid(batch.origin.clone(), batch.value.to_string(), reason));
        }
    }
    Ok(BatchSettings {
        schedule_delay: schedule_delay.value().copied().unwrap_or(default_delay),
        max_queue_size: queue,
        // A smaller queue bounds the default batch, as the SDK bounds it.
        max_export_batch_size: max_export_batch_size.value().copied().unwrap_or(default_batch.min(queue)),
    })
}
