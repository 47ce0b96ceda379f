//! Certificates: uploaded (read from their PEM, as the API does: domain names, validity and
//! SHA-256 fingerprint) and managed (issued by an action as a real, signed certificate for the
//! requested domain names, see [`crate::x509`]).

use super::effect::Effect;
use super::records::{CertStatus, CertificateRecord};
use super::store::{State, bump, sort_records};
use super::validate::{validate_labels, validate_name};
use crate::control::{ResourceKind, ResourceRef, SeedCertificate};
use crate::error::ApiError;
use crate::label_selector::LabelSelector;
use crate::pagination::PageRequest;
use crate::sort::SortRequest;
use crate::time::{now_unix, rfc3339};
use crate::wire::request::{CreateCertificateRequest, UpdateRequest};
use crate::wire::{ActionError, Certificate, CertificateStatus, Labels, Meta, Resource};
use crate::x509;

/// Validity of issued certificates.
const VALIDITY_SECS: i64 = 90 * 86_400;

/// Filters of `GET /certificates`.
#[derive(Debug, Default)]
pub(crate) struct CertificateFilter {
    pub name: Option<String>,
    pub label_selector: Option<LabelSelector>,
    pub types: Vec<String>,
    /// Requested order (`id`, `name`, `created`).
    pub sort: SortRequest,
}

/// Reads an uploaded certificate or answers `invalid_input` naming `certificate`.
fn read_certificate(pem: &str) -> Result<x509::CertificateInfo, ApiError> {
    x509::read_pem(pem).map_err(|e| ApiError::invalid_input("certificate", format!("not a PEM certificate: {e}")))
}

/// Domain names a certificate can carry (`dNSName`s are ASCII) or `invalid_input` naming
/// `domain_names`.
fn validate_domain_names(names: &[String]) -> Result<(), ApiError> {
    match names.iter().find(|n| !n.is_ascii()) {
        Some(bad) => Err(ApiError::invalid_input(
            "domain_names",
            format!("domain name '{bad}' is not ASCII: internationalized names go in punycode (xn--...)"),
        )),
        None => Ok(()),
    }
}

/// Issues a certificate or answers `invalid_input` naming `domain_names` (the only input
/// issuing can refuse once names are validated).
fn issue(domains: &[String], serial: u64, now: i64) -> Result<(String, String), ApiError> {
    x509::issue_pem_and_key(domains, serial, now, now + VALIDITY_SECS)
        .map_err(|e| ApiError::invalid_input("domain_names", format!("cannot issue a certificate: {e}")))
}

fn pem_like(text: &str) -> bool {
    text.contains("-----BEGIN ") && text.contains("-----END ")
}

impl State {
    /// The certificate record or `not_found`.
    pub fn certificate_record(&self, id: u64) -> Result<&CertificateRecord, ApiError> {
        self.certificates.get(&id).ok_or_else(|| ApiError::not_found("certificate", id))
    }

    fn check_certificate_name(&self, name: &str, labels: &Labels) -> Result<(), ApiError> {
        validate_name(name)?;
        if self.certificates.values().any(|c| c.name == name) {
            return Err(ApiError::uniqueness("name"));
        }
        validate_labels(labels)
    }

    /// `POST /certificates`: returns (certificate id, action id for managed ones).
    pub fn create_certificate(&mut self, req: &CreateCertificateRequest) -> Result<(u64, Option<u64>), ApiError> {
        let labels = req.labels.clone().unwrap_or_default();
        self.check_certificate_name(&req.name, &labels)?;
        let now = now_unix();
        match req.kind.as_deref().unwrap_or("uploaded") {
            "uploaded" => {
                let cert = req.certificate.as_deref().unwrap_or_default();
                let info = read_certificate(cert)?;
                let key = req.private_key.as_deref().unwrap_or_default();
                if !pem_like(key) {
                    return Err(ApiError::invalid_input("private_key", "private_key must be PEM encoded"));
                }
                let id = bump(&mut self.ids.certificate);
                self.certificates.insert(
                    id,
                    CertificateRecord {
                        id,
                        name: req.name.clone(),
                        managed: false,
                        certificate: Some(cert.to_owned()),
                        private_key: Some(key.to_owned()),
                        domain_names: info.domain_names,
                        fingerprint: Some(info.fingerprint),
                        not_valid_before: Some(info.not_valid_before),
                        not_valid_after: Some(info.not_valid_after),
                        status: None,
                        labels,
                        created: now,
                    },
                );
                Ok((id, None))
            }
            "managed" => {
                let domains = req.domain_names.clone().unwrap_or_default();
                if domains.is_empty() {
                    return Err(ApiError::invalid_input(
                        "domain_names",
                        "managed certificates need at least one domain name",
                    ));
                }
                validate_domain_names(&domains)?;
                let id = bump(&mut self.ids.certificate);
                self.certificates.insert(
                    id,
                    CertificateRecord {
                        id,
                        name: req.name.clone(),
                        managed: true,
                        certificate: None,
                        private_key: None,
                        domain_names: domains,
                        fingerprint: None,
                        not_valid_before: None,
                        not_valid_after: None,
                        status: Some(CertStatus {
                            issuance: "pending".to_owned(),
                            renewal: "unavailable".to_owned(),
                            error: None,
                        }),
                        labels,
                        created: now,
                    },
                );
                let action = self.start_action(
                    "create_certificate",
                    vec![ResourceRef::certificate(id)],
                    Some(Effect::IssueCertificate { certificate: id }),
                );
                Ok((id, Some(action)))
            }
            other => Err(ApiError::invalid_input("type", format!("unknown certificate type '{other}'"))),
        }
    }

    /// Seeds a certificate (managed ones are issued already).
    pub fn seed_certificate(&mut self, seed: &SeedCertificate) -> Result<u64, ApiError> {
        self.check_certificate_name(&seed.name, &seed.labels)?;
        let managed = match seed.kind.as_str() {
            "uploaded" => false,
            "managed" => true,
            other => {
                return Err(ApiError::invalid_input("type", format!("unknown certificate type '{other}'")));
            }
        };
        let now = now_unix();
        let id = self.ids.certificate;
        let (pem, private_key) = match &seed.certificate {
            Some(pem) => (pem.clone(), seed.private_key.clone()),
            None => issue(&seed.domain_names, id, now).map(|(pem, key)| (pem, Some(key)))?,
        };
        let info = read_certificate(&pem)?;
        let id = bump(&mut self.ids.certificate);
        self.certificates.insert(
            id,
            CertificateRecord {
                id,
                name: seed.name.clone(),
                managed,
                fingerprint: Some(info.fingerprint),
                certificate: Some(pem),
                private_key,
                // A seed without a PEM keeps exactly the names it gave.
                domain_names: if seed.certificate.is_some() { info.domain_names } else { seed.domain_names.clone() },
                not_valid_before: Some(info.not_valid_before),
                not_valid_after: Some(info.not_valid_after),
                status: managed.then(|| CertStatus {
                    issuance: "completed".to_owned(),
                    renewal: "unavailable".to_owned(),
                    error: None,
                }),
                labels: seed.labels.clone(),
                created: now,
            },
        );
        Ok(id)
    }

    /// Completes the issuance of a managed certificate.
    pub(crate) fn issue_certificate(&mut self, id: u64) {
        let Some(c) = self.certificates.get_mut(&id) else {
            return;
        };
        let now = now_unix();
        // The names were validated when the certificate was created; what is left to fail is
        // key generation or signing, which the API would report as a failed issuance.
        let (pem, key) = match issue(&c.domain_names, id, now) {
            Ok(issued) => issued,
            Err(e) => {
                tracing::error!(certificate = id, error = %e.message, "issuing a managed certificate failed");
                c.status = Some(CertStatus {
                    issuance: "failed".to_owned(),
                    renewal: "unavailable".to_owned(),
                    error: Some(ActionError { code: "unknown_error".to_owned(), message: e.message }),
                });
                return;
            }
        };
        if let Ok(info) = x509::read_pem(&pem) {
            c.fingerprint = Some(info.fingerprint);
        }
        c.certificate = Some(pem);
        c.private_key = Some(key);
        c.not_valid_before = Some(now);
        c.not_valid_after = Some(now + VALIDITY_SECS);
        c.status =
            Some(CertStatus { issuance: "completed".to_owned(), renewal: "unavailable".to_owned(), error: None });
    }

    /// Load balancers whose services use a certificate.
    fn certificate_users(&self, id: u64) -> Vec<u64> {
        self.load_balancers
            .values()
            .filter(|lb| lb.services.iter().filter_map(|s| s.http.as_ref()).any(|h| h.certificates.contains(&id)))
            .map(|lb| lb.id)
            .collect()
    }

    /// `PUT /certificates/{id}`: name (unique) and labels (they replace).
    pub fn update_certificate(&mut self, id: u64, req: &UpdateRequest) -> Result<(), ApiError> {
        self.certificate_record(id)?;
        self.ensure_unlocked(ResourceKind::Certificate, id)?;
        if let Some(name) = &req.name {
            validate_name(name)?;
            if self.certificates.values().any(|c| &c.name == name && c.id != id) {
                return Err(ApiError::uniqueness("name"));
            }
        }
        if let Some(labels) = &req.labels {
            validate_labels(labels)?;
        }
        if let Some(c) = self.certificates.get_mut(&id) {
            if let Some(name) = &req.name {
                c.name.clone_from(name);
            }
            if let Some(labels) = &req.labels {
                c.labels.clone_from(labels);
            }
        }
        Ok(())
    }

    /// `DELETE /certificates/{id}`: refused with `resource_in_use` while a service uses it.
    pub fn delete_certificate(&mut self, id: u64) -> Result<(), ApiError> {
        self.certificate_record(id)?;
        self.ensure_unlocked(ResourceKind::Certificate, id)?;
        let users = self.certificate_users(id);
        if !users.is_empty() {
            return Err(ApiError::new(
                "resource_in_use",
                format!("certificate {id} is used by load balancers {users:?}"),
            ));
        }
        self.certificates.remove(&id);
        Ok(())
    }

    /// The certificate as served.
    pub fn render_certificate(&self, c: &CertificateRecord) -> Certificate {
        Certificate {
            id: c.id,
            name: c.name.clone(),
            kind: if c.managed { "managed" } else { "uploaded" }.to_owned(),
            certificate: c.certificate.clone(),
            created: rfc3339(c.created),
            domain_names: c.domain_names.clone(),
            fingerprint: c.fingerprint.clone(),
            not_valid_before: c.not_valid_before.map(rfc3339),
            not_valid_after: c.not_valid_after.map(rfc3339),
            status: c.status.as_ref().map(|s| CertificateStatus {
                issuance: s.issuance.clone(),
                renewal: s.renewal.clone(),
                error: s.error.clone(),
            }),
            used_by: self
                .certificate_users(c.id)
                .into_iter()
                .map(|id| Resource { id, kind: "load_balancer".to_owned() })
                .collect(),
            labels: c.labels.clone(),
        }
    }

    /// A certificate as served.
    pub fn certificate(&self, id: u64) -> Option<Certificate> {
        self.certificates.get(&id).map(|c| self.render_certificate(c))
    }

    /// `GET /certificates`.
    pub fn list_certificates(&self, filter: &CertificateFilter, page: PageRequest) -> (Vec<Certificate>, Meta) {
        let mut matching: Vec<&CertificateRecord> = self
            .certificates
            .values()
            .filter(|c| filter.name.as_ref().is_none_or(|n| &c.name == n))
            .filter(|c| filter.label_selector.as_ref().is_none_or(|sel| sel.matches(&c.labels)))
            .filter(|c| {
                filter.types.is_empty()
                    || filter
                        .types
                        .iter()
                        .any(|t| (t == "managed") == c.managed && matches!(t.as_str(), "managed" | "uploaded"))
            })
            .collect();
        sort_records(&filter.sort, &mut matching, |c| (c.id, &c.name, c.created));
        let (slice, meta) = page.apply(&matching);
        (slice.iter().map(|c| self.render_certificate(c)).collect(), meta)
    }
}
