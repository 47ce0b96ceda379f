//! HTTP form of the control surface, under `/_fake` (JSON in and out; not authenticated,
//! rate limited or counted). Errors use the API's error envelope.
//!
//! | method | path | body | answer |
//! |---|---|---|---|
//! | GET | `/_fake/state` | – | [`StateSnapshot`](crate::control::StateSnapshot) |
//! | POST | `/_fake/seed` | [`Seed`] | [`SeedResult`](crate::control::SeedResult) |
//! | POST | `/_fake/seed/networks` | [`SeedNetwork`] | `{"id": u64}` |
//! | POST | `/_fake/seed/servers` | [`SeedServer`] | `{"id": u64}` |
//! | POST | `/_fake/seed/servers/batch` | [`SeedServerBatch`] | `{"ids": [u64]}` |
//! | POST | `/_fake/seed/load_balancers` | [`SeedLoadBalancer`] | `{"id": u64}` |
//! | POST | `/_fake/seed/certificates` | [`SeedCertificate`] | `{"id": u64}` |
//! | PATCH | `/_fake/servers/{id}` | [`ServerPatch`] `{name?, status?, labels?, public_ipv6?: "next"\|"remove"\|{"net"}}` | 204 |
//! | DELETE | `/_fake/servers/{id}` | – | 204 (instant removal) |
//! | PUT | `/_fake/load_balancer_types/{id_or_name}/deprecation` | [`DeprecationInfo`] `{announced, unavailable_after}` (RFC 3339) | 204 (served from now on; past `unavailable_after` the type cannot be ordered) |
//! | DELETE | `/_fake/load_balancer_types/{id_or_name}/deprecation` | – | 204 (a current type) |
//! | PUT | `/_fake/load_balancers/{id}/target_health` | [`TargetHealthOverride`] `{server? \| ip?, listen_port?, status?}` | 204 (wins over the data plane's checks, for the API and for forwarding) |
//! | GET | `/_fake/data_plane` | – | [`DataPlaneStatus`](crate::control::DataPlaneStatus) `{enabled, running, addresses?, proxy_protocol?, listeners, checks}` |
//! | GET | `/_fake/data_plane/listeners` | – | `[DataPlaneListener]` (address, `listening`\|`bind_failed`, error, connection counts) |
//! | GET | `/_fake/data_plane/checks` | – | `[DataPlaneCheck]` (per service and target: status found by the checks, last error, open connections) |
//! | GET | `/_fake/faults` | – | `[ActiveFault]` |
//! | POST | `/_fake/faults` | [`FaultRule`] `{method?, path, times?, error?: {status?, code, message?}, html?: {status}, reset?: "before_response"\|"mid_body", apply?, latency_ms?}` | `{"id": u64}` |
//! | DELETE | `/_fake/faults` | – | 204 |
//! | POST | `/_fake/locks` | [`ResourceRef`] `{"type": "server"\|"network"\|"load_balancer"\|"certificate", "id"}` | 204 |
//! | DELETE | `/_fake/locks/{type}/{id}` | – | 204 |
//! | POST | `/_fake/action_failures` | [`ActionFailure`] `{count?, command?, code?, message?}` | 204 |
//! | POST | `/_fake/actions/finish` | – | 204 (finish all running actions) |
//! | GET | `/_fake/config` | – | [`Settings`](crate::control::Settings) |
//! | PUT | `/_fake/config/action_delay` | `{"ms": u64}` | 204 |
//! | PUT | `/_fake/config/action_retention` | `{"ms": u64}` | 204 (finished actions older than this are pruned) |
//! | PUT | `/_fake/config/rate_limit` | [`RateLimitConfig`] `{capacity, refill_per_second}` | 204 |
//! | POST | `/_fake/rate_limit/refill` | – | 204 |
//! | PUT | `/_fake/config/token_policy` | [`TokenPolicy`] `{"mode": "accept_all"\|"allow"\|"deny", "tokens"?: [..]}` | 204 |
//! | GET | `/_fake/requests[?token_fingerprint=tok-..]` | – | `{"counts": RequestCounts, "log": [RequestRecord]}` (log filtered by token) |
//! | GET | `/_fake/requests/counts` | – | [`RequestCounts`](crate::control::RequestCounts) `{total, by_endpoint}` |
//! | GET | `/_fake/requests/log[?token_fingerprint=tok-..]` | – | `[RequestRecord]` (filtered by token) |
//! | DELETE | `/_fake/requests` | – | 204 (counters and log only) |
//! | POST | `/_fake/reset` | – | 204 (everything back to the start configuration, only the default project) |
//! | GET | `/_fake/projects` | – | `[ProjectInfo]` `{name, token_fingerprints}`, the default project first |
//! | POST | `/_fake/projects` | [`SeedProject`] `{name, tokens}` | `{"name"}` (a second project: its tokens see only its resources, see [`crate::projects`]) |
//! | GET | `/_fake/projects/{name}/state` | – | that project's [`StateSnapshot`](crate::control::StateSnapshot) |
//! | POST | `/_fake/projects/{name}/seed` | [`Seed`] | [`SeedResult`](crate::control::SeedResult), created in that project (Robot servers go to the one Robot part: Robot has no projects) |
//!
//! Every other state path (`/_fake/state`, `/_fake/seed...`, `/_fake/servers/...`, locks,
//! action failures) works on the default project.

use std::time::Duration;

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use axum::routing::{delete, get, post, put};
use http::StatusCode;
use serde::Deserialize;
use serde_json::json;

use super::extract::{ApiJson, json, no_content, parse_id};
use crate::config::TokenPolicy;
use crate::control::{
    ActionFailure, RequestRecord, ResourceKind, ResourceRef, Seed, SeedCertificate, SeedLoadBalancer, SeedNetwork,
    SeedServer, SeedServerBatch, ServerPatch, TargetHealthOverride,
};
use crate::error::{ApiError, FakeError};
use crate::faults::FaultRule;
use crate::handle::FakeHandle;
use crate::projects::SeedProject;
use crate::query::QueryParams;
use crate::rate_limit::RateLimitConfig;
use crate::wire::DeprecationInfo;

/// Body of `PUT /_fake/config/action_delay`.
#[derive(Debug, Deserialize)]
struct DelayBody {
    ms: u64,
}

/// The `/_fake` routes.
pub(crate) fn routes() -> Router<FakeHandle> {
    Router::new()
        .route("/state", get(state))
        .route("/seed", post(seed))
        .route("/seed/networks", post(seed_network))
        .route("/seed/servers", post(seed_server))
        .route("/seed/servers/batch", post(seed_servers))
        .route("/seed/load_balancers", post(seed_load_balancer))
        .route("/seed/certificates", post(seed_certificate))
        .route("/servers/{id}", delete(delete_server).patch(patch_server))
        .route("/load_balancer_types/{type}/deprecation", put(deprecate_lb_type).delete(undeprecate_lb_type))
        .route("/load_balancers/{id}/target_health", put(set_target_health))
        .route("/data_plane", get(data_plane))
        .route("/data_plane/listeners", get(data_plane_listeners))
        .route("/data_plane/checks", get(data_plane_checks))
        .route("/robot/servers", get(robot_servers).post(seed_robot_server))
        .route("/robot/servers/{number}", delete(delete_robot_server).patch(patch_robot_server))
        .route("/robot/faults", get(list_robot_faults).post(add_robot_fault).delete(clear_robot_faults))
        .route("/robot/credentials", put(set_robot_credentials))
        .route("/faults", get(list_faults).post(add_fault).delete(clear_faults))
        .route("/locks", post(lock))
        .route("/locks/{kind}/{id}", delete(unlock))
        .route("/action_failures", post(fail_actions))
        .route("/actions/finish", post(finish_actions))
        .route("/config", get(config))
        .route("/config/action_delay", put(set_delay))
        .route("/config/action_retention", put(set_retention))
        .route("/config/rate_limit", put(set_rate_limit))
        .route("/rate_limit/refill", post(refill))
        .route("/config/token_policy", put(set_token_policy))
        .route("/requests", get(requests).delete(reset_requests))
        .route("/requests/counts", get(request_counts))
        .route("/requests/log", get(request_log))
        .route("/reset", post(reset))
        .route("/projects", get(projects).post(add_project))
        .route("/projects/{name}/state", get(project_state))
        .route("/projects/{name}/seed", post(project_seed))
}

async fn projects(State(h): State<FakeHandle>) -> Response {
    json(StatusCode::OK, h.projects())
}

async fn add_project(State(h): State<FakeHandle>, ApiJson(body): ApiJson<SeedProject>) -> Result<Response, FakeError> {
    let project = h.add_project(&body)?;
    Ok(json(StatusCode::CREATED, json!({"name": project.project_name()})))
}

/// The handle of project `name`, or `not_found`.
fn project(h: &FakeHandle, name: &str) -> Result<FakeHandle, ApiError> {
    h.project(name).ok_or_else(|| ApiError::new("not_found", format!("project {name:?} not found")))
}

async fn project_state(State(h): State<FakeHandle>, Path(name): Path<String>) -> Result<Response, ApiError> {
    Ok(json(StatusCode::OK, project(&h, &name)?.snapshot()))
}

async fn project_seed(
    State(h): State<FakeHandle>,
    Path(name): Path<String>,
    ApiJson(body): ApiJson<Seed>,
) -> Result<Response, FakeError> {
    Ok(json(StatusCode::CREATED, project(&h, &name)?.seed(&body)?))
}

async fn state(State(h): State<FakeHandle>) -> Response {
    json(StatusCode::OK, h.snapshot())
}

async fn seed(State(h): State<FakeHandle>, ApiJson(body): ApiJson<Seed>) -> Result<Response, FakeError> {
    Ok(json(StatusCode::CREATED, h.seed(&body)?))
}

async fn seed_network(State(h): State<FakeHandle>, ApiJson(body): ApiJson<SeedNetwork>) -> Result<Response, FakeError> {
    Ok(json(StatusCode::CREATED, json!({"id": h.seed_network(&body)?})))
}

async fn seed_server(State(h): State<FakeHandle>, ApiJson(body): ApiJson<SeedServer>) -> Result<Response, FakeError> {
    Ok(json(StatusCode::CREATED, json!({"id": h.seed_server(&body)?})))
}

async fn seed_servers(
    State(h): State<FakeHandle>,
    ApiJson(body): ApiJson<SeedServerBatch>,
) -> Result<Response, FakeError> {
    Ok(json(StatusCode::CREATED, json!({"ids": h.seed_servers(&body)?})))
}

async fn seed_load_balancer(
    State(h): State<FakeHandle>,
    ApiJson(body): ApiJson<SeedLoadBalancer>,
) -> Result<Response, FakeError> {
    Ok(json(StatusCode::CREATED, json!({"id": h.seed_load_balancer(&body)?})))
}

async fn seed_certificate(
    State(h): State<FakeHandle>,
    ApiJson(body): ApiJson<SeedCertificate>,
) -> Result<Response, FakeError> {
    Ok(json(StatusCode::CREATED, json!({"id": h.seed_certificate(&body)?})))
}

async fn delete_server(State(h): State<FakeHandle>, Path(id): Path<String>) -> Result<Response, FakeError> {
    h.delete_server(parse_id(&id)?)?;
    Ok(no_content())
}

async fn patch_server(
    State(h): State<FakeHandle>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<ServerPatch>,
) -> Result<Response, FakeError> {
    h.update_server(parse_id(&id)?, &body)?;
    Ok(no_content())
}

async fn set_target_health(
    State(h): State<FakeHandle>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<TargetHealthOverride>,
) -> Result<Response, FakeError> {
    h.set_target_health(parse_id(&id)?, &body)?;
    Ok(no_content())
}

async fn deprecate_lb_type(
    State(h): State<FakeHandle>,
    Path(type_): Path<String>,
    ApiJson(body): ApiJson<DeprecationInfo>,
) -> Result<Response, FakeError> {
    h.set_load_balancer_type_deprecation(&type_, Some(body))?;
    Ok(no_content())
}

async fn undeprecate_lb_type(State(h): State<FakeHandle>, Path(type_): Path<String>) -> Result<Response, FakeError> {
    h.set_load_balancer_type_deprecation(&type_, None)?;
    Ok(no_content())
}

async fn data_plane(State(h): State<FakeHandle>) -> Response {
    json(StatusCode::OK, h.data_plane())
}

async fn data_plane_listeners(State(h): State<FakeHandle>) -> Response {
    json(StatusCode::OK, h.data_plane_listeners())
}

async fn data_plane_checks(State(h): State<FakeHandle>) -> Response {
    json(StatusCode::OK, h.data_plane_checks())
}

async fn robot_servers(State(h): State<FakeHandle>) -> Response {
    json(StatusCode::OK, h.robot_servers())
}

async fn seed_robot_server(
    State(h): State<FakeHandle>,
    ApiJson(body): ApiJson<crate::robot::SeedRobotServer>,
) -> Result<Response, FakeError> {
    Ok(json(StatusCode::CREATED, json!({"number": h.seed_robot_server(&body)?})))
}

async fn delete_robot_server(State(h): State<FakeHandle>, Path(n): Path<String>) -> Result<Response, FakeError> {
    h.delete_robot_server(parse_id(&n)?)?;
    Ok(no_content())
}

async fn patch_robot_server(
    State(h): State<FakeHandle>,
    Path(n): Path<String>,
    ApiJson(body): ApiJson<crate::robot::RobotServerPatch>,
) -> Result<Response, FakeError> {
    h.update_robot_server(parse_id(&n)?, &body)?;
    Ok(no_content())
}

async fn list_robot_faults(State(h): State<FakeHandle>) -> Response {
    json(StatusCode::OK, h.robot_faults())
}

async fn add_robot_fault(State(h): State<FakeHandle>, ApiJson(rule): ApiJson<FaultRule>) -> Result<Response, ApiError> {
    rule.validate()?;
    Ok(json(StatusCode::CREATED, json!({"id": h.inject_robot_fault(rule)})))
}

async fn clear_robot_faults(State(h): State<FakeHandle>) -> Response {
    h.clear_robot_faults();
    no_content()
}

async fn set_robot_credentials(
    State(h): State<FakeHandle>,
    ApiJson(body): ApiJson<crate::robot::RobotCredentials>,
) -> Response {
    h.set_robot_credentials(body);
    no_content()
}

async fn list_faults(State(h): State<FakeHandle>) -> Response {
    json(StatusCode::OK, h.faults())
}

async fn add_fault(State(h): State<FakeHandle>, ApiJson(rule): ApiJson<FaultRule>) -> Result<Response, ApiError> {
    rule.validate()?;
    Ok(json(StatusCode::CREATED, json!({"id": h.inject_fault(rule)})))
}

async fn clear_faults(State(h): State<FakeHandle>) -> Response {
    h.clear_faults();
    no_content()
}

async fn lock(State(h): State<FakeHandle>, ApiJson(r): ApiJson<ResourceRef>) -> Response {
    h.lock_resource(r);
    no_content()
}

async fn unlock(State(h): State<FakeHandle>, Path((kind, id)): Path<(String, String)>) -> Result<Response, ApiError> {
    let kind = match kind.as_str() {
        "server" => ResourceKind::Server,
        "network" => ResourceKind::Network,
        "load_balancer" => ResourceKind::LoadBalancer,
        "certificate" => ResourceKind::Certificate,
        "primary_ip" => ResourceKind::PrimaryIp,
        other => {
            return Err(ApiError::invalid_input("type", format!("unknown resource type '{other}'")));
        }
    };
    h.unlock_resource(ResourceRef { kind, id: parse_id(&id)? });
    Ok(no_content())
}

async fn fail_actions(State(h): State<FakeHandle>, ApiJson(f): ApiJson<ActionFailure>) -> Response {
    h.fail_next_actions(f);
    no_content()
}

async fn finish_actions(State(h): State<FakeHandle>) -> Response {
    h.finish_all_actions();
    no_content()
}

async fn config(State(h): State<FakeHandle>) -> Response {
    json(StatusCode::OK, h.settings())
}

async fn set_delay(State(h): State<FakeHandle>, ApiJson(b): ApiJson<DelayBody>) -> Response {
    h.set_action_delay(Duration::from_millis(b.ms));
    no_content()
}

async fn set_retention(State(h): State<FakeHandle>, ApiJson(b): ApiJson<DelayBody>) -> Response {
    h.set_action_retention(Duration::from_millis(b.ms));
    no_content()
}

async fn set_rate_limit(State(h): State<FakeHandle>, ApiJson(c): ApiJson<RateLimitConfig>) -> Response {
    h.set_rate_limit(c.capacity, c.refill_per_second);
    no_content()
}

async fn refill(State(h): State<FakeHandle>) -> Response {
    h.refill_rate_limit();
    no_content()
}

async fn set_token_policy(State(h): State<FakeHandle>, ApiJson(p): ApiJson<TokenPolicy>) -> Response {
    h.set_token_policy(p);
    no_content()
}

/// The log, filtered by `?token_fingerprint=` when given.
fn log_for(h: &FakeHandle, query: Option<&str>) -> Vec<RequestRecord> {
    match QueryParams::parse(query).get("token_fingerprint") {
        Some(fp) => h.request_log_for(fp),
        None => h.request_log(),
    }
}

async fn requests(State(h): State<FakeHandle>, RawQuery(q): RawQuery) -> Response {
    json(StatusCode::OK, json!({"counts": h.request_counts(), "log": log_for(&h, q.as_deref())}))
}

async fn request_counts(State(h): State<FakeHandle>) -> Response {
    json(StatusCode::OK, h.request_counts())
}

async fn request_log(State(h): State<FakeHandle>, RawQuery(q): RawQuery) -> Response {
    json(StatusCode::OK, log_for(&h, q.as_deref()))
}

async fn reset_requests(State(h): State<FakeHandle>) -> Response {
    h.reset_requests();
    no_content()
}

async fn reset(State(h): State<FakeHandle>) -> Response {
    h.reset();
    no_content()
}
