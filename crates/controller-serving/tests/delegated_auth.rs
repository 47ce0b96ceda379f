//! Delegated authentication and authorization against the real kube-apiserver from
//! `test-harness`: which tokens (or none: the anonymous user) get what answer, and which RBAC
//! the server's identity needs.

#![allow(clippy::expect_used, clippy::unwrap_used)] // Test helpers outside #[test] fns.

use crate::common;

use std::time::Duration;

use common::start_secure;
use controller_serving::{ANONYMOUS_USER, DelegatingAuth, Health, MetricsRegistry, UNAUTHENTICATED_GROUP};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::{Api, Client};
use prometheus_client::metrics::counter::Counter;
use reqwest::StatusCode;
use test_harness::{ControlPlane, RESTRICTED_USER, rbac, unique_name, wait_until};

async fn control_plane() -> &'static ControlPlane {
    common::init_tracing();
    ControlPlane::shared().await.expect("the test control plane starts")
}

fn metrics_with_a_counter() -> MetricsRegistry {
    let metrics = MetricsRegistry::new();
    let counter = Counter::<u64>::default();
    metrics.register("delegated_test", "A counter.", counter.clone());
    counter.inc();
    metrics
}

async fn get(client: &reqwest::Client, url: String, token: Option<&str>) -> (StatusCode, String) {
    let mut request = client.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("a response");
    let status = response.status();
    (status, response.text().await.unwrap_or_default())
}

#[tokio::test]
async fn tokens_are_reviewed_by_the_api_server() {
    let control_plane = control_plane().await;
    let auth = DelegatingAuth::new(control_plane.ccm_client().await.expect("CCM client"));
    let running = start_secure(Health::new(), metrics_with_a_counter(), Some(auth)).await;
    let client = running.client();
    let metrics = running.url("/metrics");

    // No credentials: the anonymous user, whom the API server's RBAC does not allow /metrics.
    let (status, body) = get(&client, metrics.clone(), None).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::FORBIDDEN, "forbidden: User \"system:anonymous\" cannot get path \"/metrics\"\n")
    );
    // Neither does another scheme or an empty bearer token authenticate anyone.
    let response = client.get(metrics.clone()).header("authorization", "Basic dXNlcjpwYXNz").send().await.unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);

    // Credentials that authenticate nobody are refused before any authorization.
    let (status, body) = get(&client, metrics.clone(), Some("bogus-token")).await;
    assert_eq!((status, body.as_str()), (StatusCode::UNAUTHORIZED, "Unauthorized: the bearer token is not valid\n"));
    assert!(!body.contains("bogus"), "the token is never echoed");
    let response = client.get(metrics.clone()).bearer_auth("bogus-token").send().await.expect("a response");
    assert_eq!(response.headers().get("www-authenticate").and_then(|v| v.to_str().ok()), Some("Bearer"));

    let (status, body) = get(&client, metrics.clone(), Some(control_plane.admin_token())).await;
    assert_eq!(status, StatusCode::OK, "system:masters is always allowed: {body}");
    assert!(body.contains("delegated_test_total 1\n"), "{body}");

    let (status, body) = get(&client, metrics.clone(), Some(control_plane.restricted_token())).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body, format!("forbidden: User \"{RESTRICTED_USER}\" cannot get path \"/metrics\"\n"));

    // Probe paths need no credentials at all; unknown paths are authorized first, then 404.
    for path in ["/healthz", "/livez", "/readyz"] {
        assert_eq!(get(&client, running.url(path), None).await, (StatusCode::OK, "ok".to_owned()), "{path}");
    }
    assert_eq!(get(&client, running.url("/configz"), None).await.0, StatusCode::FORBIDDEN);
    assert_eq!(get(&client, running.url("/configz"), Some(control_plane.admin_token())).await.0, StatusCode::NOT_FOUND);
}

/// Upstream's `--authorization-always-allow-paths` matches the request path exactly (or by a
/// trailing-`*` prefix), never the query: `/healthz?verbose` is `/healthz` and open, while
/// `/healthz/<check>` is another path, authorized like any other (the anonymous user without
/// RBAC for it: 403).
#[tokio::test]
async fn probe_sub_paths_are_authorized_like_any_other_path() {
    let control_plane = control_plane().await;
    let auth = DelegatingAuth::new(control_plane.ccm_client().await.expect("CCM client"));
    let running = start_secure(Health::new(), metrics_with_a_counter(), Some(auth)).await;
    let client = running.client();

    for path in ["/healthz/ping", "/livez/ping", "/readyz/ping", "/healthz/", "/healthz/ping?verbose"] {
        let (status, body) = get(&client, running.url(path), None).await;
        let checked = path.split('?').next().unwrap_or(path);
        assert_eq!(
            (status, body),
            (StatusCode::FORBIDDEN, format!("forbidden: User \"system:anonymous\" cannot get path \"{checked}\"\n")),
            "{path}"
        );
    }
    // A rejected token on a protected probe sub-path: 401, as on any protected path.
    assert_eq!(get(&client, running.url("/healthz/ping"), Some("bogus-token")).await.0, StatusCode::UNAUTHORIZED);
    // Allowed to whoever RBAC allows: system:masters.
    let admin = Some(control_plane.admin_token());
    assert_eq!(get(&client, running.url("/healthz/ping"), admin).await, (StatusCode::OK, "ok".to_owned()));
    // The exact paths stay open, whatever the query.
    assert_eq!(get(&client, running.url("/healthz"), None).await, (StatusCode::OK, "ok".to_owned()));
    assert_eq!(
        get(&client, running.url("/healthz?verbose"), None).await,
        (StatusCode::OK, "[+]ping ok\nhealthz check passed\n".to_owned())
    );
    assert_eq!(get(&client, running.url("/readyz?exclude=ping"), None).await.0, StatusCode::OK);
}

/// A SubjectAccessReview, evaluated by the API server, for `user` in `groups`.
async fn can(admin: &Client, user: &str, groups: &[&str], verb: &str, group: &str, resource: &str) -> bool {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_owned()),
            groups: Some(groups.iter().map(|g| (*g).to_owned()).collect()),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.to_owned()),
                group: Some(group.to_owned()),
                resource: Some(resource.to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let reviewed = Api::<SubjectAccessReview>::all(admin.clone()).create(&PostParams::default(), &review).await;
    reviewed.expect("a SubjectAccessReview as admin").status.is_some_and(|s| s.allowed)
}

async fn can_get_path(admin: &Client, user: &str, path: &str) -> bool {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_owned()),
            groups: Some(vec!["system:authenticated".to_owned()]),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.to_owned()),
                verb: Some("get".to_owned()),
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let reviewed = Api::<SubjectAccessReview>::all(admin.clone()).create(&PostParams::default(), &review).await;
    reviewed.expect("a SubjectAccessReview as admin").status.is_some_and(|s| s.allowed)
}

fn binding(name: &str, role: &str, subject: Subject) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "ClusterRole".to_owned(),
            name: role.to_owned(),
        },
        subjects: Some(vec![subject]),
    }
}

fn service_account(name: &str) -> Subject {
    Subject {
        kind: "ServiceAccount".to_owned(),
        name: name.to_owned(),
        namespace: Some(rbac::CCM_NAMESPACE.to_owned()),
        ..Subject::default()
    }
}

/// The official ClusterRole alone does not allow delegation; `system:auth-delegator` adds exactly
/// the two `create` permissions; the harness gives them to the CCM's ServiceAccount.
#[tokio::test]
async fn the_server_identity_needs_the_auth_delegator_cluster_role() {
    let control_plane = control_plane().await;
    let admin = control_plane.admin_client().await.expect("admin client");
    let groups = ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"];
    let reviews = [("authentication.k8s.io", "tokenreviews"), ("authorization.k8s.io", "subjectaccessreviews")];

    // The CCM identity of the harness: both allowed.
    for (group, resource) in reviews {
        assert!(can(&admin, rbac::CCM_USER, &groups, "create", group, resource).await, "CCM: create {resource}");
        assert!(!can(&admin, RESTRICTED_USER, &["system:authenticated"], "create", group, resource).await);
    }

    // A fresh ServiceAccount with only the official ClusterRole: neither is allowed...
    let account = unique_name("ccm-probe");
    let user = format!("system:serviceaccount:{}:{account}", rbac::CCM_NAMESPACE);
    let bindings = Api::<ClusterRoleBinding>::all(admin.clone());
    let official = unique_name("official-only");
    bindings
        .create(&PostParams::default(), &binding(&official, rbac::CCM_CLUSTER_ROLE, service_account(&account)))
        .await
        .expect("binding the official role");
    // (wait until that binding is in effect, so the "no" below is not just RBAC cache lag)
    wait_until(Duration::from_secs(20), "the official role binding to apply", async || {
        can(&admin, &user, &groups, "list", "", "nodes").await
    })
    .await
    .expect("binding applies");
    for (group, resource) in reviews {
        assert!(!can(&admin, &user, &groups, "create", group, resource).await, "official role alone: {resource}");
    }
    // ...until it is also bound to system:auth-delegator.
    let delegator = unique_name("auth-delegator");
    bindings
        .create(
            &PostParams::default(),
            &binding(&delegator, rbac::AUTH_DELEGATOR_CLUSTER_ROLE, service_account(&account)),
        )
        .await
        .expect("binding system:auth-delegator");
    for (group, resource) in reviews {
        wait_until(Duration::from_secs(20), "system:auth-delegator to allow the review", async || {
            can(&admin, &user, &groups, "create", group, resource).await
        })
        .await
        .expect("allowed with system:auth-delegator");
    }
    for name in [official, delegator] {
        let _ = bindings.delete(&name, &DeleteParams::default()).await;
    }
}

/// A server whose identity may not create TokenReviews answers protected paths with a clear
/// 500, and still serves the probes.
#[tokio::test]
async fn without_review_permissions_the_server_explains_the_missing_rbac() {
    let control_plane = control_plane().await;
    let auth = DelegatingAuth::new(control_plane.restricted_client().await.expect("restricted client"));
    let running = start_secure(Health::new(), metrics_with_a_counter(), Some(auth)).await;
    let client = running.client();
    for token in [control_plane.admin_token(), "bogus-token"] {
        let (status, body) = get(&client, running.url("/metrics"), Some(token)).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
        assert!(body.contains("tokenreviews.authentication.k8s.io"), "{body}");
        assert!(body.contains("system:auth-delegator"), "{body}");
        assert!(!body.contains(token), "the token is never echoed");
    }
    assert_eq!(get(&client, running.url("/healthz"), None).await, (StatusCode::OK, "ok".to_owned()));
    // No credentials: the anonymous user still needs a SubjectAccessReview, which fails the same way.
    let (status, body) = get(&client, running.url("/metrics"), None).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    assert!(body.contains("subjectaccessreviews.authorization.k8s.io"), "{body}");
}

fn metrics_reader_role(name: &str, path: &str) -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
        rules: Some(vec![PolicyRule {
            non_resource_urls: Some(vec![path.to_owned()]),
            verbs: vec!["get".to_owned()],
            ..PolicyRule::default()
        }]),
        ..ClusterRole::default()
    }
}

async fn anonymous_can_get_path(admin: &Client, path: &str) -> bool {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(ANONYMOUS_USER.to_owned()),
            groups: Some(vec![UNAUTHENTICATED_GROUP.to_owned()]),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.to_owned()),
                verb: Some("get".to_owned()),
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let reviewed = Api::<SubjectAccessReview>::all(admin.clone()).create(&PostParams::default(), &review).await;
    reviewed.expect("a SubjectAccessReview as admin").status.is_some_and(|s| s.allowed)
}

/// Upstream's delegated authentication treats a request without credentials as
/// `system:anonymous` in `system:unauthenticated`, so RBAC can open a path to it: a ClusterRole
/// granting `get` on `/metrics`, bound to the group or to the user, lets it through. A rejected
/// token stays 401. On a control plane of its own: the binding opens `/metrics` to every
/// anonymous request, which the other tests expect to be refused.
#[tokio::test]
async fn rbac_can_allow_the_anonymous_user() {
    common::init_tracing();
    let control_plane = ControlPlane::start().await.expect("a private control plane starts");
    let admin = control_plane.admin_client().await.expect("admin client");
    let path = "/metrics";
    assert!(!anonymous_can_get_path(&admin, path).await, "precondition: anonymous may not get /metrics");
    let role_name = unique_name("anonymous-metrics");
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &metrics_reader_role(&role_name, path))
        .await
        .expect("creating the role");
    let bindings = Api::<ClusterRoleBinding>::all(admin.clone());
    let group = Subject {
        kind: "Group".to_owned(),
        name: UNAUTHENTICATED_GROUP.to_owned(),
        api_group: Some("rbac.authorization.k8s.io".to_owned()),
        ..Subject::default()
    };
    bindings.create(&PostParams::default(), &binding(&role_name, &role_name, group)).await.expect("binding");
    wait_until(Duration::from_secs(20), "the anonymous binding to apply", async || {
        anonymous_can_get_path(&admin, path).await
    })
    .await
    .expect("binding applies");

    let auth = DelegatingAuth::with_cache_ttl(control_plane.ccm_client().await.expect("client"), Duration::ZERO);
    let running = start_secure(Health::new(), metrics_with_a_counter(), Some(auth)).await;
    let client = running.client();
    let (status, body) = get(&client, running.url(path), None).await;
    assert_eq!(status, StatusCode::OK, "allowed for system:unauthenticated: {body}");
    assert!(body.contains("delegated_test_total 1\n"), "{body}");
    // Only that path, and a rejected token is still refused outright.
    assert_eq!(get(&client, running.url("/configz"), None).await.0, StatusCode::FORBIDDEN);
    assert_eq!(get(&client, running.url(path), Some("bogus-token")).await.0, StatusCode::UNAUTHORIZED);
    // An authenticated user is not anonymous: the binding does not cover them.
    assert_eq!(get(&client, running.url(path), Some(control_plane.restricted_token())).await.0, StatusCode::FORBIDDEN);

    // Bound to the user instead of the group: the same.
    bindings.delete(&role_name, &DeleteParams::default()).await.expect("deleting the binding");
    wait_until(Duration::from_secs(20), "the revocation to apply", async || {
        !anonymous_can_get_path(&admin, path).await
    })
    .await
    .expect("revocation applies");
    assert_eq!(get(&client, running.url(path), None).await.0, StatusCode::FORBIDDEN);
    let user = Subject {
        kind: "User".to_owned(),
        name: ANONYMOUS_USER.to_owned(),
        api_group: Some("rbac.authorization.k8s.io".to_owned()),
        ..Subject::default()
    };
    bindings.create(&PostParams::default(), &binding(&role_name, &role_name, user)).await.expect("binding");
    wait_until(Duration::from_secs(20), "the user binding to apply", async || {
        anonymous_can_get_path(&admin, path).await
    })
    .await
    .expect("binding applies");
    assert_eq!(get(&client, running.url(path), None).await.0, StatusCode::OK);
}

/// RBAC on the non-resource path decides for users outside `system:masters`, and decisions are
/// cached: a revoked permission keeps working until the cached decision expires.
#[tokio::test]
async fn rbac_on_the_path_decides_and_decisions_are_cached() {
    let control_plane = control_plane().await;
    let admin = control_plane.admin_client().await.expect("admin client");
    // The CCM's token doubles as a client token: the CCM user has no /metrics permission yet.
    let token = control_plane.ccm_token();
    let path = "/metrics";
    assert!(!can_get_path(&admin, rbac::CCM_USER, path).await, "precondition: no /metrics permission");

    let role_name = unique_name("metrics-reader");
    let role = metrics_reader_role(&role_name, path);
    Api::<ClusterRole>::all(admin.clone()).create(&PostParams::default(), &role).await.expect("creating the role");
    let bindings = Api::<ClusterRoleBinding>::all(admin.clone());
    bindings
        .create(&PostParams::default(), &binding(&role_name, &role_name, service_account(rbac::CCM_SERVICE_ACCOUNT)))
        .await
        .expect("binding the role");
    wait_until(Duration::from_secs(20), "the metrics-reader binding to apply", async || {
        can_get_path(&admin, rbac::CCM_USER, path).await
    })
    .await
    .expect("binding applies");

    // A long cache TTL so that the check below cannot race the expiry.
    let cached_auth =
        DelegatingAuth::with_cache_ttl(control_plane.ccm_client().await.expect("client"), Duration::from_secs(300));
    let cached = start_secure(Health::new(), metrics_with_a_counter(), Some(cached_auth)).await;
    let (status, body) = get(&cached.client(), cached.url(path), Some(token)).await;
    assert_eq!(status, StatusCode::OK, "allowed by the SubjectAccessReview: {body}");
    // Another path is not covered by the rule.
    let (status, body) = get(&cached.client(), cached.url("/debug/pprof"), Some(token)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");

    // Revoke, and wait until the API server says so.
    bindings.delete(&role_name, &DeleteParams::default()).await.expect("deleting the binding");
    wait_until(Duration::from_secs(20), "the revocation to apply", async || {
        !can_get_path(&admin, rbac::CCM_USER, path).await
    })
    .await
    .expect("revocation applies");
    // The cached decision still allows; a server without a cache forbids.
    assert_eq!(get(&cached.client(), cached.url(path), Some(token)).await.0, StatusCode::OK);
    let uncached_auth =
        DelegatingAuth::with_cache_ttl(control_plane.ccm_client().await.expect("client"), Duration::ZERO);
    let uncached = start_secure(Health::new(), metrics_with_a_counter(), Some(uncached_auth)).await;
    let (status, body) = get(&uncached.client(), uncached.url(path), Some(token)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body.contains(rbac::CCM_USER), "{body}");
    let _ = Api::<ClusterRole>::all(admin).delete(&role_name, &DeleteParams::default()).await;
}
