//! A Prometheus port already in use is an error from `init` naming the address; nothing is left
//! installed, so a corrected `init` then succeeds.

#[test]
fn busy_port_names_the_address_and_leaves_nothing_installed() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port();
    let config = pipetel::Config::default().with_prometheus_host("127.0.0.1").with_console_log(false);
    let err = pipetel::init(config.clone().with_prometheus_port(port)).expect_err("the port is taken");
    assert!(matches!(err, pipetel::InitError::Bind { .. }), "{err:?}");
    assert!(err.to_string().contains(&format!("127.0.0.1:{port}")), "{err}");

    let telemetry = pipetel::init(config.with_prometheus_port(0)).expect("a free port works after the failure");
    assert!(telemetry.prometheus_addr().is_some());
}
