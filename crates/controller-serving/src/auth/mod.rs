//! Delegated authentication and authorization: the bearer token is checked with a
//! `TokenReview` and the request with a `SubjectAccessReview`, both created at the
//! kube-apiserver with this server's own identity (upstream's `DelegatingAuthenticationOptions`
//! and `DelegatingAuthorizationOptions`).
//!
//! A client certificate signed by the front proxy's CA (with an allowed CommonName) and an
//! `X-Remote-User` header, or signed by the client CA, authenticates first (see
//! `client_cert`); then only the SubjectAccessReview is asked, cached per identity.
//!
//! A request without credentials is the anonymous user's, `system:anonymous` in the group
//! `system:unauthenticated` (upstream's delegated authentication enables its anonymous
//! authenticator), and is authorized like any other: a 403 unless RBAC lets the anonymous user
//! `get` the path. Credentials that authenticate nobody (a rejected token, a client certificate
//! no configured CA signed, without a token) are answered 401.
//!
//! ```text
//! Authorization: Bearer <token>
//!   -> cache (SHA-256 of the token, verb, path; the TTLs of AuthSettings, 10 s each by default)
//!   -> TokenReview (authentication.k8s.io/v1)         -> user, groups
//!   -> group system:masters? allowed
//!   -> SubjectAccessReview (authorization.k8s.io/v1, nonResourceAttributes {path, verb})
//! ```

mod client_cert;
mod decision;
mod lookup;

use std::fmt;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use sync_lock::{Unpoison as _, UnpoisonRw as _};

use http::header::HeaderValue;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};
use kube::api::PostParams;
use kube::{Api, Client};

pub(crate) use client_cert::ClientCertAuth;
pub use client_cert::{CaBundle, ClientCertSettings, RequestHeaderSettings};
pub(crate) use decision::verb_for;
pub use decision::{
    ALWAYS_ALLOWED_GROUP, ANONYMOUS_USER, AUTH_DELEGATOR_CLUSTER_ROLE, Decision, UNAUTHENTICATED_GROUP,
};
use decision::{CacheKey, CertIdentity, Credentials, DecisionCache, WarnLimiter};
pub use lookup::{
    AUTHENTICATION_CONFIGMAP, AUTHENTICATION_CONFIGMAP_NAMESPACE, AUTHENTICATION_READER_ROLE, ClusterLookup,
    LookupError,
};

/// How long decisions are cached by default (upstream's delegated authn/authz cache TTLs).
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(10);
/// How long one review may take before the request is answered with an error.
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// At most one warning per review kind is logged per this interval.
pub const WARNING_INTERVAL: Duration = Duration::from_secs(60);
const MAX_CACHE_ENTRIES: usize = 4096;

/// Authenticates and authorizes requests by asking the kube-apiserver (see the module docs).
///
/// The server's identity (the `kube::Client`'s credentials) needs `create` on
/// `tokenreviews.authentication.k8s.io` and `subjectaccessreviews.authorization.k8s.io`, which
/// the built-in ClusterRole [`AUTH_DELEGATOR_CLUSTER_ROLE`] grants. Without them every
/// protected request is answered `500` with that advice, and a warning is logged at most once
/// per minute per review kind.
///
/// Cloning is cheap; clones share the cache. Tokens are never stored or logged: the cache is
/// keyed by their SHA-256.
#[derive(Clone)]
pub struct DelegatingAuth {
    inner: Arc<Inner>,
}

struct Inner {
    /// Creates TokenReviews (`--authentication-kubeconfig`).
    authentication: Client,
    /// Creates SubjectAccessReviews (`--authorization-kubeconfig`).
    authorization: Client,
    settings: AuthSettings,
    /// The client-certificate settings in use: the flags' and what was looked up in the
    /// cluster, replaced as a whole when the lookup finds other ones.
    client_certs: RwLock<ClientCerts>,
    cache: Mutex<DecisionCache>,
    warnings: Mutex<WarnLimiter>,
}

/// The client-certificate settings in use.
#[derive(Default)]
struct ClientCerts {
    /// Counts replacements, so that the TLS layer knows when to ask for certificates anew.
    generation: u64,
    /// What `auth` was built from.
    settings: ClientCertSettings,
    /// `None` when no client certificates are configured.
    auth: Option<Arc<ClientCertAuth>>,
}

/// How [`DelegatingAuth`] decides (upstream's delegated authentication and authorization
/// options other than the kubeconfigs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSettings {
    /// How long a TokenReview's answer is cached (`--authentication-token-webhook-cache-ttl`).
    pub token_cache_ttl: Duration,
    /// How long an allowing SubjectAccessReview is cached
    /// (`--authorization-webhook-cache-authorized-ttl`).
    pub authorized_cache_ttl: Duration,
    /// How long a denying SubjectAccessReview is cached
    /// (`--authorization-webhook-cache-unauthorized-ttl`).
    pub unauthorized_cache_ttl: Duration,
    /// Paths served without authentication and authorization
    /// (`--authorization-always-allow-paths`), as upstream's path authorizer matches them: the
    /// request path (never the query) exactly, or by prefix for a pattern ending in `*`; a
    /// leading `/` is optional on both. A `*` elsewhere is refused by
    /// [`DelegatingAuth::with_settings`].
    pub always_allow_paths: Vec<String>,
    /// Client certificates that authenticate requests (`--client-ca-file`, `--requestheader-*`).
    pub client_certificates: ClientCertSettings,
}

impl Default for AuthSettings {
    /// Upstream's defaults: 10 s caches, the probe paths always allowed, no client certificates.
    fn default() -> Self {
        AuthSettings {
            token_cache_ttl: DEFAULT_CACHE_TTL,
            authorized_cache_ttl: DEFAULT_CACHE_TTL,
            unauthorized_cache_ttl: DEFAULT_CACHE_TTL,
            always_allow_paths: DEFAULT_ALWAYS_ALLOW_PATHS.iter().map(|p| (*p).to_owned()).collect(),
            client_certificates: ClientCertSettings::default(),
        }
    }
}

/// Upstream's `--authorization-always-allow-paths` default.
pub const DEFAULT_ALWAYS_ALLOW_PATHS: [&str; 3] = ["/healthz", "/readyz", "/livez"];

/// Whether `path` (a request path, without the query) matches one of `patterns` the way
/// upstream's always-allow-paths authorizer does: one leading `/` is dropped from both, then a
/// pattern ending in `*` matches by prefix and any other pattern exactly (so `/` matches only
/// `/`, and `/healthz` neither `/healthz/ping` nor `/healthz/`).
pub fn path_matches(patterns: &[String], path: &str) -> bool {
    let path = path.strip_prefix('/').unwrap_or(path);
    patterns.iter().any(|pattern| {
        let pattern = pattern.strip_prefix('/').unwrap_or(pattern);
        match pattern.strip_suffix('*') {
            Some(prefix) => path.starts_with(prefix),
            None => path == pattern,
        }
    })
}

/// Refuses patterns upstream refuses: a `*` anywhere but at the end.
fn check_always_allow_paths(patterns: &[String]) -> Result<(), crate::error::ServeError> {
    match patterns.iter().find(|p| p.strip_suffix('*').unwrap_or(p).contains('*')) {
        Some(pattern) => Err(crate::error::ServeError::AlwaysAllowPath { pattern: pattern.clone() }),
        None => Ok(()),
    }
}

impl fmt::Debug for DelegatingAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cached = self.inner.cache.lock_unpoisoned().len();
        f.debug_struct("DelegatingAuth").field("cached_decisions", &cached).finish_non_exhaustive()
    }
}

/// A review the API server did not answer.
struct ReviewFailure {
    /// The resource that could not be created, e.g. `tokenreviews.authentication.k8s.io`.
    resource: &'static str,
    /// Whether the API server answered 403 (missing RBAC).
    forbidden: bool,
    /// The error, for the log.
    detail: String,
}

const TOKEN_REVIEWS: &str = "tokenreviews.authentication.k8s.io";
const ACCESS_REVIEWS: &str = "subjectaccessreviews.authorization.k8s.io";

impl DelegatingAuth {
    /// Delegate to the API server `client` talks to, with the client's identity.
    pub fn new(client: Client) -> Self {
        Self::with_cache_ttl(client, DEFAULT_CACHE_TTL)
    }

    /// Like [`Self::new`] with another cache time-to-live (`Duration::ZERO` disables caching).
    pub fn with_cache_ttl(client: Client, ttl: Duration) -> Self {
        let settings = AuthSettings {
            token_cache_ttl: ttl,
            authorized_cache_ttl: ttl,
            unauthorized_cache_ttl: ttl,
            ..AuthSettings::default()
        };
        Self::build(client.clone(), client, settings, None)
    }

    /// Delegate TokenReviews to `authentication`'s API server and SubjectAccessReviews to
    /// `authorization`'s, with their identities, deciding by `settings`. The client-CA files
    /// are read here: an unreadable one is an error naming its flag, as is an always-allowed
    /// path with a `*` other than at its end.
    pub fn with_settings(
        authentication: Client,
        authorization: Client,
        settings: AuthSettings,
    ) -> Result<Self, crate::error::ServeError> {
        check_always_allow_paths(&settings.always_allow_paths)?;
        let client_certs = ClientCertAuth::load(&settings.client_certificates)?;
        Ok(Self::build(authentication, authorization, settings, client_certs))
    }

    fn build(
        authentication: Client,
        authorization: Client,
        settings: AuthSettings,
        client_certs: Option<ClientCertAuth>,
    ) -> Self {
        let client_certs = ClientCerts {
            generation: 0,
            settings: settings.client_certificates.clone(),
            auth: client_certs.map(Arc::new),
        };
        Self {
            inner: Arc::new(Inner {
                authentication,
                authorization,
                cache: Mutex::new(DecisionCache::new(MAX_CACHE_ENTRIES)),
                settings,
                client_certs: RwLock::new(client_certs),
                warnings: Mutex::new(WarnLimiter::new(WARNING_INTERVAL)),
            }),
        }
    }

    /// Upstream's in-cluster lookup: the client CA and the front-proxy settings that the
    /// [`AuthSettings`] leave unset (`None`) are read from `lookup`'s ConfigMap with the
    /// authentication client's identity, now and then again every `lookup.refresh` (after a
    /// failure sooner, see [`ClusterLookup`]) for as long as this value or a clone lives. What a
    /// read finds replaces the looked-up settings in use as a whole; a failed read or content
    /// upstream refuses (a `requestheader-*` list that is not a JSON array of strings, a CA
    /// bundle without a certificate) keeps them (none before the first good read). A missing
    /// ConfigMap or key is no error: those settings are then unset. Call it once.
    ///
    /// `Err`: why the first read found nothing usable (the caller decides whether that is
    /// fatal, upstream's `--authentication-tolerate-lookup-failure`); the lookup goes on anyway.
    pub async fn look_up_in_cluster(&self, lookup: ClusterLookup) -> Result<(), LookupError> {
        let given = &self.inner.settings.client_certificates;
        if given.client_ca.is_some() && given.request_header.is_some() {
            return Ok(());
        }
        let first = self.look_up_once(&lookup).await;
        let inner = Arc::downgrade(&self.inner);
        let again = lookup.clone();
        let look_up_once = move || {
            let auth = DelegatingAuth { inner: inner.upgrade()? };
            let lookup = again.clone();
            Some(async move { auth.look_up_once(&lookup).await })
        };
        lookup::keep_looking(look_up_once, lookup, first.is_err());
        first
    }

    /// One read of the ConfigMap, and its content used.
    async fn look_up_once(&self, lookup: &ClusterLookup) -> Result<(), LookupError> {
        let data = lookup::read(&self.inner.authentication, lookup).await?.unwrap_or_default();
        self.use_configmap(&data, lookup)
    }

    /// Uses the ConfigMap's `data` for the settings the flags left unset.
    fn use_configmap(
        &self,
        data: &std::collections::BTreeMap<String, String>,
        lookup: &ClusterLookup,
    ) -> Result<(), LookupError> {
        let given = &self.inner.settings.client_certificates;
        let found = lookup::settings_from(data, lookup, given.client_ca.is_none(), given.request_header.is_none())?;
        self.use_client_certificates(found)
    }

    /// Uses `found` for the client-certificate settings the flags left unset, replacing the
    /// ones in use as a whole (requests see the old or the new ones, never a mix; connections
    /// keep what their handshake asked for). Only a change rebuilds them, and then the flags'
    /// CA files are read again too; anything unusable keeps the settings in use.
    fn use_client_certificates(&self, found: ClientCertSettings) -> Result<(), LookupError> {
        let given = &self.inner.settings.client_certificates;
        let settings = ClientCertSettings {
            client_ca: given.client_ca.clone().or(found.client_ca),
            request_header: given.request_header.clone().or(found.request_header),
        };
        if self.inner.client_certs.read_unpoisoned().settings == settings {
            return Ok(());
        }
        let auth = ClientCertAuth::load(&settings)?.map(Arc::new);
        let mut current = self.inner.client_certs.write_unpoisoned();
        lookup::log_changes(&current.settings, &settings);
        *current = ClientCerts { generation: current.generation + 1, settings, auth };
        Ok(())
    }

    /// Whether `path` is served without authentication and authorization.
    pub fn is_always_allowed(&self, path: &str) -> bool {
        path_matches(&self.inner.settings.always_allow_paths, path)
    }

    /// The TLS layer's client-certificate verifier while client certificates are configured,
    /// and the generation of the settings it is for (it changes whenever they are replaced).
    pub(crate) fn tls_client_verifier(&self) -> (u64, Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>) {
        let current = self.inner.client_certs.read_unpoisoned();
        (current.generation, current.auth.as_ref().map(|auth| auth.tls_verifier()))
    }

    /// The generation of the client-certificate settings in use.
    pub(crate) fn client_cert_generation(&self) -> u64 {
        self.inner.client_certs.read_unpoisoned().generation
    }

    /// Decide whether a request with `headers` over a connection whose client presented
    /// `peer_certificates` may `verb` the non-resource `path`: a front-proxy or client
    /// certificate identity first, then the bearer token, and without credentials the anonymous
    /// user (see [`decision::credentials`]).
    pub(crate) async fn authorize_request(
        &self,
        headers: &http::HeaderMap,
        peer_certificates: Option<&[rustls::pki_types::CertificateDer<'static>]>,
        verb: &str,
        path: &str,
    ) -> Decision {
        let client_certs = self.inner.client_certs.read_unpoisoned().auth.clone();
        let certificate = match (client_certs, peer_certificates) {
            (Some(auth), Some(chain)) => auth.authenticate(chain, headers),
            _ => CertIdentity::None,
        };
        self.authorize_credentials(
            decision::credentials(certificate, headers.get(http::header::AUTHORIZATION)),
            verb,
            path,
        )
        .await
    }

    async fn authorize_credentials(&self, credentials: Credentials<'_>, verb: &str, path: &str) -> Decision {
        match credentials {
            Credentials::User(user) => self.authorize_user(user, verb, path).await,
            Credentials::Token(token) => self.authorize_token(token, verb, path).await,
            Credentials::Rejected(reason) => {
                tracing::debug!(%reason, %path, "refusing a request whose credentials authenticate nobody");
                Decision::Unauthenticated { reason }
            }
            Credentials::Anonymous => self.authorize_user(decision::anonymous_user(), verb, path).await,
        }
    }

    /// Decide for an authenticated `user` (a certificate's, or the anonymous user): allowed in
    /// `system:masters`, otherwise by a SubjectAccessReview cached per identity.
    async fn authorize_user(&self, user: UserInfo, verb: &str, path: &str) -> Decision {
        let name = user.username.clone().unwrap_or_default();
        if decision::always_allowed(&user) {
            return Decision::Allowed { user: name };
        }
        // Keyed by the whole identity, so that a SubjectAccessReview is cached per user.
        let identity = format!("{:?}", (&user.username, &user.uid, &user.groups, &user.extra));
        let key =
            CacheKey { token_hash: decision::token_hash(&identity), verb: verb.to_owned(), path: path.to_owned() };
        if let Some(cached) = self.cache().get(&key, Instant::now()) {
            return cached;
        }
        let decision = match self.review_access(user, verb, path).await {
            Ok(status) => decision::access_decision(&name, verb, path, status),
            Err(failure) => return self.unavailable(failure),
        };
        self.remember(key, decision.clone());
        decision
    }

    /// Caches `decision` for as long as its parts may be cached: the token's answer and the
    /// SubjectAccessReview's (allowing or denying).
    fn remember(&self, key: CacheKey, decision: Decision) {
        let s = &self.inner.settings;
        let ttl = match decision {
            Decision::Allowed { .. } => s.token_cache_ttl.min(s.authorized_cache_ttl),
            Decision::Forbidden { .. } => s.token_cache_ttl.min(s.unauthorized_cache_ttl),
            Decision::Unauthenticated { .. } | Decision::Unavailable { .. } => s.token_cache_ttl,
        };
        self.cache().insert_for(key, decision, Instant::now(), ttl);
    }

    /// Decide whether a request with `authorization` (its `Authorization` header) and no client
    /// certificate may `verb` the non-resource `path`: the bearer token's user, or without a
    /// bearer token the anonymous user.
    pub async fn authorize(&self, authorization: Option<&HeaderValue>, verb: &str, path: &str) -> Decision {
        self.authorize_credentials(decision::credentials(CertIdentity::None, authorization), verb, path).await
    }

    async fn authorize_token(&self, token: &str, verb: &str, path: &str) -> Decision {
        let key = CacheKey { token_hash: decision::token_hash(token), verb: verb.to_owned(), path: path.to_owned() };
        if let Some(cached) = self.cache().get(&key, Instant::now()) {
            return cached;
        }
        let decision = self.review(token, verb, path).await;
        self.remember(key, decision.clone());
        decision
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, DecisionCache> {
        self.inner.cache.lock_unpoisoned()
    }

    async fn review(&self, token: &str, verb: &str, path: &str) -> Decision {
        let user = match self.review_token(token).await {
            Ok(Some(user)) => user,
            Ok(None) => return Decision::Unauthenticated { reason: "the bearer token is not valid".to_owned() },
            Err(failure) => return self.unavailable(failure),
        };
        let name = user.username.clone().unwrap_or_default();
        if decision::always_allowed(&user) {
            return Decision::Allowed { user: name };
        }
        match self.review_access(user, verb, path).await {
            Ok(status) => decision::access_decision(&name, verb, path, status),
            Err(failure) => self.unavailable(failure),
        }
    }

    // `.into()`: `TokenReviewSpec::token` is a `String` in k8s-openapi's Kubernetes 1.36+ and an
    // `Option<String>` before; the program picks the version, so this builds with either.
    #[allow(clippy::useless_conversion)]
    async fn review_token(&self, token: &str) -> Result<Option<UserInfo>, ReviewFailure> {
        let review = TokenReview {
            spec: TokenReviewSpec { token: token.to_owned().into(), audiences: None },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(self.inner.authentication.clone());
        let created = create(&api, &review, TOKEN_REVIEWS).await?;
        Ok(decision::reviewed_user(created.status))
    }

    async fn review_access(
        &self,
        user: UserInfo,
        verb: &str,
        path: &str,
    ) -> Result<Option<SubjectAccessReviewStatus>, ReviewFailure> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_owned()),
                    verb: Some(verb.to_owned()),
                }),
                resource_attributes: None,
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.inner.authorization.clone());
        Ok(create(&api, &review, ACCESS_REVIEWS).await?.status)
    }

    /// Log the failure (rate-limited) and turn it into the 500 decision.
    fn unavailable(&self, failure: ReviewFailure) -> Decision {
        let ReviewFailure { resource, forbidden, detail } = failure;
        let message = if forbidden {
            format!(
                "cannot check the request's credentials: the API server forbids this server to create {resource}; \
                 bind its identity to the ClusterRole {AUTH_DELEGATOR_CLUSTER_ROLE}"
            )
        } else {
            format!("cannot check the request's credentials: creating {resource} at the API server failed")
        };
        let warn = self.inner.warnings.lock_unpoisoned().allow(resource, Instant::now());
        if warn {
            tracing::warn!(
                %resource,
                error = %detail,
                "{message} (requests to protected paths fail until this is fixed; this warning repeats at most once per minute)"
            );
        } else {
            tracing::debug!(%resource, error = %detail, "{message}");
        }
        Decision::Unavailable { message }
    }
}

/// Create a review object, with [`REVIEW_TIMEOUT`].
async fn create<K>(api: &Api<K>, review: &K, resource: &'static str) -> Result<K, ReviewFailure>
where
    K: kube::Resource + Clone + fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    match tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), review)).await {
        Ok(Ok(created)) => Ok(created),
        Ok(Err(kube::Error::Api(status))) => Err(ReviewFailure {
            resource,
            forbidden: status.is_forbidden(),
            detail: format!("{} ({})", status.message, status.code),
        }),
        Ok(Err(error)) => Err(ReviewFailure { resource, forbidden: false, detail: error.to_string() }),
        Err(_) => Err(ReviewFailure {
            resource,
            forbidden: false,
            detail: format!("no answer within {}s", REVIEW_TIMEOUT.as_secs()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn always_allowed_paths_match_exactly_or_by_a_trailing_star_prefix_as_upstream() {
        let patterns: Vec<String> = ["/healthz", "readyz", "/debug/*", "/metrics"].map(str::to_owned).to_vec();
        for allowed in ["/healthz", "healthz", "/readyz", "/debug/", "/debug/pprof", "/metrics"] {
            assert!(path_matches(&patterns, allowed), "{allowed}");
        }
        // Below an exact path is another path: upstream matches exactly.
        for refused in ["/healthz/ping", "/healthz/", "/readyz/informer-sync", "/livez", "/healthzx", "/metrics/x"] {
            assert!(!path_matches(&patterns, refused), "{refused}");
        }
        for refused in ["/debug", "/", "//healthz"] {
            assert!(!path_matches(&patterns, refused), "{refused}");
        }
        // `/` (or an empty pattern) is the root only; `*` is everything.
        assert!(path_matches(&["/".to_owned()], "/"));
        assert!(!path_matches(&["/".to_owned()], "/healthz"));
        assert!(path_matches(&["*".to_owned()], "/anything/at/all"));
        assert!(check_always_allow_paths(&patterns).is_ok());
        assert!(check_always_allow_paths(&["/a*b".to_owned()]).is_err());
        assert!(check_always_allow_paths(&["**".to_owned()]).is_err());
    }
}
