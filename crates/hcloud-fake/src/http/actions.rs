//! `/v1/actions` and the per-resource action lookups.

use axum::extract::{Path, RawQuery};
use axum::response::Response;
use http::StatusCode;

use super::extract::{Scoped, list_body, parse_id, single_body};
use crate::control::ResourceKind;
use crate::error::ApiError;
use crate::handle::FakeHandle;
use crate::pagination::PageRequest;
use crate::query::QueryParams;
use crate::sort::SortRequest;
use crate::state::{ACTION_SORT_FIELDS, ActionFilter};
use crate::wire::{Action, ActionStatus};

/// `GET /actions?id=1&id=2`: the listed actions that exist, by id, as `{"actions": [..]}`
/// (no `meta`). At least one `id` is required: listing every action of a project was removed
/// from the API on 2025-01-30. `page`/`per_page` are ignored.
pub(crate) async fn list(Scoped(h): Scoped, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    let q = QueryParams::parse(q.as_deref());
    let mut ids = q.ids("id")?;
    if ids.is_empty() {
        return Err(ApiError::invalid_input(
            "id",
            "at least one id is required (listing all actions was removed from the API on 2025-01-30)",
        ));
    }
    ids.sort_unstable();
    ids.dedup();
    let actions: Vec<Action> = h.with_state(|s| ids.iter().filter_map(|id| s.action(*id)).collect());
    Ok(single_body(StatusCode::OK, "actions", &actions))
}

/// `GET /actions/{id}`.
pub(crate) async fn get(Scoped(h): Scoped, Path(id): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let action = h.with_state(|s| s.action(id)).ok_or_else(|| ApiError::not_found("action", id))?;
    Ok(single_body(StatusCode::OK, "action", &action))
}

/// `GET /{resource}/{id}/actions/{action_id}`: the action must involve that resource.
pub(crate) fn resource_action(
    h: &FakeHandle,
    kind: ResourceKind,
    id: &str,
    action_id: &str,
) -> Result<Response, ApiError> {
    let id = parse_id(id)?;
    let action_id = parse_id(action_id)?;
    let action = h
        .with_state(|s| s.action(action_id))
        .filter(|a| a.resources.iter().any(|r| r.kind == kind.as_str() && r.id == id))
        .ok_or_else(|| ApiError::not_found("action", action_id))?;
    Ok(single_body(StatusCode::OK, "action", &action))
}

/// `GET /{resource}/actions/{id}`: the action must involve a resource of that kind.
pub(crate) fn kind_action(h: &FakeHandle, kind: ResourceKind, action_id: &str) -> Result<Response, ApiError> {
    let action_id = parse_id(action_id)?;
    let action = h
        .with_state(|s| s.action(action_id))
        .filter(|a| a.resources.iter().any(|r| r.kind == kind.as_str()))
        .ok_or_else(|| ApiError::not_found("action", action_id))?;
    Ok(single_body(StatusCode::OK, "action", &action))
}

/// `GET /{resource}/{id}/actions`: the resource's actions, paged, by id.
pub(crate) fn resource_actions(
    h: &FakeHandle,
    kind: ResourceKind,
    id: &str,
    q: Option<&str>,
) -> Result<Response, ApiError> {
    let id = parse_id(id)?;
    let q = QueryParams::parse(q);
    let page = PageRequest::from_query(&q)?;
    let actions = h.with_state(|s| -> Result<Vec<Action>, ApiError> {
        let exists = match kind {
            ResourceKind::Server => s.servers.contains_key(&id),
            ResourceKind::Network => s.networks.contains_key(&id),
            ResourceKind::LoadBalancer => s.load_balancers.contains_key(&id),
            ResourceKind::Certificate => s.certificates.contains_key(&id),
            ResourceKind::PrimaryIp => s.primary_ip(id).is_some(),
        };
        if !exists {
            return Err(ApiError::not_found(kind.as_str(), id));
        }
        Ok(s.actions_of(kind, Some(id)))
    })?;
    let (slice, meta) = page.apply(&actions);
    Ok(list_body("actions", slice, &meta))
}

/// `GET /{resource}/actions` (`/servers/actions`, `/primary_ips/actions`): every action
/// involving a resource of that kind, with the `id` and `status` filters (repeatable), `sort`
/// (`id`, `command`, `status`, `started`, `finished`, each `:asc` or `:desc`) and pagination.
pub(crate) fn kind_actions(h: &FakeHandle, kind: ResourceKind, q: Option<&str>) -> Result<Response, ApiError> {
    let q = QueryParams::parse(q);
    let page = PageRequest::from_query(&q)?;
    let statuses = q
        .get_all("status")
        .into_iter()
        .flat_map(|v| v.split(','))
        .map(|v| match v.trim() {
            "running" => Ok(ActionStatus::Running),
            "success" => Ok(ActionStatus::Success),
            "error" => Ok(ActionStatus::Error),
            other => Err(ApiError::invalid_input("status", format!("unknown action status '{other}'"))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let filter = ActionFilter { ids: q.ids("id")?, statuses, sort: SortRequest::from_query(&q, ACTION_SORT_FIELDS)? };
    let (actions, meta) = h.with_state(|s| s.list_kind_actions(kind, &filter, page));
    Ok(list_body("actions", &actions, &meta))
}
