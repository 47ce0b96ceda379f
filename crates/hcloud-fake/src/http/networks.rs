//! `/v1/networks` handlers.

use axum::extract::{Path, RawQuery};
use axum::response::Response;
use http::StatusCode;
use serde_json::json;

use super::extract::{ApiJson, Scoped, json, list_body, no_content, parse_body, parse_id, single_body};
use crate::control::ResourceKind;
use crate::error::ApiError;
use crate::pagination::PageRequest;
use crate::query::QueryParams;
use crate::sort::{ID_NAME_CREATED, SortRequest};
use crate::state::NetworkFilter;
use crate::wire::Route;
use crate::wire::request::{
    ChangeProtectionRequest, CreateNetworkRequest, IpRangeRequest, SubnetRequest, UpdateNetworkRequest,
};

/// `GET /networks`.
pub(crate) async fn list(Scoped(h): Scoped, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    let q = QueryParams::parse(q.as_deref());
    let page = PageRequest::from_query(&q)?;
    let filter = NetworkFilter {
        name: q.get("name").map(str::to_owned),
        label_selector: q.label_selector()?,
        sort: SortRequest::from_query(&q, ID_NAME_CREATED)?,
    };
    let (networks, meta) = h.with_state(|s| s.list_networks(&filter, page));
    Ok(list_body("networks", &networks, &meta))
}

/// `GET /networks/{id}`.
pub(crate) async fn get(Scoped(h): Scoped, Path(id): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let network = h.with_state(|s| s.network(id)).ok_or_else(|| ApiError::not_found("network", id))?;
    Ok(single_body(StatusCode::OK, "network", &network))
}

/// `POST /networks`.
pub(crate) async fn create(
    Scoped(h): Scoped,
    ApiJson(req): ApiJson<CreateNetworkRequest>,
) -> Result<Response, ApiError> {
    let network = h.with_state(|s| -> Result<_, ApiError> {
        let id = s.create_network(&req)?;
        Ok(s.network(id))
    })?;
    Ok(json(StatusCode::CREATED, json!({"network": network})))
}

/// `PUT /networks/{id}`.
pub(crate) async fn update(
    Scoped(h): Scoped,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<UpdateNetworkRequest>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let network = h.with_state(|s| -> Result<_, ApiError> {
        s.update_network(id, &req)?;
        Ok(s.network(id))
    })?;
    Ok(single_body(StatusCode::OK, "network", &network))
}

/// `DELETE /networks/{id}`.
pub(crate) async fn delete(Scoped(h): Scoped, Path(id): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    h.with_state(|s| s.delete_network(id))?;
    Ok(no_content())
}

/// `POST /networks/{id}/actions/{command}`.
pub(crate) async fn action(
    Scoped(h): Scoped,
    Path((id, command)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let action = h.with_state(|s| -> Result<_, ApiError> {
        s.network_record(id)?;
        let a = match command.as_str() {
            "add_route" => {
                let req: Route = parse_body(&body)?;
                s.add_route(id, &req)?
            }
            "delete_route" => {
                let req: Route = parse_body(&body)?;
                s.delete_route(id, &req)?
            }
            "add_subnet" => s.add_subnet(id, &parse_body::<SubnetRequest>(&body)?)?,
            "delete_subnet" => s.delete_subnet(id, &parse_body::<IpRangeRequest>(&body)?.ip_range)?,
            "change_ip_range" => s.change_ip_range(id, &parse_body::<IpRangeRequest>(&body)?.ip_range)?,
            "change_protection" => {
                s.change_network_protection(id, parse_body::<ChangeProtectionRequest>(&body)?.delete)?
            }
            other => {
                return Err(ApiError::new(
                    "not_found",
                    format!("network action '{other}' is not supported by the fake"),
                ));
            }
        };
        Ok(s.action(a))
    })?;
    Ok(json(StatusCode::CREATED, json!({"action": action})))
}

/// `GET /networks/{id}/actions/{action_id}`.
pub(crate) async fn get_action(
    Scoped(h): Scoped,
    Path((id, action_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    super::actions::resource_action(&h, ResourceKind::Network, &id, &action_id)
}
