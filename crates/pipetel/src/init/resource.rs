//! The resource every signal carries.
//!
//! Detected attributes first, then what the user gave over them: a key the user set
//! (`OTEL_RESOURCE_ATTRIBUTES`, the file's `[resource]` table, `Config::with_resource_attribute`)
//! is never replaced by a detected value. Detected: `service.instance.id` (a random UUID unless
//! `PIPETEL_INSTANCE_ID` makes one), `host.name`, `process.pid`, the `k8s.*` attributes of the
//! downward API, and `telemetry.sdk.*` (the OpenTelemetry SDK's own name, language and version)
//! with `telemetry.distro.*` (pipetel's).

use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::resource::{ResourceDetector, TelemetryResourceDetector};
use opentelemetry_sdk::Resource;

use crate::config::ResourceSettings;

/// The resource: detected attributes, overridden by the user's, and the service's identity.
pub(super) fn build(settings: &ResourceSettings) -> Resource {
    Resource::builder_empty().with_attributes(attributes(settings)).build()
}

/// The attributes in order of precedence, lowest first, each key once (the last one wins).
fn attributes(settings: &ResourceSettings) -> Vec<KeyValue> {
    let mut attrs: Vec<KeyValue> = Vec::new();
    let mut put = |kv: KeyValue| match attrs.iter_mut().find(|existing| existing.key == kv.key) {
        Some(slot) => *slot = kv,
        None => attrs.push(kv),
    };
    // Detected.
    let instance = settings.instance_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    put(KeyValue::new("service.instance.id", instance));
    put(KeyValue::new("host.name", gethostname::gethostname().to_string_lossy().into_owned()));
    put(KeyValue::new("process.pid", i64::from(std::process::id())));
    for (k, v) in &settings.kubernetes {
        put(KeyValue::new(k.clone(), v.clone()));
    }
    for (k, v) in TelemetryResourceDetector.detect().iter() {
        put(KeyValue::new(k.clone(), v.clone()));
    }
    put(KeyValue::new("telemetry.distro.name", "pipetel"));
    put(KeyValue::new("telemetry.distro.version", env!("CARGO_PKG_VERSION")));
    // The user's.
    for (k, v) in &settings.attributes {
        put(KeyValue::new(k.clone(), v.clone()));
    }
    put(KeyValue::new("service.name", settings.service_name.clone()));
    if let Some(v) = &settings.service_version {
        put(KeyValue::new("service.version", v.clone()));
    }
    if let Some(id) = &settings.instance_id {
        put(KeyValue::new("service.instance.id", Value::from(id.clone())));
    }
    attrs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn resource(config: Config) -> Vec<(String, String)> {
        let settings = config.resolve().expect("valid");
        let mut out: Vec<(String, String)> =
            attributes(&settings.resource).into_iter().map(|kv| (kv.key.to_string(), kv.value.to_string())).collect();
        out.sort();
        out
    }

    fn get<'a>(attrs: &'a [(String, String)], key: &str) -> Option<&'a str> {
        attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    #[test]
    fn user_attributes_win_over_detected_ones() {
        let attrs = resource(
            Config::default()
                .with_resource_attribute("service.instance.id", "given-id")
                .with_resource_attribute("host.name", "given-host")
                .with_resource_attribute("process.pid", "7"),
        );
        assert_eq!(get(&attrs, "service.instance.id"), Some("given-id"));
        assert_eq!(get(&attrs, "host.name"), Some("given-host"));
        assert_eq!(get(&attrs, "process.pid"), Some("7"));
        assert_eq!(attrs.iter().filter(|(k, _)| k == "host.name").count(), 1);
    }

    #[test]
    fn telemetry_sdk_attributes_are_complete() {
        let attrs = resource(Config::default());
        assert_eq!(get(&attrs, "telemetry.sdk.name"), Some("opentelemetry"));
        assert_eq!(get(&attrs, "telemetry.sdk.language"), Some("rust"));
        let sdk = get(&attrs, "telemetry.sdk.version").expect("sdk version");
        assert!(sdk.starts_with("0.33."), "the OpenTelemetry SDK's version, not pipetel's: {sdk}");
        assert_eq!(get(&attrs, "telemetry.distro.name"), Some("pipetel"));
        assert_eq!(get(&attrs, "telemetry.distro.version"), Some(env!("CARGO_PKG_VERSION")));
        let id = get(&attrs, "service.instance.id").expect("instance id");
        assert!(uuid::Uuid::parse_str(id).is_ok(), "random UUID by default: {id}");
    }

    #[test]
    fn instance_id_recipe_beats_the_attribute_and_is_stable() {
        let host = gethostname::gethostname().to_string_lossy().into_owned();
        let config = Config::default()
            .with_resource_attribute("service.instance.id", "from-attributes")
            .with_instance_id("hostname-pid");
        let expected = format!("{host}-{}", std::process::id());
        assert_eq!(get(&resource(config.clone()), "service.instance.id"), Some(expected.as_str()));
        assert_eq!(get(&resource(config), "service.instance.id"), Some(expected.as_str()), "same id every time");
        let literal = resource(Config::default().with_instance_id("worker-{pid}-a"));
        assert_eq!(get(&literal, "service.instance.id"), Some(format!("worker-{}-a", std::process::id()).as_str()));
    }
}
