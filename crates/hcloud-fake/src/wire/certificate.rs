//! Certificate shapes (`certificate` schema).

// `#[allow(missing_docs)]` below: a field without a doc comment is the Hetzner Cloud API's JSON field of the same name.

use serde::{Deserialize, Serialize};

use super::common::{ActionError, Labels, Resource};

/// Status of a managed certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertificateStatus {
    /// `pending`, `completed` or `failed`.
    pub issuance: String,
    /// `scheduled`, `pending`, `failed` or `unavailable`.
    pub renewal: String,
    /// Error of the last issuance, if it failed.
    pub error: Option<ActionError>,
}

/// `certificate` schema.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Certificate {
    /// Certificate id.
    pub id: u64,
    pub name: String,
    /// `uploaded` or `managed`.
    #[serde(rename = "type")]
    pub kind: String,
    /// PEM text, `null` until a managed certificate is issued.
    pub certificate: Option<String>,
    /// Creation time (RFC 3339).
    pub created: String,
    /// Domain names covered.
    pub domain_names: Vec<String>,
    /// SHA-256 fingerprint, `null` until issued.
    pub fingerprint: Option<String>,
    /// Start of validity, `null` until issued.
    pub not_valid_before: Option<String>,
    /// End of validity, `null` until issued.
    pub not_valid_after: Option<String>,
    /// Issuance/renewal status (`null` for uploaded certificates).
    pub status: Option<CertificateStatus>,
    /// Resources using the certificate.
    pub used_by: Vec<Resource>,
    pub labels: Labels,
}
