//! Routes in the cluster's Hetzner private network (`HCLOUD_NETWORK`): one route per pod
//! CIDR, gateway = the node's server's IP in the network.
//!
//! ```text
//!  list_routes ── GET /networks/{id} (the routes; kept as this provider's view)
//!              └─ gateways → servers through the shared inventory (any snapshot younger
//!                 than an hour; a gateway inside the cluster CIDR that no server holds is
//!                 confirmed with a fresh list, then the servers the network says are
//!                 attached but the list lacks are looked up one by one, before it is
//!                 reported as a blackhole)
//!  create_route ─ checks first, no request: IPv4 destination inside the cluster CIDR
//!              ├─ target server by providerID (else node name), through the inventory
//!              │  (cached; asked again once if it disagrees with the node): attached to
//!              │  the network, its IP among the node's InternalIPs
//!              └─ one change at a time (the network takes one): exists → nothing;
//!                 other gateway → delete_route, then add_route; learned route limit →
//!                 fail without a request; `locked` retried; `conflict` retried by the client
//!  delete_route ─ by destination and gateway, only inside the cluster CIDR; gone = done
//! ```
//!
//! Every change waits for its action, polling once at the learned action duration, so the
//! next change does not meet `conflict` and a failure is known before the reconcile ends.

pub mod decide;

use std::borrow::Cow;
use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use sync_lock::Unpoison as _;

use cloud_provider::{CloudError, Route, Routes};
use hcloud_api::models::{Network, NetworkId, Route as NetworkRoute, Server, ServerId};
use hcloud_api::{Client, Error, ErrorCode, PollPolicy};
use ipnet::IpNet;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::api_error::api_error;
use crate::inventory::{Inventory, Lookup};
use crate::metrics::HcloudMetrics;
use crate::provider_id::{ProviderId, ProviderIdError};
use decide::{
    ActionTiming, Upsert, blackhole_candidates, check_destination, check_gateway, servers_by_private_ip,
    to_cloud_route, touches_cluster, unknown_gateway_inside, upsert,
};

/// How old the server list may be for mapping known gateways to servers. Gateways change
/// only when a server's private IP does, and the controller also checks every route's
/// gateway against its node's current addresses; unknown gateways are confirmed fresh.
pub const GATEWAY_MAX_AGE: Duration = Duration::from_secs(3600);

/// How old server data may be to resolve a new route's target when cached data disagrees
/// with the node (the official CCM's 1 min).
pub const TARGET_MAX_AGE: Duration = Duration::from_secs(60);

/// How long a learned route limit spares requests before the API is asked again (the
/// project's limit may have been raised).
const LIMIT_HINT_TTL: Duration = Duration::from_secs(600);

/// Attempts of a change the network answers with `locked` (1 s, 2 s, 4 s, 8 s apart).
const LOCKED_ATTEMPTS: u32 = 5;

/// Longest wait for a route action.
const ACTION_TIMEOUT: Duration = Duration::from_secs(120);

/// Settings of the routes.
#[derive(Debug, Clone)]
pub struct RoutesConfig {
    /// The network (`HCLOUD_NETWORK`, resolved).
    pub network: NetworkId,
    /// Its name, for messages.
    pub network_name: String,
    /// `--cluster-cidr`: routes are created and deleted only inside these.
    pub cluster_cidrs: Vec<IpNet>,
    /// How fresh the server list must be before a gateway is declared a blackhole
    /// (`HCLOUD_SERVER_CACHE_MAX_AGE`).
    pub confirm_max_age: Duration,
}

/// A change of the network's routes.
#[derive(Debug, Clone, Copy)]
enum Op {
    Add(NetworkRoute),
    Delete(NetworkRoute),
}

/// The network's routes as this provider last saw them, kept up to date by its own changes.
#[derive(Debug, Default)]
struct View {
    routes: Vec<NetworkRoute>,
    /// When the API last said the network is at its route limit, and how many it had.
    limit: Option<(usize, Instant)>,
}

/// Hetzner private-network routes (the `Routes` capability).
pub struct HcloudRoutes {
    client: Client,
    inventory: Arc<Inventory>,
    config: RoutesConfig,
    metrics: HcloudMetrics,
    view: Mutex<View>,
    /// Serializes changes: the network takes one at a time.
    changes: tokio::sync::Mutex<ActionTiming>,
}

impl HcloudRoutes {
    /// Routes of `config.network`, mapping gateways through `inventory`.
    pub fn new(client: Client, inventory: Arc<Inventory>, config: RoutesConfig, metrics: HcloudMetrics) -> Self {
        HcloudRoutes {
            client,
            inventory,
            config,
            metrics,
            view: Mutex::default(),
            changes: tokio::sync::Mutex::new(ActionTiming::new(Duration::from_millis(500))),
        }
    }

    /// `GET /networks/{id}`; the routes become the view.
    async fn reload(&self) -> Result<Network, CloudError> {
        self.metrics.operation("hcloud/reloadNetwork");
        let id = self.config.network;
        let read = self.client.networks().get(id).await;
        // The same read tells the inventory whether servers were detached without an action
        // (the network deleted): see `crate::changes`.
        match &read {
            Ok(network) => self.inventory.network_seen(id, Some(&network.servers)),
            Err(e) if e.is_not_found() => self.inventory.network_seen(id, None),
            Err(_) => {}
        }
        let network =
            read.map_err(|e| api_error(&format!("cannot read network {} ({})", self.config.network_name, id), e))?;
        self.view.lock_unpoisoned().routes.clone_from(&network.routes);
        Ok(network)
    }

    /// How to find the route's server: by providerID, else by node name.
    fn lookup_for(route: &Route) -> Result<Lookup, CloudError> {
        let node = &route.target_node;
        if route.target_provider_id.is_empty() {
            return Ok(Lookup::Name(node.clone()));
        }
        match ProviderId::parse(&route.target_provider_id) {
            Ok(ProviderId::Cloud(id)) => Ok(Lookup::Id(id)),
            // Refusals until the node's providerID changes.
            Ok(ProviderId::Robot(_) | ProviderId::LegacyRobot(_)) => Err(CloudError::refused(
                "RobotNotSupported",
                format!("node {node} is a Robot (dedicated) server: routes are only supported for cloud servers"),
            )),
            Err(e @ ProviderIdError::UnknownPrefix(_)) => {
                Err(CloudError::refused("UnknownProviderIDPrefix", format!("node {node}: {e}")))
            }
            Err(e @ ProviderIdError::InvalidId(_)) => {
                Err(CloudError::refused("InvalidProviderID", format!("node {node}: {e}")))
            }
        }
    }

    /// The server's IP in the network, which must be one of the node's InternalIPs.
    fn gateway_of(&self, route: &Route, server: &Server) -> Result<IpAddr, CloudError> {
        let gateway = server.private_ip_in(self.config.network).ok_or_else(|| {
            CloudError::transient(
                "ServerNotAttachedToNetwork",
                format!(
                    "route for node {}: server {} ({}) is not attached to network {}; retried once it is",
                    route.target_node, server.name, server.id, self.config.network_name
                ),
                None,
            )
        })?;
        check_gateway(route, gateway, server, &self.config.network_name)?;
        Ok(gateway)
    }

    /// The route's server and gateway. Cached server data answers if it agrees with the node
    /// (the node's InternalIPs come from current data, refreshed by the cloud-node
    /// controller); a server that is missing from it, not attached, or holds another IP is
    /// asked for once more (one request, as the official CCM's 1-minute max age).
    async fn target(&self, route: &Route) -> Result<(Arc<Server>, IpAddr), CloudError> {
        let node = &route.target_node;
        let lookup = Self::lookup_for(route)?;
        let lookup_err = |e| api_error(&format!("cannot look up the server of node {node}"), e);
        if let Some(server) = self.inventory.get(&lookup, GATEWAY_MAX_AGE).await.map_err(lookup_err)?
            && let Ok(gateway) = self.gateway_of(route, &server)
        {
            return Ok((server, gateway));
        }
        self.inventory.recheck(std::slice::from_ref(&lookup)).await;
        let server = self.inventory.get(&lookup, TARGET_MAX_AGE).await.map_err(lookup_err)?.ok_or_else(|| {
            CloudError::failed(
                "ServerNotFound",
                format!("route for node {node}: no Hetzner Cloud server found ({lookup:?})"),
            )
        })?;
        let gateway = self.gateway_of(route, &server)?;
        Ok((server, gateway))
    }

    /// Sends one change (retrying `locked`) and waits for its action. `Ok(false)` if the API
    /// answered `not_found` (a delete of a route that is already gone).
    async fn change(&self, timing: &mut ActionTiming, op: Op) -> Result<bool, Error> {
        let network = self.config.network;
        let mut attempt = 0;
        let action = loop {
            let sent = match &op {
                Op::Add(r) => self.client.networks().add_route(network, r).await,
                Op::Delete(r) => self.client.networks().delete_route(network, r).await,
            };
            match sent {
                Ok(a) => break a,
                Err(e) if e.is_not_found() && matches!(op, Op::Delete(_)) => return Ok(false),
                Err(e) if e.code() == Some(&ErrorCode::Locked) && attempt + 1 < LOCKED_ATTEMPTS => {
                    let delay = Duration::from_secs(1 << attempt);
                    debug!(?op, ?delay, "the network is locked; retrying");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        };
        let started = Instant::now();
        let first = timing.first_poll();
        let policy = PollPolicy { initial: first, max: timing.next_polls() };
        self.client.wait_for_actions_with(std::slice::from_ref(&action), ACTION_TIMEOUT, policy).await?;
        timing.observe(first, started.elapsed());
        Ok(true)
    }

    fn route_error(&self, what: &str, e: Error) -> CloudError {
        let network = &self.config.network_name;
        match e.code() {
            Some(ErrorCode::Locked | ErrorCode::Conflict) => CloudError::transient(
                "NetworkBusy",
                format!("{what}: network {network} is busy with another change ({e}); retried with backoff"),
                Some(Box::new(e)),
            ),
            _ => api_error(what, e),
        }
    }

    fn limit_error(&self, count: usize, route: &Route) -> CloudError {
        CloudError::failed(
            "RouteLimitExceeded",
            format!(
                "network {} has {count} routes, the most it may have (Hetzner Cloud allows 100 per network): no route \
                 for node {}'s pod CIDR {}; delete unused routes or use fewer, larger pod CIDRs",
                self.config.network_name, route.target_node, route.destination_cidr
            ),
        )
    }

    async fn upsert(&self, route: &Route, destination: IpNet, gateway: IpAddr) -> Result<(), CloudError> {
        let mut timing = self.changes.lock().await;
        let mut reloaded = false;
        loop {
            let (routes, limit) = {
                let v = self.view.lock_unpoisoned();
                (v.routes.clone(), v.limit)
            };
            let what = format!("route {destination} via {gateway} for node {}", route.target_node);
            match upsert(&routes, destination, gateway) {
                Upsert::Exists => return Ok(()),
                Upsert::Replace(old) => {
                    info!(destination = %destination, old = %old.gateway, new = %gateway, node = %route.target_node, "replacing the route's gateway");
                    self.change(&mut timing, Op::Delete(old))
                        .await
                        .map_err(|e| self.route_error(&format!("cannot delete the old route of {what}"), e))?;
                    self.view.lock_unpoisoned().routes.retain(|r| *r != old);
                }
                Upsert::Add => {}
            }
            if let Some((count, at)) = limit
                && routes.len() >= count
                && at.elapsed() < LIMIT_HINT_TTL
            {
                return Err(self.limit_error(routes.len(), route));
            }
            let new = NetworkRoute { destination, gateway };
            match self.change(&mut timing, Op::Add(new)).await {
                Ok(_) => {
                    self.view.lock_unpoisoned().routes.push(new);
                    return Ok(());
                }
                Err(e) if e.code() == Some(&ErrorCode::ResourceLimitExceeded) => {
                    let count = {
                        let mut v = self.view.lock_unpoisoned();
                        v.limit = Some((v.routes.len(), Instant::now()));
                        v.routes.len()
                    };
                    warn!(network = %self.config.network_name, routes = count, "the network is at its route limit");
                    return Err(self.limit_error(count, route));
                }
                // The view was stale (someone else changed the network): look again, once.
                Err(e) if e.code() == Some(&ErrorCode::InvalidInput) && !reloaded => {
                    debug!(error = %e, "add_route refused; reloading the network once");
                    reloaded = true;
                    self.reload().await?;
                }
                Err(e) => return Err(self.route_error(&format!("cannot add {what}"), e)),
            }
        }
    }
}

impl Routes for HcloudRoutes {
    async fn list_routes(&self, _cluster_name: &str) -> Result<Vec<Route>, CloudError> {
        self.metrics.operation("hcloud/ListRoutes");
        let network = self.reload().await?;
        let mut all = self
            .inventory
            .all(GATEWAY_MAX_AGE)
            .await
            .map_err(|e| api_error("cannot list servers to map route gateways", e))?;
        let mut by_ip = servers_by_private_ip(&all.servers, self.config.network);
        let cidrs = &self.config.cluster_cidrs;
        // A gateway no server holds is a blackhole, which the controller deletes inside the
        // cluster CIDR: confirm with data at most `confirm_max_age` old first ...
        if unknown_gateway_inside(&network.routes, &by_ip, cidrs)
            && !all.listed
            && all.as_of.elapsed() > self.config.confirm_max_age
        {
            all = self
                .inventory
                .all(self.config.confirm_max_age)
                .await
                .map_err(|e| api_error("cannot list servers to confirm a route's gateway is gone", e))?;
            by_ip = servers_by_private_ip(&all.servers, self.config.network);
        }
        self.metrics.cache_lookup("routes", self.inventory.mode(), !all.listed);
        // ... and look up directly the attached servers that list lacks (a list can miss a
        // live server): only these candidates, and only while a gateway is still unknown.
        let listed: HashSet<ServerId> = all.servers.iter().map(|s| s.id).collect();
        for id in blackhole_candidates(&network.routes, &by_ip, cidrs, &network.servers, &listed) {
            if !unknown_gateway_inside(&network.routes, &by_ip, cidrs) {
                break;
            }
            let found = self.inventory.fetch(&Lookup::Id(id)).await.map_err(|e| {
                api_error(&format!("cannot look up server {id}, attached to the network, to confirm a blackhole"), e)
            })?;
            if let Some(server) = found
                && let Some(ip) = server.private_ip_in(self.config.network)
            {
                debug!(server = %id, %ip, "the server list missed a server attached to the network");
                by_ip.insert(ip, server);
            }
        }
        Ok(network.routes.iter().map(|r| to_cloud_route(r, &by_ip)).collect())
    }

    async fn create_route(&self, _cluster_name: &str, _name_hint: &str, route: &Route) -> Result<(), CloudError> {
        self.metrics.operation("hcloud/CreateRoute");
        let destination = check_destination(route, &self.config.cluster_cidrs)?;
        let (_, gateway) = self.target(route).await?;
        self.upsert(route, destination, gateway).await
    }

    /// `hcloud://007` and `hcloud://7` name one server (the official CCM parses both), and
    /// `hcloud://bm-7` is `hrobot://7`: the parsed ID, written as this provider writes it.
    fn canonical_provider_id<'a>(&self, provider_id: &'a str) -> Cow<'a, str> {
        match ProviderId::parse(provider_id) {
            Ok(parsed) => Cow::Owned(parsed.canonical().to_string()),
            Err(_) => Cow::Borrowed(provider_id),
        }
    }

    async fn delete_route(&self, _cluster_name: &str, route: &Route) -> Result<(), CloudError> {
        self.metrics.operation("hcloud/DeleteRoute");
        let destination: IpNet = route.destination_cidr.parse::<IpNet>().map(|n| n.trunc()).map_err(|_| {
            CloudError::failed("InvalidRouteDestination", format!("route {}: destination is not a CIDR", route.name))
        })?;
        if !touches_cluster(&self.config.cluster_cidrs, &destination) {
            return Err(CloudError::failed(
                "RouteOutsideClusterCIDR",
                format!("refusing to delete route {} to {destination}: it lies outside the cluster CIDR", route.name),
            ));
        }
        let gateway = match route.gateway.as_deref().and_then(|g| g.parse::<IpAddr>().ok()) {
            Some(g) => g,
            None => match self.view.lock_unpoisoned().routes.iter().find(|r| r.destination == destination) {
                Some(r) => r.gateway,
                None => return Ok(()),
            },
        };
        let old = NetworkRoute { destination, gateway };
        let mut timing = self.changes.lock().await;
        let what = format!("route {destination} via {gateway}");
        match self.change(&mut timing, Op::Delete(old)).await {
            Ok(true) => info!(route = %what, "deleted route"),
            Ok(false) => debug!(route = %what, "the route was already gone"),
            Err(e) => return Err(self.route_error(&format!("cannot delete {what}"), e)),
        }
        self.view.lock_unpoisoned().routes.retain(|r| *r != old);
        Ok(())
    }
}
