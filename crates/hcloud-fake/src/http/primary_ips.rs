//! `/v1/primary_ips` handlers (see `state/primary_ips.rs` for what is modelled).

use axum::extract::{Path, RawQuery};
use axum::response::Response;
use http::StatusCode;
use serde_json::json;

use super::extract::{ApiJson, Scoped, json, list_body, no_content, parse_body, parse_id, single_body};
use crate::control::ResourceKind;
use crate::error::ApiError;
use crate::pagination::PageRequest;
use crate::query::QueryParams;
use crate::sort::SortRequest;
use crate::state::PrimaryIpFilter;
use crate::wire::request::{AssignPrimaryIpRequest, CreatePrimaryIpRequest, UpdatePrimaryIpRequest};

/// `GET /primary_ips`.
pub(crate) async fn list(Scoped(h): Scoped, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    let q = QueryParams::parse(q.as_deref());
    let page = PageRequest::from_query(&q)?;
    let filter = PrimaryIpFilter {
        name: q.get("name").map(str::to_owned),
        label_selector: q.label_selector()?,
        ip: q.get("ip").map(str::to_owned),
        sort: SortRequest::from_query(&q, &["id", "created"])?,
    };
    let (ips, meta) = h.with_state(|s| s.list_primary_ips(&filter, page));
    Ok(list_body("primary_ips", &ips, &meta))
}

/// `GET /primary_ips/{id}`.
pub(crate) async fn get(Scoped(h): Scoped, Path(id): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let ip = h.with_state(|s| s.primary_ip(id)).ok_or_else(|| ApiError::not_found("primary_ip", id))?;
    Ok(single_body(StatusCode::OK, "primary_ip", &ip))
}

/// `POST /primary_ips`: unassigned ones only; no action (the key is absent, as it is
/// optional in the response).
pub(crate) async fn create(
    Scoped(h): Scoped,
    ApiJson(req): ApiJson<CreatePrimaryIpRequest>,
) -> Result<Response, ApiError> {
    let ip = h.with_state(|s| -> Result<_, ApiError> {
        let id = s.create_primary_ip(&req)?;
        Ok(s.primary_ip(id))
    })?;
    Ok(json(StatusCode::CREATED, json!({"primary_ip": ip})))
}

/// `PUT /primary_ips/{id}`.
pub(crate) async fn update(
    Scoped(h): Scoped,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<UpdatePrimaryIpRequest>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let ip = h.with_state(|s| -> Result<_, ApiError> {
        s.update_primary_ip(id, &req)?;
        Ok(s.primary_ip(id))
    })?;
    Ok(single_body(StatusCode::OK, "primary_ip", &ip))
}

/// `DELETE /primary_ips/{id}`.
pub(crate) async fn delete(Scoped(h): Scoped, Path(id): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    h.with_state(|s| s.delete_primary_ip(id))?;
    Ok(no_content())
}

/// `POST /primary_ips/{id}/actions/{command}`: `assign` and `unassign` (see
/// `state/primary_ip_actions.rs`).
pub(crate) async fn action(
    Scoped(h): Scoped,
    Path((id, command)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let action = h.with_state(|s| -> Result<_, ApiError> {
        let a = match command.as_str() {
            "assign" => s.assign_primary_ip(id, &parse_body::<AssignPrimaryIpRequest>(&body)?)?,
            "unassign" => s.unassign_primary_ip(id)?,
            other => {
                return Err(ApiError::new(
                    "not_found",
                    format!("primary IP action '{other}' is not supported by the fake"),
                ));
            }
        };
        Ok(s.action(a))
    })?;
    Ok(json(StatusCode::CREATED, json!({"action": action})))
}

/// `GET /primary_ips/{id}/actions/{action_id}`.
pub(crate) async fn get_action(
    Scoped(h): Scoped,
    Path((id, action_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    super::actions::resource_action(&h, ResourceKind::PrimaryIp, &id, &action_id)
}
