//! [`State`]: every resource, action, lock and id counter of one fake, and the lock rules.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use super::effect::{ActionRecord, render_action};
use super::ipam::{DataPlanePool, PublicIps};
use super::records::{CertificateRecord, HealthKey, LoadBalancerRecord, NetworkRecord, PrimaryIpRecord, ServerRecord};
use crate::control::{ActionFailure, ResourceKind, ResourceRef, StateSnapshot};
use crate::data_plane::board::SharedBoard;
use crate::data_plane::config::DataPlaneConfig;
use crate::error::ApiError;
use crate::sort::{SortRequest, SortValue};
use crate::wire::DeprecationInfo;

/// First ids of each kind (distinct ranges catch id mix-ups).
/// How far apart the id ranges of two projects are: ids are unique across projects, as on
/// Hetzner, so another project's resource is never found under an id of one's own.
pub const PROJECT_ID_STRIDE: u64 = 1_000_000_000;

pub(crate) mod first_id {
    /// Servers.
    pub const SERVER: u64 = 10_000_001;
    /// Networks.
    pub const NETWORK: u64 = 20_001;
    /// Load balancers.
    pub const LOAD_BALANCER: u64 = 30_001;
    /// Certificates.
    pub const CERTIFICATE: u64 = 40_001;
    /// Primary IPs (ids of public IPv4/IPv6 objects).
    pub const PRIMARY_IP: u64 = 50_000_001;
    /// Actions.
    pub const ACTION: u64 = 1_000_001;
}

#[derive(Debug)]
pub(super) struct Ids {
    pub(super) server: u64,
    pub(super) network: u64,
    pub(super) load_balancer: u64,
    pub(super) certificate: u64,
    pub(super) primary_ip: u64,
    pub(super) action: u64,
    mac: u64,
}

impl Ids {
    /// The first ids of the `project`-th project (0: the default one).
    fn of_project(project: u64) -> Self {
        let offset = project.saturating_mul(PROJECT_ID_STRIDE);
        Self {
            server: first_id::SERVER + offset,
            network: first_id::NETWORK + offset,
            load_balancer: first_id::LOAD_BALANCER + offset,
            certificate: first_id::CERTIFICATE + offset,
            primary_ip: first_id::PRIMARY_IP + offset,
            action: first_id::ACTION + offset,
            mac: 1,
        }
    }
}

impl Default for Ids {
    fn default() -> Self {
        Self::of_project(0)
    }
}

/// Sorts records by the requested `id`, `name` and `created` (see [`SortRequest`]).
pub(super) fn sort_records<T>(sort: &SortRequest, records: &mut [&T], key: impl Fn(&T) -> (u64, &str, i64)) {
    sort.apply(records, |r, field| {
        let (id, name, created) = key(r);
        match field {
            "name" => SortValue::Text(Some(name)),
            "created" => SortValue::Int(created),
            _ => SortValue::id(id),
        }
    });
}

/// Hands out the counter's value and advances it.
pub(super) fn bump(counter: &mut u64) -> u64 {
    let id = *counter;
    *counter += 1;
    id
}

/// The whole state of a fake.
#[derive(Debug)]
pub(crate) struct State {
    pub action_delay: Duration,
    /// Most routes a network may have (the API's documented 100 unless a test changes it).
    pub max_routes: usize,
    /// How long finished actions are kept.
    pub action_retention: Duration,
    /// Finished actions in the order they finished (for pruning).
    pub(super) finished_order: VecDeque<(Instant, u64)>,
    pub(super) ids: Ids,
    pub servers: BTreeMap<u64, ServerRecord>,
    pub networks: BTreeMap<u64, NetworkRecord>,
    pub load_balancers: BTreeMap<u64, LoadBalancerRecord>,
    pub certificates: BTreeMap<u64, CertificateRecord>,
    /// Unassigned Primary IPs (those of servers live in the server records).
    pub(super) primary_ips: BTreeMap<u64, PrimaryIpRecord>,
    pub actions: BTreeMap<u64, ActionRecord>,
    pub(super) running: BTreeSet<u64>,
    /// When the state was last settled: the moment the current request got its turn. Actions
    /// are rendered as of then, so a request's own time (even a stalled one) never shows as
    /// progress: an action is at 0 % in the answer of the request that started it, as in the API.
    pub(super) settled_at: Option<Instant>,
    manual_locks: BTreeSet<ResourceRef>,
    pub(super) action_failures: Vec<ActionFailure>,
    pub(super) public_ips: PublicIps,
    /// Health set by tests: (load balancer, target, listen port or all) -> status.
    pub(crate) target_health: BTreeMap<(u64, HealthKey, Option<u16>), String>,
    /// With the data plane on: where Load Balancers take their public IPv4 from.
    pub(super) lb_address_pool: Option<DataPlanePool>,
    /// With the data plane on: the health checks' results (what `health_status` reports).
    pub(crate) health_board: Option<SharedBoard>,
    /// Deprecations set by tests, by Load Balancer type id (`None`: not deprecated), over the
    /// catalogue's.
    pub(super) lb_type_deprecations: BTreeMap<u64, Option<DeprecationInfo>>,
}

/// Most routes a network may have: the API's documented limit (a test may change it with
/// [`crate::FakeHandle::set_route_limit`]).
pub(crate) const MAX_ROUTES: usize = 100;

impl State {
    /// An empty state.
    pub fn new(action_delay: Duration, action_retention: Duration) -> Self {
        Self {
            action_delay,
            max_routes: MAX_ROUTES,
            action_retention,
            finished_order: VecDeque::new(),
            ids: Ids::default(),
            servers: BTreeMap::new(),
            networks: BTreeMap::new(),
            load_balancers: BTreeMap::new(),
            certificates: BTreeMap::new(),
            primary_ips: BTreeMap::new(),
            actions: BTreeMap::new(),
            running: BTreeSet::new(),
            settled_at: None,
            manual_locks: BTreeSet::new(),
            action_failures: Vec::new(),
            public_ips: PublicIps::default(),
            target_health: BTreeMap::new(),
            lb_address_pool: None,
            health_board: None,
            lb_type_deprecations: BTreeMap::new(),
        }
    }

    /// The state of the `project`-th project (0: the default one, as [`State::new`]): its ids
    /// and public addresses come from ranges of its own (see [`PROJECT_ID_STRIDE`] and
    /// [`PublicIps::of_project`]).
    pub fn of_project(action_delay: Duration, action_retention: Duration, project: u64) -> Self {
        let mut state = Self::new(action_delay, action_retention);
        state.ids = Ids::of_project(project);
        state.public_ips = PublicIps::of_project(project);
        state
    }

    /// With the data plane on: Load Balancers take addresses from `config`, and target health
    /// comes from `board`.
    pub fn with_data_plane(mut self, config: &DataPlaneConfig, board: SharedBoard) -> Self {
        self.lb_address_pool = Some(DataPlanePool::new(config.clone()));
        self.health_board = Some(board);
        self
    }

    /// Locks a resource for tests.
    pub fn lock(&mut self, r: ResourceRef) {
        self.manual_locks.insert(r);
    }

    /// Removes a test lock.
    pub fn unlock(&mut self, r: ResourceRef) {
        self.manual_locks.remove(&r);
    }

    /// Whether a test locked the resource.
    pub fn is_manually_locked(&self, r: ResourceRef) -> bool {
        self.manual_locks.contains(&r)
    }

    /// Whether mutations of the resource answer `locked`.
    pub fn is_locked(&self, kind: ResourceKind, id: u64) -> bool {
        let r = ResourceRef { kind, id };
        self.manual_locks.contains(&r)
            || self
                .running
                .iter()
                .any(|a| self.actions.get(a).and_then(|a| a.resources.first()).is_some_and(|first| *first == r))
    }

    /// `Err(locked)` if the resource is locked.
    pub fn ensure_unlocked(&self, kind: ResourceKind, id: u64) -> Result<(), ApiError> {
        if self.is_locked(kind, id) { Err(ApiError::locked(kind.as_str(), id)) } else { Ok(()) }
    }

    /// A snapshot of everything.
    pub fn snapshot(&self) -> StateSnapshot {
        StateSnapshot {
            servers: self.servers.values().map(|s| self.render_server(s)).collect(),
            networks: self.networks.values().map(|n| self.render_network(n)).collect(),
            load_balancers: self.load_balancers.values().map(|l| self.render_load_balancer(l)).collect(),
            certificates: self.certificates.values().map(|c| self.render_certificate(c)).collect(),
            actions: self.actions.values().map(|a| render_action(a, self.render_time())).collect(),
        }
    }

    pub(super) fn next_primary_ip_id(&mut self) -> u64 {
        bump(&mut self.ids.primary_ip)
    }

    pub(super) fn next_mac(&mut self) -> String {
        let n = bump(&mut self.ids.mac);
        format!("86:00:00:{:02x}:{:02x}:{:02x}", (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff)
    }

    /// The id the next action will get.
    pub(super) fn peek_action_id(&self) -> u64 {
        self.ids.action
    }
}
