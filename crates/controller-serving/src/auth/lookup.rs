//! Upstream's in-cluster lookup of the client-certificate settings the flags leave unset: the
//! client CA and the front proxy's settings from the ConfigMap the API server publishes them in
//! (`kube-system/extension-apiserver-authentication`), read with the authentication identity.
//!
//! ```text
//! start ──read──▶ settings_from (strict: JSON arrays, PEM) ──▶ replace the settings in use
//!   │               │ error: keep those in use (none yet), report to the caller
//!   ▼               ▼
//! every `refresh` (after a failure: `retry`, doubling up to `refresh`) ──read──▶ the same
//! ```
//!
//! Upstream watches the ConfigMap with an informer and also re-checks it every minute; here it
//! is read every minute, so a change takes effect within a minute rather than at once. As
//! upstream, content it cannot decode is refused and the settings in use stay.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};

use super::client_cert::{CaBundle, ClientCertSettings, RequestHeaderSettings};
use crate::error::ServeError;

/// Namespace of the ConfigMap the API server publishes its authentication settings in.
pub const AUTHENTICATION_CONFIGMAP_NAMESPACE: &str = "kube-system";
/// Name of that ConfigMap.
pub const AUTHENTICATION_CONFIGMAP: &str = "extension-apiserver-authentication";
/// The built-in Role in [`AUTHENTICATION_CONFIGMAP_NAMESPACE`] that may read it.
pub const AUTHENTICATION_READER_ROLE: &str = "extension-apiserver-authentication-reader";
/// How long one read of the ConfigMap may take.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the missing client-certificate settings are looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterLookup {
    /// The ConfigMap's namespace ([`AUTHENTICATION_CONFIGMAP_NAMESPACE`]).
    pub namespace: String,
    /// The ConfigMap's name ([`AUTHENTICATION_CONFIGMAP`]).
    pub name: String,
    /// How often the ConfigMap is read again (upstream re-checks every minute besides
    /// watching it; at least 100 ms).
    pub refresh: Duration,
    /// How soon a failed read (or refused content) is tried again, doubling with every further
    /// failure up to `refresh` (at least 100 ms).
    pub retry: Duration,
}

impl Default for ClusterLookup {
    /// The API server's ConfigMap.
    fn default() -> Self {
        ClusterLookup {
            namespace: AUTHENTICATION_CONFIGMAP_NAMESPACE.to_owned(),
            name: AUTHENTICATION_CONFIGMAP.to_owned(),
            refresh: Duration::from_secs(60),
            retry: Duration::from_secs(5),
        }
    }
}

impl ClusterLookup {
    /// `configmap <namespace>/<name>`, for messages.
    pub fn describe(&self) -> String {
        format!("configmap {}/{}", self.namespace, self.name)
    }

    /// Where a key's value came from, for messages: `(configmap <ns>/<name>, key <key>)`.
    fn origin(&self, key: &str) -> String {
        format!("({}, key {key})", self.describe())
    }
}

/// Why the lookup found no usable settings.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// The ConfigMap could not be read.
    #[error("reading {configmap} failed")]
    Read {
        /// `configmap <namespace>/<name>`.
        configmap: String,
        /// Whether the API server refused (missing RBAC).
        forbidden: bool,
        /// The API server's or the client's error.
        #[source]
        source: kube::Error,
    },
    /// The read took too long.
    #[error("reading {configmap} failed: no answer within {}s", READ_TIMEOUT.as_secs())]
    Timeout {
        /// `configmap <namespace>/<name>`.
        configmap: String,
    },
    /// A key's value is not what upstream accepts there.
    #[error("{configmap}, key {key}: {reason}")]
    Content {
        /// `configmap <namespace>/<name>`.
        configmap: String,
        /// The key.
        key: String,
        /// What is wrong and what is accepted.
        reason: String,
    },
    /// A CA bundle it holds is unusable.
    #[error(transparent)]
    Unusable(#[from] ServeError),
}

/// The ConfigMap's data; `None` when it does not exist (as upstream, not an error).
pub(crate) async fn read(
    client: &Client,
    lookup: &ClusterLookup,
) -> Result<Option<BTreeMap<String, String>>, LookupError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &lookup.namespace);
    match tokio::time::timeout(READ_TIMEOUT, api.get_opt(&lookup.name)).await {
        Ok(Ok(found)) => Ok(found.map(|cm| cm.data.unwrap_or_default())),
        Ok(Err(source)) => {
            let forbidden = matches!(&source, kube::Error::Api(status) if status.is_forbidden());
            Err(LookupError::Read { configmap: lookup.describe(), forbidden, source })
        }
        Err(_) => Err(LookupError::Timeout { configmap: lookup.describe() }),
    }
}

/// The settings asked for (`want_client_ca`, `want_request_header`) from the ConfigMap's keys,
/// read as upstream reads them: a CA bundle is PEM text (missing or blank: none), each
/// `requestheader-*` list a JSON array of strings (missing or empty: an empty list; `null`, as
/// Go decodes it, too). Anything else refuses the whole content, so that a list that cannot be
/// read never becomes an empty one (for `requestheader-allowed-names` that would let any
/// certificate of the front proxy's CA assert users).
pub(crate) fn settings_from(
    data: &BTreeMap<String, String>,
    lookup: &ClusterLookup,
    want_client_ca: bool,
    want_request_header: bool,
) -> Result<ClientCertSettings, LookupError> {
    let mut settings = ClientCertSettings::default();
    let bundle = |key: &str| {
        data.get(key)
            .filter(|pem| !pem.trim().is_empty())
            .map(|pem| CaBundle::Pem { origin: lookup.origin(key), pem: pem.clone() })
    };
    if want_client_ca {
        settings.client_ca = bundle("client-ca-file");
    }
    if want_request_header {
        let list = |key: &str| list(data, lookup, key);
        let allowed_names = list("requestheader-allowed-names")?;
        let username_headers = list("requestheader-username-headers")?;
        let uid_headers = list("requestheader-uid-headers")?;
        let group_headers = list("requestheader-group-headers")?;
        let extra_headers_prefix = list("requestheader-extra-headers-prefix")?;
        settings.request_header = bundle("requestheader-client-ca-file").map(|ca| RequestHeaderSettings {
            ca,
            allowed_names,
            username_headers,
            uid_headers,
            group_headers,
            extra_headers_prefix,
        });
    }
    Ok(settings)
}

/// One `requestheader-*` list (see [`settings_from`]).
fn list(data: &BTreeMap<String, String>, lookup: &ClusterLookup, key: &str) -> Result<Vec<String>, LookupError> {
    let Some(value) = data.get(key).filter(|value| !value.is_empty()) else { return Ok(Vec::new()) };
    serde_json::from_str::<Option<Vec<String>>>(value).map(Option::unwrap_or_default).map_err(|error| {
        LookupError::Content {
            configmap: lookup.describe(),
            key: key.to_owned(),
            reason: format!(
                "{:?} is not a JSON array of strings, e.g. [\"front-proxy-client\"] ({error}); nothing in this \
                 ConfigMap is used until it is fixed (the settings in use stay)",
                value.chars().take(200).collect::<String>()
            ),
        }
    })
}

/// How long to wait after `failures` failed reads in a row: `retry`, doubling, at most
/// `refresh`.
pub(crate) fn backoff(retry: Duration, refresh: Duration, failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    retry.saturating_mul(1 << doublings).min(refresh)
}

/// Reads the ConfigMap again every `lookup.refresh` (after a failure after `lookup.retry`,
/// doubling up to `lookup.refresh`) with `look_up_once`, which reads it and uses what it finds,
/// until it returns `None` (the authenticator it serves is gone). A failure keeps the settings in use; it is logged as a warning at most every
/// [`REPEAT_WARNING`] (`failing`: the first read failed and was reported by the caller).
pub(super) fn keep_looking<F, Fut>(look_up_once: F, lookup: ClusterLookup, failing: bool)
where
    F: Fn() -> Option<Fut> + Send + 'static,
    Fut: Future<Output = Result<(), LookupError>> + Send,
{
    // A zero interval would spin.
    let refresh = lookup.refresh.max(MIN_INTERVAL);
    let retry = lookup.retry.max(MIN_INTERVAL);
    tokio::spawn(async move {
        let mut failures = u32::from(failing);
        let mut warned = failing.then(Instant::now);
        loop {
            let delay = if failures == 0 { refresh } else { backoff(retry, refresh, failures) };
            tokio::time::sleep(delay).await;
            let Some(looking) = look_up_once() else { return };
            let result = looking.await;
            let configmap = lookup.describe();
            match result {
                Ok(()) if failures > 0 => {
                    tracing::info!("read {configmap} again after {failures} failed attempt(s)");
                    failures = 0;
                }
                Ok(()) => {}
                Err(error) => {
                    failures = failures.saturating_add(1);
                    let next = backoff(retry, refresh, failures);
                    let detail = error_chain(&error);
                    if warned.is_none_or(|at| at.elapsed() >= REPEAT_WARNING) {
                        warned = Some(Instant::now());
                        tracing::warn!(
                            "looking up the client CA and front-proxy settings failed: {detail}; the settings in use \
                             stay (none if it was never read); next attempt in {next:?}{}",
                            advice(&error)
                        );
                    } else {
                        tracing::debug!("looking up the client CA and front-proxy settings failed again: {detail}");
                    }
                }
            }
        }
    });
}

/// The shortest refresh and retry interval.
const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// How often a lookup that keeps failing is logged as a warning.
pub(crate) const REPEAT_WARNING: Duration = Duration::from_secs(600);

/// What to do about a refused read.
fn advice(error: &LookupError) -> &'static str {
    match error {
        LookupError::Read { forbidden: true, .. } => {
            " (this identity may not read it: bind it to a Role that may, in kube-system the built-in \
             extension-apiserver-authentication-reader)"
        }
        _ => "",
    }
}

/// An error and its sources, `: `-separated.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Logs what changes from `old` to `new` settings (looked up or given; only looked-up ones
/// ever change).
pub(super) fn log_changes(old: &ClientCertSettings, new: &ClientCertSettings) {
    match (&old.client_ca, &new.client_ca) {
        (None, Some(ca)) => tracing::info!("client certificates are authenticated with the client CA from {ca}"),
        (Some(_), Some(ca)) if old.client_ca != new.client_ca => {
            tracing::info!("the client CA from {ca} changed; using the new one");
        }
        (Some(ca), None) => {
            tracing::warn!("no client CA any more ({ca} is gone): client certificates no longer authenticate");
        }
        _ => {}
    }
    match (&old.request_header, &new.request_header) {
        (None, Some(rh)) => {
            tracing::info!("front-proxy requests are authenticated with the settings from {}", rh.ca);
        }
        (Some(_), Some(rh)) if old.request_header != new.request_header => {
            tracing::info!("the front-proxy settings from {} changed; using the new ones", rh.ca);
        }
        (Some(rh), None) => {
            tracing::warn!(
                "no front-proxy settings any more ({} is gone): front-proxy requests are not authenticated",
                rh.ca
            );
        }
        _ => {}
    }
}

#[cfg(test)]
#[path = "lookup_tests.rs"]
mod tests;
