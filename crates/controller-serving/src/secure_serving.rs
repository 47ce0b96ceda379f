//! [`SecureServing`]: the settings of the secure (HTTPS) listener, read by the listener
//! ([`crate::server`]) and its TLS acceptor ([`crate::acceptor`]).

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use crate::sni::SniCertKey;
use crate::tls_params::TlsParams;

/// Settings of the secure (HTTPS) listener: upstream's `--bind-address`, `--secure-port`,
/// `--tls-cert-file` and `--tls-private-key-file`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecureServing {
    /// The address to listen on (upstream default `0.0.0.0`).
    pub bind_address: IpAddr,
    /// The port; `0` turns the secure listener off, as upstream's `--secure-port=0` does.
    pub port: u16,
    /// PEM certificate chain (leaf first); without it and `key_file` a self-signed certificate
    /// is generated in memory.
    pub cert_file: Option<PathBuf>,
    /// PEM private key of `cert_file`.
    pub key_file: Option<PathBuf>,
    /// Base of the generated certificate's common names (`<name>@<time>`, CA `<name>-ca@<time>`),
    /// e.g. `cloud-controller-manager`.
    pub cert_name: String,
    /// TLS versions, cipher suites and key exchange groups (`--tls-min-version`,
    /// `--tls-cipher-suites`, `--tls-curve-preferences`).
    pub tls: TlsParams,
    /// Offer HTTP/2 by ALPN (`--disable-http2-serving` turns it off).
    pub http2: bool,
    /// Streams one HTTP/2 connection may have open at once (`--http2-max-streams-per-connection`;
    /// 0: [`HTTP2_MAX_STREAMS`]).
    pub http2_max_streams: u32,
    /// `SO_REUSEPORT` on the listening socket (`--permit-port-sharing`).
    pub reuse_port: bool,
    /// Further certificates chosen by SNI (`--tls-sni-cert-key`).
    pub sni_certificates: Vec<SniCertKey>,
}

impl Default for SecureServing {
    /// Upstream's defaults: all interfaces, port 10258, a self-signed certificate, HTTP/2 on.
    fn default() -> Self {
        SecureServing {
            bind_address: Ipv4Addr::UNSPECIFIED.into(),
            port: 10258,
            cert_file: None,
            key_file: None,
            cert_name: "cloud-controller-manager".to_owned(),
            tls: TlsParams::default(),
            http2: true,
            http2_max_streams: 0,
            reuse_port: false,
            sni_certificates: Vec::new(),
        }
    }
}

/// Streams one HTTP/2 connection may have open at once by default (kube-apiserver's default,
/// chosen so a client cannot open many streams before the server closes the connection).
pub const HTTP2_MAX_STREAMS: u32 = 100;
