//! The certificates of the OTLP-over-TLS tests, made with rcgen.

use std::path::Path;

/// The test CA and the server and client certificates the TLS tests use, as PEM files in `dir`:
/// `ca.pem`, `other_ca.pem` (a CA that signed nothing here), `good.pem`/`.key` (127.0.0.1 and
/// localhost), `expired.pem`/`.key`, `wrong_host.pem`/`.key` (only `wrong.example`),
/// `client.pem`/`.key` (a client certificate signed by the CA).
pub fn make_pki(dir: &Path) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType};
    let write = |name: &str, text: String| std::fs::write(dir.join(name), text).expect("write a PEM file");
    let ca = |cn: &str| {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        params.distinguished_name.push(DnType::CommonName, cn);
        let cert = params.self_signed(&key).expect("self-signed CA");
        (cert.pem(), Issuer::new(params, key))
    };
    let (ca_pem, issuer) = ca("pipetel test CA");
    write("ca.pem", ca_pem);
    write("other_ca.pem", ca("pipetel other CA").0);
    let leaf = |name: &str, hosts: &[&str], ip: bool, expired: bool| {
        let key = KeyPair::generate().expect("leaf key");
        let mut params =
            CertificateParams::new(hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>()).expect("params");
        if ip {
            params.subject_alt_names.push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
        }
        params.distinguished_name.push(DnType::CommonName, name);
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let cert = params.signed_by(&key, &issuer).expect("signed by the CA");
        write(&format!("{name}.pem"), cert.pem());
        write(&format!("{name}.key"), key.serialize_pem());
    };
    leaf("good", &["localhost"], true, false);
    leaf("expired", &["localhost"], true, true);
    leaf("wrong_host", &["wrong.example"], false, false);
    leaf("client", &["pipetel-test-client"], false, false);
}
