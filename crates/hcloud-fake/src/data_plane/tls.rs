//! TLS termination for `https` services: the service's certificates (uploaded ones with the
//! key they were uploaded with, managed ones with the key they were issued with), chosen by
//! the name the client asks for (SNI: an exact or a one-label wildcard match of the
//! certificate's domain names), else the service's first certificate. rustls with the
//! aws-lc-rs provider, HTTP/1.1 only.

use std::sync::Arc;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use super::plan::TlsCertificate;

/// The acceptor of a listener, built again only when its certificates change.
#[derive(Default)]
pub(super) struct AcceptorCache {
    built: Option<(Vec<TlsCertificate>, TlsAcceptor)>,
}

impl AcceptorCache {
    /// The acceptor for `certificates` (the cached one when they are the same).
    pub(super) fn acceptor(&mut self, certificates: &[TlsCertificate]) -> Result<TlsAcceptor, String> {
        if let Some((built_for, acceptor)) = &self.built
            && built_for.as_slice() == certificates
        {
            return Ok(acceptor.clone());
        }
        let acceptor = acceptor(certificates)?;
        self.built = Some((certificates.to_vec(), acceptor.clone()));
        Ok(acceptor)
    }
}

/// A TLS acceptor presenting `certificates`; an error when there is none or one cannot be read.
pub(super) fn acceptor(certificates: &[TlsCertificate]) -> Result<TlsAcceptor, String> {
    if certificates.is_empty() {
        return Err("the service has no certificate with a key yet (a managed one still being issued?)".to_owned());
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let keys = certificates
        .iter()
        .map(|c| certified_key(&provider, c).map(|key| (c.domain_names.clone(), Arc::new(key))))
        .collect::<Result<Vec<_>, _>>()?;
    let mut config = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(BySni { keys }));
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn certified_key(provider: &CryptoProvider, c: &TlsCertificate) -> Result<CertifiedKey, String> {
    let chain = CertificateDer::pem_slice_iter(c.certificate.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("certificate {}: not a PEM chain: {e}", c.id))?;
    if chain.is_empty() {
        return Err(format!("certificate {} holds no PEM certificate", c.id));
    }
    let key = PrivateKeyDer::from_pem_slice(c.private_key.as_bytes())
        .map_err(|e| format!("certificate {}: its private key is not PEM: {e}", c.id))?;
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("certificate {}: unusable private key: {e}", c.id))?;
    Ok(CertifiedKey::new(chain, signing))
}

/// Chooses a certificate by the client's SNI.
#[derive(Debug)]
struct BySni {
    keys: Vec<(Vec<String>, Arc<CertifiedKey>)>,
}

impl ResolvesServerCert for BySni {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let wanted = hello.server_name().map(str::to_ascii_lowercase);
        let matching = wanted
            .as_deref()
            .and_then(|name| self.keys.iter().find(|(domains, _)| domains.iter().any(|d| matches(d, name))));
        matching.or_else(|| self.keys.first()).map(|(_, key)| Arc::clone(key))
    }
}

/// Whether certificate name `pattern` (maybe `*.example.com`) covers `name`.
fn matches(pattern: &str, name: &str) -> bool {
    let pattern = pattern.to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        Some(suffix) => name.split_once('.').is_some_and(|(label, rest)| !label.is_empty() && rest == suffix),
        None => pattern == name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_exactly_or_by_one_wildcard_label() {
        assert!(matches("www.example.com", "www.example.com"));
        assert!(matches("WWW.example.com", "www.example.com"));
        assert!(matches("*.example.com", "a.example.com"));
        assert!(!matches("*.example.com", "a.b.example.com"));
        assert!(!matches("*.example.com", "example.com"));
        assert!(!matches("example.com", "www.example.com"));
    }

    #[test]
    fn an_acceptor_needs_a_certificate_with_a_readable_key() {
        assert!(acceptor(&[]).is_err());
        let (certificate, private_key) =
            crate::x509::issue_pem_and_key(&["a.example".to_owned()], 1, 0, 4_000_000_000).unwrap();
        let good = TlsCertificate { id: 1, domain_names: vec!["a.example".to_owned()], certificate, private_key };
        assert!(acceptor(std::slice::from_ref(&good)).is_ok());
        let bad = TlsCertificate {
            private_key: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".to_owned(),
            ..good
        };
        assert!(acceptor(&[bad]).is_err());
    }
}
