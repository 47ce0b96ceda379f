//! Tests of [`super`]: the ConfigMap's content applied to a [`DelegatingAuth`].

use sync_lock::UnpoisonRw as _;

use super::super::{AuthSettings, Client, DelegatingAuth};
use super::*;

fn ca_pem(name: &str) -> String {
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name.push(rcgen::DnType::CommonName, name);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().unwrap();
    params.self_signed(&key).unwrap().pem()
}

/// A client for an address where nothing listens: these tests never send a request.
fn unused_client() -> Client {
    Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap()
}

fn applied(auth: &DelegatingAuth) -> (u64, ClientCertSettings) {
    let current = auth.inner.client_certs.read_unpoisoned();
    (current.generation, current.settings.clone())
}

#[tokio::test]
async fn looked_up_settings_replace_the_ones_in_use_as_a_whole_and_refused_content_keeps_them() {
    let auth = DelegatingAuth::with_settings(unused_client(), unused_client(), AuthSettings::default()).unwrap();
    let lookup = ClusterLookup::default();
    let (ca, proxy_ca) = (ca_pem("client-ca"), ca_pem("proxy-ca"));
    let data = |names: &str| -> BTreeMap<String, String> {
        [
            ("client-ca-file", ca.as_str()),
            ("requestheader-client-ca-file", proxy_ca.as_str()),
            ("requestheader-allowed-names", names),
            ("requestheader-username-headers", "[\"X-Remote-User\"]"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    };
    assert_eq!(applied(&auth).0, 0);
    assert!(auth.tls_client_verifier().1.is_none(), "no client certificates asked for yet");

    auth.use_configmap(&data("[\"front-proxy\"]"), &lookup).unwrap();
    let (generation, good) = applied(&auth);
    assert_eq!(generation, 1);
    assert_eq!(good.request_header.as_ref().map(|rh| rh.allowed_names.clone()), Some(vec!["front-proxy".to_owned()]));
    assert!(good.client_ca.is_some());
    assert!(auth.tls_client_verifier().1.is_some(), "client certificates asked for");
    // The same content again changes nothing.
    auth.use_configmap(&data("[\"front-proxy\"]"), &lookup).unwrap();
    assert_eq!(applied(&auth).0, 1);

    // Unreadable names, or a CA bundle without a certificate: refused, nothing changes.
    let error = auth.use_configmap(&data("front-proxy"), &lookup).unwrap_err();
    assert!(error.to_string().contains("key requestheader-allowed-names"), "{error}");
    let mut no_certificate = data("[\"other\"]");
    no_certificate.insert("client-ca-file".to_owned(), "not PEM".to_owned());
    let error = auth.use_configmap(&no_certificate, &lookup).unwrap_err();
    assert!(error.to_string().contains("key client-ca-file"), "{error}");
    assert_eq!(applied(&auth), (1, good));

    // Keys removed from a readable ConfigMap are removed from the settings in use.
    auth.use_configmap(&BTreeMap::new(), &lookup).unwrap();
    assert_eq!(applied(&auth), (2, ClientCertSettings::default()));
    assert!(auth.tls_client_verifier().1.is_none());
}

#[tokio::test]
async fn settings_the_flags_give_are_never_looked_up() {
    let given = ClientCertSettings {
        client_ca: Some(CaBundle::Pem { origin: "flag".to_owned(), pem: ca_pem("flag-ca") }),
        request_header: None,
    };
    let settings = AuthSettings { client_certificates: given.clone(), ..AuthSettings::default() };
    let auth = DelegatingAuth::with_settings(unused_client(), unused_client(), settings).unwrap();
    let other: BTreeMap<String, String> = [("client-ca-file".to_owned(), ca_pem("cluster-ca"))].into_iter().collect();
    auth.use_configmap(&other, &ClusterLookup::default()).unwrap();
    assert_eq!(applied(&auth), (0, given));
}

fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[test]
fn the_settings_asked_for_come_from_the_configmap() {
    let data = data(&[
        ("client-ca-file", "CA"),
        ("requestheader-client-ca-file", "PROXY-CA"),
        ("requestheader-allowed-names", "[\"front-proxy-client\"]"),
        ("requestheader-username-headers", "[\"X-Remote-User\"]"),
        ("requestheader-group-headers", "[\"X-Remote-Group\"]"),
        ("requestheader-extra-headers-prefix", "[\"X-Remote-Extra-\"]"),
    ]);
    let lookup = ClusterLookup::default();
    let settings = settings_from(&data, &lookup, true, true).unwrap_or_default();
    assert!(matches!(&settings.client_ca, Some(CaBundle::Pem { pem, .. }) if pem == "CA"));
    let rh = settings.request_header.clone().unwrap_or_else(|| panic!("request header settings"));
    assert!(matches!(&rh.ca, CaBundle::Pem { pem, origin } if pem == "PROXY-CA"
        && origin == "(configmap kube-system/extension-apiserver-authentication, key requestheader-client-ca-file)"));
    assert_eq!(rh.allowed_names, vec!["front-proxy-client".to_owned()]);
    assert_eq!(rh.username_headers, vec!["X-Remote-User".to_owned()]);
    assert!(rh.uid_headers.is_empty());
    // What the flags gave is not looked up.
    assert_eq!(settings_from(&data, &lookup, false, false).ok(), Some(ClientCertSettings::default()));
}

#[test]
fn lists_are_json_arrays_and_anything_else_refuses_the_content() {
    let lookup = ClusterLookup::default();
    let with =
        |names: &str| data(&[("requestheader-client-ca-file", "PROXY-CA"), ("requestheader-allowed-names", names)]);
    let names = |names: &str| {
        settings_from(&with(names), &lookup, false, true).map(|s| s.request_header.map(|rh| rh.allowed_names))
    };
    // Empty and `null` are no names (upstream: any name the CA signed), as Go decodes them.
    assert_eq!(names("").ok(), Some(Some(Vec::new())));
    assert_eq!(names("null").ok(), Some(Some(Vec::new())));
    assert_eq!(names("[\"a\", \"b\"]").ok(), Some(Some(vec!["a".to_owned(), "b".to_owned()])));
    for bad in ["front-proxy-client", "\"front-proxy-client\"", "[1]", "{}", " ", "[\"a\""] {
        let error = names(bad).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            error.starts_with(
                "configmap kube-system/extension-apiserver-authentication, key requestheader-allowed-names: "
            ) && error.contains("is not a JSON array of strings"),
            "{bad:?}: {error}"
        );
    }
    // Every list counts, also without a CA (as upstream).
    let uid = data(&[("requestheader-uid-headers", "X-Remote-Uid")]);
    assert!(
        matches!(settings_from(&uid, &lookup, false, true), Err(LookupError::Content { key, .. }) if key == "requestheader-uid-headers")
    );
    // A list the flags give is not read.
    assert!(settings_from(&with("nonsense"), &lookup, true, false).is_ok());
    // No CA: no front-proxy settings.
    let no_ca = data(&[("requestheader-allowed-names", "[\"a\"]")]);
    assert_eq!(settings_from(&no_ca, &lookup, true, true).ok(), Some(ClientCertSettings::default()));
}

#[test]
fn failed_reads_are_retried_sooner_doubling_up_to_the_refresh_interval() {
    let (retry, refresh) = (Duration::from_secs(5), Duration::from_secs(60));
    let delays: Vec<u64> = (1..=6).map(|n| backoff(retry, refresh, n).as_secs()).collect();
    assert_eq!(delays, vec![5, 10, 20, 40, 60, 60]);
    assert_eq!(backoff(retry, refresh, u32::MAX), refresh);
}
