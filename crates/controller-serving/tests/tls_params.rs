//! `--tls-min-version`, `--tls-cipher-suites`, `--tls-curve-preferences`,
//! `--disable-http2-serving` and `--permit-port-sharing` end to end: handshakes with real TLS
//! clients, and sockets.

#![allow(clippy::expect_used, clippy::unwrap_used)] // Test helpers outside #[test] fns.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;

use common::{free_port, init_tracing, loopback_settings};
use controller_serving::{
    Bound, CertificateDer, Health, MetricsRegistry, SecureServing, parse_tls_params, serve_secure,
};
use rustls::crypto::CryptoProvider;
use rustls::crypto::aws_lc_rs::{cipher_suite, default_provider, kx_group};
use rustls::pki_types::ServerName;
use rustls::version::{TLS12, TLS13};
use rustls::{SupportedCipherSuite, SupportedProtocolVersion};
use tokio_util::sync::CancellationToken;

/// Starts the secure server with the TLS flags given as upstream spells them.
async fn start(min_version: &str, suites: &[&str], curves: &[&str], http2: bool) -> (Bound, CancellationToken) {
    init_tracing();
    let strings = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let parsed = parse_tls_params(min_version, &strings(suites), &strings(curves)).expect("valid TLS flags");
    let shutdown = CancellationToken::new();
    let settings = SecureServing { tls: parsed.params, http2, ..loopback_settings(free_port()) };
    let bound = serve_secure(&settings, Health::new(), MetricsRegistry::new(), None, shutdown.clone())
        .await
        .expect("starting")
        .expect("a port");
    (bound, shutdown)
}

/// A client restricted to `versions`, `suites` (empty: all) and `groups` (empty: defaults).
async fn connect(
    addr: SocketAddr,
    ca: &CertificateDer<'static>,
    versions: &[&'static SupportedProtocolVersion],
    suites: &[SupportedCipherSuite],
    groups: &[&'static dyn rustls::crypto::SupportedKxGroup],
    alpn: &[&[u8]],
) -> Result<Option<Vec<u8>>, String> {
    let mut provider: CryptoProvider = default_provider();
    if !suites.is_empty() {
        provider.cipher_suites = suites.to_vec();
    }
    if !groups.is_empty() {
        provider.kx_groups = groups.to_vec();
    }
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).map_err(|e| e.to_string())?;
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let stream = connector.connect(name, tcp).await.map_err(|e| e.to_string())?;
    Ok(stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec))
}

fn ca_of(bound: &Bound) -> CertificateDer<'static> {
    bound.certificate_chain.last().cloned().expect("the generated CA")
}

#[tokio::test]
async fn a_handshake_below_the_minimum_version_is_refused() {
    let (bound, shutdown) = start("VersionTLS13", &[], &[], true).await;
    let (addr, ca) = (bound.local_addr, ca_of(&bound));
    let refused = connect(addr, &ca, &[&TLS12], &[], &[], &[]).await;
    assert!(refused.is_err(), "a TLS 1.2 client must be refused: {refused:?}");
    connect(addr, &ca, &[&TLS13], &[], &[], &[]).await.expect("TLS 1.3 is accepted");
    shutdown.cancel();

    let (bound, shutdown) = start("VersionTLS12", &[], &[], true).await;
    connect(bound.local_addr, &ca_of(&bound), &[&TLS12], &[], &[], &[]).await.expect("TLS 1.2 is accepted");
    shutdown.cancel();
}

#[tokio::test]
async fn a_handshake_outside_the_cipher_suites_is_refused() {
    // The generated certificate has an ECDSA key.
    let (bound, shutdown) = start("", &["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"], &[], true).await;
    let (addr, ca) = (bound.local_addr, ca_of(&bound));
    let other = [cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384];
    let refused = connect(addr, &ca, &[&TLS12], &other, &[], &[]).await;
    assert!(refused.is_err(), "a client offering only another TLS 1.2 suite must be refused: {refused:?}");
    let listed = [cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256];
    connect(addr, &ca, &[&TLS12], &listed, &[], &[]).await.expect("the listed suite is accepted");
    // As in Go, TLS 1.3 suites are not restricted.
    let tls13 = [cipher_suite::TLS13_CHACHA20_POLY1305_SHA256];
    connect(addr, &ca, &[&TLS13], &tls13, &[], &[]).await.expect("TLS 1.3 suites stay enabled");
    shutdown.cancel();
}

#[tokio::test]
async fn a_handshake_outside_the_curve_preferences_is_refused() {
    let (bound, shutdown) = start("", &[], &["CurveP384"], true).await;
    let (addr, ca) = (bound.local_addr, ca_of(&bound));
    let refused = connect(addr, &ca, &[&TLS13, &TLS12], &[], &[kx_group::X25519], &[]).await;
    assert!(refused.is_err(), "a client with only X25519 must be refused: {refused:?}");
    connect(addr, &ca, &[&TLS13, &TLS12], &[], &[kx_group::SECP384R1], &[]).await.expect("P-384 is accepted");
    shutdown.cancel();
}

#[tokio::test]
async fn disabling_http2_leaves_http1_by_alpn() {
    let (bound, shutdown) = start("", &[], &[], false).await;
    let alpn = connect(bound.local_addr, &ca_of(&bound), &[&TLS13], &[], &[], &[b"h2", b"http/1.1"]).await;
    assert_eq!(alpn, Ok(Some(b"http/1.1".to_vec())));
    shutdown.cancel();
    let (bound, shutdown) = start("", &[], &[], true).await;
    let alpn = connect(bound.local_addr, &ca_of(&bound), &[&TLS13], &[], &[], &[b"h2", b"http/1.1"]).await;
    assert_eq!(alpn, Ok(Some(b"h2".to_vec())));
    shutdown.cancel();
}

#[tokio::test]
async fn port_sharing_lets_two_servers_listen_on_one_port() {
    init_tracing();
    let shutdown = CancellationToken::new();
    let shared = SecureServing { reuse_port: true, ..loopback_settings(free_port()) };
    let serve = |settings: SecureServing| {
        let shutdown = shutdown.clone();
        async move { serve_secure(&settings, Health::new(), MetricsRegistry::new(), None, shutdown).await }
    };
    let first = serve(shared.clone()).await.expect("the first server").expect("a port");
    let second = serve(shared.clone()).await.expect("the second server shares the port").expect("a port");
    assert_eq!(first.local_addr, second.local_addr);
    let exclusive = SecureServing { reuse_port: false, ..shared };
    assert!(serve(exclusive).await.is_err(), "without --permit-port-sharing the port is taken");
    shutdown.cancel();
}

/// Accepts any server certificate: the test only looks at which one was presented.
#[derive(Debug)]
struct AnyServer;

impl rustls::client::danger::ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        default_provider().signature_verification_algorithms.supported_schemes()
    }
}

/// The leaf certificate presented to a client asking for `name` (`None`: no SNI, by IP).
async fn presented(addr: SocketAddr, name: &str) -> CertificateDer<'static> {
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServer))
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let server_name = ServerName::try_from(name.to_owned()).unwrap();
    let stream = connector.connect(server_name, tcp).await.expect("a handshake");
    stream.get_ref().1.peer_certificates().and_then(|c| c.first()).cloned().expect("a certificate")
}

/// A self-signed certificate for `names` written to `dir`; returns its DER and the files.
fn certificate(dir: &tempfile::TempDir, file: &str, names: &[&str]) -> (CertificateDer<'static>, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>()).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let (cert_path, key_path) = (dir.path().join(format!("{file}.crt")), dir.path().join(format!("{file}.key")));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (cert.der().clone(), format!("{},{}", cert_path.display(), key_path.display()))
}

#[tokio::test]
async fn sni_certificates_are_chosen_by_the_requested_name() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let (a, a_files) = certificate(&dir, "a", &["a.example"]);
    let (b, b_files) = certificate(&dir, "b", &["b.example"]);
    let flags = [a_files, format!("{b_files}:*.wild.example,explicit.example")];
    let sni = flags.iter().map(|f| controller_serving::SniCertKey::parse(f).unwrap()).collect();
    let shutdown = CancellationToken::new();
    let settings = SecureServing { sni_certificates: sni, ..loopback_settings(free_port()) };
    let bound = serve_secure(&settings, Health::new(), MetricsRegistry::new(), None, shutdown.clone())
        .await
        .expect("starting")
        .expect("a port");
    let default = bound.certificate_chain.first().cloned().unwrap();
    let addr = bound.local_addr;
    assert_eq!(presented(addr, "a.example").await, a, "a name from the certificate");
    assert_eq!(presented(addr, "x.wild.example").await, b, "a wildcard pattern");
    assert_eq!(presented(addr, "explicit.example").await, b, "an explicit pattern");
    // Explicit names replace the certificate's own: b.example is not served by b.
    assert_eq!(presented(addr, "b.example").await, default);
    assert_eq!(presented(addr, "x.y.wild.example").await, default, "a wildcard covers one label");
    assert_eq!(presented(addr, "localhost").await, default);
    shutdown.cancel();
}
