//! [`FakeHandle`]: the library form of the control surface, shared with the HTTP layer.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use sync_lock::Unpoison as _;

use crate::config::{FakeConfig, TokenPolicy};
use crate::control::{
    ActionFailure, DataPlaneCheck, DataPlaneListener, DataPlaneStatus, PublicIpv6Change, RequestCounts, RequestRecord,
    ResourceRef, Seed, SeedCertificate, SeedLoadBalancer, SeedNetwork, SeedResult, SeedServer, SeedServerBatch,
    ServerPatch, Settings, StateSnapshot, TargetHealthOverride,
};
use crate::data_plane::shared::DataPlaneShared;
use crate::error::FakeError;
use crate::faults::{ActiveFault, FaultRule, Faults};
use crate::metrics::Metrics;
use crate::projects::{DEFAULT_PROJECT, Projects};
use crate::rate_limit::{RateLimitConfig, RateLimitStatus, TokenBucket};
use crate::robot::{RobotCredentials, RobotServer as RobotServerRecord, RobotServerPatch, RobotState, SeedRobotServer};
use crate::state::State;
use crate::time::now_unix;
use crate::wire::request::IdOrName;
use crate::wire::{Action, Certificate, DeprecationInfo, LoadBalancer, Network, Server, ServerStatus};

/// Locks a mutex; a poisoned lock is recovered (the state stays usable after a panic in a
/// test thread, and every mutation keeps the state consistent before it can panic).

#[derive(Debug)]
pub(crate) struct Shared {
    pub config: FakeConfig,
    /// Every project's state ([`crate::projects`]); the default project's is the fake as it
    /// always was.
    pub projects: Mutex<Projects>,
    pub bucket: Mutex<TokenBucket>,
    pub faults: Mutex<Faults>,
    pub policy: Mutex<TokenPolicy>,
    pub metrics: Mutex<Metrics>,
    pub robot: Mutex<RobotState>,
    pub robot_faults: Mutex<Faults>,
    pub robot_credentials: Mutex<RobotCredentials>,
    /// The opt-in Load Balancer data plane ([`crate::data_plane`]).
    pub data_plane: Option<Arc<DataPlaneShared>>,
}

/// A fresh state for `config` (with the data plane's address pool and health board).
fn fresh_state(config: &FakeConfig, data_plane: Option<&Arc<DataPlaneShared>>) -> State {
    let state = State::new(config.action_delay, config.action_retention);
    match data_plane {
        Some(dp) => state.with_data_plane(&dp.config, Arc::clone(&dp.board)),
        None => state,
    }
}

/// A cloneable handle to one fake's state and controls (`Clone + Send + Sync`).
///
/// Every method first settles due actions, exactly like an HTTP request does. The state
/// methods (seeding, instant mutations, snapshots) work on the handle's project: the default
/// one, unless the handle came from [`FakeHandle::add_project`] or [`FakeHandle::project`]
/// (see [`crate::projects`]); everything else is shared by all projects.
#[derive(Debug, Clone)]
pub struct FakeHandle {
    pub(crate) shared: Arc<Shared>,
    /// The project whose state the state methods work on.
    pub(crate) project: Arc<str>,
}

impl FakeHandle {
    /// A fake without a listener (use [`FakeHandle::router`] to serve it yourself).
    pub fn new(config: FakeConfig) -> Self {
        let data_plane = config.load_balancer_data_plane.clone().map(|c| Arc::new(DataPlaneShared::new(c)));
        Self {
            shared: Arc::new(Shared {
                projects: Mutex::new(Projects::new(fresh_state(&config, data_plane.as_ref()))),
                bucket: Mutex::new(TokenBucket::new(config.rate_limit)),
                faults: Mutex::new(Faults::default()),
                policy: Mutex::new(config.token_policy.clone()),
                metrics: Mutex::new(Metrics::default()),
                robot: Mutex::new(RobotState::default()),
                robot_faults: Mutex::new(Faults::default()),
                robot_credentials: Mutex::new(config.robot_credentials.clone()),
                data_plane,
                config,
            }),
            project: Arc::from(DEFAULT_PROJECT),
        }
    }

    /// Runs `f` on the state after settling due actions; wakes the data plane (if any) to
    /// pick up what changed.
    pub(crate) fn with_state<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let out = self.with_state_quiet(f);
        if let Some(dp) = &self.shared.data_plane {
            dp.changed();
        }
        out
    }

    /// [`FakeHandle::with_state`] without waking the data plane (the data plane's own reads).
    pub(crate) fn with_state_quiet<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut projects = self.shared.projects.lock_unpoisoned();
        let state = projects.state(&self.project);
        state.settle(Instant::now());
        f(state)
    }

    /// Reads the default project's state as it is, without settling (the data plane's
    /// per-connection reads: it carries the default project's Load Balancers only).
    pub(crate) fn with_state_unsettled<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        f(self.shared.projects.lock_unpoisoned().default_state())
    }

    /// Runs `f` on every project's state (fake-wide settings).
    fn with_all_states(&self, mut f: impl FnMut(&mut State)) {
        self.shared.projects.lock_unpoisoned().states().for_each(&mut f);
    }

    pub(crate) fn data_plane_shared(&self) -> Option<Arc<DataPlaneShared>> {
        self.shared.data_plane.clone()
    }

    pub(crate) fn log_requests(&self) -> bool {
        self.shared.config.log_requests
    }

    /// Whether `/v1` accepts `token`: by the policy, or as a token of a project of its own
    /// (unless the policy denies it by name).
    pub(crate) fn token_accepted(&self, token: &str) -> bool {
        let policy = self.shared.policy.lock_unpoisoned();
        policy.accepts(token) || (self.is_project_token(token) && !policy.denies(token))
    }

    pub(crate) fn acquire_rate(&self) -> RateLimitStatus {
        self.shared.bucket.lock_unpoisoned().acquire(Instant::now(), now_unix())
    }

    pub(crate) fn peek_rate(&self) -> RateLimitStatus {
        self.shared.bucket.lock_unpoisoned().peek(Instant::now(), now_unix())
    }

    pub(crate) fn take_fault(&self, method: &str, path: &str) -> Option<FaultRule> {
        self.shared.faults.lock_unpoisoned().take(method, path)
    }

    pub(crate) fn record_request(&self, record: RequestRecord) {
        self.shared.metrics.lock_unpoisoned().record(record);
    }

    // ----- seeding -----

    /// Applies a whole seed (networks, servers, batches, certificates, load balancers).
    /// Stops at the first error; what was created before stays.
    pub fn seed(&self, seed: &Seed) -> Result<SeedResult, FakeError> {
        self.with_state(|s| {
            let mut out = SeedResult::default();
            for n in &seed.networks {
                out.networks.push(s.seed_network(n)?);
            }
            for srv in &seed.servers {
                out.servers.push(s.seed_server(srv)?);
            }
            for b in &seed.server_batches {
                out.servers.extend(s.seed_server_batch(b)?);
            }
            for c in &seed.certificates {
                out.certificates.push(s.seed_certificate(c)?);
            }
            for lb in &seed.load_balancers {
                out.load_balancers.push(s.seed_load_balancer(lb)?);
            }
            Ok::<_, FakeError>(out)
        })
        .and_then(|mut out| {
            for r in &seed.robot_servers {
                out.robot_servers.push(self.seed_robot_server(r)?);
            }
            Ok(out)
        })
    }

    /// Creates a network instantly; returns its id.
    pub fn seed_network(&self, network: &SeedNetwork) -> Result<u64, FakeError> {
        Ok(self.with_state(|s| s.seed_network(network))?)
    }

    /// Creates a server instantly (public IPs and private IPs assigned); returns its id.
    pub fn seed_server(&self, server: &SeedServer) -> Result<u64, FakeError> {
        Ok(self.with_state(|s| s.seed_server(server))?)
    }

    /// Creates `batch.count` servers instantly; returns their ids in order.
    pub fn seed_servers(&self, batch: &SeedServerBatch) -> Result<Vec<u64>, FakeError> {
        Ok(self.with_state(|s| s.seed_server_batch(batch))?)
    }

    /// Creates a load balancer instantly (no action, not locked); returns its id.
    pub fn seed_load_balancer(&self, lb: &SeedLoadBalancer) -> Result<u64, FakeError> {
        Ok(self.with_state(|s| s.seed_load_balancer(lb))?)
    }

    /// Creates a certificate instantly (managed ones already issued); returns its id.
    pub fn seed_certificate(&self, cert: &SeedCertificate) -> Result<u64, FakeError> {
        Ok(self.with_state(|s| s.seed_certificate(cert))?)
    }

    // ----- instant mutations -----

    /// Removes a server at once (no action; ignores locks and protection).
    pub fn delete_server(&self, id: u64) -> Result<(), FakeError> {
        Ok(self.with_state(|s| s.delete_server_now(id))?)
    }

    /// Sets a server's status at once.
    pub fn set_server_status(&self, id: u64, status: ServerStatus) -> Result<(), FakeError> {
        self.update_server(id, &ServerPatch { status: Some(status), ..ServerPatch::default() })
    }

    /// Renames a server at once.
    pub fn rename_server(&self, id: u64, name: &str) -> Result<(), FakeError> {
        self.update_server(id, &ServerPatch { name: Some(name.to_owned()), ..ServerPatch::default() })
    }

    /// Gives a server another public IPv6 network (or none) at once, as unassigning its IPv6
    /// Primary IP and assigning another would (with those two actions, finished at once).
    pub fn change_server_ipv6(&self, id: u64, change: PublicIpv6Change) -> Result<(), FakeError> {
        self.update_server(id, &ServerPatch { public_ipv6: Some(change), ..ServerPatch::default() })
    }

    /// Changes name, status, labels and/or the public IPv6 network of a server at once.
    pub fn update_server(&self, id: u64, patch: &ServerPatch) -> Result<(), FakeError> {
        Ok(self.with_state(|s| s.patch_server(id, patch))?)
    }

    /// Moves a server's private IP in `network` to `ip` at once (like a detach and an attach
    /// with another IP, without actions). Routes via the old IP stay, as blackholes.
    pub fn move_private_ip(&self, server: u64, network: u64, ip: &str) -> Result<(), FakeError> {
        Ok(self.with_state(|s| s.move_private_ip(server, network, ip))?)
    }

    /// Removes the network's route to `destination` at once, as someone outside the client
    /// under test would (no action, no lock).
    pub fn remove_route(&self, network: u64, destination: &str) -> Result<(), FakeError> {
        Ok(self.with_state(|s| s.remove_route_now(network, destination))?)
    }

    /// Sets how many routes a network may have (default: the API's 100), in every project.
    pub fn set_route_limit(&self, max_routes: usize) {
        self.with_all_states(|s| s.max_routes = max_routes);
    }

    /// Sets (or clears) the health a load balancer reports for one of its targets.
    pub fn set_target_health(&self, load_balancer: u64, health: &TargetHealthOverride) -> Result<(), FakeError> {
        Ok(self.with_state(|s| s.set_target_health(load_balancer, health))?)
    }

    /// Deprecates the Load Balancer type `type_` (name or id) as `deprecation` says, from now
    /// on; with `None` it is a current type. `GET /load_balancer_types` and every Load Balancer
    /// of that type serve it; once `unavailable_after` has passed, it can no longer be ordered.
    pub fn set_load_balancer_type_deprecation(
        &self,
        type_: &str,
        deprecation: Option<DeprecationInfo>,
    ) -> Result<(), FakeError> {
        Ok(self.with_state(|s| s.set_lb_type_deprecation(&IdOrName::Name(type_.to_owned()), deprecation))?)
    }

    // ----- faults, locks, action failures -----

    /// Installs a fault; returns its id.
    pub fn inject_fault(&self, rule: FaultRule) -> u64 {
        self.shared.faults.lock_unpoisoned().add(rule)
    }

    /// The installed faults with their remaining counts.
    pub fn faults(&self) -> Vec<ActiveFault> {
        self.shared.faults.lock_unpoisoned().list()
    }

    /// Removes all faults.
    pub fn clear_faults(&self) {
        self.shared.faults.lock_unpoisoned().clear();
    }

    /// Locks a resource: its mutations answer `423 locked` until unlocked.
    pub fn lock_resource(&self, resource: ResourceRef) {
        self.with_state(|s| s.lock(resource));
    }

    /// Removes a lock set by [`FakeHandle::lock_resource`].
    pub fn unlock_resource(&self, resource: ResourceRef) {
        self.with_state(|s| s.unlock(resource));
    }

    /// Makes upcoming actions fail (see [`ActionFailure`]).
    pub fn fail_next_actions(&self, failure: ActionFailure) {
        self.with_state(|s| s.add_action_failure(failure));
    }

    /// Finishes every running action now (applying effects or failures).
    pub fn finish_all_actions(&self) {
        self.with_state(State::finish_all);
    }

    // ----- configuration -----

    /// Sets the delay of newly started actions (zero: they finish immediately), in every
    /// project.
    pub fn set_action_delay(&self, delay: Duration) {
        self.with_all_states(|s| s.action_delay = delay);
    }

    /// Sets how long finished actions are kept (zero: pruned at the next request), in every
    /// project.
    pub fn set_action_retention(&self, retention: Duration) {
        self.with_all_states(|s| s.action_retention = retention);
    }

    /// Sets the rate limit; the bucket starts full.
    pub fn set_rate_limit(&self, capacity: u32, refill_per_second: f64) {
        self.shared.bucket.lock_unpoisoned().reconfigure(RateLimitConfig { capacity, refill_per_second });
    }

    /// Fills the rate-limit bucket.
    pub fn refill_rate_limit(&self) {
        self.shared.bucket.lock_unpoisoned().refill_full();
    }

    /// Sets the token policy.
    pub fn set_token_policy(&self, policy: TokenPolicy) {
        *self.shared.policy.lock_unpoisoned() = policy;
    }

    /// The current settings.
    pub fn settings(&self) -> Settings {
        let (delay, retention) = self.with_state(|s| (s.action_delay, s.action_retention));
        Settings {
            action_delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            action_retention_ms: u64::try_from(retention.as_millis()).unwrap_or(u64::MAX),
            rate_limit: self.shared.bucket.lock_unpoisoned().config(),
            token_policy: self.shared.policy.lock_unpoisoned().clone(),
        }
    }

    // ----- observation -----

    /// Request counters of `/v1` (keys like `GET /v1/servers/{id}`).
    pub fn request_counts(&self) -> RequestCounts {
        self.shared.metrics.lock_unpoisoned().counts()
    }

    /// The count of one endpoint key, e.g. `"POST /v1/load_balancers/{id}/actions/add_target"`.
    pub fn request_count(&self, endpoint: &str) -> u64 {
        self.request_counts().get(endpoint)
    }

    /// The request log, oldest first (at most [`crate::metrics::LOG_CAPACITY`] entries).
    pub fn request_log(&self) -> Vec<RequestRecord> {
        self.shared.metrics.lock_unpoisoned().log()
    }

    /// The requests sent with one token, oldest first: `fingerprint` as in
    /// [`RequestRecord::token_fingerprint`] (see [`crate::token_fingerprint`]).
    pub fn request_log_for(&self, fingerprint: &str) -> Vec<RequestRecord> {
        self.shared.metrics.lock_unpoisoned().log_where(|r| r.token_fingerprint.as_deref() == Some(fingerprint))
    }

    /// The requests sent with `token`, oldest first (the token is only hashed, never stored).
    pub fn request_log_for_token(&self, token: &str) -> Vec<RequestRecord> {
        self.request_log_for(&crate::control::token_fingerprint(token))
    }

    /// Clears counters and log only.
    pub fn reset_requests(&self) {
        self.shared.metrics.lock_unpoisoned().reset();
    }

    /// Back to the start: empty state, no faults, locks or failures, cleared counters, only the
    /// default project, and the configuration the fake was created with.
    pub fn reset(&self) {
        let config = &self.shared.config;
        *self.shared.projects.lock_unpoisoned() = Projects::new(fresh_state(config, self.shared.data_plane.as_ref()));
        if let Some(dp) = &self.shared.data_plane {
            dp.reset();
        }
        *self.shared.bucket.lock_unpoisoned() = TokenBucket::new(config.rate_limit);
        *self.shared.policy.lock_unpoisoned() = config.token_policy.clone();
        self.shared.faults.lock_unpoisoned().clear();
        self.shared.metrics.lock_unpoisoned().reset();
        *self.shared.robot.lock_unpoisoned() = RobotState::default();
        self.shared.robot_faults.lock_unpoisoned().clear();
        *self.shared.robot_credentials.lock_unpoisoned() = config.robot_credentials.clone();
    }

    /// Everything, as the API would serve it.
    pub fn snapshot(&self) -> StateSnapshot {
        self.with_state(|s| s.snapshot())
    }

    /// One server as served.
    pub fn server(&self, id: u64) -> Option<Server> {
        self.with_state(|s| s.server(id))
    }

    /// One network as served.
    pub fn network(&self, id: u64) -> Option<Network> {
        self.with_state(|s| s.network(id))
    }

    /// One load balancer as served.
    pub fn load_balancer(&self, id: u64) -> Option<LoadBalancer> {
        self.with_state(|s| s.load_balancer(id))
    }

    /// One certificate as served.
    pub fn certificate(&self, id: u64) -> Option<Certificate> {
        self.with_state(|s| s.certificate(id))
    }

    // ----- the Robot part (`/robot`) -----

    /// Creates a dedicated server; returns its number.
    pub fn seed_robot_server(&self, server: &SeedRobotServer) -> Result<u64, FakeError> {
        Ok(self.shared.robot.lock_unpoisoned().seed(server)?)
    }

    /// Removes a dedicated server at once (cancelled and gone from `GET /robot/server`).
    pub fn delete_robot_server(&self, number: u64) -> Result<(), FakeError> {
        Ok(self.shared.robot.lock_unpoisoned().delete(number)?)
    }

    /// Changes a dedicated server's name, reset operating status and/or IPv6 network at once.
    pub fn update_robot_server(&self, number: u64, patch: &RobotServerPatch) -> Result<(), FakeError> {
        Ok(self.shared.robot.lock_unpoisoned().patch(number, patch)?)
    }

    /// One dedicated server as stored.
    pub fn robot_server(&self, number: u64) -> Option<RobotServerRecord> {
        self.shared.robot.lock_unpoisoned().get(number).cloned()
    }

    /// Every dedicated server, by number.
    pub fn robot_servers(&self) -> Vec<RobotServerRecord> {
        self.shared.robot.lock_unpoisoned().list()
    }

    /// Installs a fault for the Robot part: the rule's path is relative to `/robot`
    /// (e.g. `/server` or `/robot/server/{id}`); an `error` answers the webservice's envelope
    /// with its status and code (e.g. 403 `RATE_LIMIT_EXCEEDED`). Returns its id.
    pub fn inject_robot_fault(&self, mut rule: FaultRule) -> u64 {
        if let Some(rest) = rule.path.strip_prefix("/robot") {
            rule.path = if rest.is_empty() { "/".to_owned() } else { rest.to_owned() };
        }
        self.shared.robot_faults.lock_unpoisoned().add(rule)
    }

    /// The installed Robot faults.
    pub fn robot_faults(&self) -> Vec<ActiveFault> {
        self.shared.robot_faults.lock_unpoisoned().list()
    }

    /// Removes all Robot faults.
    pub fn clear_robot_faults(&self) {
        self.shared.robot_faults.lock_unpoisoned().clear();
    }

    pub(crate) fn take_robot_fault(&self, method: &str, path_below_robot: &str) -> Option<FaultRule> {
        self.shared.robot_faults.lock_unpoisoned().take(method, path_below_robot)
    }

    /// Sets the Robot basic-auth credentials.
    pub fn set_robot_credentials(&self, credentials: RobotCredentials) {
        *self.shared.robot_credentials.lock_unpoisoned() = credentials;
    }

    /// The Robot basic-auth credentials.
    pub fn robot_credentials(&self) -> RobotCredentials {
        self.shared.robot_credentials.lock_unpoisoned().clone()
    }

    pub(crate) fn with_robot<R>(&self, f: impl FnOnce(&mut RobotState) -> R) -> R {
        f(&mut self.shared.robot.lock_unpoisoned())
    }

    // ----- the Load Balancer data plane -----

    /// The data plane: whether it is on and running, its listeners (with bind errors) and its
    /// health checks. Off: `enabled: false` and nothing else.
    pub fn data_plane(&self) -> DataPlaneStatus {
        self.shared.data_plane.as_ref().map(|dp| dp.status()).unwrap_or_default()
    }

    /// The data plane's listeners, by Load Balancer and address (empty when off).
    pub fn data_plane_listeners(&self) -> Vec<DataPlaneListener> {
        self.data_plane().listeners
    }

    /// The data plane's health checks, by Load Balancer, listen port and target (empty when
    /// off).
    pub fn data_plane_checks(&self) -> Vec<DataPlaneCheck> {
        self.data_plane().checks
    }

    /// One action as served.
    pub fn action(&self, id: u64) -> Option<Action> {
        self.with_state(|s| s.action(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shareable<T: Clone + Send + Sync + 'static>() {}

    #[test]
    fn handle_is_shareable() {
        shareable::<FakeHandle>();
    }

    #[test]
    fn library_calls_settle_actions() {
        let h = FakeHandle::new(FakeConfig::default().with_action_delay(Duration::ZERO));
        let id = h.seed_server(&SeedServer::new("a")).unwrap_or_else(|e| panic!("{e}"));
        assert!(h.server(id).is_some());
        h.set_action_delay(Duration::from_secs(3600));
        let action = h.with_state(|s| s.server_power(id, "stop_server", Some(ServerStatus::Off)));
        let action = action.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(h.action(action).map(|a| a.status), Some(crate::wire::ActionStatus::Running));
        h.finish_all_actions();
        assert_eq!(h.server(id).map(|s| s.status), Some(ServerStatus::Off));
    }
}
