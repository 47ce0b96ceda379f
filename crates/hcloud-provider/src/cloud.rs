//! The Hetzner `Cloud`: start-up checks and the capabilities it offers.

use std::sync::Arc;
use std::time::Duration;

use cloud_provider::events::EventSink;
use cloud_provider::{Cloud, Unsupported};
use hcloud_api::models::{Network, NetworkId};
use hcloud_api::{Client, ErrorCode, RequestGate};
use secrecy::ExposeSecret;
use tracing::{info, warn};

use crate::config::{CacheMode, Config};
use crate::instances::{HcloudInstances, RobotSupport};
use crate::inventory::Inventory;
use crate::load_balancers::HcloudLoadBalancers;
use crate::metrics::HcloudMetrics;
use crate::robot::RobotInventory;
use crate::routes::{HcloudRoutes, RoutesConfig};
use hcloud_api::robot::RobotClient;

/// The provider name: the providerID prefix is `hcloud://`.
pub const PROVIDER_NAME: &str = "hcloud";

/// Why the provider could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// The client could not be built (bad endpoint or token format).
    #[error("cannot build the Hetzner Cloud client: {0}")]
    Client(#[source] hcloud_api::Error),
    /// The API rejected the token.
    #[error("HCLOUD_TOKEN was rejected by the Hetzner Cloud API ({0}); check that the token is valid and not revoked")]
    InvalidToken(#[source] hcloud_api::Error),
    /// The API could not be reached to check the token.
    #[error("cannot reach the Hetzner Cloud API at {endpoint} to check the token: {source}")]
    Unreachable {
        /// The endpoint.
        endpoint: String,
        /// Why.
        #[source]
        source: hcloud_api::Error,
    },
    /// The Robot client could not be built (bad `ROBOT_ENDPOINT`).
    #[error("cannot build the Robot webservice client: {0}")]
    RobotClient(#[source] hcloud_api::robot::RobotError),
    /// `HCLOUD_NETWORK` names no network of the project.
    #[error("HCLOUD_NETWORK: no network with id or name {0:?} exists in the project of HCLOUD_TOKEN")]
    NetworkNotFound(String),
    /// Resolving `HCLOUD_NETWORK` failed.
    #[error("HCLOUD_NETWORK: cannot look up network {name:?}: {source}")]
    NetworkLookup {
        /// The configured value.
        name: String,
        /// Why.
        #[source]
        source: hcloud_api::Error,
    },
}

/// What the embedding program adds to the API client.
#[derive(Default, Clone)]
pub struct ClientHooks {
    /// Metrics: the client's requests, provider operations, the server inventory.
    pub metrics: Option<HcloudMetrics>,
    /// Consulted before every request (e.g. the leader-election fence); a refusal keeps the
    /// request from being sent.
    pub gate: Option<RequestGate>,
}

/// The Hetzner Cloud provider.
pub struct HcloudCloud {
    client: Client,
    network: Option<Network>,
    inventory: Arc<Inventory>,
    instances: Arc<HcloudInstances>,
    routes: Option<Arc<HcloudRoutes>>,
    load_balancers: Option<Arc<HcloudLoadBalancers>>,
}

impl HcloudCloud {
    /// Builds the client, checks the token (`GET /locations`) and resolves `HCLOUD_NETWORK`.
    pub async fn connect(config: &Config, hooks: ClientHooks) -> Result<HcloudCloud, StartupError> {
        for w in &config.warnings {
            warn!("{w}");
        }
        if config.cache_mode != CacheMode::All {
            warn!(mode = ?config.cache_mode, "HCLOUD_SERVER_CACHE_MODE is set: every lookup may cost API requests");
        }
        let mut builder = Client::builder(secrecy::SecretString::from(config.token.expose_secret().to_owned()))
            .debug(config.debug)
            .timeout(Duration::from_secs(15));
        if let Some(endpoint) = &config.endpoint {
            builder = builder.endpoint(endpoint.clone());
        }
        let metrics = hooks.metrics.unwrap_or_default();
        builder = builder.observer(metrics.observer());
        if let Some(gate) = hooks.gate.clone() {
            builder = builder.gate(gate);
        }
        let client = builder.build().map_err(StartupError::Client)?;
        metrics.watch_rate_limit(&client);

        match client.locations().list_all().await {
            Ok(locations) => {
                info!(locations = locations.len(), endpoint = client.endpoint(), "Hetzner Cloud token accepted")
            }
            Err(e) if matches!(e.code(), Some(ErrorCode::Unauthorized | ErrorCode::Forbidden)) => {
                return Err(StartupError::InvalidToken(e));
            }
            Err(e) => return Err(StartupError::Unreachable { endpoint: client.endpoint().to_owned(), source: e }),
        }

        let network = match &config.network {
            None => None,
            Some(name) => Some(resolve_network(&client, name).await?),
        };
        if let Some(n) = &network {
            info!(network = %n.name, id = %n.id, ip_range = %n.ip_range, "using private network");
        }

        let inventory =
            Arc::new(Inventory::with_stats(client.clone(), config.cache_mode, metrics.inventory(config.cache_mode)));
        let mut robot_inventory = None;
        let mut instances = HcloudInstances::new(
            inventory.clone(),
            network.as_ref().map(|n| n.id),
            config.address_family,
            config.zone_label_enabled,
            config.cache_max_age,
            config.lifecycle_max_age,
        )
        .with_metrics(metrics.clone());
        if let Some(robot) = &config.robot {
            let inventory = match &robot.credentials {
                Some((user, password)) => {
                    let mut client = RobotClient::new(
                        &robot.endpoint,
                        user,
                        secrecy::SecretString::from(password.expose_secret().to_owned()),
                    )
                    .map_err(StartupError::RobotClient)?
                    .with_timeout(Duration::from_secs(15));
                    if let Some(gate) = hooks.gate.clone() {
                        client = client.with_gate(gate);
                    }
                    client = client.with_observer(metrics.robot_observer());
                    info!(endpoint = %robot.endpoint, user = %user, cache_timeout = ?robot.cache_timeout,
                        rate_limit_wait = ?robot.rate_limit_wait, "Robot (dedicated server) support enabled");
                    Some(Arc::new(RobotInventory::new(client, robot.cache_timeout, robot.rate_limit_wait)))
                }
                None => {
                    info!("ROBOT_ENABLED without ROBOT_USER/ROBOT_PASSWORD: Load Balancer-only Robot mode");
                    None
                }
            };
            robot_inventory = Some(inventory.clone());
            instances =
                instances.with_robot(RobotSupport { inventory, forward_internal_ips: robot.forward_internal_ips });
        }
        let instances = Arc::new(instances);
        let routes = match &network {
            Some(n) if config.routes_enabled => {
                info!(network = %n.name, cluster_cidrs = ?config.cluster_cidrs, "routes enabled in the private network");
                let settings = RoutesConfig {
                    network: n.id,
                    network_name: n.name.clone(),
                    cluster_cidrs: config.cluster_cidrs.clone(),
                    confirm_max_age: config.cache_max_age,
                };
                Some(Arc::new(HcloudRoutes::new(client.clone(), inventory.clone(), settings, metrics.clone())))
            }
            _ => None,
        };
        let load_balancers = config.load_balancers_enabled.then(|| {
            let lbs = HcloudLoadBalancers::new(
                client.clone(),
                config.load_balancers.clone(),
                network.as_ref().map(|n| n.id),
                config.load_balancers_max_age,
            )
            .with_metrics(metrics);
            Arc::new(match robot_inventory {
                Some(inventory) => lbs.with_robot(inventory),
                None => lbs,
            })
        });
        if load_balancers.is_none() {
            info!("HCLOUD_LOAD_BALANCERS_ENABLED=false: Services of type LoadBalancer are not served");
        }
        Ok(HcloudCloud { client, network, inventory, instances, routes, load_balancers })
    }

    /// The API client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The configured private network, if any.
    pub fn network(&self) -> Option<&Network> {
        self.network.as_ref()
    }

    /// The shared server inventory.
    pub fn inventory(&self) -> &Arc<Inventory> {
        &self.inventory
    }
}

async fn resolve_network(client: &Client, name: &str) -> Result<Network, StartupError> {
    let lookup_err = |source| StartupError::NetworkLookup { name: name.to_owned(), source };
    if let Ok(id) = name.parse::<i64>() {
        return match client.networks().get(NetworkId(id)).await {
            Ok(n) => Ok(n),
            Err(e) if e.is_not_found() => Err(StartupError::NetworkNotFound(name.to_owned())),
            Err(e) => Err(lookup_err(e)),
        };
    }
    client
        .networks()
        .get_by_name(name)
        .await
        .map_err(lookup_err)?
        .ok_or_else(|| StartupError::NetworkNotFound(name.to_owned()))
}

impl Cloud for HcloudCloud {
    type InstancesV2 = HcloudInstances;
    type Instances = Unsupported;
    type Zones = Unsupported;
    type LoadBalancer = HcloudLoadBalancers;
    type Routes = HcloudRoutes;

    fn provider_name(&self) -> &str {
        PROVIDER_NAME
    }

    /// Like the official CCM: no cluster ID, so `--allow-untagged-cloud` is required.
    fn has_cluster_id(&self) -> bool {
        false
    }

    fn instances_v2(&self) -> Option<Arc<HcloudInstances>> {
        Some(self.instances.clone())
    }

    fn instances(&self) -> Option<Arc<Unsupported>> {
        None
    }

    fn zones(&self) -> Option<Arc<Unsupported>> {
        None
    }

    /// Unless `HCLOUD_LOAD_BALANCERS_ENABLED=false`.
    fn load_balancer(&self) -> Option<Arc<HcloudLoadBalancers>> {
        self.load_balancers.clone()
    }

    /// With `HCLOUD_NETWORK` set and `HCLOUD_NETWORK_ROUTES_ENABLED` not false.
    fn routes(&self) -> Option<Arc<HcloudRoutes>> {
        self.routes.clone()
    }

    fn initialize(&self, events: Arc<dyn EventSink>) {
        self.instances.set_events(events.clone());
        if let Some(lb) = &self.load_balancers {
            lb.set_events(events);
        }
    }
}
