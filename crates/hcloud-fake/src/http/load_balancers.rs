//! `/v1/load_balancers` handlers.

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
use crate::state::LoadBalancerFilter;
use crate::wire::request::{
    AlgorithmRequest, AttachLoadBalancerToNetworkRequest, ChangeDnsPtrRequest, ChangeLoadBalancerTypeRequest,
    ChangeProtectionRequest, CreateLoadBalancerRequest, DeleteServiceRequest, DetachFromNetworkRequest, ServiceRequest,
    TargetRequest, UpdateRequest, UpdateServiceRequest,
};

/// `GET /load_balancers`.
pub(crate) async fn list(Scoped(h): Scoped, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    let q = QueryParams::parse(q.as_deref());
    let page = PageRequest::from_query(&q)?;
    let filter = LoadBalancerFilter {
        name: q.get("name").map(str::to_owned),
        label_selector: q.label_selector()?,
        sort: SortRequest::from_query(&q, ID_NAME_CREATED)?,
    };
    let (lbs, meta) = h.with_state(|s| s.list_load_balancers(&filter, page));
    Ok(list_body("load_balancers", &lbs, &meta))
}

/// `GET /load_balancers/{id}`.
pub(crate) async fn get(Scoped(h): Scoped, Path(id): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let lb = h.with_state(|s| s.load_balancer(id)).ok_or_else(|| ApiError::not_found("load_balancer", id))?;
    Ok(single_body(StatusCode::OK, "load_balancer", &lb))
}

/// `POST /load_balancers`.
pub(crate) async fn create(
    Scoped(h): Scoped,
    ApiJson(req): ApiJson<CreateLoadBalancerRequest>,
) -> Result<Response, ApiError> {
    let body = h.with_state(|s| -> Result<_, ApiError> {
        let (id, action) = s.create_load_balancer(&req)?;
        Ok(json!({"load_balancer": s.load_balancer(id), "action": s.action(action)}))
    })?;
    Ok(json(StatusCode::CREATED, body))
}

/// `PUT /load_balancers/{id}`.
pub(crate) async fn update(
    Scoped(h): Scoped,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<UpdateRequest>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let lb = h.with_state(|s| -> Result<_, ApiError> {
        s.update_load_balancer(id, &req)?;
        Ok(s.load_balancer(id))
    })?;
    Ok(single_body(StatusCode::OK, "load_balancer", &lb))
}

/// `DELETE /load_balancers/{id}`: `200` with the `delete_load_balancer` action, as the API
/// answers today.
pub(crate) async fn delete(Scoped(h): Scoped, Path(id): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let action = h.with_state(|s| -> Result<_, ApiError> {
        let a = s.delete_load_balancer(id)?;
        Ok(s.action(a))
    })?;
    Ok(json(StatusCode::OK, json!({"action": action})))
}

/// `POST /load_balancers/{id}/actions/{command}`.
pub(crate) async fn action(
    Scoped(h): Scoped,
    Path((id, command)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let action = h.with_state(|s| -> Result<_, ApiError> {
        s.lb_record(id)?;
        let a = match command.as_str() {
            "add_service" => s.add_service(id, &parse_body::<ServiceRequest>(&body)?)?,
            "update_service" => s.update_service(id, &parse_body::<UpdateServiceRequest>(&body)?)?,
            "delete_service" => {
                let req: DeleteServiceRequest = parse_body(&body)?;
                s.delete_service(id, req.listen_port)?
            }
            "add_target" => s.add_target(id, &parse_body::<TargetRequest>(&body)?)?,
            "remove_target" => s.remove_target(id, &parse_body::<TargetRequest>(&body)?)?,
            "attach_to_network" => s.attach_lb(id, &parse_body::<AttachLoadBalancerToNetworkRequest>(&body)?)?,
            "detach_from_network" => s.detach_lb(id, &parse_body::<DetachFromNetworkRequest>(&body)?)?,
            "change_type" => {
                let req: ChangeLoadBalancerTypeRequest = parse_body(&body)?;
                s.change_lb_type(id, &req.load_balancer_type)?
            }
            "change_algorithm" => {
                let req: AlgorithmRequest = parse_body(&body)?;
                s.change_algorithm(id, &req.kind)?
            }
            "enable_public_interface" => s.set_public_interface(id, true)?,
            "disable_public_interface" => s.set_public_interface(id, false)?,
            "change_dns_ptr" => s.change_lb_dns_ptr(id, &parse_body::<ChangeDnsPtrRequest>(&body)?)?,
            "change_protection" => {
                let req: ChangeProtectionRequest = parse_body(&body)?;
                s.change_lb_protection(id, req.delete)?
            }
            other => {
                return Err(ApiError::new(
                    "not_found",
                    format!("load balancer action '{other}' is not supported by the fake"),
                ));
            }
        };
        Ok(s.action(a))
    })?;
    Ok(json(StatusCode::CREATED, json!({"action": action})))
}

/// `GET /load_balancers/{id}/actions/{action_id}`.
pub(crate) async fn get_action(
    Scoped(h): Scoped,
    Path((id, action_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    super::actions::resource_action(&h, ResourceKind::LoadBalancer, &id, &action_id)
}
