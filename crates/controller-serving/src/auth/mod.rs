//! Delegated authentication and authorization: the bearer token is checked with a
//! `TokenReview` and the request with a `SubjectAccessReview`, both created at the
//! kube-apiserver with this server's own identity (upstream's `DelegatingAuthenticationOptions`
//! and `DelegatingAuthorizationOptions`).
//!
//! ```text
//! Authorization: Bearer <token>
//!   -> cache (SHA-256 of the token, verb, path; 10 s)
//!   -> TokenReview (authentication.k8s.io/v1)         -> user, groups
//!   -> group system:masters? allowed
//!   -> SubjectAccessReview (authorization.k8s.io/v1, nonResourceAttributes {path, verb})
//! ```

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

pub(crate) use decision::verb_for;
pub use decision::{ALWAYS_ALLOWED_GROUP, AUTH_DELEGATOR_CLUSTER_ROLE, Decision};
use decision::{CacheKey, DecisionCache, WarnLimiter};

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
    client: Client,
    cache: Mutex<DecisionCache>,
    warnings: Mutex<WarnLimiter>,
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
        Self {
            inner: Arc::new(Inner {
                client,
                cache: Mutex::new(DecisionCache::new(ttl, MAX_CACHE_ENTRIES)),
                warnings: Mutex::new(WarnLimiter::new(WARNING_INTERVAL)),
            }),
        }
    }

    /// Decide whether the bearer token in `authorization` (the `Authorization` header) may
    /// `verb` the non-resource `path`.
    pub async fn authorize(&self, authorization: Option<&HeaderValue>, verb: &str, path: &str) -> Decision {
        let token = match decision::bearer_token(authorization) {
            Ok(token) => token,
            Err(reason) => return Decision::Unauthenticated { reason: reason.to_owned() },
        };
        let key = CacheKey { token_hash: decision::token_hash(token), verb: verb.to_owned(), path: path.to_owned() };
        if let Some(cached) = self.cache().get(&key, Instant::now()) {
            return cached;
        }
        let decision = self.review(token, verb, path).await;
        self.cache().insert(key, decision.clone(), Instant::now());
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

    async fn review_token(&self, token: &str) -> Result<Option<UserInfo>, ReviewFailure> {
        let review = TokenReview {
            spec: TokenReviewSpec { token: token.to_owned(), audiences: None },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(self.inner.client.clone());
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
        let api: Api<SubjectAccessReview> = Api::all(self.inner.client.clone());
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
