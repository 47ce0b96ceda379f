//! Client-certificate authentication (upstream's `--client-ca-file`) and front-proxy
//! authentication by request headers (`--requestheader-*`).
//!
//! The TLS layer asks for a client certificate but accepts any (checking only that the client
//! holds its key), as Go's `tls.RequestClientCert` does; the chain is verified per request
//! against each CA here, so a certificate no CA signed leaves the request to the bearer token,
//! as upstream's union authenticator does, and without a token is answered 401 (not treated as
//! anonymous).

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use http::HeaderMap;
use k8s_openapi::api::authentication::v1::UserInfo;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use x509_cert::Certificate;
use x509_cert::der::Decode;
use x509_cert::der::oid::ObjectIdentifier;
use x509_cert::ext::pkix::name::DirectoryString;

use super::decision::CertIdentity;
use crate::error::ServeError;

const COMMON_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.3");
const ORGANIZATION: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.10");

/// A CA bundle (PEM): a file, or text read elsewhere (e.g. from a ConfigMap).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaBundle {
    /// A PEM file.
    File(PathBuf),
    /// PEM text, and where it came from (for error messages).
    Pem {
        /// E.g. `configmap kube-system/extension-apiserver-authentication, key client-ca-file`.
        origin: String,
        /// The certificates.
        pem: String,
    },
}

impl From<PathBuf> for CaBundle {
    fn from(path: PathBuf) -> Self {
        CaBundle::File(path)
    }
}

impl fmt::Display for CaBundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaBundle::File(path) => write!(f, "{}", path.display()),
            CaBundle::Pem { origin, .. } => f.write_str(origin),
        }
    }
}

/// The front proxy's settings (upstream's `--requestheader-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeaderSettings {
    /// CA bundle of the proxy's client certificates.
    pub ca: CaBundle,
    /// Common names allowed to assert users (empty: any certificate the CA signed).
    pub allowed_names: Vec<String>,
    /// Headers with the user name; the first non-empty one wins.
    pub username_headers: Vec<String>,
    /// Headers with the UID; the first non-empty one wins.
    pub uid_headers: Vec<String>,
    /// Headers with the groups; every value of every one counts.
    pub group_headers: Vec<String>,
    /// Prefixes of headers with extra attributes (`<prefix><key>: value`).
    pub extra_headers_prefix: Vec<String>,
}

/// Which client certificates authenticate requests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientCertSettings {
    /// `--client-ca-file`: a certificate it signed authenticates as its CommonName, with its
    /// Organizations as groups.
    pub client_ca: Option<CaBundle>,
    /// `--requestheader-client-ca-file` and the other `--requestheader-*` flags.
    pub request_header: Option<RequestHeaderSettings>,
}

/// [`ClientCertSettings`] with the CA files loaded.
#[derive(Clone)]
pub(crate) struct ClientCertAuth {
    client_ca: Option<Arc<dyn ClientCertVerifier>>,
    request_header: Option<(Arc<dyn ClientCertVerifier>, RequestHeaderSettings)>,
    /// What the TLS layer uses: asks for a certificate, accepts any.
    tls: Arc<dyn ClientCertVerifier>,
}

impl fmt::Debug for ClientCertAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCertAuth")
            .field("client_ca", &self.client_ca.is_some())
            .field("request_header", &self.request_header.as_ref().map(|(_, s)| s))
            .finish()
    }
}

/// Reads a CA bundle into a root store.
fn roots(bundle: &CaBundle, flag: &'static str) -> Result<RootCertStore, ServeError> {
    let error = |reason: String| ServeError::ClientCa { flag, origin: bundle.to_string(), reason };
    let pem = match bundle {
        CaBundle::File(path) => std::fs::read(path).map_err(|e| error(format!("cannot read it: {e}")))?,
        CaBundle::Pem { pem, .. } => pem.as_bytes().to_vec(),
    };
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| error(format!("not a valid PEM file: {e}")))?;
    let mut store = RootCertStore::empty();
    let (added, _) = store.add_parsable_certificates(certificates);
    if added == 0 {
        return Err(error("holds no usable PEM \"CERTIFICATE\" block".to_owned()));
    }
    Ok(store)
}

fn verifier(
    store: RootCertStore,
    flag: &'static str,
    origin: String,
) -> Result<Arc<dyn ClientCertVerifier>, ServeError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    WebPkiClientVerifier::builder_with_provider(Arc::new(store), provider)
        .allow_unauthenticated()
        .build()
        .map_err(|e| ServeError::ClientCa { flag, origin, reason: e.to_string() })
}

impl ClientCertAuth {
    /// Loads the CA files; `None` when no client certificates are configured.
    pub(crate) fn load(settings: &ClientCertSettings) -> Result<Option<Self>, ServeError> {
        let mut all = RootCertStore::empty();
        let mut client_ca = None;
        if let Some(bundle) = &settings.client_ca {
            let store = roots(bundle, "--client-ca-file")?;
            all.extend(store.roots.iter().cloned());
            client_ca = Some(verifier(store, "--client-ca-file", bundle.to_string())?);
        }
        let mut request_header = None;
        if let Some(rh) = &settings.request_header {
            let flag = "--requestheader-client-ca-file";
            let store = roots(&rh.ca, flag)?;
            all.extend(store.roots.iter().cloned());
            request_header = Some((verifier(store, flag, rh.ca.to_string())?, rh.clone()));
        }
        if client_ca.is_none() && request_header.is_none() {
            return Ok(None);
        }
        let hints = verifier(all, "--client-ca-file", "the client CAs".to_owned())?;
        Ok(Some(ClientCertAuth { client_ca, request_header, tls: Arc::new(AnyClientCert { inner: hints }) }))
    }

    /// The verifier for the TLS configuration.
    pub(crate) fn tls_verifier(&self) -> Arc<dyn ClientCertVerifier> {
        Arc::clone(&self.tls)
    }

    /// What the client certificate and headers say: the front proxy's asserted user first,
    /// then the certificate's own identity (upstream's order). A certificate that one of the
    /// configured checks refused, and none accepted, is [`CertIdentity::Rejected`] (upstream's
    /// union authenticator returns the verification error then, and answers 401 unless a bearer
    /// token authenticates).
    pub(crate) fn authenticate(&self, chain: &[CertificateDer<'static>], headers: &HeaderMap) -> CertIdentity {
        let Some((leaf, intermediates)) = chain.split_first() else { return CertIdentity::None };
        let now = UnixTime::now();
        let mut refusals = Vec::new();
        if let Some((verifier, settings)) = &self.request_header {
            match verifier.verify_client_cert(leaf, intermediates, now) {
                Err(error) => {
                    tracing::debug!(%error, "the client certificate is not the front proxy's");
                    refusals.push("not signed by the front proxy's CA (--requestheader-client-ca-file)".to_owned());
                }
                Ok(_) => {
                    let name = subject(leaf).map(|(cn, _)| cn).unwrap_or_default();
                    if !settings.allowed_names.is_empty() && !settings.allowed_names.contains(&name) {
                        refusals.push(format!("its CommonName {name:?} is not in --requestheader-allowed-names"));
                    } else if let Some(user) = user_from_headers(settings, headers) {
                        return CertIdentity::User(user);
                    }
                }
            }
        }
        if let Some(verifier) = &self.client_ca {
            match verifier.verify_client_cert(leaf, intermediates, now) {
                Err(error) => {
                    tracing::debug!(%error, "the client certificate is not the client CA's");
                    refusals.push("not signed by the client CA (--client-ca-file)".to_owned());
                }
                Ok(_) => {
                    if let Some((name, groups)) = subject(leaf).filter(|(cn, _)| !cn.is_empty()) {
                        return CertIdentity::User(UserInfo {
                            username: Some(name),
                            groups: Some(groups),
                            ..UserInfo::default()
                        });
                    }
                }
            }
        }
        if refusals.is_empty() {
            CertIdentity::None
        } else {
            CertIdentity::Rejected(format!("the client certificate authenticates nobody: {}", refusals.join("; ")))
        }
    }
}

/// The subject's CommonName and Organizations.
fn subject(certificate: &CertificateDer<'_>) -> Option<(String, Vec<String>)> {
    let parsed = Certificate::from_der(certificate.as_ref()).ok()?;
    let name = parsed.tbs_certificate().subject();
    let values = |oid: ObjectIdentifier| -> Vec<String> {
        name.iter()
            .filter(|atav| atav.oid == oid)
            .filter_map(|atav| DirectoryString::try_from(&atav.value).ok())
            .map(|s| s.value().into_owned())
            .collect()
    };
    let common_name = values(COMMON_NAME).into_iter().next()?;
    Some((common_name, values(ORGANIZATION)))
}

/// Upstream's `requestHeaderAuthRequestHandler`: the first non-empty user name header, every
/// group header value, the first UID, and the extra attributes by prefix (key lower-cased and
/// percent-decoded).
pub(crate) fn user_from_headers(settings: &RequestHeaderSettings, headers: &HeaderMap) -> Option<UserInfo> {
    let first = |names: &[String]| {
        names.iter().find_map(|h| {
            headers.get_all(h.as_str()).iter().filter_map(|v| v.to_str().ok()).find(|v| !v.trim().is_empty())
        })
    };
    let name = first(&settings.username_headers)?.trim().to_owned();
    let groups: Vec<String> = settings
        .group_headers
        .iter()
        .flat_map(|h| headers.get_all(h.as_str()).iter().filter_map(|v| v.to_str().ok()).map(str::to_owned))
        .collect();
    let uid = first(&settings.uid_headers).map(|v| v.trim().to_owned());
    let mut extra = std::collections::BTreeMap::<String, Vec<String>>::new();
    for (header, value) in headers {
        let header = header.as_str();
        let Some(prefix) = settings.extra_headers_prefix.iter().find(|p| header.starts_with(&p.to_ascii_lowercase()))
        else {
            continue;
        };
        let key = percent_decode(&header[prefix.len()..]).to_lowercase();
        if let Ok(value) = value.to_str() {
            extra.entry(key).or_default().push(value.to_owned());
        }
    }
    Some(UserInfo { username: Some(name), groups: Some(groups), uid, extra: (!extra.is_empty()).then_some(extra) })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Asks for a client certificate (naming the configured CAs as hints) and accepts any whose
/// key the client proves to hold; trust is decided per request by [`ClientCertAuth`].
#[derive(Debug)]
struct AnyClientCert {
    inner: Arc<dyn ClientCertVerifier>,
}

impl ClientCertVerifier for AnyClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn settings() -> RequestHeaderSettings {
        RequestHeaderSettings {
            ca: CaBundle::File(PathBuf::new()),
            allowed_names: Vec::new(),
            username_headers: vec!["x-remote-user".to_owned()],
            uid_headers: vec!["x-remote-uid".to_owned()],
            group_headers: vec!["x-remote-group".to_owned()],
            extra_headers_prefix: vec!["X-Remote-Extra-".to_owned()],
        }
    }

    #[test]
    fn front_proxy_headers_name_the_user_groups_uid_and_extras() {
        let mut headers = HeaderMap::new();
        headers.insert("x-remote-user", HeaderValue::from_static("alice"));
        headers.append("x-remote-group", HeaderValue::from_static("dev"));
        headers.append("x-remote-group", HeaderValue::from_static("ops"));
        headers.insert("x-remote-uid", HeaderValue::from_static("42"));
        headers.insert("x-remote-extra-scopes%2Fa", HeaderValue::from_static("s1"));
        let user = user_from_headers(&settings(), &headers).unwrap_or_default();
        assert_eq!(user.username.as_deref(), Some("alice"));
        assert_eq!(user.groups, Some(vec!["dev".to_owned(), "ops".to_owned()]));
        assert_eq!(user.uid.as_deref(), Some("42"));
        let extra = user.extra.unwrap_or_default();
        assert_eq!(extra.get("scopes/a"), Some(&vec!["s1".to_owned()]));
        assert_eq!(user_from_headers(&settings(), &HeaderMap::new()), None);
    }
}
