//! Helpers shared by the integration tests: starting the secure server on a free loopback
//! port, HTTPS clients that trust exactly the server's CA, raw TLS handshakes.

#![allow(clippy::expect_used, clippy::unwrap_used)] // Test helpers: a failed set-up fails the test.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use controller_serving::{
    Bound, CertificateDer, DelegatingAuth, Health, Limits, MetricsRegistry, SecureServing, ServeError,
    serve_secure_with,
};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

/// Log to the test output (shown for failing tests) once per binary.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("controller_serving=debug"))
        .with_test_writer()
        .try_init();
}

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0");
    listener.local_addr().expect("local address").port()
}

/// Settings for 127.0.0.1 on a free port, self-signed.
pub fn loopback_settings(port: u16) -> SecureServing {
    SecureServing {
        bind_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
        port,
        cert_file: None,
        key_file: None,
        cert_name: "test-controller-manager".to_owned(),
        ..SecureServing::default()
    }
}

/// A running secure server and what stops it (it also stops with the test's runtime).
pub struct Running {
    pub bound: Bound,
    pub shutdown: CancellationToken,
}

impl Running {
    pub fn addr(&self) -> SocketAddr {
        self.bound.local_addr
    }

    /// The CA that signed the generated serving certificate (last element of the chain).
    pub fn ca(&self) -> CertificateDer<'static> {
        self.bound.certificate_chain.last().expect("a certificate chain").clone()
    }

    /// `https://localhost:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.addr().port())
    }

    /// A client that trusts only this server's CA and resolves `localhost` to the server.
    pub fn client(&self) -> reqwest::Client {
        https_client(&self.ca(), self.addr())
    }
}

/// Start the secure server on a free 127.0.0.1 port (retrying if another process took the
/// port between picking and binding).
pub async fn start_secure(health: Health, metrics: MetricsRegistry, authorizer: Option<DelegatingAuth>) -> Running {
    start_secure_with(health, metrics, authorizer, Limits::SECURE).await
}

/// [`start_secure`] with other limits.
pub async fn start_secure_with(
    health: Health,
    metrics: MetricsRegistry,
    authorizer: Option<DelegatingAuth>,
    limits: Limits,
) -> Running {
    let mut last_error = None;
    for _ in 0..5 {
        let shutdown = CancellationToken::new();
        let settings = loopback_settings(free_port());
        let started =
            serve_secure_with(&settings, health.clone(), metrics.clone(), authorizer.clone(), shutdown.clone(), limits);
        match started.await {
            Ok(Some(bound)) => return Running { bound, shutdown },
            Ok(None) => panic!("a non-zero port must start the server"),
            Err(error @ ServeError::Bind { .. }) => last_error = Some(error),
            Err(error) => panic!("starting the secure server: {error}"),
        }
    }
    panic!("no free port after 5 attempts: {last_error:?}")
}

/// A reqwest client trusting only `ca`, with `localhost` resolved to `addr`.
pub fn https_client(ca: &CertificateDer<'_>, addr: SocketAddr) -> reqwest::Client {
    let certificate = reqwest::Certificate::from_der(ca).expect("a DER certificate");
    reqwest::Client::builder()
        .tls_certs_only([certificate])
        .resolve("localhost", addr)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("building the HTTPS client")
}

/// A TLS handshake with `addr` that verifies the server's certificate for `server_name`
/// against `ca` only. `Err` carries the reason.
pub async fn handshake(addr: SocketAddr, server_name: &str, ca: &CertificateDer<'static>) -> Result<(), String> {
    tls_connect(addr, server_name, ca, &[]).await.map(|_| ())
}

/// A TLS connection to `addr` verified for `server_name` against `ca` only, offering the ALPN
/// `protocols` (none: the server speaks HTTP/1.1).
pub async fn tls_connect(
    addr: SocketAddr,
    server_name: &str,
    ca: &CertificateDer<'static>,
    protocols: &[&[u8]],
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).map_err(|e| format!("adding the CA: {e}"))?;
    let mut config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = ServerName::try_from(server_name.to_owned()).map_err(|e| format!("{server_name:?}: {e}"))?;
    let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("connecting: {e}"))?;
    connector.connect(name, tcp).await.map_err(|e| e.to_string())
}

/// Whether the server closes `stream` within `deadline` (reading until end-of-file or an error).
pub async fn closed_within(stream: &mut (impl AsyncRead + Unpin), deadline: Duration) -> bool {
    let mut sink = Vec::new();
    tokio::time::timeout(deadline, stream.read_to_end(&mut sink)).await.is_ok()
}

/// Certificate and key files in a temporary directory.
pub struct PemFiles {
    pub dir: tempfile::TempDir,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub cert_der: CertificateDer<'static>,
}

/// A fresh self-signed certificate for `localhost` as PEM files.
pub fn pem_files() -> PemFiles {
    let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("generating a certificate");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cert = dir.path().join("tls.crt");
    let key = dir.path().join("tls.key");
    std::fs::write(&cert, generated.cert.pem()).expect("writing the certificate");
    std::fs::write(&key, generated.signing_key.serialize_pem()).expect("writing the key");
    PemFiles { dir, cert, key, cert_der: generated.cert.der().clone() }
}

/// Wait for the server task to end after shutdown (bounded).
pub async fn stopped(bound: Bound) {
    tokio::time::timeout(Duration::from_secs(10), bound.task)
        .await
        .expect("the server stops within 10 s of shutdown")
        .expect("the server task does not panic");
}
