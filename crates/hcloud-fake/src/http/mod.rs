//! HTTP layer: routing of `/v1` (the Hetzner API subset), `/robot` (the Robot webservice
//! subset, see [`crate::robot`]) and `/_fake` (control), the
//! request pipeline middleware, and JSON extraction.

mod actions;
mod catalog;
mod certificates;
pub(crate) mod conn;
pub mod control;
pub(crate) mod extract;
mod fault_answer;
mod images;
mod load_balancers;
mod networks;
pub(crate) mod pipeline;
mod primary_ips;
mod respond;
mod robot;
mod servers;

use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::control::ResourceKind;
use crate::error::ApiError;
use crate::handle::FakeHandle;

async fn not_found() -> Response {
    ApiError::new("not_found", "no such endpoint").into_response()
}

async fn method_not_allowed() -> Response {
    ApiError::new("method_not_allowed", "method not allowed for this endpoint").into_response()
}

macro_rules! kind_action_routes {
    ($kind:expr) => {
        get(|extract::Scoped(h): extract::Scoped, axum::extract::Path(id): axum::extract::Path<String>| async move {
            actions::kind_action(&h, $kind, &id)
        })
    };
}

macro_rules! kind_actions_route {
    ($kind:expr) => {
        get(|extract::Scoped(h): extract::Scoped, axum::extract::RawQuery(q): axum::extract::RawQuery| async move {
            actions::kind_actions(&h, $kind, q.as_deref())
        })
    };
}

macro_rules! resource_actions_route {
    ($kind:expr) => {
        get(
            |extract::Scoped(h): extract::Scoped,
             axum::extract::Path(id): axum::extract::Path<String>,
             axum::extract::RawQuery(q): axum::extract::RawQuery| async move {
                actions::resource_actions(&h, $kind, &id, q.as_deref())
            },
        )
    };
}

fn v1_routes() -> Router<FakeHandle> {
    Router::new()
        .route("/actions", get(actions::list))
        .route("/actions/{id}", get(actions::get))
        .route("/servers", get(servers::list).post(servers::create))
        .route("/servers/actions", kind_actions_route!(ResourceKind::Server))
        .route("/servers/actions/{id}", kind_action_routes!(ResourceKind::Server))
        .route("/servers/{id}", get(servers::get).put(servers::update).delete(servers::delete))
        .route("/servers/{id}/actions", resource_actions_route!(ResourceKind::Server))
        .route("/servers/{id}/actions/{command}", get(servers::get_action).post(servers::action))
        .route("/networks", get(networks::list).post(networks::create))
        .route("/networks/actions/{id}", kind_action_routes!(ResourceKind::Network))
        .route("/networks/{id}", get(networks::get).put(networks::update).delete(networks::delete))
        .route("/networks/{id}/actions", resource_actions_route!(ResourceKind::Network))
        .route("/networks/{id}/actions/{command}", get(networks::get_action).post(networks::action))
        .route("/load_balancers", get(load_balancers::list).post(load_balancers::create))
        .route("/load_balancers/actions/{id}", kind_action_routes!(ResourceKind::LoadBalancer))
        .route(
            "/load_balancers/{id}",
            get(load_balancers::get).put(load_balancers::update).delete(load_balancers::delete),
        )
        .route("/load_balancers/{id}/actions", resource_actions_route!(ResourceKind::LoadBalancer))
        .route("/load_balancers/{id}/actions/{command}", get(load_balancers::get_action).post(load_balancers::action))
        .route("/certificates", get(certificates::list).post(certificates::create))
        .route("/certificates/actions/{id}", kind_action_routes!(ResourceKind::Certificate))
        .route("/certificates/{id}", get(certificates::get).put(certificates::update).delete(certificates::delete))
        .route("/certificates/{id}/actions", resource_actions_route!(ResourceKind::Certificate))
        .route("/certificates/{id}/actions/{action_id}", get(certificates::get_action))
        .route("/datacenters", get(catalog::datacenters_gone))
        .route("/datacenters/{id}", get(catalog::datacenters_gone))
        .route("/primary_ips", get(primary_ips::list).post(primary_ips::create))
        .route("/primary_ips/actions", kind_actions_route!(ResourceKind::PrimaryIp))
        .route("/primary_ips/actions/{id}", kind_action_routes!(ResourceKind::PrimaryIp))
        .route("/primary_ips/{id}", get(primary_ips::get).put(primary_ips::update).delete(primary_ips::delete))
        .route("/primary_ips/{id}/actions", resource_actions_route!(ResourceKind::PrimaryIp))
        .route("/primary_ips/{id}/actions/{command}", get(primary_ips::get_action).post(primary_ips::action))
        .route("/images", get(images::list))
        .route("/images/{id}", get(images::get))
        .route("/pricing", get(catalog::pricing))
        .route("/locations", get(catalog::list_locations))
        .route("/locations/{id}", get(catalog::get_location))
        .route("/server_types", get(catalog::list_server_types))
        .route("/server_types/{id}", get(catalog::get_server_type))
        .route("/load_balancer_types", get(catalog::list_load_balancer_types))
        .route("/load_balancer_types/{id}", get(catalog::get_load_balancer_type))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
}

impl FakeHandle {
    /// The axum router serving `/v1` and `/_fake` for this fake (serve it yourself, or use
    /// [`crate::FakeServer`]).
    pub fn router(&self) -> Router {
        router(self.clone())
    }
}

/// The full router of a fake: `/v1/...`, `/_fake/...`, wrapped in the request pipeline.
pub fn router(handle: FakeHandle) -> Router {
    Router::new()
        .nest("/v1", v1_routes())
        .nest("/robot", robot::routes(handle.clone()))
        .nest("/_fake", control::routes().fallback(not_found).method_not_allowed_fallback(method_not_allowed))
        .fallback(not_found)
        .layer(from_fn_with_state(handle.clone(), pipeline::pipeline))
        .with_state(handle)
}
