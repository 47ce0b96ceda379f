//! The HTTP(S) endpoints of a Kubernetes controller manager: health probes, Prometheus
//! metrics, and the secure port with delegated authentication and authorization, with the
//! semantics of `k8s.io/cloud-provider`'s controller manager (`--secure-port`,
//! `--bind-address`, `--tls-cert-file`, `--tls-private-key-file`) plus an optional plain-HTTP
//! metrics listener.
//!
//! # Data flow
//!
//! ```text
//! components ──register──▶ Health (named checks per probe)      MetricsRegistry (prometheus-client)
//!                                   │                                    │
//! client ─TLS─▶ serve_secure ─▶ always-allowed path? ─no─▶ DelegatingAuth ─▶ TokenReview,
//!                                   │ yes                      SubjectAccessReview (kube-apiserver)
//!                                   ▼                                    ▼
//!                             routes: /healthz /livez /readyz [/<check>], /metrics, else 404
//! client ─HTTP─▶ serve_plain ───────┘ (no authentication)
//! ```
//!
//! - [`Health`]: checks are registered by name for one or more [`Probe`]s, at any time (also
//!   after serving started). `/<probe>` runs them and answers like kube-apiserver's healthz
//!   handler (`ok`; on failure `[-]name failed: reason withheld` lines, the real reason goes to
//!   the log); `?verbose`, repeatable `?exclude=name`, and `/<probe>/<name>` for one check. A
//!   probe without checks answers with an implicit `ping` check. [`Health::run`] is pure.
//! - [`MetricsRegistry`]: one shared `prometheus-client` registry; `/metrics` serves it as
//!   OpenMetrics text ([`OPENMETRICS_CONTENT_TYPE`]).
//! - [`serve_secure`]: HTTPS (rustls with the aws-lc-rs provider; HTTP/1.1 and h2 by ALPN) on
//!   [`SecureServing`]'s address, with the given certificate files or a self-signed certificate
//!   generated in memory (a CA plus a serving certificate for `localhost`, `127.0.0.1`, `::1`
//!   and the host name, valid for a year). Port 0 turns it off. Paths other than the always-allowed
//!   ones (by default exactly `/healthz`, `/readyz`, `/livez`, whatever the query; not their
//!   single-check paths, as upstream) are authenticated and authorized by [`DelegatingAuth`]: a `TokenReview` authenticates a
//!   bearer token, a request without credentials is [`ANONYMOUS_USER`]'s (a rejected token is
//!   401), members of `system:masters` are allowed, everyone else is checked with a
//!   `SubjectAccessReview` for the non-resource path and verb `get` (403 when it refuses).
//!   Decisions are cached for 10 s by the token's SHA-256 (or the user). The server's identity needs the ClusterRole
//!   `system:auth-delegator`. [`AuthSettings`] (via [`DelegatingAuth::with_settings`]) adds
//!   upstream's other options: separate clients for the two reviews, the cache TTLs, the
//!   always-allowed paths, client certificates of a client CA (CommonName as user,
//!   Organizations as groups) and a front proxy's certificate with `X-Remote-*` headers;
//!   [`DelegatingAuth::look_up_in_cluster`] reads those the settings leave unset from the API
//!   server's ConfigMap ([`ClusterLookup`]) at start and every minute after.
//! - TLS parameters with Go's names ([`parse_tls_params`]): minimum version, TLS 1.2 cipher
//!   suites, key exchange groups; HTTP/2 can be turned off, `SO_REUSEPORT` turned on.
//! - [`serve_plain`]: plain HTTP for scrapers that expect it, without authentication, with the
//!   official Go CCM's metrics-listener timeouts (read 5 s, handler 10 s, write 20 s);
//!   [`parse_listen_address`] reads Go listen syntax (`:8233`).
//!
//! Both listeners bind before returning (start-up errors name the setting), log each request
//! at debug level, answer anything else with 404, and stop when their `CancellationToken` is
//! cancelled, giving open connections [`SHUTDOWN_GRACE`] to finish.
//!
//! [`Limits`] keep idle, slow and greedy clients from holding the port: every phase of a
//! connection has a timeout ([`Timeouts`]: TLS handshake, the first request and each request's
//! headers, HTTP/2 idle, handler, stalled writes), the HTTP version is fixed by ALPN (no
//! sniffing of the first bytes), at most [`Limits::MAX_CONNECTIONS`] connections are served at
//! once and one client (IPv4 address or IPv6 /64) holds at most
//! [`Limits::MAX_CONNECTIONS_PER_CLIENT`] (beyond that its connections are closed at once), of
//! which [`Limits::RESERVED_FOR_NEW_CLIENTS`] slots go only to a client without another
//! connection (a probe's); as many more wait up to [`Limits::ADMISSION_WAIT`] for a slot,
//! first come first served, and anything beyond is closed at once. [`serve_secure_with`] and
//! [`serve_plain_with`] take other limits.
//!
//! # Example
//!
//! ```no_run
//! use std::net::Ipv4Addr;
//!
//! use controller_serving::prometheus_client::metrics::counter::Counter;
//! use controller_serving::{
//!     DelegatingAuth, Health, MetricsRegistry, Probe, SecureServing, parse_listen_address, serve_plain, serve_secure,
//! };
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn example(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let health = Health::new();
//! let metrics = MetricsRegistry::new();
//! let syncs = Counter::<u64>::default();
//! metrics.register("node_syncs", "Node syncs.", syncs.clone());
//! let shutdown = CancellationToken::new();
//!
//! let secure = SecureServing {
//!     bind_address: Ipv4Addr::UNSPECIFIED.into(),
//!     port: 10258,
//!     cert_file: None,
//!     key_file: None,
//!     cert_name: "cloud-controller-manager".to_owned(),
//!     ..SecureServing::default()
//! };
//! let auth = DelegatingAuth::new(client);
//! let _secure = serve_secure(&secure, health.clone(), metrics.clone(), Some(auth), shutdown.clone()).await?;
//! let plain = parse_listen_address(":8233")?;
//! let _plain = serve_plain(plain, health.clone(), metrics.clone(), shutdown.clone()).await?;
//!
//! // Later, when a controller has started:
//! health.register("node-controller", &[Probe::Healthz], || Ok(()));
//! syncs.inc();
//! # Ok(())
//! # }
//! ```

mod acceptor;
mod address;
mod admission;
mod auth;
mod error;
mod health;
mod io_timeout;
mod limits;
mod metrics;
mod routes;
mod secure_serving;
mod server;
mod sni;
mod tls;
mod tls_params;

pub use address::parse_listen_address;
pub use auth::{
    ALWAYS_ALLOWED_GROUP, ANONYMOUS_USER, AUTH_DELEGATOR_CLUSTER_ROLE, AUTHENTICATION_CONFIGMAP,
    AUTHENTICATION_CONFIGMAP_NAMESPACE, AUTHENTICATION_READER_ROLE, AuthSettings, CaBundle, ClientCertSettings,
    ClusterLookup, DEFAULT_ALWAYS_ALLOW_PATHS, DEFAULT_CACHE_TTL, Decision, DelegatingAuth, LookupError,
    REVIEW_TIMEOUT, RequestHeaderSettings, UNAUTHENTICATED_GROUP, WARNING_INTERVAL, path_matches,
};
pub use error::{CERT_FILE_FLAG, KEY_FILE_FLAG, ServeError};
pub use health::{CheckReport, Health, Outcome, PING, Probe, Report};
pub use limits::{Limits, Timeouts};
pub use metrics::{EncodeError, MetricsRegistry, OPENMETRICS_CONTENT_TYPE};
pub use routes::METRICS_PATH;
pub use rustls::pki_types::CertificateDer;
pub use secure_serving::{HTTP2_MAX_STREAMS, SecureServing};
pub use server::{Bound, SHUTDOWN_GRACE, serve_plain, serve_plain_with, serve_secure, serve_secure_with};
pub use sni::SniCertKey;
pub use tls_params::{
    GO_CIPHER_SUITES, GO_CURVES, ParsedTlsParams, TLS_VERSION_NAMES, TlsParams, TlsVersion, parse_tls_params,
};

/// Re-exported so that callers can build metrics without naming the dependency themselves.
pub use prometheus_client;
