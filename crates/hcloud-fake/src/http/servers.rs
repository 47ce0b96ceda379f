//! `/v1/servers` handlers.

use axum::extract::{Path, RawQuery};
use axum::response::Response;
use http::StatusCode;
use serde_json::json;

use super::extract::{ApiJson, Scoped, json, list_body, parse_body, parse_id, single_body};
use crate::control::ResourceKind;
use crate::error::ApiError;
use crate::pagination::PageRequest;
use crate::query::QueryParams;
use crate::sort::{ID_NAME_CREATED, SortRequest};
use crate::state::ServerFilter;
use crate::wire::ServerStatus;
use crate::wire::request::{
    AttachServerToNetworkRequest, ChangeDnsPtrRequest, ChangeServerProtectionRequest, CreateServerRequest,
    DetachFromNetworkRequest, UpdateRequest,
};

/// `GET /servers`.
pub(crate) async fn list(Scoped(h): Scoped, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    let q = QueryParams::parse(q.as_deref());
    let page = PageRequest::from_query(&q)?;
    let status = q
        .get_all("status")
        .into_iter()
        .map(|s| {
            ServerStatus::parse(s).ok_or_else(|| ApiError::invalid_input("status", format!("unknown status '{s}'")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let filter = ServerFilter {
        name: q.get("name").map(str::to_owned),
        label_selector: q.label_selector()?,
        status,
        sort: SortRequest::from_query(&q, ID_NAME_CREATED)?,
    };
    let (servers, meta) = h.with_state(|s| s.list_servers(&filter, page));
    Ok(list_body("servers", &servers, &meta))
}

/// `GET /servers/{id}`.
pub(crate) async fn get(Scoped(h): Scoped, Path(id): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let server = h.with_state(|s| s.server(id)).ok_or_else(|| ApiError::not_found("server", id))?;
    Ok(single_body(StatusCode::OK, "server", &server))
}

/// `POST /servers`.
pub(crate) async fn create(
    Scoped(h): Scoped,
    ApiJson(req): ApiJson<CreateServerRequest>,
) -> Result<Response, ApiError> {
    let body = h.with_state(|s| -> Result<_, ApiError> {
        let (id, action, root_password) = s.create_server(req)?;
        Ok(json!({
            "server": s.server(id),
            "action": s.action(action),
            "next_actions": [],
            "root_password": root_password,
        }))
    })?;
    Ok(json(StatusCode::CREATED, body))
}

/// `PUT /servers/{id}`.
pub(crate) async fn update(
    Scoped(h): Scoped,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<UpdateRequest>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let server = h.with_state(|s| -> Result<_, ApiError> {
        s.update_server(id, &req)?;
        Ok(s.server(id))
    })?;
    Ok(single_body(StatusCode::OK, "server", &server))
}

/// `DELETE /servers/{id}`.
pub(crate) async fn delete(Scoped(h): Scoped, Path(id): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let action = h.with_state(|s| -> Result<_, ApiError> {
        let a = s.delete_server(id)?;
        Ok(s.action(a))
    })?;
    Ok(json(StatusCode::OK, json!({"action": action})))
}

/// `POST /servers/{id}/actions/{command}`.
pub(crate) async fn action(
    Scoped(h): Scoped,
    Path((id, command)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let action = h.with_state(|s| -> Result<_, ApiError> {
        s.server_record(id)?;
        let a = match command.as_str() {
            "poweron" => s.server_power(id, "start_server", Some(ServerStatus::Running))?,
            "poweroff" => s.server_power(id, "stop_server", Some(ServerStatus::Off))?,
            "shutdown" => s.server_power(id, "shutdown_server", Some(ServerStatus::Off))?,
            "reset" => s.server_power(id, "reset_server", Some(ServerStatus::Running))?,
            "reboot" => s.server_power(id, "reboot_server", None)?,
            "change_dns_ptr" => s.change_server_dns_ptr(id, &parse_body::<ChangeDnsPtrRequest>(&body)?)?,
            "change_protection" => {
                s.change_server_protection(id, &parse_body::<ChangeServerProtectionRequest>(&body)?)?
            }
            "attach_to_network" => {
                let req: AttachServerToNetworkRequest = parse_body(&body)?;
                s.attach_server(id, &req)?
            }
            "detach_from_network" => {
                let req: DetachFromNetworkRequest = parse_body(&body)?;
                s.detach_server(id, &req)?
            }
            other => {
                return Err(ApiError::new(
                    "not_found",
                    format!("server action '{other}' is not supported by the fake"),
                ));
            }
        };
        Ok(s.action(a))
    })?;
    Ok(json(StatusCode::CREATED, json!({"action": action})))
}

/// `GET /servers/{id}/actions/{action_id}`.
pub(crate) async fn get_action(
    Scoped(h): Scoped,
    Path((id, action_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    super::actions::resource_action(&h, ResourceKind::Server, &id, &action_id)
}
