//! Upstream's secure-serving, authentication and authorization flags beyond the address, port
//! and certificate pair (`k8s.io/apiserver` `SecureServingOptions`,
//! `DelegatingAuthenticationOptions`, `DelegatingAuthorizationOptions`), with Go's names and
//! defaults.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args};
use controller_serving::{CaBundle, HTTP2_MAX_STREAMS, RequestHeaderSettings, SniCertKey, parse_tls_params};

use super::values::{go_bool, go_duration};
use crate::options::AuthOptions;

/// TLS, HTTP/2 and socket flags of the secure port.
#[derive(Debug, Clone, Args)]
pub struct ServingArgs {
    /// TLS 1.2 cipher suites allowed, Go names (e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256).
    /// TLS 1.3 suites are always enabled (as in Go); suites rustls lacks (CBC, RSA key exchange)
    /// are not offered (a warning names them). Empty: the defaults.
    #[arg(long, value_delimiter = ',')]
    pub tls_cipher_suites: Vec<String>,

    /// Lowest TLS version accepted: VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13
    /// (TLS 1.2 is the lowest ever offered here).
    #[arg(long, default_value = "")]
    pub tls_min_version: String,

    /// Key exchange groups allowed: Go's numeric CurveIDs (29, 23, 24, 4588) or names (X25519,
    /// CurveP256, CurveP384, X25519MLKEM768). Empty: the defaults.
    #[arg(long, value_delimiter = ',')]
    pub tls_curve_preferences: Vec<String>,

    /// A certificate and key for SNI: `cert.pem,key.pem` or `cert.pem,key.pem:*.example.com,example.com`
    /// (names default to the certificate's). Repeatable.
    #[arg(long, action = ArgAction::Append)]
    pub tls_sni_cert_key: Vec<String>,

    /// Offer only HTTP/1.1 (no h2 by ALPN).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = go_bool)]
    pub disable_http2_serving: bool,

    /// Streams one HTTP/2 connection may have open at once (0: 100).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub http2_max_streams_per_connection: i64,

    /// SO_REUSEPORT on the secure port, so several processes can listen on it.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = go_bool)]
    pub permit_port_sharing: bool,

    /// SO_REUSEADDR on the secure port (always set on Linux, as by Go).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = go_bool)]
    pub permit_address_sharing: bool,
}

/// Delegated authentication and authorization flags.
#[derive(Debug, Clone, Args)]
pub struct AuthArgs {
    /// Kubeconfig for TokenReviews (and the in-cluster lookup). Empty: the main client.
    #[arg(long)]
    pub authentication_kubeconfig: Option<PathBuf>,

    /// Do not read missing client-CA and front-proxy settings from
    /// kube-system/extension-apiserver-authentication.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = go_bool)]
    pub authentication_skip_lookup: bool,

    /// How long a TokenReview's answer is cached.
    #[arg(long, default_value = "10s", value_parser = go_duration)]
    pub authentication_token_webhook_cache_ttl: Duration,

    /// Start even if the lookup in kube-system/extension-apiserver-authentication fails (a
    /// warning says so). Default true here (upstream: false): the chart's RBAC grants the
    /// lookup, but RBAC of one's own may not.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true", value_parser = go_bool)]
    pub authentication_tolerate_lookup_failure: bool,

    /// CA bundle (PEM): a client certificate it signed authenticates as its CommonName, with
    /// its Organizations as groups.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,

    /// Common names of front-proxy client certificates allowed to assert users by headers
    /// (empty: any certificate --requestheader-client-ca-file signed).
    #[arg(long, value_delimiter = ',')]
    pub requestheader_allowed_names: Vec<String>,

    /// CA bundle (PEM) of the front proxy's client certificates; requests with such a
    /// certificate are authenticated by the --requestheader-*-headers.
    #[arg(long)]
    pub requestheader_client_ca_file: Option<PathBuf>,

    /// Header prefixes carrying the user's extra attributes.
    #[arg(long, value_delimiter = ',', default_value = "x-remote-extra-")]
    pub requestheader_extra_headers_prefix: Vec<String>,

    /// Headers carrying the user's groups.
    #[arg(long, value_delimiter = ',', default_value = "x-remote-group")]
    pub requestheader_group_headers: Vec<String>,

    /// Headers carrying the user's UID.
    #[arg(long, value_delimiter = ',')]
    pub requestheader_uid_headers: Vec<String>,

    /// Headers carrying the user name.
    #[arg(long, value_delimiter = ',', default_value = "x-remote-user")]
    pub requestheader_username_headers: Vec<String>,

    /// Paths served without authentication and authorization (`/prefix*` matches a prefix).
    #[arg(long, value_delimiter = ',', default_value = "/healthz,/readyz,/livez")]
    pub authorization_always_allow_paths: Vec<String>,

    /// Kubeconfig for SubjectAccessReviews. Empty: the main client.
    #[arg(long)]
    pub authorization_kubeconfig: Option<PathBuf>,

    /// How long an "allowed" SubjectAccessReview answer is cached.
    #[arg(long, default_value = "10s", value_parser = go_duration)]
    pub authorization_webhook_cache_authorized_ttl: Duration,

    /// How long a "denied" SubjectAccessReview answer is cached.
    #[arg(long, default_value = "10s", value_parser = go_duration)]
    pub authorization_webhook_cache_unauthorized_ttl: Duration,
}

/// What [`ServingArgs::validate`] returns: the TLS parameters and the HTTP/2 settings.
pub(crate) struct ServingSettings {
    pub(crate) tls: controller_serving::TlsParams,
    pub(crate) http2: bool,
    pub(crate) http2_max_streams: u32,
    pub(crate) sni_certificates: Vec<SniCertKey>,
}

impl ServingArgs {
    /// Checks the TLS names and numbers; adds errors and warnings.
    pub(crate) fn validate(&self, errors: &mut Vec<String>, warnings: &mut Vec<String>) -> ServingSettings {
        let tls = match parse_tls_params(&self.tls_min_version, &self.tls_cipher_suites, &self.tls_curve_preferences) {
            Ok(parsed) => {
                warnings.extend(parsed.notes);
                parsed.params
            }
            Err(e) => {
                errors.extend(e);
                controller_serving::TlsParams::default()
            }
        };
        let http2_max_streams = match u32::try_from(self.http2_max_streams_per_connection) {
            Ok(0) => HTTP2_MAX_STREAMS,
            Ok(n) => n,
            Err(_) => {
                errors.push(format!(
                    "--http2-max-streams-per-connection: {} is not a number of streams (0 or more)",
                    self.http2_max_streams_per_connection
                ));
                HTTP2_MAX_STREAMS
            }
        };
        let sni_certificates = self
            .tls_sni_cert_key
            .iter()
            .filter_map(|v| SniCertKey::parse(v).map_err(|e| errors.push(e)).ok())
            .collect();
        ServingSettings { tls, http2: !self.disable_http2_serving, http2_max_streams, sni_certificates }
    }
}

/// Drops empty items (`--flag=` gives one empty string) and trims the others.
fn non_empty(items: &[String]) -> Vec<String> {
    items.iter().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect()
}

impl AuthArgs {
    /// The typed settings; adds errors.
    pub(crate) fn validate(&self, errors: &mut Vec<String>) -> AuthOptions {
        for path in non_empty(&self.authorization_always_allow_paths) {
            if !path.starts_with('/') {
                errors.push(format!("--authorization-always-allow-paths: {path:?} must start with /"));
            }
            if path.find('*').is_some_and(|i| i != path.len() - 1) {
                errors.push(format!("--authorization-always-allow-paths: {path:?}: only a trailing * is allowed"));
            }
        }
        let request_header = self.requestheader_client_ca_file.clone().map(|ca_file| RequestHeaderSettings {
            ca: ca_file.into(),
            allowed_names: non_empty(&self.requestheader_allowed_names),
            username_headers: non_empty(&self.requestheader_username_headers),
            uid_headers: non_empty(&self.requestheader_uid_headers),
            group_headers: non_empty(&self.requestheader_group_headers),
            extra_headers_prefix: non_empty(&self.requestheader_extra_headers_prefix),
        });
        if request_header.as_ref().is_some_and(|r| r.username_headers.is_empty()) {
            errors.push(
                "--requestheader-username-headers: must not be empty with --requestheader-client-ca-file".to_owned(),
            );
        }
        AuthOptions {
            authentication_kubeconfig: self.authentication_kubeconfig.clone(),
            authorization_kubeconfig: self.authorization_kubeconfig.clone(),
            skip_lookup: self.authentication_skip_lookup,
            tolerate_lookup_failure: self.authentication_tolerate_lookup_failure,
            token_cache_ttl: self.authentication_token_webhook_cache_ttl,
            authorized_cache_ttl: self.authorization_webhook_cache_authorized_ttl,
            unauthorized_cache_ttl: self.authorization_webhook_cache_unauthorized_ttl,
            client_ca: self.client_ca_file.clone().map(CaBundle::File),
            request_header,
            always_allow_paths: non_empty(&self.authorization_always_allow_paths),
        }
    }
}
