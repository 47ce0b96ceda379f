//! Load Balancer types and certificates, each read with one list and shared by every Service:
//! types are cached for an hour (the official CCM's LB-type cache), certificates for the
//! inventory's max age and re-read after a failed change or when a name is not found.
//!
//! Managed certificates are found by the Service-UID label (like the official CCM) and
//! created only when missing — the official CCM sends a create on every reconcile and treats
//! `uniqueness_error` as "exists".

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cloud_provider::events::{EventObject, EventSink, ProviderEvent};
use hcloud_api::models::{
    Certificate, CertificateId, CertificateListParams, CreateCertificateRequest, LoadBalancerType,
};
use hcloud_api::{Client, Error, ErrorCode};
use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;
use tracing::info;

use super::annotations::{self as a, Invalid, LABEL_SERVICE_UID, LABEL_USE_STAGING_CA};
use super::spec::{CertRef, CertificateSpec, LbSpec};

/// How long the type list is used.
const TYPES_MAX_AGE: Duration = Duration::from_secs(3600);

struct Cached<T> {
    at: Instant,
    items: Arc<Vec<T>>,
}

/// Why certificates or a type could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// A configured value names nothing that exists (or cannot be used).
    #[error("{0}")]
    Invalid(Invalid),
    /// Something else went wrong (a certificate name is taken, ...).
    #[error("{0}")]
    Conflict(String),
    /// The API failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// Why.
        #[source]
        source: Error,
    },
}

/// The shared catalog.
pub struct Catalog {
    client: Client,
    max_age: Duration,
    types: tokio::sync::Mutex<Option<Cached<LoadBalancerType>>>,
    certificates: tokio::sync::Mutex<Option<Cached<Certificate>>>,
    events: Arc<Mutex<Arc<dyn EventSink>>>,
}

fn api(what: &str) -> impl FnOnce(Error) -> CatalogError + '_ {
    move |source| CatalogError::Api { what: what.to_owned(), source }
}

impl Catalog {
    /// A catalog reading through `client`; certificates are re-read after `max_age`.
    pub fn new(client: Client, max_age: Duration, events: Arc<Mutex<Arc<dyn EventSink>>>) -> Catalog {
        Catalog {
            client,
            max_age,
            types: tokio::sync::Mutex::new(None),
            certificates: tokio::sync::Mutex::new(None),
            events,
        }
    }

    fn publish(&self, e: ProviderEvent) {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).publish(e);
    }

    async fn types(&self) -> Result<Arc<Vec<LoadBalancerType>>, CatalogError> {
        let mut cached = self.types.lock().await;
        if let Some(c) = cached.as_ref().filter(|c| c.at.elapsed() < TYPES_MAX_AGE) {
            return Ok(c.items.clone());
        }
        let items =
            Arc::new(self.client.load_balancer_types().list_all().await.map_err(api("listing Load Balancer types"))?);
        *cached = Some(Cached { at: Instant::now(), items: items.clone() });
        Ok(items)
    }

    /// The type `name`, checked for availability; `explicit` says whether the Service (or the
    /// environment) configured it, for the error message. A deprecated type raises
    /// `LoadBalancerTypeDeprecated` on `owner`.
    pub async fn lb_type(&self, name: &str, owner: &EventObject) -> Result<LoadBalancerType, CatalogError> {
        let types = self.types().await?;
        let Some(t) = types.iter().find(|t| t.name == name) else {
            let names: Vec<&str> = types.iter().map(|t| t.name.as_str()).collect();
            return Err(CatalogError::Invalid(Invalid::new(
                format!("annotation {} (or HCLOUD_LOAD_BALANCERS_TYPE)", a::TYPE),
                name,
                format!("accepted: {}", names.join(", ")),
            )));
        };
        if let Some(dep) = &t.deprecation {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
                .unwrap_or_default();
            let unavailable = dep.unavailable_after.parse::<Timestamp>().is_ok_and(|at| at.as_second() <= now);
            if unavailable {
                return Err(CatalogError::Invalid(Invalid::new(
                    format!("annotation {} (or HCLOUD_LOAD_BALANCERS_TYPE)", a::TYPE),
                    name,
                    format!("this type is no longer available since {}; choose another one", dep.unavailable_after),
                )));
            }
            self.publish(ProviderEvent::warning(
                owner.clone(),
                "LoadBalancerTypeDeprecated",
                format!(
                    "Load Balancer type {name} is deprecated and will no longer be available for order as of {}",
                    dep.unavailable_after
                ),
            ));
        }
        Ok(t.clone())
    }

    async fn certificate_list(&self, refresh: bool) -> Result<Arc<Vec<Certificate>>, CatalogError> {
        let mut cached = self.certificates.lock().await;
        if !refresh && let Some(c) = cached.as_ref().filter(|c| c.at.elapsed() < self.max_age) {
            return Ok(c.items.clone());
        }
        let items = Arc::new(
            self.client
                .certificates()
                .list_all(&CertificateListParams::default())
                .await
                .map_err(api("listing certificates"))?,
        );
        *cached = Some(Cached { at: Instant::now(), items: items.clone() });
        Ok(items)
    }

    /// Forgets the certificate list (after a change failed: a certificate may be gone).
    pub async fn forget_certificates(&self) {
        *self.certificates.lock().await = None;
    }

    /// The certificate ids `spec`'s HTTPS ports use: uploaded ones by id or name, or the
    /// managed one (created if missing).
    pub async fn certificates_for(
        &self,
        spec: &LbSpec,
        owner: &EventObject,
    ) -> Result<Vec<CertificateId>, CatalogError> {
        match &spec.certificates {
            CertificateSpec::None => Ok(Vec::new()),
            CertificateSpec::Uploaded(refs) => self.uploaded(refs).await,
            CertificateSpec::Managed { name, domains, staging } => {
                Ok(vec![self.managed(spec, name, domains, *staging, owner).await?])
            }
        }
    }

    /// The certificate ids of the ports with their own `http-certificates` (from the same
    /// cached list: no request when every name is known).
    pub async fn port_certificates(&self, spec: &LbSpec) -> Result<BTreeMap<u16, Vec<CertificateId>>, CatalogError> {
        let mut out = BTreeMap::new();
        for (port, settings) in &spec.port_settings {
            if let Some(refs) = &settings.certificates {
                out.insert(*port, self.uploaded(refs).await?);
            }
        }
        Ok(out)
    }

    async fn uploaded(&self, refs: &[CertRef]) -> Result<Vec<CertificateId>, CatalogError> {
        let mut out = Vec::with_capacity(refs.len());
        for r in refs {
            match r {
                CertRef::Id(id) => out.push(*id),
                CertRef::Name(name) => out.push(self.certificate_by_name(name).await?),
            }
        }
        Ok(out)
    }

    async fn certificate_by_name(&self, name: &str) -> Result<CertificateId, CatalogError> {
        for refresh in [false, true] {
            if let Some(c) = self.certificate_list(refresh).await?.iter().find(|c| c.name == name) {
                return Ok(c.id);
            }
        }
        Err(CatalogError::Invalid(Invalid::new(
            format!("annotation {}", a::HTTP_CERTIFICATES),
            name,
            "no certificate with this name exists in the project; accepted: ids or names of existing certificates",
        )))
    }

    async fn managed(
        &self,
        spec: &LbSpec,
        name: &str,
        domains: &[String],
        staging: bool,
        owner: &EventObject,
    ) -> Result<CertificateId, CatalogError> {
        let ours = |c: &&Certificate| c.labels.get(LABEL_SERVICE_UID) == Some(&spec.uid);
        if let Some(c) = self.certificate_list(false).await?.iter().find(ours) {
            let mut have = c.domain_names.clone();
            let mut want = domains.to_vec();
            have.sort();
            want.sort();
            if have != want {
                self.publish(ProviderEvent::warning(
                    owner.clone(),
                    "ManagedCertificateDomainsChanged",
                    format!(
                        "managed certificate {} covers {} but {} asks for {}; hcloud-ccm does not replace managed \
                         certificates: delete it to have a new one issued",
                        c.name,
                        have.join(","),
                        a::HTTP_MANAGED_CERTIFICATE_DOMAINS,
                        want.join(",")
                    ),
                ));
            }
            return Ok(c.id);
        }
        let mut labels: hcloud_api::models::Labels =
            [(LABEL_SERVICE_UID.to_owned(), spec.uid.clone())].into_iter().collect();
        if staging {
            labels.insert(LABEL_USE_STAGING_CA.to_owned(), "true".to_owned());
        }
        let req = CreateCertificateRequest::Managed { name: name.to_owned(), domain_names: domains.to_vec(), labels };
        match self.client.certificates().create(&req).await {
            Ok(created) => {
                info!(certificate = %created.resource.id, name, service = %spec.service, "created managed certificate");
                self.forget_certificates().await;
                Ok(created.resource.id)
            }
            Err(e) if e.is_outcome_unknown() => {
                let by_label = [(LABEL_SERVICE_UID.to_owned(), spec.uid.clone())].into_iter().collect();
                let found = self
                    .client
                    .certificates()
                    .list_by_labels(&by_label)
                    .await
                    .map_err(api("looking up the managed certificate after a lost answer"))?;
                self.forget_certificates().await;
                found
                    .first()
                    .map(|c| c.id)
                    .ok_or(CatalogError::Api { what: format!("creating managed certificate {name}"), source: e })
            }
            Err(e) if e.code() == Some(&ErrorCode::UniquenessError) => Err(CatalogError::Conflict(format!(
                "a certificate named {name} exists but does not carry the label {LABEL_SERVICE_UID}={} of this \
                 Service; set {} to another name or delete that certificate",
                spec.uid,
                a::HTTP_MANAGED_CERTIFICATE_NAME
            ))),
            Err(e) => Err(CatalogError::Api { what: format!("creating managed certificate {name}"), source: e }),
        }
    }
}
