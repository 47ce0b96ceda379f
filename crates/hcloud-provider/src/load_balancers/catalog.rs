//! Load Balancer types and certificates, each read with one list and shared by every Service:
//! types are cached for an hour (the official CCM's LB-type cache), certificates for the
//! inventory's max age and re-read after a failed change or when a name is not found. Which
//! type a sync uses, and what it warns about, is decided in [`super::type_choice`].
//!
//! Managed certificates are found by the Service-UID label (like the official CCM) and
//! created only when missing — the official CCM sends a create on every reconcile and treats
//! `uniqueness_error` as "exists". When `http-managed-certificate-domains` changes, a new one
//! is issued and the HTTPS ports switch to it once it is issued ([`super::managed_cert`]);
//! meanwhile the Service is synced again every [`ISSUANCE_POLL`].

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use sync_lock::Unpoison as _;

use cloud_provider::events::{EventObject, EventSink, ProviderEvent};
use hcloud_api::models::{
    Certificate, CertificateId, CertificateListParams, CreateCertificateRequest, LoadBalancer, LoadBalancerType,
};
use hcloud_api::{Client, Error, ErrorCode};
use tokio::time::Instant;
use tracing::{info, warn};

use super::annotations::{self as a, Invalid, LABEL_SERVICE_UID, LABEL_USE_STAGING_CA};
use super::managed_cert::{ManagedPlan, NameTaken, plan_managed};
use super::spec::{CertRef, CertificateSpec, LbSpec};

/// How long the type list is used.
const TYPES_MAX_AGE: Duration = Duration::from_secs(3600);

/// How often a Service whose new managed certificate is being issued is synced again.
pub const ISSUANCE_POLL: Duration = Duration::from_secs(10);

/// The certificates a Service's HTTPS ports use, and the Service's managed certificates to
/// delete once its Load Balancer no longer uses them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    /// Certificate ids.
    pub ids: Vec<CertificateId>,
    /// Replaced managed certificates (labelled for the Service).
    pub retire: Vec<CertificateId>,
}

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
    /// Services with a resync scheduled while their new managed certificate is issued.
    awaiting: Arc<Mutex<HashSet<String>>>,
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
            awaiting: Arc::default(),
        }
    }

    fn publish(&self, e: ProviderEvent) {
        self.events.lock_unpoisoned().publish(e);
    }

    /// The Load Balancer types: one list shared by every Service, read again after an hour.
    pub async fn types(&self) -> Result<Arc<Vec<LoadBalancerType>>, CatalogError> {
        let mut cached = self.types.lock().await;
        if let Some(c) = cached.as_ref().filter(|c| c.at.elapsed() < TYPES_MAX_AGE) {
            return Ok(c.items.clone());
        }
        let items =
            Arc::new(self.client.load_balancer_types().list_all().await.map_err(api("listing Load Balancer types"))?);
        *cached = Some(Cached { at: Instant::now(), items: items.clone() });
        Ok(items)
    }

    async fn certificate_list(&self, refresh: bool) -> Result<Arc<Vec<Certificate>>, CatalogError> {
        self.certificates_within(if refresh { Duration::ZERO } else { self.max_age }).await
    }

    /// The certificate list, read again if the cached one is `max_age` old.
    async fn certificates_within(&self, max_age: Duration) -> Result<Arc<Vec<Certificate>>, CatalogError> {
        let mut cached = self.certificates.lock().await;
        if let Some(c) = cached.as_ref().filter(|c| c.at.elapsed() < max_age) {
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
    pub async fn certificates_for(&self, spec: &LbSpec, owner: &EventObject) -> Result<Resolved, CatalogError> {
        match &spec.certificates {
            CertificateSpec::None => Ok(Resolved::default()),
            CertificateSpec::Uploaded(refs) => {
                Ok(Resolved { ids: self.uploaded(refs, a::HTTP_CERTIFICATES).await?, retire: Vec::new() })
            }
            CertificateSpec::Managed { name, domains, staging } => {
                self.managed(spec, name, domains, *staging, owner).await
            }
        }
    }

    /// Deletes the replaced managed certificates `retire` that `lb` no longer uses. One the API
    /// still sees in use (the `update_service` that replaced it is still running) is deleted at
    /// a sync [`ISSUANCE_POLL`] later.
    pub async fn retire(&self, retire: &[CertificateId], lb: &LoadBalancer, spec: &LbSpec, owner: &EventObject) {
        let service = spec.service.as_str();
        let used = |id: &CertificateId| {
            lb.services.iter().filter_map(|s| s.http.as_ref()).any(|h| h.certificates.contains(id))
        };
        let mut gone = Vec::new();
        for id in retire.iter().filter(|id| !used(id)) {
            match self.client.certificates().delete(*id).await {
                Ok(()) => {
                    info!(certificate = %id, service, "deleted the replaced managed certificate");
                    gone.push(*id);
                }
                Err(e) if e.code() == Some(&ErrorCode::NotFound) => gone.push(*id),
                // Tried again at a later sync (it is still labelled for the Service).
                Err(e) => {
                    // Expected while the update that replaced it runs; anything else is worth a warning.
                    if e.code().is_some_and(|c| c.as_str() == "resource_in_use" || *c == ErrorCode::Locked) {
                        info!(certificate = %id, service, "the replaced managed certificate is still in use; deleting it later");
                    } else {
                        warn!(certificate = %id, service, error = %e, "deleting the replaced managed certificate failed; trying again later");
                    }
                    self.resync_later(&spec.uid, owner);
                }
            }
        }
        if gone.is_empty() {
            return;
        }
        // The cached list without them: the next sync needs no new list.
        let mut cached = self.certificates.lock().await;
        if let Some(c) = cached.as_mut() {
            c.items = Arc::new(c.items.iter().filter(|cert| !gone.contains(&cert.id)).cloned().collect());
        }
    }

    /// Syncs the Service again after [`ISSUANCE_POLL`] (once, however often it is asked).
    fn resync_later(&self, uid: &str, owner: &EventObject) {
        if !self.awaiting.lock_unpoisoned().insert(uid.to_owned()) {
            return;
        }
        let (awaiting, events, uid, owner) =
            (self.awaiting.clone(), self.events.clone(), uid.to_owned(), owner.clone());
        tokio::spawn(async move {
            tokio::time::sleep(ISSUANCE_POLL).await;
            awaiting.lock_unpoisoned().remove(&uid);
            let sink = events.lock_unpoisoned().clone();
            sink.resync(&owner);
        });
    }

    /// The certificate ids of the ports with their own `http-certificates` (from the same
    /// cached list: no request when every name is known).
    pub async fn port_certificates(&self, spec: &LbSpec) -> Result<BTreeMap<u16, Vec<CertificateId>>, CatalogError> {
        let mut out = BTreeMap::new();
        for (port, settings) in &spec.port_settings {
            if let Some(refs) = &settings.certificates {
                // A name that does not exist is reported under the annotation the user wrote.
                let setting = a::port_annotation(*port, a::HTTP_CERTIFICATES);
                out.insert(*port, self.uploaded(refs, &setting).await?);
            }
        }
        Ok(out)
    }

    /// The ids of `refs`, read from annotation `setting` (named when a name does not exist).
    async fn uploaded(&self, refs: &[CertRef], setting: &str) -> Result<Vec<CertificateId>, CatalogError> {
        let mut out = Vec::with_capacity(refs.len());
        for r in refs {
            match r {
                CertRef::Id(id) => out.push(*id),
                CertRef::Name(name) => out.push(self.certificate_by_name(name, setting).await?),
            }
        }
        Ok(out)
    }

    async fn certificate_by_name(&self, name: &str, setting: &str) -> Result<CertificateId, CatalogError> {
        for refresh in [false, true] {
            if let Some(c) = self.certificate_list(refresh).await?.iter().find(|c| c.name == name) {
                return Ok(c.id);
            }
        }
        Err(CatalogError::Invalid(Invalid::new(
            format!("annotation {setting}"),
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
    ) -> Result<Resolved, CatalogError> {
        let ours = |c: &&Certificate| c.labels.get(LABEL_SERVICE_UID) == Some(&spec.uid);
        // The awaited certificate may have been issued since the list was read: a list older
        // than half the poll is read again (once per poll, not twice right after a create).
        let awaited_max_age = ISSUANCE_POLL / 2;
        let mut max_age = self.max_age;
        let (list, plan) = loop {
            let list = self.certificates_within(max_age).await?;
            let mine: Vec<&Certificate> = list.iter().filter(ours).collect();
            let taken: BTreeSet<&str> = list.iter().map(|c| c.name.as_str()).collect();
            // Decided on the list as cached (up to the max age): a name taken meanwhile makes
            // the create fail with `uniqueness_error`, which is refused the same way.
            let plan = plan_managed(&mine, domains, name, &taken)
                .map_err(|NameTaken { name }| name_taken(&name, &spec.uid))?;
            if plan.awaited.is_none() || max_age == awaited_max_age {
                break (list, plan);
            }
            max_age = awaited_max_age;
        };
        let find = |id: Option<CertificateId>| id.and_then(|id| list.iter().find(|c| c.id == id));
        if let Some(failed) = find(plan.failed) {
            self.publish(ProviderEvent::warning(
                owner.clone(),
                "ManagedCertificateIssuanceFailed",
                issuance_failed(failed, find(plan.use_now)),
            ));
        }
        if plan.awaited.is_some() {
            self.resync_later(&spec.uid, owner);
        }
        let ManagedPlan { use_now, create, retire, .. } = plan;
        let Some(new_name) = create else {
            // `use_now` is set whenever nothing is to be created (see `plan_managed`).
            return Ok(Resolved { ids: use_now.into_iter().collect(), retire });
        };
        let created = self.create_managed(spec, &new_name, domains, staging).await?;
        if let Some(old) = find(use_now) {
            self.publish(ProviderEvent::normal(
                owner.clone(),
                "ManagedCertificateIssuing",
                format!(
                    "{} changed to {}: issuing managed certificate {new_name}; the Load Balancer keeps certificate {} \
                     ({}) until it is issued",
                    a::HTTP_MANAGED_CERTIFICATE_DOMAINS,
                    domains.join(","),
                    old.name,
                    old.domain_names.join(",")
                ),
            ));
            self.resync_later(&spec.uid, owner);
        }
        Ok(Resolved { ids: vec![use_now.unwrap_or(created)], retire })
    }

    async fn create_managed(
        &self,
        spec: &LbSpec,
        name: &str,
        domains: &[String],
        staging: bool,
    ) -> Result<CertificateId, CatalogError> {
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
                let mut want = domains.to_vec();
                want.sort();
                found
                    .iter()
                    .find(|c| {
                        let mut have = c.domain_names.clone();
                        have.sort();
                        have == want
                    })
                    .map(|c| c.id)
                    .ok_or(CatalogError::Api { what: format!("creating managed certificate {name}"), source: e })
            }
            Err(e) if e.code() == Some(&ErrorCode::UniquenessError) => {
                // The list may be stale (the name was free in it): read it again next time.
                self.forget_certificates().await;
                Err(name_taken(name, &spec.uid))
            }
            Err(e) => Err(CatalogError::Api { what: format!("creating managed certificate {name}"), source: e }),
        }
    }
}

/// A managed certificate name held by a certificate not labelled for the Service `uid`.
fn name_taken(name: &str, uid: &str) -> CatalogError {
    CatalogError::Conflict(format!(
        "a certificate named {name} exists but does not carry the label {LABEL_SERVICE_UID}={uid} of this Service; set \
         {} to another name or delete that certificate",
        a::HTTP_MANAGED_CERTIFICATE_NAME
    ))
}

/// The Warning of a failed issuance: the domains, Hetzner's error, and what is kept.
fn issuance_failed(failed: &Certificate, kept: Option<&Certificate>) -> String {
    let error = failed
        .status
        .as_ref()
        .and_then(|s| s.error.as_ref())
        .map_or_else(|| "no error given".to_owned(), |e| format!("{}: {}", e.code.as_str(), e.message));
    let kept = match kept {
        Some(k) if k.id != failed.id => {
            format!("the Load Balancer keeps certificate {} ({})", k.name, k.domain_names.join(","))
        }
        _ => "there is no issued certificate to keep".to_owned(),
    };
    format!(
        "managed certificate {} for {} could not be issued: {error}; {kept}; set {} to domains whose DNS points to \
         the Load Balancer, or delete certificate {} to have it issued again",
        failed.name,
        failed.domain_names.join(","),
        a::HTTP_MANAGED_CERTIFICATE_DOMAINS,
        failed.name
    )
}
