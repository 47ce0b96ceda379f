//! `--client-ca-file`, `--requestheader-*`, `--authorization-always-allow-paths` and the
//! separate authentication/authorization clients, against the real kube-apiserver from
//! `test-harness` (identities outside `system:masters` are authorized by SubjectAccessReview).

#![allow(clippy::expect_used, clippy::unwrap_used)] // Test helpers outside #[test] fns.

use crate::common;

use std::path::PathBuf;
use std::time::Duration;

use common::{free_port, loopback_settings};
use controller_serving::{
    AuthSettings, Bound, ClientCertSettings, DelegatingAuth, Health, MetricsRegistry, RequestHeaderSettings,
    serve_secure,
};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use reqwest::StatusCode;
use test_harness::ControlPlane;
use tokio_util::sync::CancellationToken;

/// A CA that signs client certificates.
pub(crate) struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pub(crate) pem: String,
}

impl Ca {
    pub(crate) fn new(name: &str) -> Ca {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        Ca { issuer: Issuer::new(params, key), pem }
    }

    /// A client certificate and key (PEM, concatenated) for `common_name` in `organizations`.
    pub(crate) fn client(&self, common_name: &str, organizations: &[&str]) -> String {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, common_name);
        for o in organizations {
            params.distinguished_name.push(DnType::OrganizationName, *o);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        format!("{}{}", cert.pem(), key.serialize_pem())
    }

    fn file(&self, dir: &tempfile::TempDir, name: &str) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, &self.pem).unwrap();
        path
    }
}

async fn control_plane() -> &'static ControlPlane {
    common::init_tracing();
    ControlPlane::shared().await.expect("the test control plane starts")
}

pub(crate) async fn start(auth: DelegatingAuth) -> (Bound, CancellationToken) {
    let shutdown = CancellationToken::new();
    let metrics = MetricsRegistry::new();
    let bound = serve_secure(&loopback_settings(free_port()), Health::new(), metrics, Some(auth), shutdown.clone())
        .await
        .expect("starting")
        .expect("a port");
    (bound, shutdown)
}

/// A client trusting the server's CA, presenting `identity` (certificate and key PEM).
pub(crate) fn client(bound: &Bound, identity: Option<&str>) -> reqwest::Client {
    let ca = reqwest::Certificate::from_der(bound.certificate_chain.last().unwrap()).unwrap();
    let mut builder = reqwest::Client::builder()
        .tls_certs_only([ca])
        .resolve("localhost", bound.local_addr)
        .timeout(Duration::from_secs(30));
    if let Some(identity) = identity {
        builder = builder.identity(reqwest::Identity::from_pem(identity.as_bytes()).unwrap());
    }
    builder.build().unwrap()
}

pub(crate) async fn get(client: &reqwest::Client, bound: &Bound, headers: &[(&str, &str)]) -> (StatusCode, String) {
    let mut request = client.get(format!("https://localhost:{}/metrics", bound.local_addr.port()));
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.send().await.expect("a response");
    (response.status(), response.text().await.unwrap_or_default())
}

#[tokio::test]
async fn a_client_certificate_signed_by_the_client_ca_reaches_metrics() {
    let control_plane = control_plane().await;
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("client-ca");
    let settings = AuthSettings {
        client_certificates: ClientCertSettings {
            client_ca: Some(ca.file(&dir, "ca.pem").into()),
            request_header: None,
        },
        ..AuthSettings::default()
    };
    let client_of_ccm = control_plane.ccm_client().await.unwrap();
    let auth = DelegatingAuth::with_settings(client_of_ccm.clone(), client_of_ccm, settings).unwrap();
    let (bound, shutdown) = start(auth).await;

    let admin = ca.client("cert-admin", &["system:masters"]);
    let (status, body) = get(&client(&bound, Some(&admin)), &bound, &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // Outside system:masters the API server's SubjectAccessReview decides for the CommonName.
    let user = ca.client("cert-user", &["some-group"]);
    let (status, body) = get(&client(&bound, Some(&user)), &bound, &[]).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::FORBIDDEN, "forbidden: User \"cert-user\" cannot get path \"/metrics\"\n")
    );

    // A certificate another CA signed authenticates nobody: without a token that is a 401, not
    // the anonymous user (upstream's union authenticator fails with the verification error).
    let stranger = Ca::new("other-ca").client("cert-admin", &["system:masters"]);
    let (status, body) = get(&client(&bound, Some(&stranger)), &bound, &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body.contains("--client-ca-file"), "{body}");
    // With a valid token the token decides.
    let bearer = [("Authorization", format!("Bearer {}", control_plane.admin_token()))];
    let bearer: Vec<(&str, &str)> = bearer.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(get(&client(&bound, Some(&stranger)), &bound, &bearer).await.0, StatusCode::OK);
    // No certificate and no token: the anonymous user, refused by RBAC.
    let (status, body) = get(&client(&bound, None), &bound, &[]).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::FORBIDDEN, "forbidden: User \"system:anonymous\" cannot get path \"/metrics\"\n")
    );
    shutdown.cancel();
}

fn front_proxy(ca_file: PathBuf, allowed_names: &[&str]) -> RequestHeaderSettings {
    RequestHeaderSettings {
        ca: ca_file.into(),
        allowed_names: allowed_names.iter().map(|n| (*n).to_owned()).collect(),
        username_headers: vec!["X-Remote-User".to_owned()],
        uid_headers: Vec::new(),
        group_headers: vec!["X-Remote-Group".to_owned()],
        extra_headers_prefix: vec!["X-Remote-Extra-".to_owned()],
    }
}

#[tokio::test]
async fn a_front_proxy_request_authenticates_through_the_request_headers() {
    let control_plane = control_plane().await;
    let dir = tempfile::tempdir().unwrap();
    let proxy_ca = Ca::new("front-proxy-ca");
    let ca_file = proxy_ca.file(&dir, "front-proxy-ca.pem");
    let settings = AuthSettings {
        client_certificates: ClientCertSettings {
            client_ca: None,
            request_header: Some(front_proxy(ca_file.clone(), &["front-proxy-client"])),
        },
        ..AuthSettings::default()
    };
    let client_of_ccm = control_plane.ccm_client().await.unwrap();
    let auth = DelegatingAuth::with_settings(client_of_ccm.clone(), client_of_ccm.clone(), settings).unwrap();
    let (bound, shutdown) = start(auth).await;
    let proxy = client(&bound, Some(&proxy_ca.client("front-proxy-client", &[])));

    let masters = [("X-Remote-User", "alice"), ("X-Remote-Group", "system:masters")];
    let (status, body) = get(&proxy, &bound, &masters).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = get(&proxy, &bound, &[("X-Remote-User", "bob"), ("X-Remote-Group", "dev")]).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::FORBIDDEN, "forbidden: User \"bob\" cannot get path \"/metrics\"\n")
    );
    // Without the proxy's certificate the headers count for nothing: the anonymous user.
    let (status, body) = get(&client(&bound, None), &bound, &masters).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body.contains("system:anonymous"), "{body}");
    // A certificate of the CA with a name not in --requestheader-allowed-names is refused: 401.
    let other = client(&bound, Some(&proxy_ca.client("someone-else", &[])));
    let (status, body) = get(&other, &bound, &masters).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body.contains("--requestheader-allowed-names"), "{body}");
    // The proxy's certificate without a user header names nobody: anonymous (no client CA here).
    assert_eq!(get(&proxy, &bound, &[]).await.0, StatusCode::FORBIDDEN);
    shutdown.cancel();

    // Empty --requestheader-allowed-names: any certificate of the CA.
    let settings = AuthSettings {
        client_certificates: ClientCertSettings { client_ca: None, request_header: Some(front_proxy(ca_file, &[])) },
        ..AuthSettings::default()
    };
    let auth = DelegatingAuth::with_settings(client_of_ccm.clone(), client_of_ccm, settings).unwrap();
    let (bound, shutdown) = start(auth).await;
    let other = client(&bound, Some(&proxy_ca.client("someone-else", &[])));
    assert_eq!(get(&other, &bound, &masters).await.0, StatusCode::OK);
    shutdown.cancel();
}

#[tokio::test]
async fn always_allowed_paths_and_separate_review_clients() {
    let control_plane = control_plane().await;
    let ccm = control_plane.ccm_client().await.unwrap();
    let restricted = control_plane.restricted_client().await.unwrap();
    let open = AuthSettings { always_allow_paths: vec!["/met*".to_owned()], ..AuthSettings::default() };
    let auth = DelegatingAuth::with_settings(ccm.clone(), ccm.clone(), open).unwrap();
    let (bound, shutdown) = start(auth).await;
    assert_eq!(get(&client(&bound, None), &bound, &[]).await.0, StatusCode::OK);
    shutdown.cancel();

    // TokenReviews go through the authentication client only ...
    let auth = DelegatingAuth::with_settings(restricted.clone(), ccm.clone(), AuthSettings::default()).unwrap();
    let (bound, shutdown) = start(auth).await;
    let bearer = [("Authorization", format!("Bearer {}", control_plane.admin_token()))];
    let bearer: Vec<(&str, &str)> = bearer.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (status, body) = get(&client(&bound, None), &bound, &bearer).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    assert!(body.contains("tokenreviews.authentication.k8s.io"), "{body}");
    shutdown.cancel();

    // ... and SubjectAccessReviews through the authorization client only.
    let auth = DelegatingAuth::with_settings(ccm.clone(), restricted, AuthSettings::default()).unwrap();
    let (bound, shutdown) = start(auth).await;
    let (status, body) = get(&client(&bound, None), &bound, &bearer).await;
    assert_eq!(status, StatusCode::OK, "system:masters needs no SubjectAccessReview: {body}");
    let bearer = [("Authorization", format!("Bearer {}", control_plane.restricted_token()))];
    let bearer: Vec<(&str, &str)> = bearer.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (status, body) = get(&client(&bound, None), &bound, &bearer).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    assert!(body.contains("subjectaccessreviews.authorization.k8s.io"), "{body}");
    shutdown.cancel();
}
