//! `--tls-sni-cert-key`: further certificates chosen by the name the client asks for (SNI),
//! with upstream's rules: explicit name patterns win over names read from the certificate, an
//! exact name over a wildcard (`*.example.com` matches one label), an earlier flag over a
//! later one; anything else (and a client without SNI) gets the default certificate.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::CertificateDer;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use x509_cert::Certificate;
use x509_cert::der::Decode;
use x509_cert::der::oid::ObjectIdentifier;
use x509_cert::ext::pkix::SubjectAltName;
use x509_cert::ext::pkix::name::{DirectoryString, GeneralName};

use crate::error::ServeError;
use crate::tls::from_files;

const SNI_FLAG: &str = "--tls-sni-cert-key";
const COMMON_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.3");

/// One `--tls-sni-cert-key`: a certificate/key pair and the names it serves (empty: the
/// certificate's own CommonName and DNS names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SniCertKey {
    /// PEM certificate chain, leaf first.
    pub cert_file: PathBuf,
    /// PEM private key.
    pub key_file: PathBuf,
    /// Name patterns (`example.com`, `*.example.com`).
    pub names: Vec<String>,
}

impl SniCertKey {
    /// Parses upstream's syntax: `cert,key` or `cert,key:name1,name2`.
    pub fn parse(value: &str) -> Result<Self, String> {
        let (files, names) = match value.split_once(':') {
            Some((files, names)) => (files, names.split(',').map(str::trim).filter(|n| !n.is_empty()).collect()),
            None => (value, Vec::new()),
        };
        match files.split(',').map(str::trim).collect::<Vec<_>>().as_slice() {
            [cert, key] if !cert.is_empty() && !key.is_empty() => Ok(SniCertKey {
                cert_file: PathBuf::from(cert),
                key_file: PathBuf::from(key),
                names: names.into_iter().map(str::to_ascii_lowercase).collect(),
            }),
            _ => Err(format!(
                "{SNI_FLAG}: {value:?}: expected comma separated certificate and key file paths, optionally followed \
                 by :name,name (e.g. foo.crt,foo.key:*.foo.com,foo.com)"
            )),
        }
    }
}

/// Chooses the certificate by SNI.
#[derive(Debug)]
pub(crate) struct SniResolver {
    default: Arc<CertifiedKey>,
    by_name: HashMap<String, Arc<CertifiedKey>>,
}

impl SniResolver {
    /// Loads the pairs; `default` serves every other name.
    pub(crate) fn new(
        default: Arc<CertifiedKey>,
        pairs: &[SniCertKey],
        provider: &CryptoProvider,
    ) -> Result<Self, ServeError> {
        let mut explicit = HashMap::new();
        let mut extracted = HashMap::new();
        // Earlier flags win: insert in reverse so that they overwrite later ones.
        for pair in pairs.iter().rev() {
            let certificate = from_files(&pair.cert_file, &pair.key_file)?;
            let unusable = |reason: String| ServeError::Pair {
                cert: pair.cert_file.clone(),
                key: pair.key_file.clone(),
                reason: format!("({SNI_FLAG}) {reason}"),
            };
            let names = certificate_names(&certificate.chain);
            let key = CertifiedKey::from_der(certificate.chain, certificate.key, provider)
                .map_err(|e| unusable(e.to_string()))?;
            let key = Arc::new(key);
            if pair.names.is_empty() {
                for name in names {
                    extracted.insert(name, Arc::clone(&key));
                }
            } else {
                for name in &pair.names {
                    explicit.insert(name.clone(), Arc::clone(&key));
                }
            }
        }
        extracted.extend(explicit);
        Ok(SniResolver { default, by_name: extracted })
    }

    fn lookup(&self, server_name: &str) -> Option<Arc<CertifiedKey>> {
        let name = server_name.to_ascii_lowercase();
        if let Some(key) = self.by_name.get(&name) {
            return Some(Arc::clone(key));
        }
        let (_, parent) = name.split_once('.')?;
        self.by_name.get(&format!("*.{parent}")).cloned()
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        client_hello.server_name().and_then(|n| self.lookup(n)).or_else(|| Some(Arc::clone(&self.default)))
    }
}

/// The leaf's CommonName and DNS names, lower-cased.
fn certificate_names(chain: &[CertificateDer<'_>]) -> Vec<String> {
    let Some(parsed) = chain.first().and_then(|leaf| Certificate::from_der(leaf.as_ref()).ok()) else {
        return Vec::new();
    };
    let tbs = parsed.tbs_certificate();
    let mut names: Vec<String> = tbs
        .subject()
        .iter()
        .filter(|atav| atav.oid == COMMON_NAME)
        .filter_map(|atav| DirectoryString::try_from(&atav.value).ok())
        .map(|s| s.value().to_ascii_lowercase())
        .collect();
    for (_, SubjectAltName(general)) in tbs.filter_extensions::<SubjectAltName>().flatten() {
        names.extend(general.iter().filter_map(|g| match g {
            GeneralName::DnsName(dns) => Some(dns.to_string().to_ascii_lowercase()),
            _ => None,
        }));
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_syntax() {
        assert_eq!(
            SniCertKey::parse("foo.crt,foo.key:*.Foo.com,foo.com"),
            Ok(SniCertKey {
                cert_file: "foo.crt".into(),
                key_file: "foo.key".into(),
                names: vec!["*.foo.com".to_owned(), "foo.com".to_owned()]
            })
        );
        assert_eq!(SniCertKey::parse("a.crt,a.key").map(|p| p.names), Ok(Vec::new()));
        for bad in ["a.crt", "a.crt,a.key,b", ",a.key", "a.crt,:x"] {
            assert!(SniCertKey::parse(bad).is_err(), "{bad}");
        }
    }
}
