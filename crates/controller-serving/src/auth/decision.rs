//! The pure half of delegated authentication and authorization: reading the bearer token,
//! choosing whose credentials a request carries (or the anonymous user), turning review results
//! into decisions, the responses for them, the decision cache and the warning rate limit. No I/O
//! here.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use http::StatusCode;
use http::header::HeaderValue;
use k8s_openapi::api::authentication::v1::{TokenReviewStatus, UserInfo};
use k8s_openapi::api::authorization::v1::SubjectAccessReviewStatus;

/// The group whose members are allowed everything without a SubjectAccessReview.
pub const ALWAYS_ALLOWED_GROUP: &str = "system:masters";

/// The user a request without credentials is authenticated as (upstream's anonymous
/// authenticator, on by default for delegated authentication).
pub const ANONYMOUS_USER: &str = "system:anonymous";

/// The group of [`ANONYMOUS_USER`].
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";

/// The built-in ClusterRole that grants `create` on `tokenreviews` and
/// `subjectaccessreviews`, which delegated authentication and authorization need.
pub const AUTH_DELEGATOR_CLUSTER_ROLE: &str = "system:auth-delegator";

/// The outcome of authenticating and authorizing one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The request may proceed.
    Allowed {
        /// The authenticated user name.
        user: String,
    },
    /// Credentials that authenticate nobody (a rejected token, a client certificate no CA
    /// signed): `401 Unauthorized`. A request without credentials is not this: it is the
    /// anonymous user's and authorized like any other.
    Unauthenticated {
        /// Why, safe to show to the client (never contains the token).
        reason: String,
    },
    /// Authenticated but not authorized: `403 Forbidden`.
    Forbidden {
        /// The authenticated user name.
        user: String,
        /// The verb that was checked (`get`).
        verb: String,
        /// The path that was checked.
        path: String,
        /// The authorizer's reason, if it gave one.
        reason: String,
    },
    /// The API server could not review the request (missing RBAC, unreachable):
    /// `500 Internal Server Error`.
    Unavailable {
        /// What failed and how to fix it.
        message: String,
    },
}

impl Decision {
    /// The HTTP status for a refused request (`200 OK` for [`Decision::Allowed`]).
    pub fn status(&self) -> StatusCode {
        match self {
            Decision::Allowed { .. } => StatusCode::OK,
            Decision::Unauthenticated { .. } => StatusCode::UNAUTHORIZED,
            Decision::Forbidden { .. } => StatusCode::FORBIDDEN,
            Decision::Unavailable { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The response body for a refused request (empty for [`Decision::Allowed`]).
    pub fn body(&self) -> String {
        match self {
            Decision::Allowed { .. } => String::new(),
            Decision::Unauthenticated { reason } => format!("Unauthorized: {reason}\n"),
            Decision::Forbidden { user, verb, path, reason } => {
                let mut message = format!("forbidden: User {user:?} cannot {verb} path {path:?}");
                if !reason.is_empty() {
                    message.push_str(": ");
                    message.push_str(reason);
                }
                message.push('\n');
                message
            }
            Decision::Unavailable { message } => format!("Internal Server Error: {message}\n"),
        }
    }

    /// The user the decision is about, if one was authenticated.
    pub fn user(&self) -> Option<&str> {
        match self {
            Decision::Allowed { user } | Decision::Forbidden { user, .. } => Some(user),
            Decision::Unauthenticated { .. } | Decision::Unavailable { .. } => None,
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header, read as upstream's bearer-token
/// authenticator reads it: the trimmed value split at the first two spaces, the scheme
/// case-insensitive, the token the second part. `Ok(None)`: no bearer token (no header, another
/// scheme, an empty token), which leaves the request to the other authenticators and then to
/// the anonymous user. `Err`: a bearer token that cannot be valid (not UTF-8), which upstream's
/// TokenReview would reject.
pub(crate) fn bearer_token(header: Option<&HeaderValue>) -> Result<Option<&str>, &'static str> {
    let Some(header) = header else { return Ok(None) };
    let Ok(value) = std::str::from_utf8(header.as_bytes()) else {
        let bytes = header.as_bytes().trim_ascii_start();
        let bearer = bytes.get(..7).is_some_and(|scheme| scheme.eq_ignore_ascii_case(b"bearer "));
        return if bearer { Err("the bearer token is not valid") } else { Ok(None) };
    };
    let mut parts = value.trim().splitn(3, ' ');
    let scheme = parts.next().unwrap_or_default();
    let Some(token) = parts.next() else { return Ok(None) };
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Ok(None);
    }
    Ok(Some(token))
}

/// What a client certificate (and a front proxy's headers) say about a request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CertIdentity {
    /// No certificate, or one that names nobody (a front proxy's without a user header, one
    /// without a CommonName).
    None,
    /// The user it authenticates.
    User(UserInfo),
    /// It was checked and refused (no configured CA signed it, a CommonName outside
    /// `--requestheader-allowed-names`): why, safe to show to the client.
    Rejected(String),
}

/// Whose request it is, before any review (upstream's union of the front-proxy, client
/// certificate and bearer-token authenticators, with the anonymous authenticator after it).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Credentials<'a> {
    /// A user authenticated by a client certificate: only the SubjectAccessReview is left.
    User(UserInfo),
    /// A bearer token for the TokenReview.
    Token(&'a str),
    /// Credentials that authenticate nobody: `401`, even where the anonymous user is allowed.
    Rejected(String),
    /// No credentials at all: the anonymous user ([`anonymous_user`]), authorized like any other.
    Anonymous,
}

/// The credentials of a request from its client certificate's identity and its `Authorization`
/// header: the certificate's user first, then the token; a refused certificate only counts when
/// there is no token, and a request with neither is anonymous.
pub(crate) fn credentials(certificate: CertIdentity, authorization: Option<&HeaderValue>) -> Credentials<'_> {
    if let CertIdentity::User(user) = certificate {
        return Credentials::User(user);
    }
    match (bearer_token(authorization), certificate) {
        (Ok(Some(token)), _) => Credentials::Token(token),
        (Err(reason), _) => Credentials::Rejected(reason.to_owned()),
        (Ok(None), CertIdentity::Rejected(reason)) => Credentials::Rejected(reason),
        (Ok(None), CertIdentity::None | CertIdentity::User(_)) => Credentials::Anonymous,
    }
}

/// The anonymous user: [`ANONYMOUS_USER`] in [`UNAUTHENTICATED_GROUP`].
pub(crate) fn anonymous_user() -> UserInfo {
    UserInfo {
        username: Some(ANONYMOUS_USER.to_owned()),
        groups: Some(vec![UNAUTHENTICATED_GROUP.to_owned()]),
        ..UserInfo::default()
    }
}

/// The authenticated user from a TokenReview's status, or `None` when the token was rejected.
pub(crate) fn reviewed_user(status: Option<TokenReviewStatus>) -> Option<UserInfo> {
    let status = status?;
    if status.authenticated != Some(true) {
        return None;
    }
    status.user.filter(|user| user.username.as_deref().is_some_and(|name| !name.is_empty()))
}

/// Whether `user` belongs to [`ALWAYS_ALLOWED_GROUP`].
pub(crate) fn always_allowed(user: &UserInfo) -> bool {
    user.groups.as_deref().unwrap_or_default().iter().any(|group| group == ALWAYS_ALLOWED_GROUP)
}

/// The decision for a SubjectAccessReview's status.
pub(crate) fn access_decision(
    user: &str,
    verb: &str,
    path: &str,
    status: Option<SubjectAccessReviewStatus>,
) -> Decision {
    match status {
        Some(status) if status.allowed && status.denied != Some(true) => Decision::Allowed { user: user.to_owned() },
        status => Decision::Forbidden {
            user: user.to_owned(),
            verb: verb.to_owned(),
            path: path.to_owned(),
            reason: status.and_then(|s| s.reason).unwrap_or_default(),
        },
    }
}

/// The verb of a non-resource request: `get` for GET and HEAD, the lowercase method otherwise
/// (upstream's request-info rule for non-resource paths, with HEAD read as `get`).
pub(crate) fn verb_for(method: &http::Method) -> String {
    if *method == http::Method::GET || *method == http::Method::HEAD {
        "get".to_owned()
    } else {
        method.as_str().to_ascii_lowercase()
    }
}

/// SHA-256 of a token: the only form in which a token is kept.
pub(crate) fn token_hash(token: &str) -> [u8; 32] {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, token.as_bytes());
    let mut hash = [0u8; 32];
    hash.copy_from_slice(digest.as_ref());
    hash
}

/// What a cached decision is keyed by: the token's hash, the verb and the path.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct CacheKey {
    pub(crate) token_hash: [u8; 32],
    pub(crate) verb: String,
    pub(crate) path: String,
}

/// Decisions (allowed, forbidden, rejected token) for a time-to-live each; failures to review
/// are never cached. Bounded: when full, expired entries are dropped, and if that is not enough,
/// everything (a flood of distinct bogus tokens must not grow memory without bound).
pub(crate) struct DecisionCache {
    max_entries: usize,
    entries: HashMap<CacheKey, (Instant, Decision)>,
}

impl DecisionCache {
    /// An empty cache of at most `max_entries` decisions.
    pub(crate) fn new(max_entries: usize) -> Self {
        Self { max_entries, entries: HashMap::new() }
    }

    /// The cached decision, if it has not expired at `now`.
    pub(crate) fn get(&self, key: &CacheKey, now: Instant) -> Option<Decision> {
        let (expires, decision) = self.entries.get(key)?;
        (now < *expires).then(|| decision.clone())
    }

    /// Remember `decision` for `key` from `now` for `ttl` (not [`Decision::Unavailable`]).
    pub(crate) fn insert_for(&mut self, key: CacheKey, decision: Decision, now: Instant, ttl: Duration) {
        if ttl.is_zero() || matches!(decision, Decision::Unavailable { .. }) {
            return;
        }
        if self.entries.len() >= self.max_entries && !self.entries.contains_key(&key) {
            self.entries.retain(|_, (expires, _)| now < *expires);
            if self.entries.len() >= self.max_entries {
                self.entries.clear();
            }
        }
        // A time-to-live beyond the clock's range: a year is forever here.
        let expires =
            now.checked_add(ttl).or_else(|| now.checked_add(Duration::from_secs(365 * 86_400))).unwrap_or(now);
        self.entries.insert(key, (expires, decision));
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// Lets one warning per kind through per interval; the rest go to debug.
pub(crate) struct WarnLimiter {
    interval: Duration,
    last: HashMap<&'static str, Instant>,
}

impl WarnLimiter {
    pub(crate) fn new(interval: Duration) -> Self {
        Self { interval, last: HashMap::new() }
    }

    /// Whether a warning of `kind` may be logged at `now` (and if so, remember it).
    pub(crate) fn allow(&mut self, kind: &'static str, now: Instant) -> bool {
        match self.last.get(kind) {
            Some(last) if now.saturating_duration_since(*last) < self.interval => false,
            _ => {
                self.last.insert(kind, now);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(value: &str) -> HeaderValue {
        HeaderValue::from_str(value).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            username: Some(name.to_owned()),
            groups: Some(groups.iter().map(|g| (*g).to_owned()).collect()),
            ..UserInfo::default()
        }
    }

    #[test]
    fn bearer_tokens_are_read_as_upstream_reads_them() {
        assert_eq!(bearer_token(Some(&header("Bearer abc.def"))), Ok(Some("abc.def")));
        assert_eq!(bearer_token(Some(&header("bearer abc  "))), Ok(Some("abc")));
        // Split at the first two spaces: the second part is the token.
        assert_eq!(bearer_token(Some(&header("Bearer a b"))), Ok(Some("a")));
        // No bearer token: left to the anonymous user.
        for none in ["Basic dXNlcjpwYXNz", "Bearer", "Bearer ", "bearer   abc", "abc", "", "Bearer\tabc"] {
            assert_eq!(bearer_token(Some(&header(none))), Ok(None), "{none:?}");
        }
        assert_eq!(bearer_token(None), Ok(None));
        let latin1 = HeaderValue::from_bytes(b"Bearer caf\xe9").unwrap_or_else(|_| header("invalid"));
        assert!(bearer_token(Some(&latin1)).is_err());
        let other = HeaderValue::from_bytes(b"Basic caf\xe9").unwrap_or_else(|_| header("invalid"));
        assert_eq!(bearer_token(Some(&other)), Ok(None));
    }

    #[test]
    fn credentials_follow_upstreams_union_then_anonymous() {
        let token = header("Bearer t");
        let alice = user("alice", &[]);
        let refused = || CertIdentity::Rejected("unknown CA".to_owned());
        // A certificate's user wins over a token.
        assert_eq!(credentials(CertIdentity::User(alice.clone()), Some(&token)), Credentials::User(alice));
        // A token is reviewed whether or not a certificate was refused.
        assert_eq!(credentials(CertIdentity::None, Some(&token)), Credentials::Token("t"));
        assert_eq!(credentials(refused(), Some(&token)), Credentials::Token("t"));
        // A refused certificate without a token: 401, not anonymous.
        assert_eq!(credentials(refused(), None), Credentials::Rejected("unknown CA".to_owned()));
        // Nothing (or nothing usable): the anonymous user.
        assert_eq!(credentials(CertIdentity::None, None), Credentials::Anonymous);
        assert_eq!(credentials(CertIdentity::None, Some(&header("Basic x"))), Credentials::Anonymous);
        let anonymous = anonymous_user();
        assert_eq!(anonymous.username.as_deref(), Some("system:anonymous"));
        assert_eq!(anonymous.groups, Some(vec!["system:unauthenticated".to_owned()]));
        assert!(!always_allowed(&anonymous));
    }

    #[test]
    fn token_reviews() {
        let authenticated = TokenReviewStatus {
            authenticated: Some(true),
            user: Some(user("alice", &["dev"])),
            ..TokenReviewStatus::default()
        };
        assert_eq!(reviewed_user(Some(authenticated)).and_then(|u| u.username), Some("alice".to_owned()));
        let rejected = TokenReviewStatus {
            authenticated: Some(false),
            error: Some("invalid".to_owned()),
            ..TokenReviewStatus::default()
        };
        assert_eq!(reviewed_user(Some(rejected)), None);
        assert_eq!(reviewed_user(None), None);
        let nameless =
            TokenReviewStatus { authenticated: Some(true), user: Some(UserInfo::default()), ..Default::default() };
        assert_eq!(reviewed_user(Some(nameless)), None);
    }

    #[test]
    fn system_masters_is_always_allowed() {
        assert!(always_allowed(&user("admin", &["system:authenticated", "system:masters"])));
        assert!(!always_allowed(&user("bob", &["system:authenticated"])));
        assert!(!always_allowed(&UserInfo::default()));
    }

    #[test]
    fn access_decisions_and_their_responses() {
        let allowed = SubjectAccessReviewStatus { allowed: true, ..SubjectAccessReviewStatus::default() };
        assert_eq!(
            access_decision("bob", "get", "/metrics", Some(allowed)),
            Decision::Allowed { user: "bob".to_owned() }
        );
        // `denied` wins over `allowed`.
        let contradictory = SubjectAccessReviewStatus { allowed: true, denied: Some(true), ..Default::default() };
        assert_eq!(access_decision("bob", "get", "/metrics", Some(contradictory)).status(), StatusCode::FORBIDDEN);
        let denied = access_decision("bob", "get", "/metrics", Some(SubjectAccessReviewStatus::default()));
        assert_eq!(denied.status(), StatusCode::FORBIDDEN);
        assert_eq!(denied.body(), "forbidden: User \"bob\" cannot get path \"/metrics\"\n");
        assert_eq!(denied.user(), Some("bob"));
        let with_reason = SubjectAccessReviewStatus { reason: Some("no rule".to_owned()), ..Default::default() };
        assert_eq!(
            access_decision("bob", "get", "/x", Some(with_reason)).body(),
            "forbidden: User \"bob\" cannot get path \"/x\": no rule\n"
        );
        let anonymous = access_decision(ANONYMOUS_USER, "get", "/metrics", None);
        assert_eq!(anonymous.body(), "forbidden: User \"system:anonymous\" cannot get path \"/metrics\"\n");
        let unauthenticated = Decision::Unauthenticated { reason: "the bearer token is not valid".to_owned() };
        assert_eq!(
            (unauthenticated.status(), unauthenticated.body()),
            (StatusCode::UNAUTHORIZED, "Unauthorized: the bearer token is not valid\n".to_owned())
        );
        assert_eq!(Decision::Unavailable { message: "m".to_owned() }.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[test]
    fn verbs() {
        assert_eq!(verb_for(&http::Method::GET), "get");
        assert_eq!(verb_for(&http::Method::HEAD), "get");
        assert_eq!(verb_for(&http::Method::POST), "post");
    }

    #[test]
    fn token_hash_is_sha256() {
        // SHA-256("abc"), FIPS 180-2 test vector.
        let hex: String = token_hash("abc").iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    const TTL: Duration = Duration::from_secs(10);

    fn key(token: &str, path: &str) -> CacheKey {
        CacheKey { token_hash: token_hash(token), verb: "get".to_owned(), path: path.to_owned() }
    }

    #[test]
    fn cache_expires_after_the_ttl_and_is_keyed_by_token_verb_and_path() {
        let start = Instant::now();
        let mut cache = DecisionCache::new(100);
        let allowed = Decision::Allowed { user: "bob".to_owned() };
        cache.insert_for(key("t1", "/metrics"), allowed.clone(), start, TTL);
        assert_eq!(cache.get(&key("t1", "/metrics"), start + Duration::from_secs(9)), Some(allowed));
        assert_eq!(cache.get(&key("t1", "/metrics"), start + Duration::from_secs(10)), None);
        assert_eq!(cache.get(&key("t2", "/metrics"), start), None);
        assert_eq!(cache.get(&key("t1", "/other"), start), None);
    }

    #[test]
    fn cache_never_stores_failures_and_is_bounded() {
        let start = Instant::now();
        let mut cache = DecisionCache::new(3);
        cache.insert_for(key("t", "/m"), Decision::Unavailable { message: "down".to_owned() }, start, TTL);
        assert_eq!(cache.len(), 0);
        let rejected = Decision::Unauthenticated { reason: "invalid".to_owned() };
        for token in ["a", "b", "c"] {
            cache.insert_for(key(token, "/m"), rejected.clone(), start, TTL);
        }
        assert_eq!(cache.len(), 3);
        // Full of live entries: cleared, then the new one stored.
        cache.insert_for(key("d", "/m"), rejected.clone(), start + Duration::from_secs(1), TTL);
        assert_eq!(cache.len(), 1);
        cache.insert_for(key("e", "/m"), rejected.clone(), start + Duration::from_secs(2), TTL);
        cache.insert_for(key("f", "/m"), rejected.clone(), start + Duration::from_secs(12), TTL);
        // Full again; "d" and "e" have expired and make room.
        cache.insert_for(key("g", "/m"), rejected.clone(), start + Duration::from_secs(12), TTL);
        assert_eq!(cache.len(), 2);
        assert!(cache.get(&key("f", "/m"), start + Duration::from_secs(12)).is_some());
        let mut disabled = DecisionCache::new(3);
        disabled.insert_for(key("a", "/m"), rejected, start, Duration::ZERO);
        assert_eq!(disabled.len(), 0);
    }

    #[test]
    fn one_warning_per_kind_per_interval() {
        let start = Instant::now();
        let mut limiter = WarnLimiter::new(Duration::from_secs(60));
        assert!(limiter.allow("tokenreviews", start));
        assert!(!limiter.allow("tokenreviews", start + Duration::from_secs(59)));
        assert!(limiter.allow("subjectaccessreviews", start + Duration::from_secs(1)));
        assert!(limiter.allow("tokenreviews", start + Duration::from_secs(60)));
    }
}
