//! `/certificates`.

use reqwest::Method;
use serde::Deserialize;

use super::common::{Created, push_filter, selector_from_labels};
use crate::client::{Client, Target};
use crate::error::Error;
use crate::models::{Action, Certificate, CertificateId, CertificateListParams, CreateCertificateRequest, Labels};
use crate::paging::Page;

/// Certificate endpoints.
#[derive(Debug, Clone, Copy)]
pub struct Certificates<'a>(pub(crate) &'a Client);

#[derive(Deserialize)]
struct One {
    certificate: Certificate,
}

#[derive(Deserialize)]
struct CreateAnswer {
    certificate: Certificate,
    #[serde(default)]
    action: Option<Action>,
}

fn filters(params: &CertificateListParams) -> Vec<(&'static str, String)> {
    let mut q = Vec::new();
    push_filter(&mut q, "name", &params.name);
    push_filter(&mut q, "label_selector", &params.label_selector);
    q
}

impl Certificates<'_> {
    /// `GET /certificates/{id}`.
    pub async fn get(&self, id: CertificateId) -> Result<Certificate, Error> {
        let one: One = self.0.json::<_, ()>(Method::GET, &Target::with_id("/certificates/{id}", id), &[], None).await?;
        Ok(one.certificate)
    }

    /// `GET /certificates` — one page.
    pub async fn list(
        &self,
        params: &CertificateListParams,
        page: u32,
        per_page: u32,
    ) -> Result<Page<Certificate>, Error> {
        self.0.page(&Target::fixed("/certificates"), "certificates", &filters(params), page, per_page).await
    }

    /// `GET /certificates` — every page.
    pub async fn list_all(&self, params: &CertificateListParams) -> Result<Vec<Certificate>, Error> {
        self.0.all(&Target::fixed("/certificates"), "certificates", &filters(params)).await
    }

    /// Every certificate carrying all of `labels` (see [`selector_from_labels`]).
    pub async fn list_by_labels(&self, labels: &Labels) -> Result<Vec<Certificate>, Error> {
        let params =
            CertificateListParams { label_selector: Some(selector_from_labels(labels)?), ..Default::default() };
        self.list_all(&params).await
    }

    /// `POST /certificates` (uploaded or managed). Managed certificates come with an action
    /// that finishes when the certificate is issued. Never repeated once it may have been
    /// applied: see [`Error::OutcomeUnknown`]. The private key never appears in logs.
    pub async fn create(&self, req: &CreateCertificateRequest) -> Result<Created<Certificate>, Error> {
        let a: CreateAnswer = self.0.json(Method::POST, &Target::create("/certificates"), &[], Some(req)).await?;
        Ok(Created { resource: a.certificate, action: a.action, next_actions: Vec::new() })
    }

    /// `DELETE /certificates/{id}` (also succeeds if a retry found it already gone).
    pub async fn delete(&self, id: CertificateId) -> Result<(), Error> {
        self.0.delete(&Target::with_id("/certificates/{id}", id)).await?;
        Ok(())
    }
}
