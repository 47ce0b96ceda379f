//! End to end: the official CCM's secure-serving flags on the hcloud-ccm binary against the
//! real kube-apiserver — `--client-ca-file`, `--requestheader-*`, `--tls-min-version`,
//! `--authorization-always-allow-paths`, `--authentication-kubeconfig` — and the one start-up
//! warning of a flag without meaning here.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

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

    // /metrics is always allowed here; /healthz too. Another path needs credentials.
    assert_eq!(status(&metrics, None, &[]).await, 200);
    assert_eq!(status(&healthz, None, &[]).await, 200);
    let other = format!("https://127.0.0.1:{port}/other");
    assert_eq!(status(&other, None, &[]).await, 401);
    // A client certificate of the client CA in system:masters: allowed (then 404: no such path).
    assert_eq!(status(&other, Some(client_ca.client("admin", &["system:masters"])), &[]).await, 404);
    // Outside system:masters the API server's SubjectAccessReview refuses.
    assert_eq!(status(&other, Some(client_ca.client("someone", &[])), &[]).await, 403);
    // The front proxy asserts a user by headers.
    let headers = [("X-Remote-User", "alice"), ("X-Remote-Group", "system:masters")];
    assert_eq!(status(&other, Some(proxy_ca.client("front-proxy", &[])), &headers).await, 404);
    assert_eq!(status(&other, Some(proxy_ca.client("not-allowed", &[])), &headers).await, 401);
    // --tls-min-version=VersionTLS13.
    assert!(!tls12_handshake(port).await, "a TLS 1.2 handshake must be refused");

    let logs = ccm.logs();
    assert_eq!(logs.matches("--webhooks has no effect").count(), 1, "{logs}");
    let status = ccm.stop().await.expect("stops");
    assert_eq!(status.code(), Some(0), "{}", ccm.logs());
}

/// Upstream's lookup of the client CA and front-proxy settings in
/// kube-system/extension-apiserver-authentication: read with the authentication identity; a
/// refused read is a warning (tolerated by default here), or fatal with
/// `--authentication-tolerate-lookup-failure=false`.
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

    let port = free_port();
    let secure_port = format!("--secure-port={port}");
    let admin = format!("--authentication-kubeconfig={}", env.cp.admin_kubeconfig().display());
    let ccm = env.ccm(&[], &[&secure_port, &admin]).await;
    let other = format!("https://127.0.0.1:{port}/other");
    assert_eq!(status(&other, Some(client_ca.client("admin", &["system:masters"])), &[]).await, 404, "{}", ccm.logs());
    let headers = [("X-Remote-User", "alice"), ("X-Remote-Group", "system:masters")];
    assert_eq!(status(&other, Some(proxy_ca.client("front-proxy", &[])), &headers).await, 404);
    assert_eq!(status(&other, Some(proxy_ca.client("not-allowed", &[])), &headers).await, 401);
    ccm.stop().await.expect("stops");

    // The CCM's own identity may not read the ConfigMap (least-privilege RBAC): one warning.
    let ccm = env.ccm(&[], &[&format!("--secure-port={}", free_port())]).await;
    let refused = "cannot read configmap kube-system/extension-apiserver-authentication";
    assert_eq!(ccm.logs().matches(refused).count(), 1, "{}", ccm.logs());
    ccm.stop().await.expect("stops");
    let skipped = env.ccm(&[], &[&format!("--secure-port={}", free_port()), "--authentication-skip-lookup"]).await;
    assert!(!skipped.logs().contains(refused), "{}", skipped.logs());
    skipped.stop().await.expect("stops");
    let fatal = env
        .spawn_ccm(&[], &[&format!("--secure-port={}", free_port()), "--authentication-tolerate-lookup-failure=false"]);
    let exit = fatal.wait_exit(Duration::from_secs(30)).await.unwrap_or_else(|| panic!("exits: {}", fatal.logs()));
    assert_ne!(exit.code(), Some(0));
    assert!(fatal.logs().contains("--authentication-tolerate-lookup-failure"), "{}", fatal.logs());
    let _ = configmaps.delete(name, &DeleteParams::default()).await;
}
