//! `/v1/certificates` handlers.

use axum::extract::{Path, RawQuery};
use axum::response::Response;
use http::StatusCode;
use serde_json::json;

use super::extract::{ApiJson, Scoped, json, list_body, no_content, parse_id, single_body};
use crate::control::ResourceKind;
use crate::error::ApiError;
use crate::pagination::PageRequest;
use crate::query::QueryParams;
use crate::sort::{ID_NAME_CREATED, SortRequest};
use crate::state::CertificateFilter;
use crate::wire::request::{CreateCertificateRequest, UpdateRequest};

/// `GET /certificates`.
pub(crate) async fn list(Scoped(h): Scoped, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    let q = QueryParams::parse(q.as_deref());
    let page = PageRequest::from_query(&q)?;
    let types: Vec<String> = q.get_all("type").into_iter().map(str::to_owned).collect();
    if let Some(bad) = types.iter().find(|t| !matches!(t.as_str(), "managed" | "uploaded")) {
        return Err(ApiError::invalid_input("type", format!("unknown certificate type '{bad}'")));
    }
    let filter = CertificateFilter {
        name: q.get("name").map(str::to_owned),
        label_selector: q.label_selector()?,
        types,
        sort: SortRequest::from_query(&q, ID_NAME_CREATED)?,
    };
    let (certificates, meta) = h.with_state(|s| s.list_certificates(&filter, page));
    Ok(list_body("certificates", &certificates, &meta))
}

/// `GET /certificates/{id}`.
pub(crate) async fn get(Scoped(h): Scoped, Path(id): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let certificate = h.with_state(|s| s.certificate(id)).ok_or_else(|| ApiError::not_found("certificate", id))?;
    Ok(single_body(StatusCode::OK, "certificate", &certificate))
}

/// `POST /certificates`: `action` is `null` for uploaded certificates.
pub(crate) async fn create(
    Scoped(h): Scoped,
    ApiJson(req): ApiJson<CreateCertificateRequest>,
) -> Result<Response, ApiError> {
    let body = h.with_state(|s| -> Result<_, ApiError> {
        let (id, action) = s.create_certificate(&req)?;
        Ok(json!({
            "certificate": s.certificate(id),
            "action": action.and_then(|a| s.action(a)),
        }))
    })?;
    Ok(json(StatusCode::CREATED, body))
}

/// `PUT /certificates/{id}`.
pub(crate) async fn update(
    Scoped(h): Scoped,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<UpdateRequest>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let certificate = h.with_state(|s| -> Result<_, ApiError> {
        s.update_certificate(id, &req)?;
        Ok(s.certificate(id))
    })?;
    Ok(single_body(StatusCode::OK, "certificate", &certificate))
}

/// `DELETE /certificates/{id}`.
pub(crate) async fn delete(Scoped(h): Scoped, Path(id): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    h.with_state(|s| s.delete_certificate(id))?;
    Ok(no_content())
}

/// `GET /certificates/{id}/actions/{action_id}`.
pub(crate) async fn get_action(
    Scoped(h): Scoped,
    Path((id, action_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    super::actions::resource_action(&h, ResourceKind::Certificate, &id, &action_id)
}
