//! The end-to-end tests that drive pipetel from outside: the examples run as child processes
//! against real Prometheus, `promtool`, a real OTLP collector and the Python parser, and the
//! shipped operations files (dashboards, alert rules, collector configs) are checked. One test
//! binary, one module per behaviour; tests of different modules take turns
//! ([`support::turns`]).
//!
//! Compiled only with the `e2e` feature (`scripts/test` switches it on), so a plain
//! `cargo test` on a machine without the peers stays green. Tests that call `pipetel::init`
//! in this process are test binaries of their own beside this one (`init` is once per process).
#![cfg(feature = "e2e")]

#[path = "../support/mod.rs"]
mod support;

mod agent_to_two_gateways;
mod alert_rules_pass_promtool;
mod collector_configs_use_contrib_components;
mod collector_outage_never_blocks;
mod compose_prometheus_keeps_exemplars;
mod custom_exporter_example_receives_every_signal;
mod dashboards_and_alerts_query_real_prometheus;
mod dashboards_are_importable;
mod exemplar_trace_ids_resolve_in_jaeger;
mod exemplars_link_metrics_to_traces;
mod fleet_script_smoke;
mod fleet_stores_end_to_end;
mod gateway_tail_sampling_keeps_failed_traces;
mod gpu_dcgm_compat_rules;
mod gpu_gauges_in_prometheus;
mod gpu_health_alerts_fire_in_prometheus;
mod http_server_metrics_in_prometheus;
mod multiprocess_hub_exports_exact_totals;
mod names_agree_on_both_routes;
mod otlp_reaches_a_real_collector;
mod pipeline_rows_reach_a_real_collector;
mod pipeline_stages_in_prometheus;
mod prometheus_scrapes_a_million_series;
mod prometheus_scrapes_the_pull_endpoint;
mod python_workers_feed_a_rust_hub;
mod ratio_sampling_keeps_whole_traces;
mod registry_and_service_in_prometheus;
mod reliability_collector_outage_recovers_totals;
mod rows_survive_a_collector_restart;
mod sdk_disabled_exports_nothing;
mod shipped_configs_validate;
mod sigterm_flushes_telemetry_before_exit;
mod single_collector_config_end_to_end;
