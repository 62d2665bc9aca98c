//! The resource every signal carries.

use opentelemetry::KeyValue;
use opentelemetry_sdk::Resource;

use crate::config::ResourceSettings;

/// The configured attributes, the service's identity, and what pipetel knows of the process.
pub(super) fn build(settings: &ResourceSettings) -> Resource {
    let mut attrs: Vec<KeyValue> =
        settings.attributes.iter().map(|(k, v)| KeyValue::new(k.clone(), v.clone())).collect();
    attrs.push(KeyValue::new("service.name", settings.service_name.clone()));
    if let Some(v) = &settings.service_version {
        attrs.push(KeyValue::new("service.version", v.clone()));
    }
    attrs.push(KeyValue::new("service.instance.id", uuid::Uuid::new_v4().to_string()));
    attrs.push(KeyValue::new("host.name", gethostname::gethostname().to_string_lossy().into_owned()));
    attrs.push(KeyValue::new("process.pid", i64::from(std::process::id())));
    attrs.push(KeyValue::new("telemetry.sdk.name", "opentelemetry"));
    attrs.push(KeyValue::new("telemetry.sdk.language", "rust"));
    attrs.push(KeyValue::new("telemetry.distro.name", "pipetel"));
    attrs.push(KeyValue::new("telemetry.distro.version", env!("CARGO_PKG_VERSION")));
    Resource::builder_empty().with_attributes(attrs).build()
}
