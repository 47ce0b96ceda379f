//! The secure listener's TLS configuration: the serving certificate (from files, generated, or
//! chosen by SNI), the TLS parameters, ALPN, and the client-certificate verifier of the current
//! client-certificate settings. Those settings can change while serving (the in-cluster lookup
//! finds others), so the configuration is rebuilt for new connections when they do; the
//! certificate is loaded or generated once.

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::CertificateDer;
use rustls::server::ResolvesServerCert;
use rustls::server::danger::ClientCertVerifier;
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use sync_lock::Unpoison as _;
use tokio_rustls::TlsAcceptor;

use crate::auth::DelegatingAuth;
use crate::error::{CERT_FILE_FLAG, KEY_FILE_FLAG, ServeError};
use crate::secure_serving::SecureServing;
use crate::sni::SniResolver;
use crate::tls;

/// What builds the TLS configuration, and the one in use.
pub(crate) struct Acceptor {
    parts: Parts,
    auth: Option<DelegatingAuth>,
    /// The configuration for the client-certificate settings of that generation.
    current: Mutex<(u64, TlsAcceptor)>,
}

/// Everything in the TLS configuration but the client-certificate verifier.
struct Parts {
    provider: Arc<CryptoProvider>,
    versions: Vec<&'static rustls::SupportedProtocolVersion>,
    resolver: Arc<dyn ResolvesServerCert>,
    alpn: Vec<Vec<u8>>,
}

impl Parts {
    fn config(&self, verifier: Option<Arc<dyn ClientCertVerifier>>) -> Result<Arc<ServerConfig>, ServeError> {
        let builder = ServerConfig::builder_with_provider(Arc::clone(&self.provider))
            .with_protocol_versions(&self.versions)
            .map_err(|e| ServeError::TlsParams(e.to_string()))?;
        let builder = match verifier {
            Some(verifier) => builder.with_client_cert_verifier(verifier),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(Arc::clone(&self.resolver));
        config.alpn_protocols = self.alpn.clone();
        Ok(Arc::new(config))
    }
}

impl Acceptor {
    /// The configuration for `settings` (certificate files, or a fresh self-signed certificate
    /// when neither file is given) asking for the client certificates `auth` accepts; also the
    /// certificate chain the server presents.
    pub(crate) fn new(
        settings: &SecureServing,
        auth: Option<DelegatingAuth>,
    ) -> Result<(Self, Vec<CertificateDer<'static>>), ServeError> {
        let (cert_name, bind_address, params) = (&settings.cert_name, settings.bind_address, &settings.tls);
        let (certificate, files) = match (settings.cert_file.as_deref(), settings.key_file.as_deref()) {
            (Some(cert), Some(key)) => (tls::from_files(cert, key)?, Some((cert, key))),
            (Some(_), None) => {
                return Err(ServeError::IncompletePair { given: CERT_FILE_FLAG, missing: KEY_FILE_FLAG });
            }
            (None, Some(_)) => {
                return Err(ServeError::IncompletePair { given: KEY_FILE_FLAG, missing: CERT_FILE_FLAG });
            }
            (None, None) => (
                tls::self_signed(
                    cert_name,
                    &tls::subject_alt_names(tls::hostname().as_deref(), bind_address),
                    SystemTime::now(),
                )?,
                None,
            ),
        };
        let chain = certificate.chain.clone();
        let unusable = |reason: String| match files {
            Some((cert, key)) => ServeError::Pair { cert: cert.to_owned(), key: key.to_owned(), reason },
            None => ServeError::SelfSigned(reason),
        };
        let provider = params.provider();
        let default = CertifiedKey::from_der(certificate.chain, certificate.key, &provider)
            .map_err(|e| unusable(e.to_string()))?;
        let resolver: Arc<dyn ResolvesServerCert> = if settings.sni_certificates.is_empty() {
            Arc::new(SingleCertAndKey::from(default))
        } else {
            Arc::new(SniResolver::new(Arc::new(default), &settings.sni_certificates, &provider)?)
        };
        // `--disable-http2-serving`: HTTP/2 is then never chosen by ALPN.
        let alpn = if settings.http2 { vec![b"h2".to_vec(), b"http/1.1".to_vec()] } else { vec![b"http/1.1".to_vec()] };
        let parts = Parts { provider, versions: params.versions(), resolver, alpn };
        let (generation, verifier) = auth.as_ref().map(DelegatingAuth::tls_client_verifier).unwrap_or_default();
        let current = Mutex::new((generation, TlsAcceptor::from(parts.config(verifier)?)));
        Ok((Acceptor { parts, auth, current }, chain))
    }

    /// The acceptor for a new connection: for the client-certificate settings in use now.
    pub(crate) fn get(&self) -> TlsAcceptor {
        let Some(auth) = &self.auth else { return self.current.lock_unpoisoned().1.clone() };
        {
            let current = self.current.lock_unpoisoned();
            if current.0 == auth.client_cert_generation() {
                return current.1.clone();
            }
        }
        let (generation, verifier) = auth.tls_client_verifier();
        let mut current = self.current.lock_unpoisoned();
        match self.parts.config(verifier) {
            Ok(config) => *current = (generation, TlsAcceptor::from(config)),
            // The same parameters built the first configuration, so this does not happen; the
            // previous configuration stays if it does.
            Err(error) => tracing::warn!("rebuilding the TLS configuration failed: {error}"),
        }
        current.1.clone()
    }
}
