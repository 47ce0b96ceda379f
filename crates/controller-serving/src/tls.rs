//! The secure server's TLS configuration: a certificate/key pair from files, or a self-signed
//! certificate generated in memory like upstream's `MaybeDefaultWithSelfSignedCerts` (a CA and a
//! serving certificate it signed, both valid for a year). rustls with the aws-lc-rs provider.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::error::ServeError;

/// How long the generated certificates are valid (from one hour before generation, as
/// upstream does against clock skew).
pub(crate) const SELF_SIGNED_VALIDITY: Duration = Duration::from_secs(365 * 24 * 60 * 60);
const BACKDATE: Duration = Duration::from_secs(60 * 60);

/// A certificate chain (leaf first) and its private key.
pub(crate) struct ServingCertificate {
    pub(crate) chain: Vec<CertificateDer<'static>>,
    pub(crate) key: PrivateKeyDer<'static>,
}

/// Read a PEM certificate chain and a PEM private key (PKCS#8, PKCS#1 or SEC1).
pub(crate) fn from_files(cert: &Path, key: &Path) -> Result<ServingCertificate, ServeError> {
    let cert_error = |reason: String| ServeError::CertFile { path: cert.to_owned(), reason };
    let key_error = |reason: String| ServeError::KeyFile { path: key.to_owned(), reason };
    let cert_pem = std::fs::read(cert).map_err(|e| cert_error(format!("cannot read it: {e}")))?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| cert_error(format!("not a valid PEM file: {e}")))?;
    if chain.is_empty() {
        return Err(cert_error("holds no PEM \"CERTIFICATE\" block".to_owned()));
    }
    let key_pem = std::fs::read(key).map_err(|e| key_error(format!("cannot read it: {e}")))?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => key_error(
            "holds no PEM private key (\"PRIVATE KEY\", \"RSA PRIVATE KEY\" or \"EC PRIVATE KEY\")".to_owned(),
        ),
        other => key_error(format!("not a valid PEM file: {other}")),
    })?;
    Ok(ServingCertificate { chain, key })
}

/// The names the generated certificate is valid for: `localhost`, `127.0.0.1`, `::1`, the
/// host name (when it is a valid DNS name) and a specific bind address.
pub(crate) fn subject_alt_names(hostname: Option<&str>, bind_address: IpAddr) -> Vec<SanType> {
    let mut names =
        vec![SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)), SanType::IpAddress(IpAddr::V6(Ipv6Addr::LOCALHOST))];
    let mut dns = vec!["localhost".to_owned()];
    if let Some(host) = hostname.map(str::trim).filter(|host| is_dns_name(host)) {
        let host = host.to_ascii_lowercase();
        if !dns.contains(&host) {
            dns.push(host);
        }
    }
    for name in dns {
        // Only ASCII DNS names reach this point, which always convert.
        if let Ok(name) = name.try_into() {
            names.push(SanType::DnsName(name));
        }
    }
    if !bind_address.is_unspecified() && !names.contains(&SanType::IpAddress(bind_address)) {
        names.push(SanType::IpAddress(bind_address));
    }
    names
}

/// This machine's host name (Linux: `/proc/sys/kernel/hostname`).
pub(crate) fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|name| name.trim().to_owned())
}

fn is_dns_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// The CA's and the serving certificate's parameters: common names `<name>-ca@<unix time>` and
/// `<name>@<unix time>` (upstream's pattern), valid from an hour ago for [`SELF_SIGNED_VALIDITY`].
pub(crate) fn self_signed_params(
    name: &str,
    subject_alt_names: &[SanType],
    now: SystemTime,
) -> (CertificateParams, CertificateParams) {
    let stamp = now.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
    let not_before = time::OffsetDateTime::from(now.checked_sub(BACKDATE).unwrap_or(now));
    let not_after = time::OffsetDateTime::from(now.checked_add(SELF_SIGNED_VALIDITY).unwrap_or(now));

    let mut ca = CertificateParams::default();
    ca.distinguished_name = rcgen::DistinguishedName::new();
    ca.distinguished_name.push(DnType::CommonName, format!("{name}-ca@{stamp}"));
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    ca.not_before = not_before;
    ca.not_after = not_after;

    let mut leaf = CertificateParams::default();
    leaf.distinguished_name = rcgen::DistinguishedName::new();
    leaf.distinguished_name.push(DnType::CommonName, format!("{name}@{stamp}"));
    leaf.subject_alt_names = subject_alt_names.to_vec();
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.use_authority_key_identifier_extension = true;
    leaf.not_before = not_before;
    leaf.not_after = not_after;
    (ca, leaf)
}

/// Generate a CA and a serving certificate signed by it (ECDSA P-256 keys); the chain is
/// `[serving, CA]`, so a client can trust the CA (the last element).
pub(crate) fn self_signed(
    name: &str,
    subject_alt_names: &[SanType],
    now: SystemTime,
) -> Result<ServingCertificate, ServeError> {
    let failed = |e: rcgen::Error| ServeError::SelfSigned(e.to_string());
    let (ca_params, leaf_params) = self_signed_params(name, subject_alt_names, now);
    let ca_key = KeyPair::generate().map_err(failed)?;
    let ca_cert = ca_params.self_signed(&ca_key).map_err(failed)?;
    let leaf_key = KeyPair::generate().map_err(failed)?;
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).map_err(failed)?;
    Ok(ServingCertificate {
        chain: vec![leaf.der().clone(), ca_cert.der().clone()],
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustls::ServerConfig;

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
    }

    fn dns(s: &str) -> SanType {
        SanType::DnsName(s.try_into().unwrap_or_else(|_| panic!("{s} is ASCII")))
    }

    #[test]
    fn sans_cover_loopback_the_host_name_and_a_specific_bind_address() {
        let unspecified = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        assert_eq!(
            subject_alt_names(Some("Node-1.example\n"), unspecified),
            vec![
                SanType::IpAddress(ip("127.0.0.1")),
                SanType::IpAddress(ip("::1")),
                dns("localhost"),
                dns("node-1.example")
            ]
        );
        assert_eq!(
            subject_alt_names(Some("localhost"), ip("10.0.0.5")),
            vec![
                SanType::IpAddress(ip("127.0.0.1")),
                SanType::IpAddress(ip("::1")),
                dns("localhost"),
                SanType::IpAddress(ip("10.0.0.5"))
            ]
        );
        // Invalid host names are left out; a loopback bind address is not repeated.
        for bad in ["", "-bad", "under_score", "a..b", "höst"] {
            assert_eq!(subject_alt_names(Some(bad), ip("::1")).len(), 3, "{bad:?}");
        }
    }

    #[test]
    fn self_signed_params_follow_upstream() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let (ca, leaf) = self_signed_params("cloud-controller-manager", &[dns("localhost")], now);
        let common_name = |params: &CertificateParams| match params.distinguished_name.get(&DnType::CommonName) {
            Some(rcgen::DnValue::Utf8String(name)) => name.clone(),
            other => panic!("unexpected common name {other:?}"),
        };
        assert_eq!(common_name(&ca), "cloud-controller-manager-ca@1700000000");
        assert_eq!(common_name(&leaf), "cloud-controller-manager@1700000000");
        assert_eq!(ca.is_ca, IsCa::Ca(BasicConstraints::Unconstrained));
        assert_eq!(leaf.is_ca, IsCa::NoCa);
        assert_eq!(leaf.extended_key_usages, vec![ExtendedKeyUsagePurpose::ServerAuth]);
        assert_eq!(leaf.subject_alt_names, vec![dns("localhost")]);
        for params in [&ca, &leaf] {
            assert_eq!(params.not_before.unix_timestamp(), 1_700_000_000 - 3600);
            assert_eq!(params.not_after.unix_timestamp(), 1_700_000_000 + 365 * 86_400);
        }
    }

    #[test]
    fn self_signed_chain_is_usable_by_rustls() {
        let sans = subject_alt_names(None, IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        let certificate = self_signed("test", &sans, SystemTime::now());
        let certificate = certificate.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(certificate.chain.len(), 2);
        let built = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .with_safe_default_protocol_versions()
            .map(|b| b.with_no_client_auth().with_single_cert(certificate.chain, certificate.key));
        assert!(matches!(built, Ok(Ok(_))), "{built:?}");
    }
}
