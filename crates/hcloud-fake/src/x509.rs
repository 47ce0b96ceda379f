//! Certificates as the API serves them: read an uploaded PEM (domain names, validity and
//! SHA-256 fingerprint, as the API does) and issue the certificate of a managed certificate.
//!
//! Reading takes the first `CERTIFICATE` section of the PEM text (other sections and text
//! between them are skipped; `rustls-pki-types`), decodes its DER as an X.509 certificate
//! (`x509-cert`, strict DER) and takes the subject alternative names (`dNSName`s, in order;
//! the subject's common name when there are none), `notBefore` and `notAfter`, and the
//! SHA-256 of the DER (`aws-lc-rs`). Nothing is verified: signatures, chains and keys are not
//! the fake's business.
//!
//! Issuing (`rcgen`) signs a v3 certificate with the domain names as subject alternative
//! names (`dNSName`s, in order) and the first one as common name, the given serial number and
//! validity. Its issuer, `CN=hcloud-fake issuer`, is an ECDSA P-256 key made for the occasion,
//! as is the certificate's own key: the certificate is well-formed and its signature real,
//! but nothing chains to it and both private keys are dropped.

use aws_lc_rs::digest::{SHA256, digest};
use rcgen::string::Ia5String;
use rcgen::{CertificateParams, DistinguishedName, DnType, Issuer, KeyPair, SanType, SerialNumber};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::{self, PemObject};
use time::OffsetDateTime;
use x509_cert::Certificate;
use x509_cert::der::Decode;
use x509_cert::der::oid::ObjectIdentifier;
use x509_cert::ext::pkix::SubjectAltName;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::name::Name;
use x509_cert::time::Time;

/// What the API reads from an uploaded certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateInfo {
    /// Subject alternative names (`dNSName`), else the subject's common name.
    pub domain_names: Vec<String>,
    /// Start of validity, unix seconds.
    pub not_valid_before: i64,
    /// End of validity, unix seconds.
    pub not_valid_after: i64,
    /// SHA-256 of the DER, lower-case hex pairs joined by `:`.
    pub fingerprint: String,
}

/// `id-at-commonName` (2.5.4.3).
const COMMON_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.3");

/// Common name of the issuer of issued certificates.
const ISSUER_NAME: &str = "hcloud-fake issuer";

/// Common name of an issued certificate without domain names.
const NO_DOMAIN_SUBJECT: &str = "hcloud-fake";

/// The DER of the first `CERTIFICATE` section of a PEM text.
fn first_certificate_der(pem: &str) -> Result<CertificateDer<'static>, String> {
    CertificateDer::from_pem_slice(pem.as_bytes()).map_err(|e| match e {
        pem::Error::NoItemsFound => "no -----BEGIN CERTIFICATE----- section".to_owned(),
        pem::Error::MissingSectionEnd { .. } => "a PEM section has no -----END line".to_owned(),
        pem::Error::IllegalSectionStart { .. } => "malformed -----BEGIN line".to_owned(),
        pem::Error::Base64Decode(e) => format!("the certificate section is not base64 ({e})"),
        other => other.to_string(),
    })
}

/// The first common name of `name` (its bytes as UTF-8, whatever the string type).
fn common_name(name: &Name) -> Option<String> {
    name.iter().find(|atv| atv.oid == COMMON_NAME).map(|atv| String::from_utf8_lossy(atv.value.value()).into_owned())
}

/// The `dNSName`s of the first subject alternative name extension, in order.
fn dns_names(cert: &Certificate) -> Result<Vec<String>, String> {
    let Some(san) = cert.tbs_certificate().filter_extensions::<SubjectAltName>().next() else {
        return Ok(Vec::new());
    };
    let (_critical, SubjectAltName(names)) = san.map_err(|e| format!("bad subject alternative names: {e}"))?;
    Ok(names
        .iter()
        .filter_map(|n| match n {
            GeneralName::DnsName(dns) => Some(dns.to_string()),
            _ => None,
        })
        .collect())
}

fn unix_seconds(t: Time, what: &str) -> Result<i64, String> {
    i64::try_from(t.to_unix_duration().as_secs()).map_err(|_| format!("{what} is out of range"))
}

/// SHA-256 of `der`, lower-case hex pairs joined by `:`.
fn fingerprint(der: &[u8]) -> String {
    digest(&SHA256, der).as_ref().iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// Reads the first certificate of a PEM text (see the module docs).
pub fn read_pem(pem: &str) -> Result<CertificateInfo, String> {
    let der = first_certificate_der(pem)?;
    let cert = Certificate::from_der(&der).map_err(|e| format!("not an X.509 certificate: {e}"))?;
    let mut domain_names = dns_names(&cert)?;
    if domain_names.is_empty()
        && let Some(cn) = common_name(cert.tbs_certificate().subject())
    {
        domain_names.push(cn);
    }
    let validity = cert.tbs_certificate().validity();
    Ok(CertificateInfo {
        domain_names,
        not_valid_before: unix_seconds(validity.not_before, "notBefore")?,
        not_valid_after: unix_seconds(validity.not_after, "notAfter")?,
        fingerprint: fingerprint(&der),
    })
}

fn common_name_only(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn
}

/// A certificate time, within the years the reader accepts (1970..=9999).
fn time(secs: i64, what: &str) -> Result<OffsetDateTime, String> {
    OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .filter(|t| (1970..=9999).contains(&t.year()))
        .ok_or_else(|| format!("{what} ({secs}) is outside the years 1970 to 9999"))
}

/// [`issue_pem_and_key`] without the key.
#[cfg(test)]
pub fn issue_pem(domains: &[String], serial: u64, not_before: i64, not_after: i64) -> Result<String, String> {
    issue_pem_and_key(domains, serial, not_before, not_after).map(|(cert, _)| cert)
}

/// A PEM certificate for `domains` valid from `not_before` to `not_after` (unix seconds),
/// with `serial` as its serial number (see the module docs), and its private key (PKCS#8 PEM),
/// with which the data plane terminates TLS. Fails for a domain name that is not ASCII (a
/// `dNSName` is an IA5String) and for times outside the years 1970 to 9999.
pub fn issue_pem_and_key(
    domains: &[String],
    serial: u64,
    not_before: i64,
    not_after: i64,
) -> Result<(String, String), String> {
    let mut params = CertificateParams::default();
    params.serial_number = Some(SerialNumber::from(serial));
    params.not_before = time(not_before, "not_before")?;
    params.not_after = time(not_after, "not_after")?;
    params.distinguished_name = common_name_only(domains.first().map_or(NO_DOMAIN_SUBJECT, String::as_str));
    // Built by hand: `CertificateParams::new` would turn names that look like IP addresses
    // into `iPAddress` entries.
    params.subject_alt_names = domains
        .iter()
        .map(|d| {
            Ia5String::try_from(d.as_str())
                .map(SanType::DnsName)
                .map_err(|_| format!("domain name '{d}' is not ASCII (internationalized names go in punycode)"))
        })
        .collect::<Result<_, _>>()?;
    let mut issuer_params = CertificateParams::default();
    issuer_params.distinguished_name = common_name_only(ISSUER_NAME);
    let key_error = |e: rcgen::Error| format!("generating a key: {e}");
    let issuer = Issuer::new(issuer_params, KeyPair::generate().map_err(key_error)?);
    let key = KeyPair::generate().map_err(key_error)?;
    let cert = params.signed_by(&key, &issuer).map_err(|e| format!("signing the certificate: {e}"))?;
    Ok((cert.pem(), key.serialize_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::unix;

    const FIXTURE: &str = include_str!("../tests/fixtures/test-only-cert.pem");

    #[test]
    fn reads_the_fixture_like_openssl() {
        // Values from `openssl x509 -noout -fingerprint -sha256 -dates -ext subjectAltName`.
        let info = read_pem(FIXTURE).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(info.domain_names, vec!["fake.example.com", "www.fake.example.com", "*.apps.fake.example.com"]);
        assert_eq!(info.not_valid_before, unix("2026-11-23T17:14:53Z"));
        assert_eq!(info.not_valid_after, unix("2036-11-20T17:14:53Z"));
        assert_eq!(
            info.fingerprint,
            "59:6c:9f:41:8a:91:19:bf:75:64:bd:0c:ab:ef:fe:05:d1:b5:f2:36:37:35:c3:b7:13:ef:e6:25:cd:a6:15:c2"
        );
    }

    #[test]
    fn reads_the_first_certificate_among_other_sections() {
        let key = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";
        let other = issue_pem(&["other.example.com".to_owned()], 7, 0, 86_400).unwrap_or_else(|e| panic!("{e}"));
        let text = format!("leading text\n{key}{FIXTURE}{other}");
        assert_eq!(read_pem(&text), read_pem(FIXTURE));
    }

    fn issued(domains: &[&str], serial: u64, from: i64, to: i64) -> (String, Certificate) {
        let domains: Vec<String> = domains.iter().map(|&d| d.to_owned()).collect();
        let pem = issue_pem(&domains, serial, from, to).unwrap_or_else(|e| panic!("{e}"));
        let der = first_certificate_der(&pem).unwrap_or_else(|e| panic!("{e}"));
        let cert = Certificate::from_der(&der).unwrap_or_else(|e| panic!("{e}"));
        (pem, cert)
    }

    #[test]
    fn issued_certificates_read_back() {
        let domains = ["a.example.com", "b.example.com"];
        // One time before 2050 (UTCTime), one after (GeneralizedTime).
        let (from, to) = (unix("2026-01-02T03:04:05Z"), unix("2051-06-07T08:09:10Z"));
        let (pem, cert) = issued(&domains, 40_001, from, to);
        let info = read_pem(&pem).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (info.domain_names, info.not_valid_before, info.not_valid_after),
            (domains.map(String::from).to_vec(), from, to)
        );
        let der = first_certificate_der(&pem).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(info.fingerprint, fingerprint(&der));
        assert!(pem.lines().all(|l| l.len() <= 64));
        let tbs = cert.tbs_certificate();
        // A positive INTEGER: 40001 is 0x9c41, so DER puts a zero byte before it.
        assert_eq!(tbs.serial_number().as_bytes(), [0x00, 0x9c, 0x41], "the serial is the one given");
        assert_eq!(common_name(tbs.subject()).as_deref(), Some("a.example.com"));
        assert_eq!(common_name(tbs.issuer()).as_deref(), Some(ISSUER_NAME));
        assert!(matches!(tbs.validity().not_before, Time::UtcTime(_)));
        assert!(matches!(tbs.validity().not_after, Time::GeneralTime(_)));
        let (other, _) = issued(&domains, 40_002, from, to);
        assert_ne!(other, pem);
    }

    #[test]
    fn issued_names_stay_dns_names() {
        // Names that look like IP addresses are still dNSNames; no names: the default subject.
        let (pem, _) = issued(&["10.0.0.1", "*.example.com"], 1, 0, 86_400);
        assert_eq!(read_pem(&pem).map(|i| i.domain_names), Ok(vec!["10.0.0.1".to_owned(), "*.example.com".to_owned()]));
        let (pem, cert) = issued(&[], 1, 0, 86_400);
        assert_eq!(read_pem(&pem).map(|i| i.domain_names), Ok(vec![NO_DOMAIN_SUBJECT.to_owned()]));
        assert_eq!(dns_names(&cert), Ok(Vec::new()));
    }

    #[test]
    fn issuing_refuses_what_a_certificate_cannot_carry() {
        let err = issue_pem(&["bücher.example".to_owned()], 1, 0, 86_400).err().unwrap_or_default();
        assert!(err.contains("'bücher.example' is not ASCII"), "{err}");
        let err = issue_pem(&["a.example".to_owned()], 1, 0, i64::MAX).err().unwrap_or_default();
        assert!(err.contains("not_after"), "{err}");
        let err = issue_pem(&["a.example".to_owned()], 1, -1, 0).err().unwrap_or_default();
        assert!(err.contains("not_before"), "{err}");
    }

    #[test]
    fn rejects_what_is_not_a_certificate() {
        for (text, why) in [
            ("nothing here", "no -----BEGIN CERTIFICATE----- section"),
            ("-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n", "not base64"),
            ("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", "not an X.509 certificate"),
            ("-----BEGIN CERTIFICATE-----\n\n-----END CERTIFICATE-----\n", "not an X.509 certificate"),
            ("-----BEGIN CERTIFICATE-----\nMIIB\n", "no -----END line"),
            (
                "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n",
                "no -----BEGIN CERTIFICATE----- section",
            ),
        ] {
            let err = read_pem(text).err().unwrap_or_default();
            assert!(err.contains(why), "{text:?}: {err:?} should say {why:?}");
        }
    }
}
