//! The Hetzner `Cloud`: start-up checks and the capabilities it offers.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use sync_lock::Unpoison as _;

use cloud_provider::events::EventSink;
use cloud_provider::{Cloud, Unsupported};
use hcloud_api::models::{Network, NetworkId};
use hcloud_api::{Client, ErrorCode, RequestGate, WriteGate};
use secrecy::ExposeSecret;
use tracing::{info, warn};

use crate::config::{CacheMode, Config, RobotConfig};
use crate::instances::{HcloudInstances, RobotSupport};
use crate::inventory::Inventory;
use crate::load_balancers::HcloudLoadBalancers;
use crate::metrics::HcloudMetrics;
use crate::robot::{RobotInventory, RobotMode};
use crate::rotation::project::ProjectWitness;
use crate::rotation::{CredentialRotation, EventSlot, Refusals, RobotPair, Source};
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
        /// The API base URL tried.
        endpoint: String,
        /// The request's error.
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
        /// The `HCLOUD_NETWORK` value.
        name: String,
        /// The API's error.
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
    /// Consulted before every Cloud API call that writes (a dry run); a refusal keeps it from
    /// being sent. The Robot webservice is only read.
    pub write_gate: Option<WriteGate>,
}

/// The Hetzner Cloud provider.
pub struct HcloudCloud {
    client: Client,
    network: Option<Network>,
    inventory: Arc<Inventory>,
    instances: Arc<HcloudInstances>,
    routes: Option<Arc<HcloudRoutes>>,
    load_balancers: Option<Arc<HcloudLoadBalancers>>,
    rotation: Mutex<Option<CredentialRotation>>,
    /// Where the credential rotation's Warnings go (set by `initialize`).
    rotation_events: EventSlot,
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
        // The metrics, and a 401 of the token in use wakes the credential rotation.
        let refusals = Refusals::default();
        builder = builder.observer(refusals.token_observer(metrics.observer()));
        if let Some(gate) = hooks.gate.clone() {
            builder = builder.gate(gate);
        }
        if let Some(gate) = hooks.write_gate.clone() {
            builder = builder.write_gate(gate);
        }
        let client = builder.build().map_err(StartupError::Client)?;
        metrics.watch_rate_limit(&client);

        match client.locations().list_all().await {
            Ok(locations) => info!(locations = locations.len(), endpoint = client.endpoint(),
                fingerprint = client.token_fingerprint(), token_file = ?config.token_file, "Hetzner Cloud token accepted"),
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

        let inventory = Arc::new(
            Inventory::with_stats(client.clone(), config.cache_mode, metrics.inventory(config.cache_mode))
                .with_network(network.as_ref().map(|n| n.id))
                .with_change_detection(config.change_detection),
        );
        let (robot, robot_client) = robot_mode(config.robot.as_ref(), hooks.gate.clone(), &metrics, &refusals)?;
        // What a rotated token must see: the network, else the servers Nodes name.
        let witness = Arc::new(ProjectWitness::new(network.as_ref().map(|n| n.id)));
        let rotation_events: EventSlot = Arc::new(OnceLock::new());
        let rotation = CredentialRotation::new(metrics.clone(), refusals);
        let rotation = credential_rotation(config, &client, robot_client, rotation, &witness, &rotation_events);
        let mut instances = HcloudInstances::new(
            inventory.clone(),
            network.as_ref().map(|n| n.id),
            config.address_family,
            config.zone_label_enabled,
            config.cache_max_age,
            config.lifecycle_max_age,
        )
        .with_metrics(metrics.clone())
        .with_witness(witness);
        instances = instances.with_robot(RobotSupport {
            mode: robot.clone(),
            forward_internal_ips: config.robot.as_ref().is_some_and(|r| r.forward_internal_ips),
        });
        let instances = Arc::new(instances);
        let routes = routes_config(config, network.as_ref()).map(|settings| {
            info!(network = %settings.network_name, cluster_cidrs = ?settings.cluster_cidrs,
                "routes enabled in the private network");
            Arc::new(HcloudRoutes::new(client.clone(), inventory.clone(), settings, metrics.clone()))
        });
        let load_balancers = config.load_balancers_enabled.then(|| {
            let lbs = HcloudLoadBalancers::new(
                client.clone(),
                config.load_balancers.clone(),
                network.as_ref().map(|n| n.id),
                config.load_balancers_max_age,
            )
            .with_metrics(metrics);
            Arc::new(lbs.with_robot(robot))
        });
        if load_balancers.is_none() {
            info!("HCLOUD_LOAD_BALANCERS_ENABLED=false: Services of type LoadBalancer are not served");
        }
        Ok(HcloudCloud {
            client,
            network,
            inventory,
            instances,
            routes,
            load_balancers,
            rotation: Mutex::new(rotation),
            rotation_events,
        })
    }

    /// The watcher of the credential files (`HCLOUD_TOKEN_FILE`, `ROBOT_USER_FILE`,
    /// `ROBOT_PASSWORD_FILE`) for the program to run next to the controllers; `None` when no
    /// credential came from a file (or it was taken already).
    pub fn take_credential_rotation(&self) -> Option<CredentialRotation> {
        self.rotation.lock_unpoisoned().take()
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

/// `rotation` watching the credentials that came from files: the token of `client` and, with
/// `robot_client`, the Robot pair; `None` when none came from a file.
fn credential_rotation(
    config: &Config,
    client: &Client,
    robot_client: Option<RobotClient>,
    mut rotation: CredentialRotation,
    witness: &Arc<ProjectWitness>,
    events: &EventSlot,
) -> Option<CredentialRotation> {
    if let Some(file) = &config.token_file {
        let (token, witness, events) = (config.token.clone(), witness.clone(), events.clone());
        rotation = rotation.watch_token(file.clone(), client.clone(), token, witness, events);
    }
    let robot = config.robot.as_ref();
    if let (Some(robot_client), Some(robot)) = (robot_client, robot)
        && let Some((user, password)) = &robot.credentials
    {
        let source = |file: &Option<std::path::PathBuf>| file.clone().map_or(Source::Fixed, Source::File);
        let in_use = RobotPair { user: user.clone(), password: password.clone() };
        let files = &robot.credential_files;
        rotation = rotation.watch_robot(source(&files.user), source(&files.password), robot_client, in_use);
    }
    if rotation.is_watching() {
        info!(?rotation, interval = ?crate::rotation::POLL_INTERVAL,
            "credential files are watched: a new credential is checked and used without a restart");
        Some(rotation)
    } else {
        None
    }
}

/// The Robot support `robot` (the `ROBOT_*` settings, `None` unless `ROBOT_ENABLED`) asks
/// for; with credentials, a Robot client behind `gate`, counted in `metrics` (returned too:
/// the credential rotation replaces its credentials).
fn robot_mode(
    robot: Option<&RobotConfig>,
    gate: Option<RequestGate>,
    metrics: &HcloudMetrics,
    refusals: &Refusals,
) -> Result<(RobotMode, Option<RobotClient>), StartupError> {
    let Some(robot) = robot else {
        return Ok((RobotMode::Off, None));
    };
    let Some((user, password)) = &robot.credentials else {
        info!("ROBOT_ENABLED without ROBOT_USER/ROBOT_PASSWORD: Load Balancer-only Robot mode");
        return Ok((RobotMode::LoadBalancerOnly, None));
    };
    let mut client = RobotClient::new(&robot.endpoint, user, password.clone())
        .map_err(StartupError::RobotClient)?
        .with_timeout(Duration::from_secs(15));
    if let Some(gate) = gate {
        client = client.with_gate(gate);
    }
    client = client.with_observer(refusals.robot_observer(metrics.robot_observer()));
    info!(endpoint = %robot.endpoint, user = %user, cache_timeout = ?robot.cache_timeout,
        rate_limit_wait = ?robot.rate_limit_wait, "Robot (dedicated server) support enabled");
    let inventory = RobotInventory::new(client.clone(), robot.cache_timeout, robot.rate_limit_wait);
    Ok((RobotMode::Full(Arc::new(inventory)), Some(client)))
}

/// The routes' settings when routes are enabled and the network resolved: routes only
/// inside the cluster CIDRs the configuration was read with.
fn routes_config(config: &Config, network: Option<&Network>) -> Option<RoutesConfig> {
    let network = network.filter(|_| config.routes_enabled)?;
    Some(RoutesConfig {
        network: network.id,
        network_name: network.name.clone(),
        cluster_cidrs: config.cluster_cidrs.clone(),
        confirm_max_age: config.cache_max_age,
    })
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
        let _ = self.rotation_events.set(events.clone());
        self.instances.set_events(events.clone());
        if let Some(lb) = &self.load_balancers {
            lb.set_events(events);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn config(pairs: &[(&str, &str)], cluster_cidrs: Vec<ipnet::IpNet>) -> Config {
        let token = "x".repeat(64);
        let mut m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        m.insert("HCLOUD_TOKEN".into(), token);
        Config::from_env(move |k| m.get(k).cloned(), cluster_cidrs).expect("valid")
    }

    #[test]
    fn the_robot_mode_follows_robot_enabled_and_the_credentials() {
        let credentials = [("ROBOT_USER", "u"), ("ROBOT_PASSWORD", "p")];
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[], "off"),
            (&credentials, "off"),
            (&[("ROBOT_ENABLED", "false"), ("ROBOT_USER", "u"), ("ROBOT_PASSWORD", "p")], "off"),
            (&[("ROBOT_ENABLED", "true")], "load-balancer-only"),
            (&[("ROBOT_ENABLED", "1"), ("ROBOT_USER", ""), ("ROBOT_PASSWORD", "")], "load-balancer-only"),
            (&[("ROBOT_ENABLED", "true"), ("ROBOT_USER", "u"), ("ROBOT_PASSWORD", "p")], "full"),
            (
                &[
                    ("ROBOT_ENABLED", "t"),
                    ("ROBOT_USER", "u"),
                    ("ROBOT_PASSWORD", "p"),
                    ("ROBOT_ENDPOINT", "http://127.0.0.1:1"),
                ],
                "full",
            ),
        ];
        for (env, expected) in cases {
            let c = config(env, Vec::new());
            let (mode, client) = robot_mode(c.robot.as_ref(), None, &HcloudMetrics::default(), &Refusals::default())
                .expect("client builds");
            assert_eq!(client.is_some(), *expected == "full", "{env:?}");
            let got = match mode {
                RobotMode::Off => "off",
                RobotMode::LoadBalancerOnly => "load-balancer-only",
                RobotMode::Full(_) => "full",
            };
            assert_eq!(got, *expected, "{env:?}");
            assert_eq!(mode.is_enabled(), *expected != "off", "{env:?}");
            assert_eq!(mode.inventory().is_some(), *expected == "full", "{env:?}");
        }
    }

    #[test]
    fn the_cluster_cidrs_of_the_config_reach_the_routes() {
        let network: Network =
            serde_json::from_value(serde_json::json!({"id": 7, "name": "k8s", "ip_range": "10.0.0.0/8"})).expect("net");
        let cidrs: Vec<ipnet::IpNet> = vec!["10.244.0.0/16".parse().expect("cidr")];
        let c = config(&[("HCLOUD_NETWORK", "k8s"), ("HCLOUD_SERVER_CACHE_MAX_AGE", "3s")], cidrs.clone());
        let routes = routes_config(&c, Some(&network)).expect("routes on");
        assert_eq!(routes.cluster_cidrs, cidrs);
        assert_eq!((routes.network, routes.network_name.as_str()), (NetworkId(7), "k8s"));
        assert_eq!(routes.confirm_max_age, Duration::from_secs(3));
        assert!(routes_config(&c, None).is_none(), "no network resolved");
        let off = config(&[("HCLOUD_NETWORK", "k8s"), ("HCLOUD_NETWORK_ROUTES_ENABLED", "false")], cidrs);
        assert!(routes_config(&off, Some(&network)).is_none(), "routes turned off");
    }
}
