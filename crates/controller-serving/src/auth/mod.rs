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

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use sync_lock::Unpoison as _;

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
    client_certs: Option<ClientCertAuth>,
    cache: Mutex<DecisionCache>,
    warnings: Mutex<WarnLimiter>,
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
    /// (`--authorization-always-allow-paths`): exact, or a prefix with a trailing `*`; a probe
    /// path also covers its single-check paths.
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

/// Whether `path` matches one of `patterns`: exactly, by a trailing-`*` prefix, or as a
/// single-check path below a probe path (`/healthz/ping` below `/healthz`).
pub fn path_matches(patterns: &[String], path: &str) -> bool {
    patterns.iter().any(|pattern| match pattern.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => {
            path == pattern
                || (crate::routes::is_always_allowed(pattern)
                    && path.strip_prefix(pattern.as_str()).is_some_and(|rest| rest.starts_with('/')))
        }
    })
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
    /// are read here: an unreadable one is an error naming its flag.
    pub fn with_settings(
        authentication: Client,
        authorization: Client,
        settings: AuthSettings,
    ) -> Result<Self, crate::error::ServeError> {
        let client_certs = ClientCertAuth::load(&settings.client_certificates)?;
        Ok(Self::build(authentication, authorization, settings, client_certs))
    }

    fn build(
        authentication: Client,
        authorization: Client,
        settings: AuthSettings,
        client_certs: Option<ClientCertAuth>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                authentication,
                authorization,
                cache: Mutex::new(DecisionCache::new(MAX_CACHE_ENTRIES)),
                settings,
                client_certs,
                warnings: Mutex::new(WarnLimiter::new(WARNING_INTERVAL)),
            }),
        }
    }

    /// Whether `path` is served without authentication and authorization.
    pub fn is_always_allowed(&self, path: &str) -> bool {
        path_matches(&self.inner.settings.always_allow_paths, path)
    }

    /// The TLS layer's client-certificate verifier, when client certificates are configured.
    pub(crate) fn tls_client_verifier(&self) -> Option<Arc<dyn rustls::server::danger::ClientCertVerifier>> {
        self.inner.client_certs.as_ref().map(ClientCertAuth::tls_verifier)
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
        let certificate = match (&self.inner.client_certs, peer_certificates) {
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
    fn always_allowed_paths_match_exactly_by_prefix_or_below_a_probe() {
        let patterns: Vec<String> = ["/healthz", "/readyz", "/debug/*", "/metrics"].map(str::to_owned).to_vec();
        for allowed in ["/healthz", "/healthz/ping", "/readyz/informer-sync", "/debug/", "/debug/pprof", "/metrics"] {
            assert!(path_matches(&patterns, allowed), "{allowed}");
        }
        for refused in ["/livez", "/healthzx", "/metrics/x", "/debug", "/"] {
            assert!(!path_matches(&patterns, refused), "{refused}");
        }
    }
}
