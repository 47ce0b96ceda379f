//! End to end: the official CCM's secure-serving flags on the hcloud-ccm binary against the
//! real kube-apiserver — `--client-ca-file`, `--requestheader-*`, `--tls-min-version`,
//! `--authorization-always-allow-paths`, `--authentication-kubeconfig` — and the one start-up
//! warning of a flag without meaning here; the lookup of missing client-certificate settings in
//! kube-system/extension-apiserver-authentication with the shipped RBAC, and refused.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{Env, free_port};
use hcloud_fake::FakeConfig;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        Ca { issuer: Issuer::new(params, key), pem }
    }

    /// Certificate and key PEM of a client `common_name` in `organizations`.
    fn client(&self, common_name: &str, organizations: &[&str]) -> reqwest::Identity {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, common_name);
        for o in organizations {
            params.distinguished_name.push(DnType::OrganizationName, *o);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        reqwest::Identity::from_pem(format!("{}{}", cert.pem(), key.serialize_pem()).as_bytes()).unwrap()
    }
}

async fn status(url: &str, identity: Option<reqwest::Identity>, headers: &[(&str, &str)]) -> u16 {
    let mut builder = reqwest::Client::builder().tls_danger_accept_invalid_certs(true).timeout(Duration::from_secs(20));
    if let Some(identity) = identity {
        builder = builder.identity(identity);
    }
    let mut request = builder.build().unwrap().get(url);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    request.send().await.unwrap_or_else(|e| panic!("GET {url}: {e}")).status().as_u16()
}

/// Whether a TLS 1.2-only client completes a handshake with `port`.
async fn tls12_handshake(port: u16) -> bool {
    #[derive(Debug)]
    struct Any;
    impl rustls::client::danger::ServerCertVerifier for Any {
        fn verify_server_cert(
            &self,
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &[rustls::pki_types::CertificateDer<'_>],
            _: &rustls::pki_types::ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            _: &[u8],
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn verify_tls13_signature(
            &self,
            _: &[u8],
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            rustls::crypto::aws_lc_rs::default_provider().signature_verification_algorithms.supported_schemes()
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS12])
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Any))
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await.is_ok()
}

#[tokio::test]
async fn client_certificates_front_proxy_and_tls_flags_work_on_the_binary() {
    let env = Env::start(FakeConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let (client_ca, proxy_ca) = (Ca::new("client-ca"), Ca::new("front-proxy-ca"));
    let client_ca_file = dir.path().join("client-ca.pem");
    let proxy_ca_file = dir.path().join("front-proxy-ca.pem");
    std::fs::write(&client_ca_file, &client_ca.pem).unwrap();
    std::fs::write(&proxy_ca_file, &proxy_ca.pem).unwrap();
    let port = free_port();
    let args = [
        format!("--secure-port={port}"),
        format!("--client-ca-file={}", client_ca_file.display()),
        format!("--requestheader-client-ca-file={}", proxy_ca_file.display()),
        "--requestheader-allowed-names=front-proxy".to_owned(),
        "--tls-min-version=VersionTLS13".to_owned(),
        // The lookup of missing settings is skipped: both CA files are given.
        format!("--authentication-kubeconfig={}", env.cp.ccm_kubeconfig().display()),
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/met*".to_owned(),
        "--webhooks=*".to_owned(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ccm = env.ccm(&[], &args).await;
    let metrics = format!("https://127.0.0.1:{port}/metrics");
    let healthz = format!("https://127.0.0.1:{port}/healthz");

    // /metrics is always allowed here; /healthz too. Another path is authorized: without
    // credentials for the anonymous user, whom RBAC refuses.
    assert_eq!(status(&metrics, None, &[]).await, 200);
    assert_eq!(status(&healthz, None, &[]).await, 200);
    let other = format!("https://127.0.0.1:{port}/other");
    assert_eq!(status(&other, None, &[]).await, 403);
    // A certificate neither CA signed authenticates nobody: 401, not anonymous.
    assert_eq!(status(&other, Some(Ca::new("stranger-ca").client("admin", &["system:masters"])), &[]).await, 401);
    // A client certificate of the client CA in system:masters: allowed (then 404: no such path).
    assert_eq!(status(&other, Some(client_ca.client("admin", &["system:masters"])), &[]).await, 404);
    // Outside system:masters the API server's SubjectAccessReview refuses.
    assert_eq!(status(&other, Some(client_ca.client("someone", &[])), &[]).await, 403);
    // The front proxy asserts a user by headers.
    let headers = [("X-Remote-User", "alice"), ("X-Remote-Group", "system:masters")];
    assert_eq!(status(&other, Some(proxy_ca.client("front-proxy", &[])), &headers).await, 404);
    // A front-proxy certificate with a CommonName outside --requestheader-allowed-names: 401.
    assert_eq!(status(&other, Some(proxy_ca.client("not-allowed", &[])), &headers).await, 401);
    // --tls-min-version=VersionTLS13.
    assert!(!tls12_handshake(port).await, "a TLS 1.2 handshake must be refused");

    let logs = ccm.logs();
    assert_eq!(logs.matches("--webhooks has no effect").count(), 1, "{logs}");
    let status = ccm.stop().await.expect("stops");
    assert_eq!(status.code(), Some(0), "{}", ccm.logs());
}

/// The start-up warning of a lookup of kube-system/extension-apiserver-authentication the
/// authentication identity may not make.
const REFUSED: &str = "cannot read configmap kube-system/extension-apiserver-authentication";
/// The start-up line of a lookup that found the cluster's client CA.
const LOOKED_UP: &str = "client certificates are authenticated with the client CA from (configmap kube-system/extension-apiserver-authentication";

/// Upstream's lookup of the client CA and front-proxy settings in
/// kube-system/extension-apiserver-authentication, read with the authentication identity: here
/// the CCM's own, with the shipped RBAC (which binds it to the built-in Role
/// `extension-apiserver-authentication-reader`). Without any CA flag the cluster's client CA
/// and front proxy authenticate, and nothing warns; `--authentication-skip-lookup` turns the
/// lookup off.
#[tokio::test]
async fn missing_client_ca_settings_are_looked_up_in_the_cluster() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{DeleteParams, ObjectMeta, PostParams};

    let env = Env::start(FakeConfig::default()).await;
    let (client_ca, proxy_ca) = (Ca::new("cluster-client-ca"), Ca::new("cluster-front-proxy-ca"));
    // The test control plane's API server publishes no such ConfigMap: publish one as kube-apiserver does.
    let admin = env.cp.admin_client().await.expect("admin client");
    let configmaps: kube::Api<ConfigMap> = kube::Api::namespaced(admin, "kube-system");
    let name = "extension-apiserver-authentication";
    let _ = configmaps.delete(name, &DeleteParams::default()).await;
    let data = [
        ("client-ca-file", client_ca.pem.clone()),
        ("requestheader-client-ca-file", proxy_ca.pem.clone()),
        ("requestheader-allowed-names", "[\"front-proxy\"]".to_owned()),
        ("requestheader-username-headers", "[\"X-Remote-User\"]".to_owned()),
        ("requestheader-group-headers", "[\"X-Remote-Group\"]".to_owned()),
        ("requestheader-extra-headers-prefix", "[\"X-Remote-Extra-\"]".to_owned()),
    ];
    let configmap = ConfigMap {
        metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
        data: Some(data.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()),
        ..ConfigMap::default()
    };
    configmaps.create(&PostParams::default(), &configmap).await.expect("creating the ConfigMap");

    // The CCM's own identity, as every other test runs it: no --authentication-kubeconfig.
    let port = free_port();
    let ccm = env.ccm(&[], &[&format!("--secure-port={port}")]).await;
    let other = format!("https://127.0.0.1:{port}/other");
    assert_eq!(status(&other, Some(client_ca.client("admin", &["system:masters"])), &[]).await, 404, "{}", ccm.logs());
    let headers = [("X-Remote-User", "alice"), ("X-Remote-Group", "system:masters")];
    assert_eq!(status(&other, Some(proxy_ca.client("front-proxy", &[])), &headers).await, 404);
    assert_eq!(status(&other, Some(proxy_ca.client("not-allowed", &[])), &headers).await, 401);
    let logs = ccm.logs();
    assert_eq!(logs.matches(LOOKED_UP).count(), 1, "{logs}");
    assert!(!logs.contains(REFUSED), "{logs}");
    ccm.stop().await.expect("stops");

    // --authentication-skip-lookup: the cluster's CAs are not used; no client certificate is
    // asked for, so these requests are the anonymous user's, whom RBAC refuses.
    let port = free_port();
    let skipped = env.ccm(&[], &[&format!("--secure-port={port}"), "--authentication-skip-lookup"]).await;
    let other = format!("https://127.0.0.1:{port}/other");
    assert_eq!(status(&other, Some(client_ca.client("admin", &["system:masters"])), &[]).await, 403);
    assert_eq!(status(&other, Some(proxy_ca.client("front-proxy", &[])), &headers).await, 403);
    let logs = skipped.logs();
    assert!(!logs.contains(LOOKED_UP) && !logs.contains(REFUSED), "{logs}");
    skipped.stop().await.expect("stops");
    let _ = configmaps.delete(name, &DeleteParams::default()).await;
}

/// The same lookup by an identity the reader Role is not bound to, as with RBAC narrower than the
/// chart's (`rbac.create: false` with an own role, say): the ServiceAccount
/// `kube-system/hcloud-ccm-without-reader`, bound to the CCM's ClusterRole and
/// `system:auth-delegator` only. A refused read is one warning by default
/// (`--authentication-tolerate-lookup-failure=true`), and fatal with
/// `--authentication-tolerate-lookup-failure=false`.
#[tokio::test]
async fn a_refused_lookup_warns_by_default_and_is_fatal_when_not_tolerated() {
    let env = Env::start(FakeConfig::default()).await;
    let kubeconfig = identity_without_reader(&env).await;

    // The secure port (off by default in these tests) is what looks the settings up.
    let secure_port = format!("--secure-port={}", free_port());
    let ccm = env.spawn_with(common::TOKEN, &kubeconfig, &[], &["--leader-elect=false", &secure_port], "hcloud-ccm");
    ccm.wait_for_log("hcloud-ccm started", Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("hcloud-ccm did not start: {e}\n{}", ccm.logs()));
    let logs = ccm.logs();
    assert_eq!(logs.matches(REFUSED).count(), 1, "{logs}");
    assert!(logs.contains("extension-apiserver-authentication-reader"), "the warning names the Role: {logs}");
    ccm.stop().await.expect("stops");

    let secure_port = format!("--secure-port={}", free_port());
    let fatal = env.spawn_with(
        common::TOKEN,
        &kubeconfig,
        &[],
        &["--leader-elect=false", &secure_port, "--authentication-tolerate-lookup-failure=false"],
        "hcloud-ccm",
    );
    let exit = fatal.wait_exit(Duration::from_secs(30)).await.unwrap_or_else(|| panic!("exits: {}", fatal.logs()));
    assert_ne!(exit.code(), Some(0));
    assert!(fatal.logs().contains("--authentication-tolerate-lookup-failure"), "{}", fatal.logs());
}

/// The kubeconfig (in the control plane's directory) of the ServiceAccount
/// `kube-system/hcloud-ccm-without-reader`, created here with the CCM's ClusterRoleBindings but
/// not its RoleBinding to the reader Role, once its RBAC is in effect and it is refused the
/// ConfigMap.
async fn identity_without_reader(env: &Env) -> std::path::PathBuf {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::{ConfigMap, Node, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
    use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams};
    use test_harness::rbac;

    let name = "hcloud-ccm-without-reader";
    let admin = env.cp.admin_client().await.expect("admin client");
    let apply = PatchParams::apply("serving-flags-e2e").force();
    let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(admin.clone(), rbac::CCM_NAMESPACE);
    let account = ServiceAccount {
        metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
        ..ServiceAccount::default()
    };
    accounts.patch(name, &apply, &Patch::Apply(&account)).await.expect("ServiceAccount");
    let bindings: kube::Api<ClusterRoleBinding> = kube::Api::all(admin);
    for (binding, role) in [
        (name.to_owned(), rbac::CCM_CLUSTER_ROLE),
        (format!("{name}:system:auth-delegator"), rbac::AUTH_DELEGATOR_CLUSTER_ROLE),
    ] {
        let object = ClusterRoleBinding {
            metadata: ObjectMeta { name: Some(binding.clone()), ..ObjectMeta::default() },
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".to_owned()),
                kind: "ClusterRole".to_owned(),
                name: role.to_owned(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".to_owned(),
                name: name.to_owned(),
                namespace: Some(rbac::CCM_NAMESPACE.to_owned()),
                ..Subject::default()
            }]),
        };
        bindings.patch(&binding, &apply, &Patch::Apply(&object)).await.expect("ClusterRoleBinding");
    }
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(3600), ..TokenRequestSpec::default() }),
        ..TokenRequest::default()
    };
    let token = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .expect("TokenRequest")
        .status
        .and_then(|status| status.token)
        .expect("a token");
    // The CCM's kubeconfig (server, CA) with this identity's token.
    let ccm_kubeconfig = std::fs::read_to_string(env.cp.ccm_kubeconfig()).unwrap();
    assert_eq!(ccm_kubeconfig.matches(env.cp.ccm_token()).count(), 1);
    let path = env.cp.dir().join(format!("{name}.kubeconfig"));
    std::fs::write(&path, ccm_kubeconfig.replace(env.cp.ccm_token(), &token)).unwrap();
    let client = test_harness::client_from_kubeconfig(&path).await.expect("client");
    let nodes: kube::Api<Node> = kube::Api::all(client.clone());
    test_harness::wait_until(Duration::from_secs(20), "the ClusterRoleBindings to take effect", async || {
        nodes.list(&ListParams::default().limit(1)).await.is_ok()
    })
    .await
    .expect("RBAC in effect");
    let configmaps: kube::Api<ConfigMap> = kube::Api::namespaced(client, "kube-system");
    match configmaps.get_opt("extension-apiserver-authentication").await {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("{name} must be refused the ConfigMap: {other:?}"),
    }
    path
}
