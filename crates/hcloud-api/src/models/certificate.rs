//! TLS certificates (uploaded and managed).

// `#[allow(missing_docs)]` below: a field without a doc comment is the Hetzner Cloud API's JSON field of the same name.

use serde::{Deserialize, Serialize};

use super::common::{CertificateId, Labels};

crate::string_enum! {
    /// Kind of certificate.
    #[derive(Default)]
    pub enum CertificateKind {
        /// Uploaded by the user.
        #[default]
        Uploaded = "uploaded",
        /// Issued and renewed by Hetzner (Let's Encrypt).
        Managed = "managed",
    }
}

/// A certificate.
#[allow(missing_docs)]
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Certificate {
    pub id: CertificateId,
    pub name: String,
    /// `uploaded` or `managed` (the JSON `type`).
    #[serde(rename = "type")]
    pub kind: CertificateKind,
    /// Domains covered.
    pub domain_names: Vec<String>,
    pub labels: Labels,
    /// SHA-256 fingerprint, colon-separated hex; None until a managed certificate is issued.
    pub fingerprint: Option<String>,
    /// Validity start.
    pub not_valid_before: Option<String>,
    /// Validity end.
    pub not_valid_after: Option<String>,
    /// Issuance/renewal state of a managed certificate.
    pub status: Option<CertificateStatus>,
}

/// Issuance/renewal state of a managed certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct CertificateStatus {
    /// `pending`, `completed` or `failed`.
    pub issuance: String,
    /// `scheduled`, `pending`, `failed` or `unavailable`.
    pub renewal: String,
    /// Why the last issuance or renewal failed.
    pub error: Option<super::common::ActionError>,
}

/// Filters for listing certificates.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CertificateListParams {
    /// Exact name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Label selector, e.g. `env=prod,!legacy`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
}

/// Body of `POST /certificates`.
#[allow(missing_docs)]
#[derive(Debug, Clone)]
pub enum CreateCertificateRequest {
    /// Upload a certificate and its key.
    Uploaded {
        name: String,
        /// PEM certificate chain.
        certificate: String,
        /// PEM private key.
        private_key: secrecy::SecretString,
        labels: Labels,
    },
    /// Let Hetzner issue one.
    Managed { name: String, domain_names: Vec<String>, labels: Labels },
}

impl Serialize for CreateCertificateRequest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use secrecy::ExposeSecret;
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        match self {
            CreateCertificateRequest::Uploaded { name, certificate, private_key, labels } => {
                m.serialize_entry("name", name)?;
                m.serialize_entry("type", "uploaded")?;
                m.serialize_entry("certificate", certificate)?;
                m.serialize_entry("private_key", private_key.expose_secret())?;
                m.serialize_entry("labels", labels)?;
            }
            CreateCertificateRequest::Managed { name, domain_names, labels } => {
                m.serialize_entry("name", name)?;
                m.serialize_entry("type", "managed")?;
                m.serialize_entry("domain_names", domain_names)?;
                m.serialize_entry("labels", labels)?;
            }
        }
        m.end()
    }
}
