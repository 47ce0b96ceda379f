//! TLS parameters named as Go's `crypto/tls` names them (upstream's `--tls-min-version`,
//! `--tls-cipher-suites`, `--tls-curve-preferences`), and the rustls provider they select.
//!
//! rustls implements TLS 1.2 and 1.3 with AEAD ECDHE suites only, so some names Go accepts
//! cannot be honoured: they are accepted and reported back as notes (the caller warns), while
//! names Go does not know are errors that list the accepted ones.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::crypto::aws_lc_rs::{ALL_CIPHER_SUITES, ALL_KX_GROUPS, default_provider};
use rustls::version::{TLS12, TLS13};
use rustls::{SupportedCipherSuite, SupportedProtocolVersion};

/// The lowest TLS version the server accepts (`--tls-min-version`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    /// `VersionTLS10`: TLS 1.2 is the lowest version rustls implements, so this means TLS 1.2.
    Tls10,
    /// `VersionTLS11`: as [`TlsVersion::Tls10`].
    Tls11,
    /// `VersionTLS12` (the default).
    #[default]
    Tls12,
    /// `VersionTLS13`.
    Tls13,
}

/// Go's names of the TLS versions, in order.
pub const TLS_VERSION_NAMES: [&str; 4] = ["VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13"];

impl TlsVersion {
    /// Parses a Go version name (`VersionTLS12`); the error lists the accepted names.
    pub fn from_go_name(name: &str) -> Result<Self, String> {
        match name {
            "VersionTLS10" => Ok(TlsVersion::Tls10),
            "VersionTLS11" => Ok(TlsVersion::Tls11),
            "VersionTLS12" => Ok(TlsVersion::Tls12),
            "VersionTLS13" => Ok(TlsVersion::Tls13),
            other => Err(format!("{other:?} is not a TLS version; accepted: {}", TLS_VERSION_NAMES.join(", "))),
        }
    }
}

/// Go's cipher suite names (`tls.CipherSuites()` and `tls.InsecureCipherSuites()`, with the
/// two CHACHA20 aliases) and their IANA numbers.
pub const GO_CIPHER_SUITES: &[(&str, u16)] = &[
    ("TLS_AES_128_GCM_SHA256", 0x1301),
    ("TLS_AES_256_GCM_SHA384", 0x1302),
    ("TLS_CHACHA20_POLY1305_SHA256", 0x1303),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", 0xc009),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", 0xc02b),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", 0xc00a),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", 0xc02c),
    ("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", 0xcca9),
    ("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", 0xcca9),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", 0xc013),
    ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", 0xc02f),
    ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", 0xc014),
    ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", 0xc030),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", 0xcca8),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", 0xcca8),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", 0xc023),
    ("TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", 0xc007),
    ("TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", 0xc012),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", 0xc027),
    ("TLS_ECDHE_RSA_WITH_RC4_128_SHA", 0xc011),
    ("TLS_RSA_WITH_3DES_EDE_CBC_SHA", 0x000a),
    ("TLS_RSA_WITH_AES_128_CBC_SHA", 0x002f),
    ("TLS_RSA_WITH_AES_128_CBC_SHA256", 0x003c),
    ("TLS_RSA_WITH_AES_128_GCM_SHA256", 0x009c),
    ("TLS_RSA_WITH_AES_256_CBC_SHA", 0x0035),
    ("TLS_RSA_WITH_AES_256_GCM_SHA384", 0x009d),
    ("TLS_RSA_WITH_RC4_128_SHA", 0x0005),
];

/// Go's `tls.CurveID` names and numbers (the numbers are the IANA group numbers).
pub const GO_CURVES: &[(&str, u16)] = &[
    ("CurveP256", 23),
    ("CurveP384", 24),
    ("CurveP521", 25),
    ("X25519", 29),
    ("SecP256r1MLKEM768", 4587),
    ("X25519MLKEM768", 4588),
    ("SecP384r1MLKEM1024", 4589),
];

/// The TLS parameters of the secure server. The default is rustls's defaults with TLS 1.2 as
/// the minimum, as Go's server defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsParams {
    /// The lowest version accepted.
    pub min_version: TlsVersion,
    /// IANA numbers of the allowed TLS 1.2 suites; `None`: rustls's defaults. TLS 1.3 suites
    /// are always all enabled, as in Go, which does not make them configurable.
    pub cipher_suites: Option<Vec<u16>>,
    /// IANA numbers of the allowed key exchange groups; `None`: rustls's defaults.
    pub curves: Option<Vec<u16>>,
}

/// Parsed TLS parameters and the notes about names that were accepted without effect.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedTlsParams {
    /// The parameters.
    pub params: TlsParams,
    /// One line per name that is accepted but cannot be honoured, for a start-up warning.
    pub notes: Vec<String>,
}

/// Parses `--tls-min-version`, `--tls-cipher-suites` and `--tls-curve-preferences` (Go names;
/// curves also as Go's numeric `CurveID`s). Every problem is returned, each naming its flag
/// and the accepted values.
pub fn parse_tls_params(
    min_version: &str,
    cipher_suites: &[String],
    curves: &[String],
) -> Result<ParsedTlsParams, Vec<String>> {
    let mut errors = Vec::new();
    let mut parsed = ParsedTlsParams::default();
    if !min_version.is_empty() {
        match TlsVersion::from_go_name(min_version) {
            Ok(v) => parsed.params.min_version = v,
            Err(e) => errors.push(format!("--tls-min-version: {e}")),
        }
    }
    let suites: Vec<&str> = cipher_suites.iter().map(|s| s.trim()).filter(|s| !s.is_empty()).collect();
    if !suites.is_empty() {
        let mut chosen = Vec::new();
        let mut unsupported = Vec::new();
        for name in suites {
            match GO_CIPHER_SUITES.iter().find(|(n, _)| *n == name) {
                None => errors.push(format!(
                    "--tls-cipher-suites: {name:?} is not a cipher suite; accepted: {}",
                    GO_CIPHER_SUITES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                )),
                Some((_, id)) if is_tls13_suite(*id) => {}
                Some((_, id)) if supported_suite(*id).is_some() => chosen.push(*id),
                Some(_) => unsupported.push(name),
            }
        }
        if !unsupported.is_empty() {
            parsed.notes.push(format!(
                "--tls-cipher-suites: {} not implemented here (only AEAD suites with ECDHE key exchange are), so not \
                 offered",
                unsupported.join(", ")
            ));
        }
        parsed.params.cipher_suites = Some(chosen);
    }
    let curves: Vec<&str> = curves.iter().map(|s| s.trim()).filter(|s| !s.is_empty()).collect();
    if !curves.is_empty() {
        let mut chosen = Vec::new();
        let mut unsupported = Vec::new();
        for item in curves {
            let id = item.parse::<u16>().ok().or_else(|| GO_CURVES.iter().find(|(n, _)| *n == item).map(|(_, id)| *id));
            match id {
                Some(id) if supported_group(id) => chosen.push(id),
                Some(id) if GO_CURVES.iter().any(|(_, known)| *known == id) => unsupported.push(item),
                _ => errors.push(format!(
                    "--tls-curve-preferences: {item:?} is not a key exchange group; accepted: {}",
                    accepted_curves()
                )),
            }
        }
        if !unsupported.is_empty() {
            parsed.notes.push(format!(
                "--tls-curve-preferences: {} not implemented here, so not offered",
                unsupported.join(", ")
            ));
        }
        if chosen.is_empty() && errors.is_empty() {
            errors.push(format!(
                "--tls-curve-preferences: none of the groups given is implemented here; accepted: {}",
                accepted_curves()
            ));
        }
        parsed.params.curves = Some(chosen);
    }
    if errors.is_empty() { Ok(parsed) } else { Err(errors) }
}

/// The curves accepted by [`parse_tls_params`]: names and numbers of the implemented ones.
fn accepted_curves() -> String {
    GO_CURVES
        .iter()
        .filter(|(_, id)| supported_group(*id))
        .map(|(name, id)| format!("{name} ({id})"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn is_tls13_suite(id: u16) -> bool {
    (0x1301..=0x1303).contains(&id)
}

fn supported_suite(id: u16) -> Option<SupportedCipherSuite> {
    ALL_CIPHER_SUITES.iter().copied().find(|s| u16::from(s.suite()) == id)
}

fn supported_group(id: u16) -> bool {
    ALL_KX_GROUPS.iter().any(|g| u16::from(g.name()) == id)
}

impl TlsParams {
    /// The crypto provider (aws-lc-rs) restricted to these suites and groups.
    pub(crate) fn provider(&self) -> Arc<CryptoProvider> {
        let mut provider = default_provider();
        if let Some(suites) = &self.cipher_suites {
            provider.cipher_suites = ALL_CIPHER_SUITES
                .iter()
                .copied()
                .filter(|s| is_tls13_suite(u16::from(s.suite())) || suites.contains(&u16::from(s.suite())))
                .collect();
        }
        if let Some(curves) = &self.curves {
            provider.kx_groups =
                ALL_KX_GROUPS.iter().copied().filter(|g| curves.contains(&u16::from(g.name()))).collect();
        }
        Arc::new(provider)
    }

    /// The versions offered: from the minimum up; TLS 1.2 only when a TLS 1.2 suite is left.
    pub(crate) fn versions(&self) -> Vec<&'static SupportedProtocolVersion> {
        let tls12_suites = self.cipher_suites.as_ref().is_none_or(|s| !s.is_empty());
        if self.min_version <= TlsVersion::Tls12 && tls12_suites { vec![&TLS13, &TLS12] } else { vec![&TLS13] }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn go_names_are_accepted() {
        let parsed = parse_tls_params(
            "VersionTLS13",
            &strings(&[
                "TLS_AES_128_GCM_SHA256",
                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            ]),
            &strings(&["X25519", "23"]),
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(parsed.params.min_version, TlsVersion::Tls13);
        assert_eq!(parsed.params.cipher_suites, Some(vec![0xcca8, 0xc02b]));
        assert_eq!(parsed.params.curves, Some(vec![29, 23]));
        assert!(parsed.notes.is_empty(), "{:?}", parsed.notes);
        assert_eq!(parsed.params.versions(), vec![&TLS13]);
    }

    #[test]
    fn unknown_names_are_errors_naming_the_accepted_ones() {
        let errors = parse_tls_params("VersionTLS14", &strings(&["TLS_FOO"]), &strings(&["P999"])).unwrap_err();
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].starts_with("--tls-min-version: \"VersionTLS14\""), "{}", errors[0]);
        assert!(errors[0].contains("VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13"), "{}", errors[0]);
        assert!(errors[1].contains("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"), "{}", errors[1]);
        assert!(errors[2].contains("X25519 (29)"), "{}", errors[2]);
    }

    #[test]
    fn go_suites_rustls_lacks_are_notes_and_every_go_name_parses() {
        let all: Vec<String> = GO_CIPHER_SUITES.iter().map(|(n, _)| (*n).to_owned()).collect();
        let parsed = parse_tls_params("VersionTLS10", &all, &[]).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(parsed.notes.len(), 1);
        assert!(parsed.notes[0].contains("TLS_RSA_WITH_AES_128_CBC_SHA"), "{}", parsed.notes[0]);
        assert_eq!(parsed.params.versions(), vec![&TLS13, &TLS12]);
        // Only TLS 1.3 names: TLS 1.2 has no suite left, so only TLS 1.3 is offered.
        let parsed =
            parse_tls_params("", &strings(&["TLS_AES_256_GCM_SHA384"]), &[]).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(parsed.params.versions(), vec![&TLS13]);
    }
}
