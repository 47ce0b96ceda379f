//! Catalogue handlers: `/v1/locations`, `/v1/server_types`, `/v1/load_balancer_types`,
//! `/v1/pricing` (images: `images.rs`).

use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use http::StatusCode;
use serde::Serialize;

use super::extract::{list_body, parse_id, single_body};
use crate::catalog::catalog;
use crate::error::ApiError;
use crate::handle::FakeHandle;
use crate::pagination::PageRequest;
use crate::query::QueryParams;
use crate::sort::{SortRequest, SortValue};

/// A catalogue list filtered by `name` and paged; `sort` is read when the endpoint takes it
/// (`sortable`: by `id` and `name`; the type lists take no `sort`).
fn list_of<T: Serialize>(
    key: &str,
    items: &[T],
    id_and_name: impl Fn(&T) -> (u64, &str),
    sortable: bool,
    raw: Option<&str>,
) -> Result<Response, ApiError> {
    let q = QueryParams::parse(raw);
    let page = PageRequest::from_query(&q)?;
    let sort = if sortable { SortRequest::from_query(&q, &["id", "name"])? } else { SortRequest::default() };
    let name = q.get("name");
    let mut matching: Vec<&T> = items.iter().filter(|i| name.is_none_or(|n| id_and_name(i).1 == n)).collect();
    sort.apply(&mut matching, |i, field| {
        let (id, name) = id_and_name(i);
        if field == "name" { SortValue::Text(Some(name)) } else { SortValue::id(id) }
    });
    let (slice, meta) = page.apply(&matching);
    Ok(list_body(key, slice, &meta))
}

/// `GET /datacenters` and `GET /datacenters/{id}`: removed from the API on 2026-10-01
/// (`410 Gone`, `deprecated_api_endpoint`).
pub(crate) async fn datacenters_gone() -> ApiError {
    let mut e = ApiError::with_status(
        StatusCode::GONE,
        "deprecated_api_endpoint",
        "the datacenters endpoints were removed on 2026-10-01; use locations",
    );
    e.details = serde_json::json!({
        "announcement": "https://docs.hetzner.cloud/changelog#2026-06-02-datacenters-deprecated"
    });
    e
}

/// `GET /pricing`.
pub(crate) async fn pricing() -> Response {
    single_body(StatusCode::OK, "pricing", &catalog().pricing)
}

/// `GET /locations`.
pub(crate) async fn list_locations(State(_): State<FakeHandle>, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    list_of("locations", &catalog().locations, |l| (l.id, &l.name), true, q.as_deref())
}

/// `GET /locations/{id}`.
pub(crate) async fn get_location(Path(id): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let l = catalog().location_by_id(id).ok_or_else(|| ApiError::not_found("location", id))?;
    Ok(single_body(StatusCode::OK, "location", &l))
}

/// `GET /server_types`.
pub(crate) async fn list_server_types(
    State(_): State<FakeHandle>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    list_of("server_types", &catalog().server_types, |t| (t.id, &t.name), false, q.as_deref())
}

/// `GET /server_types/{id}`.
pub(crate) async fn get_server_type(Path(id): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let t = catalog().server_type_by_id(id).ok_or_else(|| ApiError::not_found("server_type", id))?;
    Ok(single_body(StatusCode::OK, "server_type", &t))
}

/// `GET /load_balancer_types` (with the deprecations a test set).
pub(crate) async fn list_load_balancer_types(
    State(h): State<FakeHandle>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    let types = h.with_state_unsettled(|s| s.load_balancer_types());
    list_of("load_balancer_types", &types, |t| (t.id, &t.name), false, q.as_deref())
}

/// `GET /load_balancer_types/{id}` (with the deprecation a test set).
pub(crate) async fn get_load_balancer_type(
    State(h): State<FakeHandle>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let t = catalog().load_balancer_type_by_id(id).ok_or_else(|| ApiError::not_found("load_balancer_type", id))?;
    let t = h.with_state_unsettled(|s| s.load_balancer_type_view(t));
    Ok(single_body(StatusCode::OK, "load_balancer_type", &t))
}
