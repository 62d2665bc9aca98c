//! The collector itself accepts every shipped config: `otelcol-pipetel validate --config` (the
//! collector `scripts/build-collector` builds from `otel-collector/builder-config.yaml`) passes
//! for `config.yaml`, `agent.yaml`, `gateway.yaml` and `gateway-stores.yaml`, both with the defaults the compose stack
//! relies on and with every address moved by the `${env:OTELCOL_...}` variables the tests use.
//! (`collector_configs_use_contrib_components` checks the same files statically: component
//! names, pipelines, ports, the compose mounts.)

use crate::support::otelcol::{shipped_config, validate};
use crate::support::{turn_if_peers, Peer};

const CONFIGS: [&str; 4] = ["config.yaml", "agent.yaml", "gateway.yaml", "gateway-stores.yaml"];

/// What every config needs from the environment: the agent's node name, the gateway's name.
const REQUIRED: [(&str, &str); 2] = [("NODE_NAME", "node-1"), ("HOSTNAME", "gateway-1")];

/// Every variable of `otel-collector/README.md`, "Addresses from the environment", set to a
/// loopback value of the kind the end-to-end tests give them.
const MOVED: [(&str, &str); 18] = [
    ("OTELCOL_OTLP_GRPC_ENDPOINT", "127.0.0.2:14317"),
    ("OTELCOL_OTLP_HTTP_ENDPOINT", "127.0.0.2:14318"),
    ("OTELCOL_HEALTH_CHECK_ENDPOINT", "127.0.0.2:23133"),
    ("OTELCOL_ZPAGES_ENDPOINT", "127.0.0.2:55680"),
    ("OTELCOL_PPROF_ENDPOINT", "127.0.0.2:11777"),
    ("OTELCOL_PROMETHEUS_ENDPOINT", "127.0.0.2:18889"),
    ("OTELCOL_TELEMETRY_HOST", "127.0.0.2"),
    ("OTELCOL_TEMPO_ENDPOINT", "127.0.0.1:24317"),
    ("OTELCOL_LOKI_URL", "http://127.0.0.1:24318"),
    ("OTELCOL_REMOTE_WRITE_URL", "http://127.0.0.1:9090/api/v1/write"),
    ("OTELCOL_VICTORIA_METRICS_URL", "http://127.0.0.1:18428"),
    ("OTELCOL_VICTORIA_LOGS_URL", "http://127.0.0.1:19428"),
    ("OTELCOL_JAEGER_ENDPOINT", "127.0.0.1:34317"),
    ("OTELCOL_GATEWAY_HOSTNAME", "pipetel-gateways.test"),
    ("OTELCOL_GATEWAY_PORT", "14317"),
    ("OTELCOL_TAIL_SAMPLING_DECISION_WAIT", "2s"),
    ("OTELCOL_TAIL_SAMPLING_SLOW_MS", "500"),
    ("OTELCOL_TAIL_SAMPLING_PERCENT", "25"),
];

/// Asserts that every shipped config validates with `env`; `with` goes into the failure message.
fn every_config_validates(env: &[(&str, &str)], with: &str) {
    for config in CONFIGS {
        let (code, out) = validate(&shipped_config(config), env);
        assert_eq!(code, Some(0), "otelcol validate --config otel-collector/{config}{with}:\n{out}");
    }
}

#[test]
fn every_shipped_config_validates_with_its_defaults() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Otelcol]) else { return };
    every_config_validates(&REQUIRED, "");
}

#[test]
fn every_shipped_config_validates_with_its_addresses_moved() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Otelcol]) else { return };
    let env: Vec<(&str, &str)> = REQUIRED.iter().chain(MOVED.iter()).copied().collect();
    every_config_validates(&env, &format!(" with {env:?}"));
}

#[test]
fn a_broken_config_fails_validation() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Otelcol]) else { return };
    // The check is not vacuous: a pipeline naming an exporter the config does not define is refused.
    let dir = std::env::temp_dir().join(format!("pipetel-validate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let broken = dir.join("broken.yaml");
    let text = std::fs::read_to_string(shipped_config("config.yaml")).expect("config.yaml");
    std::fs::write(&broken, text.replace("exporters: [prometheus]", "exporters: [prometheus, kafka]"))
        .expect("write broken config");
    let (code, out) = validate(&broken, &REQUIRED);
    let _ = std::fs::remove_dir_all(&dir);
    assert_ne!(code, Some(0), "a pipeline naming an undefined exporter passed validation:\n{out}");
    assert!(out.contains("kafka"), "{out}");
}
