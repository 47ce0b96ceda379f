//! Upstream's in-cluster lookup of the client CA and front-proxy settings, against the real
//! kube-apiserver from `test-harness`, in a ConfigMap of a namespace of each test's own (the
//! shared control plane's `kube-system/extension-apiserver-authentication` stays untouched):
//! content upstream refuses is refused (never "any front-proxy name"), and the ConfigMap is
//! read again, so a failed first read or a later change takes effect without a restart.

#![allow(clippy::expect_used, clippy::unwrap_used)] // Test helpers outside #[test] fns.

use crate::client_certs::{Ca, client, get, start};
use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use controller_serving::{AuthSettings, ClusterLookup, DelegatingAuth, LookupError};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::{Api, Client};
use reqwest::StatusCode;
use test_harness::{ControlPlane, RESTRICTED_USER, unique_name, wait_until};

/// Refreshes fast enough for a test; a change must show within this.
const CHANGE_SHOWS_WITHIN: Duration = Duration::from_secs(20);

async fn control_plane() -> &'static ControlPlane {
    common::init_tracing();
    ControlPlane::shared().await.expect("the test control plane starts")
}

/// A fresh namespace with a ConfigMap named `extension-apiserver-authentication` holding `data`.
async fn configmap_in_own_namespace(admin: &Client, data: &[(&str, &str)]) -> (String, Api<ConfigMap>) {
    let namespace = unique_name("auth-lookup");
    let ns = Namespace {
        metadata: ObjectMeta { name: Some(namespace.clone()), ..ObjectMeta::default() },
        ..Namespace::default()
    };
    Api::<Namespace>::all(admin.clone()).create(&PostParams::default(), &ns).await.expect("creating the namespace");
    let configmaps = Api::<ConfigMap>::namespaced(admin.clone(), &namespace);
    configmaps.create(&PostParams::default(), &configmap(data)).await.expect("creating the ConfigMap");
    (namespace, configmaps)
}

fn configmap(data: &[(&str, &str)]) -> ConfigMap {
    let data: BTreeMap<String, String> = data.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    ConfigMap {
        metadata: ObjectMeta { name: Some("extension-apiserver-authentication".to_owned()), ..ObjectMeta::default() },
        data: Some(data),
        ..ConfigMap::default()
    }
}

async fn replace(configmaps: &Api<ConfigMap>, data: &[(&str, &str)]) {
    let mut current = configmaps.get("extension-apiserver-authentication").await.expect("reading the ConfigMap");
    current.data = configmap(data).data;
    configmaps
        .replace("extension-apiserver-authentication", &PostParams::default(), &current)
        .await
        .expect("replacing the ConfigMap");
}

fn lookup(namespace: &str) -> ClusterLookup {
    ClusterLookup {
        namespace: namespace.to_owned(),
        name: "extension-apiserver-authentication".to_owned(),
        refresh: Duration::from_millis(500),
        retry: Duration::from_millis(200),
    }
}

async fn delete_namespace(admin: &Client, namespace: &str) {
    let _ = Api::<Namespace>::all(admin.clone()).delete(namespace, &DeleteParams::default()).await;
}

/// The headers a front proxy sends for a user in `system:masters`.
const MASTERS: [(&str, &str); 2] = [("X-Remote-User", "alice"), ("X-Remote-Group", "system:masters")];

/// Upstream decodes every `requestheader-*` list as a JSON array and refuses the settings when
/// one does not decode; here an unreadable `requestheader-allowed-names` once became an empty
/// list, which lets every certificate of the front proxy's CA assert any user.
#[tokio::test]
async fn an_unparsable_allowed_names_list_refuses_front_proxy_authentication() {
    let control_plane = control_plane().await;
    let admin = control_plane.admin_client().await.unwrap();
    let proxy_ca = Ca::new("front-proxy-ca");
    let headers = [
        ("requestheader-client-ca-file", proxy_ca.pem.as_str()),
        ("requestheader-username-headers", "[\"X-Remote-User\"]"),
        ("requestheader-group-headers", "[\"X-Remote-Group\"]"),
    ];
    let mut data = headers.to_vec();
    data.push(("requestheader-allowed-names", "front-proxy-client"));
    let (namespace, configmaps) = configmap_in_own_namespace(&admin, &data).await;

    // The admin reads the ConfigMap (authentication client); the CCM's identity authorizes.
    let auth = DelegatingAuth::with_settings(
        admin.clone(),
        control_plane.ccm_client().await.unwrap(),
        AuthSettings::default(),
    )
    .unwrap();
    let first = auth.look_up_in_cluster(lookup(&namespace)).await;
    let (bound, shutdown) = start(auth).await;

    // No front-proxy authentication at all: the asserted user counts for nothing, whatever the
    // certificate's name; the request is the anonymous user's.
    for name in ["someone-else", "front-proxy-client"] {
        let proxy = client(&bound, Some(&proxy_ca.client(name, &[])));
        let (status, body) = get(&proxy, &bound, &MASTERS).await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::FORBIDDEN, "forbidden: User \"system:anonymous\" cannot get path \"/metrics\"\n"),
            "a front-proxy certificate named {name:?}"
        );
    }
    let error = first.expect_err("the lookup refuses the content");
    let message = error.to_string();
    assert!(matches!(error, LookupError::Content { .. }), "{error:?}");
    assert!(message.contains("requestheader-allowed-names"), "names the key: {message}");
    assert!(message.contains("JSON array of strings"), "says what is accepted: {message}");

    // Fixed in the ConfigMap: picked up without a restart, with the allowed name enforced.
    let mut data = headers.to_vec();
    data.push(("requestheader-allowed-names", "[\"front-proxy-client\"]"));
    replace(&configmaps, &data).await;
    // A new client, so a new connection, for every attempt: whether a client certificate is
    // asked for is settled in each connection's handshake.
    let proxy = proxy_ca.client("front-proxy-client", &[]);
    wait_until(CHANGE_SHOWS_WITHIN, "the fixed front-proxy settings to apply", async || {
        get(&client(&bound, Some(&proxy)), &bound, &MASTERS).await.0 == StatusCode::OK
    })
    .await
    .expect("the fixed settings apply");
    let other = client(&bound, Some(&proxy_ca.client("someone-else", &[])));
    let (status, body) = get(&other, &bound, &MASTERS).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    shutdown.cancel();
    delete_namespace(&admin, &namespace).await;
}

/// Upstream watches the ConfigMap (and re-reads it every minute); here it was read once, so one
/// failed read at start turned client-certificate authentication off for the life of the
/// process. The first read fails (the identity may not read it yet); once RBAC allows it the
/// client CA authenticates, and a new CA replaces the old one.
#[tokio::test]
async fn a_failed_first_lookup_is_retried_and_later_changes_are_applied() {
    let control_plane = control_plane().await;
    let admin = control_plane.admin_client().await.unwrap();
    let (first_ca, second_ca) = (Ca::new("client-ca-1"), Ca::new("client-ca-2"));
    let (namespace, configmaps) = configmap_in_own_namespace(&admin, &[("client-ca-file", &first_ca.pem)]).await;

    // The restricted identity reads the ConfigMap: refused until the Role below is bound.
    let restricted = control_plane.restricted_client().await.unwrap();
    let auth =
        DelegatingAuth::with_settings(restricted, control_plane.ccm_client().await.unwrap(), AuthSettings::default())
            .unwrap();
    let first = auth.look_up_in_cluster(lookup(&namespace)).await;
    assert!(matches!(first, Err(LookupError::Read { forbidden: true, .. })), "{first:?}");
    let (bound, shutdown) = start(auth).await;
    let first_admin = first_ca.client("cert-admin", &["system:masters"]);
    let (status, body) = get(&client(&bound, Some(&first_admin)), &bound, &[]).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "no client CA yet: the anonymous user: {body}");

    // A new client, so a new connection, for every attempt: whether a client certificate is
    // asked for is settled in each connection's handshake.
    grant_read(&admin, &namespace).await;
    wait_until(CHANGE_SHOWS_WITHIN, "the client CA to be looked up again", async || {
        get(&client(&bound, Some(&first_admin)), &bound, &[]).await.0 == StatusCode::OK
    })
    .await
    .expect("the client CA is used once the ConfigMap can be read");

    // A new CA in the ConfigMap replaces the old one.
    replace(&configmaps, &[("client-ca-file", &second_ca.pem)]).await;
    let second_admin = second_ca.client("cert-admin", &["system:masters"]);
    wait_until(CHANGE_SHOWS_WITHIN, "the new client CA to apply", async || {
        get(&client(&bound, Some(&second_admin)), &bound, &[]).await.0 == StatusCode::OK
    })
    .await
    .expect("the new client CA applies");
    let (status, body) = get(&client(&bound, Some(&first_admin)), &bound, &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "the old CA no longer authenticates: {body}");
    shutdown.cancel();
    delete_namespace(&admin, &namespace).await;
}

/// Lets the restricted user read the ConfigMaps of `namespace`.
async fn grant_read(admin: &Client, namespace: &str) {
    let name = "read-authentication-configmap";
    let role = Role {
        metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["configmaps".to_owned()]),
            resource_names: Some(vec!["extension-apiserver-authentication".to_owned()]),
            verbs: vec!["get".to_owned()],
            ..PolicyRule::default()
        }]),
    };
    Api::<Role>::namespaced(admin.clone(), namespace).create(&PostParams::default(), &role).await.expect("the Role");
    let binding = RoleBinding {
        metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "Role".to_owned(),
            name: name.to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "User".to_owned(),
            name: RESTRICTED_USER.to_owned(),
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            ..Subject::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &binding)
        .await
        .expect("the RoleBinding");
}
