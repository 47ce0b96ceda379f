//! Just enough X.509 for certificates as the API serves them: read an uploaded PEM (domain
//! names, validity, SHA-256 fingerprint, as the API does) and write the certificate a
//! managed issuance produces.
//!
//! Reading walks the DER of the first `CERTIFICATE` block: the subject alternative names
//! (`dNSName`s, in order; the subject's common name when there are none), `notBefore` and
//! `notAfter` (UTCTime or GeneralizedTime), and the SHA-256 of the DER. Nothing is verified:
//! signatures, chains and keys are not the fake's business.
//!
//! Writing produces a structurally valid v3 certificate (DER, then PEM) with the domain names
//! as common name and subject alternative names and the given validity. Its key and signature
//! are made-up bytes: it parses, it does not verify.

use crate::sha256;
use crate::time::{civil_from_unix, unix_from_civil};

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

const TAG_INTEGER: u8 = 0x02;
const TAG_BIT_STRING: u8 = 0x03;
const TAG_OCTET_STRING: u8 = 0x04;
const TAG_OID: u8 = 0x06;
const TAG_UTF8: u8 = 0x0c;
const TAG_UTC_TIME: u8 = 0x17;
const TAG_GENERALIZED_TIME: u8 = 0x18;
const TAG_SEQUENCE: u8 = 0x30;
const TAG_SET: u8 = 0x31;
const TAG_VERSION: u8 = 0xa0;
const TAG_EXTENSIONS: u8 = 0xa3;
const TAG_DNS_NAME: u8 = 0x82;

const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
const OID_SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];
const OID_ECDSA_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
const OID_EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_PRIME256V1: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn b64_value(c: u8) -> Option<u32> {
    B64.iter().position(|&b| b == c).and_then(|p| u32::try_from(p).ok())
}

/// Decodes standard base64 (whitespace ignored, `=` padding optional).
fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    let chars: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    let body = chars.iter().position(|&b| b == b'=').map_or(&chars[..], |p| &chars[..p]);
    if chars[body.len()..].iter().any(|&b| b != b'=') {
        return Err("base64 padding in the middle".to_owned());
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    for chunk in body.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            let v = b64_value(c).ok_or_else(|| format!("'{}' is not base64", char::from(c)))?;
            acc |= v << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        match chunk.len() {
            4 => out.extend_from_slice(&bytes[1..4]),
            3 => out.extend_from_slice(&bytes[1..3]),
            2 => out.push(bytes[1]),
            _ => return Err("truncated base64".to_owned()),
        }
    }
    Ok(out)
}

fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let mut b = [0u8; 3];
        b[..chunk.len()].copy_from_slice(chunk);
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                // The index is 6 bits wide.
                out.push(char::from(B64[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The DER of the first `CERTIFICATE` block of a PEM text.
fn first_certificate_der(pem: &str) -> Result<Vec<u8>, String> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let start = pem.find(BEGIN).ok_or("no -----BEGIN CERTIFICATE----- block")? + BEGIN.len();
    let len = pem[start..].find(END).ok_or("no -----END CERTIFICATE----- line")?;
    let der = base64_decode(&pem[start..start + len])?;
    if der.is_empty() {
        return Err("empty certificate block".to_owned());
    }
    Ok(der)
}

/// A DER reader over one level of TLVs.
struct Der<'a> {
    rest: &'a [u8],
}

impl<'a> Der<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    fn peek_tag(&self) -> Option<u8> {
        self.rest.first().copied()
    }

    /// The next TLV: (tag, value).
    fn next(&mut self) -> Result<(u8, &'a [u8]), String> {
        let (&tag, rest) = self.rest.split_first().ok_or("unexpected end of DER")?;
        let (&first, mut rest) = rest.split_first().ok_or("missing DER length")?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return Err("unsupported DER length".to_owned());
            }
            let len = rest[..n].iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
            rest = &rest[n..];
            len
        };
        if rest.len() < len {
            return Err("DER value longer than its container".to_owned());
        }
        let (value, after) = rest.split_at(len);
        self.rest = after;
        Ok((tag, value))
    }

    fn expect(&mut self, tag: u8, what: &str) -> Result<&'a [u8], String> {
        let (t, v) = self.next()?;
        if t != tag {
            return Err(format!("expected {what} (tag {tag:#04x}), found tag {t:#04x}"));
        }
        Ok(v)
    }
}

fn digits(s: &[u8], what: &str) -> Result<u32, String> {
    std::str::from_utf8(s).ok().and_then(|t| t.parse().ok()).ok_or_else(|| format!("bad {what} in a certificate time"))
}

/// UTCTime `YYMMDDHHMMSSZ` or GeneralizedTime `YYYYMMDDHHMMSSZ` to unix seconds.
fn parse_time(tag: u8, v: &[u8]) -> Result<i64, String> {
    let (year, rest) = match tag {
        TAG_UTC_TIME if v.len() == 13 => {
            let yy = i64::from(digits(&v[..2], "year")?);
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &v[2..])
        }
        TAG_GENERALIZED_TIME if v.len() == 15 => (i64::from(digits(&v[..4], "year")?), &v[4..]),
        _ => return Err("unsupported certificate time format".to_owned()),
    };
    if rest.last() != Some(&b'Z') {
        return Err("certificate times must be UTC (Z)".to_owned());
    }
    let f = |i: usize, what: &str| digits(&rest[i..i + 2], what);
    Ok(unix_from_civil(year, f(0, "month")?, f(2, "day")?, f(4, "hour")?, f(6, "minute")?, f(8, "second")?))
}

fn common_name(name: &[u8]) -> Result<Option<String>, String> {
    let mut rdns = Der::new(name);
    while !rdns.is_empty() {
        let mut set = Der::new(rdns.expect(TAG_SET, "a relative distinguished name")?);
        while !set.is_empty() {
            let mut atv = Der::new(set.expect(TAG_SEQUENCE, "an attribute")?);
            let oid = atv.expect(TAG_OID, "an attribute type")?;
            let (_, value) = atv.next()?;
            if oid == OID_COMMON_NAME {
                return Ok(Some(String::from_utf8_lossy(value).into_owned()));
            }
        }
    }
    Ok(None)
}

fn dns_names(extensions: &[u8]) -> Result<Vec<String>, String> {
    let mut list = Der::new(Der::new(extensions).expect(TAG_SEQUENCE, "extensions")?);
    while !list.is_empty() {
        let mut ext = Der::new(list.expect(TAG_SEQUENCE, "an extension")?);
        let oid = ext.expect(TAG_OID, "an extension id")?;
        if ext.peek_tag() == Some(0x01) {
            ext.next()?; // critical
        }
        let value = ext.expect(TAG_OCTET_STRING, "an extension value")?;
        if oid == OID_SUBJECT_ALT_NAME {
            let mut names = Der::new(Der::new(value).expect(TAG_SEQUENCE, "subject alternative names")?);
            let mut out = Vec::new();
            while !names.is_empty() {
                let (tag, v) = names.next()?;
                if tag == TAG_DNS_NAME {
                    out.push(String::from_utf8_lossy(v).into_owned());
                }
            }
            return Ok(out);
        }
    }
    Ok(Vec::new())
}

fn fingerprint(der: &[u8]) -> String {
    sha256::digest(der).iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// Reads the first certificate of a PEM text (see the module docs).
pub fn read_pem(pem: &str) -> Result<CertificateInfo, String> {
    let der = first_certificate_der(pem)?;
    let mut cert = Der::new(Der::new(&der).expect(TAG_SEQUENCE, "a certificate")?);
    let mut tbs = Der::new(cert.expect(TAG_SEQUENCE, "the signed part of a certificate")?);
    if tbs.peek_tag() == Some(TAG_VERSION) {
        tbs.next()?;
    }
    tbs.expect(TAG_INTEGER, "a serial number")?;
    tbs.expect(TAG_SEQUENCE, "a signature algorithm")?;
    tbs.expect(TAG_SEQUENCE, "an issuer")?;
    let mut validity = Der::new(tbs.expect(TAG_SEQUENCE, "a validity")?);
    let (t1, v1) = validity.next()?;
    let (t2, v2) = validity.next()?;
    let subject = tbs.expect(TAG_SEQUENCE, "a subject")?;
    tbs.expect(TAG_SEQUENCE, "a public key")?;
    let mut names = Vec::new();
    while !tbs.is_empty() {
        let (tag, v) = tbs.next()?;
        if tag == TAG_EXTENSIONS {
            names = dns_names(v)?;
        }
    }
    if names.is_empty()
        && let Some(cn) = common_name(subject)?
    {
        names.push(cn);
    }
    Ok(CertificateInfo {
        domain_names: names,
        not_valid_before: parse_time(t1, v1)?,
        not_valid_after: parse_time(t2, v2)?,
        fingerprint: fingerprint(&der),
    })
}

fn tlv(tag: u8, value: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = value.len();
    if len < 0x80 {
        // Checked: below 0x80.
        out.push(len as u8);
    } else {
        let bytes = (len as u32).to_be_bytes();
        let skip = bytes.iter().position(|&b| b != 0).unwrap_or(3);
        // At most 4 length bytes follow.
        out.push(0x80 | (4 - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(value);
    out
}

fn seq(parts: &[Vec<u8>]) -> Vec<u8> {
    tlv(TAG_SEQUENCE, &parts.concat())
}

fn time(secs: i64) -> Vec<u8> {
    let (y, m, d, hh, mm, ss) = civil_from_unix(secs);
    if (1950..2050).contains(&y) {
        tlv(TAG_UTC_TIME, format!("{:02}{m:02}{d:02}{hh:02}{mm:02}{ss:02}Z", y % 100).as_bytes())
    } else {
        tlv(TAG_GENERALIZED_TIME, format!("{y:04}{m:02}{d:02}{hh:02}{mm:02}{ss:02}Z").as_bytes())
    }
}

fn name(cn: &str) -> Vec<u8> {
    seq(&[tlv(TAG_SET, &seq(&[tlv(TAG_OID, OID_COMMON_NAME), tlv(TAG_UTF8, cn.as_bytes())]))])
}

/// A PEM certificate for `domains` valid from `not_before` to `not_after` (unix seconds),
/// with `serial` as its serial number (see the module docs).
pub fn issue_pem(domains: &[String], serial: u64, not_before: i64, not_after: i64) -> String {
    let subject = domains.first().map_or("hcloud-fake", String::as_str);
    let seed = sha256::digest(format!("{serial}:{}", domains.join(",")).as_bytes());
    let mut point = vec![0x00, 0x04];
    point.extend_from_slice(&seed);
    point.extend_from_slice(&sha256::digest(&seed));
    let algorithm = seq(&[tlv(TAG_OID, OID_ECDSA_SHA256)]);
    let sans: Vec<u8> = domains.iter().flat_map(|d| tlv(TAG_DNS_NAME, d.as_bytes())).collect();
    let san_ext = seq(&[tlv(TAG_OID, OID_SUBJECT_ALT_NAME), tlv(TAG_OCTET_STRING, &tlv(TAG_SEQUENCE, &sans))]);
    let mut serial_bytes = vec![0x00];
    serial_bytes.extend_from_slice(&serial.to_be_bytes());
    let tbs = seq(&[
        tlv(TAG_VERSION, &tlv(TAG_INTEGER, &[0x02])),
        tlv(TAG_INTEGER, &serial_bytes),
        algorithm.clone(),
        name("hcloud-fake issuer"),
        seq(&[time(not_before), time(not_after)]),
        name(subject),
        seq(&[seq(&[tlv(TAG_OID, OID_EC_PUBLIC_KEY), tlv(TAG_OID, OID_PRIME256V1)]), tlv(TAG_BIT_STRING, &point)]),
        tlv(TAG_EXTENSIONS, &seq(&[san_ext])),
    ]);
    let sig_seed = sha256::digest(&tbs);
    let mut r = vec![0x00];
    r.extend_from_slice(&sig_seed);
    let signature = seq(&[tlv(TAG_INTEGER, &r), tlv(TAG_INTEGER, &r)]);
    let mut sig_bits = vec![0x00];
    sig_bits.extend_from_slice(&signature);
    let der = seq(&[tbs, algorithm, tlv(TAG_BIT_STRING, &sig_bits)]);
    let b64 = base64_encode(&der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../tests/fixtures/test-only-cert.pem");

    #[test]
    fn base64_round_trip() {
        for data in [&b""[..], b"f", b"fo", b"foo", b"foob", b"fooba", b"foobar"] {
            let enc = base64_encode(data);
            assert_eq!(base64_decode(&enc).as_deref(), Ok(data), "{enc}");
        }
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert!(base64_decode("Zm9v!").is_err());
    }

    #[test]
    fn reads_the_fixture_like_openssl() {
        // Values from `openssl x509 -noout -fingerprint -sha256 -dates -ext subjectAltName`.
        let info = read_pem(FIXTURE).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(info.domain_names, vec!["fake.example.com", "www.fake.example.com", "*.apps.fake.example.com"]);
        assert_eq!(info.not_valid_before, unix_from_civil(2026, 11, 23, 17, 14, 53));
        assert_eq!(info.not_valid_after, unix_from_civil(2036, 11, 20, 17, 14, 53));
        assert_eq!(
            info.fingerprint,
            "59:6c:9f:41:8a:91:19:bf:75:64:bd:0c:ab:ef:fe:05:d1:b5:f2:36:37:35:c3:b7:13:ef:e6:25:cd:a6:15:c2"
        );
    }

    #[test]
    fn issued_certificates_read_back() {
        let domains = vec!["a.example.com".to_owned(), "b.example.com".to_owned()];
        // One time before 2050 (UTCTime), one after (GeneralizedTime).
        let (from, to) = (unix_from_civil(2026, 1, 2, 3, 4, 5), unix_from_civil(2051, 6, 7, 8, 9, 10));
        let pem = issue_pem(&domains, 40_001, from, to);
        let info = read_pem(&pem).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((info.domain_names, info.not_valid_before, info.not_valid_after), (domains.clone(), from, to));
        let der = first_certificate_der(&pem).unwrap_or_default();
        assert_eq!(info.fingerprint, fingerprint(&der));
        assert!(pem.lines().all(|l| l.len() <= 64));
        assert_ne!(issue_pem(&domains, 40_002, from, to), pem, "the serial is part of the certificate");
    }

    #[test]
    fn rejects_what_is_not_a_certificate() {
        assert!(read_pem("nothing here").is_err());
        assert!(read_pem("-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n").is_err());
        assert!(read_pem("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").is_err());
        assert!(read_pem("-----BEGIN CERTIFICATE-----\n\n-----END CERTIFICATE-----\n").is_err());
    }
}
