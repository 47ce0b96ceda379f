//! The `LoadBalancer` capability: the thin I/O around the pure planners.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use sync_lock::Unpoison as _;

use cloud_provider::events::{EventObject, EventSink, LogEvents, ProviderEvent};
use cloud_provider::helpers::service::service_name;
use cloud_provider::{CloudError, LoadBalancer as LoadBalancerCapability, LoadBalancerStatus};
use hcloud_api::models::{Action, LoadBalancer, LoadBalancerId, LoadBalancerType, NetworkId};
use hcloud_api::{Client, Error, ErrorCode};
use k8s_openapi::api::core::v1::{Node, Service};
use tracing::{debug, info, warn};

use super::annotations as a;
use super::catalog::Catalog;
use super::defaults::LbDefaults;
use super::lb_inventory::{Found, LbInventory};
use super::plan::{Desired, LbOp, Plan, apply, plan_create, plan_update};
use super::services::desired_services_by_port;
use super::sharing;
use super::sharing::{After, Group, create_labels, plan_shared};
use super::spec::{LbSpec, StatusSpec, leaving};
use super::status::status;
use super::target_health::HealthWarnings;
use super::targets::{RobotTargets, ServerTarget, desired_targets, node_selector_keys};
use super::tracker::{ActionTracker, TrackerPolicy};
use crate::api_error::api_error;
use crate::api_error::robot_error;
use crate::metrics::HcloudMetrics;
use crate::provider_id::ProviderId;
use crate::robot::RobotMode;

/// The reason of a refused adoption (the Load Balancer carries another Service's UID label).
const OWNED_ELSEWHERE: &str = "LoadBalancerOwnedElsewhere";

/// How long a reconcile waits after the API answered `locked` (someone else's action).
const LOCKED_RETRY: Duration = Duration::from_secs(2);

/// Hetzner Cloud Load Balancers for Services.
pub struct HcloudLoadBalancers {
    client: Client,
    defaults: LbDefaults,
    network: Option<NetworkId>,
    inventory: Arc<LbInventory>,
    tracker: Arc<ActionTracker>,
    catalog: Catalog,
    events: Arc<Mutex<Arc<dyn EventSink>>>,
    metrics: HcloudMetrics,
    /// Whether Robot Nodes become targets, and through which list.
    robot: RobotMode,
    /// Watches the targets of each synced Load Balancer and warns about those unhealthy for
    /// longer than the Service allows.
    health: Arc<HealthWarnings>,
    /// One lock per sharing group (`sharing-key`): its members sync one at a time.
    group_locks: Mutex<HashMap<Group, Arc<tokio::sync::Mutex<()>>>>,
}

enum Mode {
    Ensure,
    Update,
}

impl HcloudLoadBalancers {
    /// Load Balancers through `client`, with the cluster's `defaults` and `network`
    /// (`HCLOUD_NETWORK`), the shared list re-read after `max_age`.
    pub fn new(client: Client, defaults: LbDefaults, network: Option<NetworkId>, max_age: Duration) -> Self {
        Self::with_policy(client, defaults, network, max_age, TrackerPolicy::default())
    }

    /// Like [`HcloudLoadBalancers::new`], with the action tracker's poll schedule.
    pub fn with_policy(
        client: Client,
        defaults: LbDefaults,
        network: Option<NetworkId>,
        max_age: Duration,
        policy: TrackerPolicy,
    ) -> Self {
        let events: Arc<Mutex<Arc<dyn EventSink>>> = Arc::new(Mutex::new(Arc::new(LogEvents)));
        let inventory = Arc::new(LbInventory::new(client.clone(), max_age));
        let tracker = ActionTracker::new(client.clone(), inventory.clone(), events.clone(), policy);
        let catalog = Catalog::new(client.clone(), max_age, events.clone());
        let health = HealthWarnings::new(inventory.clone(), events.clone(), max_age);
        HcloudLoadBalancers {
            client,
            defaults,
            network,
            inventory,
            tracker,
            catalog,
            events,
            metrics: HcloudMetrics::default(),
            robot: RobotMode::Off,
            health,
            group_locks: Mutex::default(),
        }
    }

    /// Robot Nodes become IP targets unless `robot` is off; in Load Balancer-only mode only
    /// their InternalIPs can be used.
    pub fn with_robot(mut self, robot: RobotMode) -> Self {
        self.robot = robot;
        self
    }

    /// Counts operations in `metrics`.
    pub fn with_metrics(mut self, metrics: HcloudMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Where events go from now on.
    pub fn set_events(&self, sink: Arc<dyn EventSink>) {
        *self.events.lock_unpoisoned() = sink;
    }

    /// The cached list of the project's Load Balancers that every sync looks its own up in.
    pub fn inventory(&self) -> &Arc<LbInventory> {
        &self.inventory
    }

    /// Which Services' targets are watched for the unhealthy-target warning.
    pub fn health_warnings(&self) -> &Arc<HealthWarnings> {
        &self.health
    }

    /// The Load Balancer actions still running, which a sync waits for before it sends more.
    pub fn tracker(&self) -> &Arc<ActionTracker> {
        &self.tracker
    }

    fn publish(&self, e: ProviderEvent) {
        self.events.lock_unpoisoned().clone().publish(e);
    }

    async fn reconcile(
        &self,
        svc: &Service,
        nodes: &[Node],
        mode: Mode,
        cluster: &str,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let mut spec = LbSpec::from_service(svc, &self.defaults, self.network).map_err(invalid)?;
        if let Some(group) = &spec.sharing
            && !spec.name_annotated
        {
            spec.name = group.default_name(cluster);
        }
        self.reconcile_spec(svc, &spec, nodes, mode, cluster).await
    }

    /// Robot server number → public IPv4, from the cached Robot list, if any Node is a Robot
    /// Node and Robot has credentials. A Robot failure fails the sync: the Load Balancer stays
    /// as it is rather than losing its Robot targets.
    async fn robot_ips(
        &self,
        nodes: &[Node],
        service: &str,
    ) -> Result<Option<HashMap<u64, Option<std::net::Ipv4Addr>>>, CloudError> {
        let Some(inventory) = self.robot.inventory() else {
            return Ok(None);
        };
        let is_robot = |n: &Node| {
            let pid = n.spec.as_ref().and_then(|s| s.provider_id.as_deref()).unwrap_or_default();
            matches!(ProviderId::parse(pid), Ok(ProviderId::Robot(_) | ProviderId::LegacyRobot(_)))
        };
        if !nodes.iter().any(is_robot) {
            return Ok(Some(HashMap::new()));
        }
        let list = inventory
            .servers()
            .await
            .map_err(|e| robot_error(&format!("Service {service}: reading the Robot server list"), e))?;
        Ok(Some(list.iter().map(|s| (s.server_number, s.server_ip)).collect()))
    }

    async fn reconcile_spec(
        &self,
        svc: &Service,
        spec: &LbSpec,
        nodes: &[Node],
        mode: Mode,
        cluster: &str,
    ) -> Result<Option<LoadBalancerStatus>, CloudError> {
        let owner = EventObject::service(svc);
        let service = &spec.service;
        for port in &spec.unsupported_ports {
            self.publish(ProviderEvent::warning(
                owner.clone(),
                "UnsupportedProtocolConfigured",
                format!(
                    "configured unsupported Hetzner Cloud load balancer protocol for port {port} of service with name \
                     {}; only TCP ports are served",
                    svc.metadata.name.as_deref().unwrap_or_default()
                ),
            ));
        }
        let robot_ips = self.robot_ips(nodes, service).await?;
        let robot = self.robot.is_enabled().then_some(RobotTargets {
            public_ips: robot_ips.as_ref(),
            use_private_ip: spec.use_private_ip,
            service: &owner,
        });
        let (targets, node_events) = desired_targets(nodes, &spec.node_selector, service, robot.as_ref());
        for e in node_events {
            self.publish(e);
        }
        // Whether a Load Balancer exists decides what the type must allow, and is known before
        // anything is created (a managed certificate) or sent. Failures of actions tracked before
        // this lookup were handled already (event, fresh read).
        let since = tokio::time::Instant::now();
        // A Service leaves the groups it is no longer in first (never while holding a group's
        // lock: two Services swapping groups would wait on each other).
        self.leave_groups(svc, &spec.uid, cluster, spec.sharing.as_ref(), After::OwnLoadBalancer).await?;
        let group_lock = spec.sharing.as_ref().map(|g| self.group_lock(g));
        let _turn = match &group_lock {
            Some(l) => Some(l.lock().await),
            None => None,
        };
        let mut leftover = None;
        let found = match &spec.sharing {
            Some(group) => {
                let found = self.find_group(group, cluster, &spec.uid, service).await?;
                if found.group.is_some() {
                    leftover = found.dedicated.clone();
                }
                found.group.or(found.dedicated)
            }
            None => match self.inventory.find(&spec.uid, Some(&spec.name)).await {
                Ok(Found::ByName(cached)) => self.adoptable(&cached, spec).await?.into_option(),
                // Read fresh and checked by `adoptable`: its labels are the ones the plan keeps.
                found => found.map_err(|e| lookup_error(service, e))?.into_option(),
            },
        };
        let existing = match found {
            Some(lb) => Some(lb),
            None if matches!(mode, Mode::Update) => {
                debug!(service = %service, "no Load Balancer to update");
                return Ok(None);
            }
            None => None,
        };
        let (target, type_warnings) = self.choose_type(spec, existing).await?;
        let certificates = self.catalog.certificates_for(spec, &owner).await.map_err(|e| catalog_error(service, e))?;
        let port_certificates = self.catalog.port_certificates(spec).await.map_err(|e| catalog_error(service, e))?;
        let services = desired_services_by_port(spec, &certificates.ids, &port_certificates);
        let lb_type = match &target {
            Target::Existing { change, .. } => change.as_ref(),
            Target::New(t) => Some(t),
        };
        let want = Desired { spec, services: &services, targets: &targets, lb_type };

        let mut full: Vec<ServerTarget> = Vec::new();
        let lb = match &target {
            Target::Existing { lb, .. } => lb.clone(),
            Target::New(t) => {
                let (lb, not_added) = self.create(&want, t, &owner, cluster).await?;
                full = not_added;
                lb
            }
        };
        let plan = match &spec.sharing {
            Some(group) => plan_shared(&lb, &want, group, cluster)
                .map_err(|conflicts| conflict_error(service, &lb, group, &conflicts))?,
            None => plan_update(&lb, &want),
        };
        let lb = self.execute(&lb, plan, &owner, &targets, &mut full, since).await?;
        if let Some(own) = leftover.filter(|own| own.id != lb.id) {
            // Joined the group's Load Balancer: the one of its own is no longer needed.
            info!(service = %service, load_balancer = %own.id, "joined a shared Load Balancer; deleting the Service's own");
            self.delete_found(svc, &own, service).await?;
        }
        // Replaced managed certificates go only once the services use the new one.
        self.catalog.retire(&certificates.retire, &lb, spec, &owner).await;
        let mut reported = BTreeSet::new();
        for t in full.into_iter().filter(|t| reported.insert(t.node.clone())) {
            self.publish(ProviderEvent::warning(
                t.object.clone(),
                "MaxTargetsReached",
                format!(
                    "Node could not be added to Load Balancer for service {service} because the max number of targets \
                     has been reached"
                ),
            ));
        }
        // Once the sync went through, like upstream's `EnsuredLoadBalancer` (one per sync).
        for (reason, message) in type_warnings {
            self.publish(ProviderEvent::warning(owner.clone(), reason, message));
        }
        let nodes = targets.iter().map(|t| (t.target, t.node.clone())).collect();
        self.metrics.target_ports(&spec.service, &super::target_health::port_health_counts(&lb));
        self.health.synced(&spec.uid, &owner, &lb, spec.unhealthy_target_warning_after, nodes);
        Ok(Some(status(&lb, &spec.status)))
    }

    /// Creates the Load Balancer of type `lb_type` in one request. Returns it and the Nodes left
    /// out for the type's target limit.
    async fn create(
        &self,
        want: &Desired<'_>,
        lb_type: &LoadBalancerType,
        owner: &EventObject,
        cluster: &str,
    ) -> Result<(Arc<LoadBalancer>, Vec<ServerTarget>), CloudError> {
        let spec = want.spec;
        let service = &spec.service;
        let (mut request, full) = plan_create(want, lb_type).map_err(|inv| {
            CloudError::failed(
                INVALID,
                format!("Service {service} cannot get a new Load Balancer, nothing was created: {inv}"),
            )
        })?;
        if let Some(group) = &spec.sharing {
            let ports: Vec<u16> = request.services.iter().map(|s| s.listen_port).collect();
            request.labels = create_labels(&request.labels, spec, group, cluster, &ports);
        }
        match self.client.load_balancers().create(&request).await {
            Ok(created) => {
                let id = created.resource.id;
                info!(service = %service, load_balancer = %id, name = %request.name, services = request.services.len(),
                      targets = request.targets.len(), "created Load Balancer");
                let lb = self.inventory.insert_created(&spec.uid, created.resource);
                if let Some(action) = &created.action {
                    self.tracker.track(id, action, "creating the Load Balancer".to_owned(), Some(owner.clone()));
                }
                Ok((lb, full))
            }
            Err(e) if e.is_outcome_unknown() => {
                // The create may have happened: never create again before looking it up.
                warn!(service = %service, error = %e, "the answer to creating the Load Balancer was lost; looking it up by label");
                if let Some(group) = &spec.sharing {
                    // Found by its group's labels from now on: read the list again.
                    self.inventory.relist().await.map_err(|l| api_error(&format!("Service {service}: listing"), l))?;
                    let found = self.find_group(group, cluster, &spec.uid, service).await?;
                    return match found.group {
                        Some(lb) => Ok((lb, full)),
                        None => Err(api_error(&format!("Service {service}: creating its shared Load Balancer"), e)),
                    };
                }
                self.inventory.mark_uncertain(&spec.uid);
                match self.inventory.find_by_label(&spec.uid).await {
                    Ok(Some(lb)) => Ok((lb, full)),
                    Ok(None) => Err(api_error(&format!("Service {service}: creating its Load Balancer"), e)),
                    Err(l) => Err(lookup_error(service, l)),
                }
            }
            Err(e) if e.code() == Some(&ErrorCode::UniquenessError) => {
                // Most likely a Load Balancer with this name appeared since the list was read
                // (to be adopted): read the list again and retry soon.
                if let Err(l) = self.inventory.relist().await {
                    warn!(error = %l, "reading the Load Balancer list again failed");
                }
                Err(CloudError::Retry {
                    message: format!(
                        "Service {service}: a Load Balancer named {} appeared meanwhile; adopting it on the next try ({e})",
                        request.name
                    ),
                    retry_after: Duration::from_secs(1),
                })
            }
            Err(e) => Err(api_error(&format!("Service {service}: creating its Load Balancer"), e)),
        }
    }

    async fn send(&self, id: LoadBalancerId, op: &LbOp) -> Result<Option<Action>, Error> {
        let lbs = self.client.load_balancers();
        let action = match op {
            LbOp::Update(req) => {
                let updated = lbs.update(id, req).await?;
                self.inventory.modify(id, |lb| {
                    lb.name = updated.name;
                    lb.labels = updated.labels;
                });
                return Ok(None);
            }
            LbOp::ChangeDnsPtr { ip, dns_ptr } => lbs.change_dns_ptr(id, *ip, Some(dns_ptr)).await?,
            LbOp::ChangeAlgorithm(alg) => lbs.change_algorithm(id, alg.clone()).await?,
            LbOp::ChangeType(t) => lbs.change_type(id, &t.name).await?,
            LbOp::DetachFromNetwork(n) => lbs.detach_from_network(id, *n).await?,
            LbOp::AttachToNetwork(req) => lbs.attach_to_network(id, req).await?,
            LbOp::EnablePublicInterface => lbs.enable_public_interface(id).await?,
            LbOp::DisablePublicInterface => lbs.disable_public_interface(id).await?,
            LbOp::DeleteService(port) => lbs.delete_service(id, *port).await?,
            LbOp::UpdateService(req) => lbs.update_service(id, req).await?,
            LbOp::AddService(s) => lbs.add_service(id, s).await?,
            LbOp::RemoveTarget(t) => lbs.remove_target(id, t).await?,
            LbOp::AddTarget { target, .. } => lbs.add_target(id, target).await?,
        };
        self.inventory.modify(id, |lb| apply(lb, op));
        Ok(Some(action))
    }

    /// Sends `plan`'s operations in order. Each waits for the Load Balancer's outstanding
    /// actions first (the API locks it while one runs); the last ones are confirmed in the
    /// background. Nodes refused for the target limit are added to `full`.
    async fn execute(
        &self,
        lb: &LoadBalancer,
        plan: Plan,
        owner: &EventObject,
        targets: &[ServerTarget],
        full: &mut Vec<ServerTarget>,
        since: tokio::time::Instant,
    ) -> Result<Arc<LoadBalancer>, CloudError> {
        let id = lb.id;
        let what = |op: &LbOp| format!("Load Balancer {} ({id}): {}", lb.name, op.describe());
        full.extend(plan.max_targets_reached);
        let mut reload = false;
        for op in &plan.ops {
            self.tracker.wait_for(id, since).await.map_err(wait_error(id))?;
            info!(load_balancer = %id, "{}", op.describe());
            match self.send(id, op).await {
                Ok(Some(action)) => self.tracker.track(id, &action, op.describe(), Some(owner.clone())),
                Ok(None) => {}
                Err(e) => {
                    let code = e.code().cloned();
                    match (op, code) {
                        (LbOp::AddTarget { node, .. }, Some(ErrorCode::ResourceLimitExceeded)) => {
                            debug!(node = %node, "max targets reached");
                            full.extend(targets.iter().filter(|t| t.node == *node).cloned());
                            self.inventory.mark_stale(id);
                            continue;
                        }
                        (LbOp::AddTarget { .. }, Some(ErrorCode::TargetAlreadyDefined))
                        | (LbOp::RemoveTarget(_) | LbOp::DeleteService(_), Some(ErrorCode::NotFound)) => {
                            // Already as wanted: our picture was behind.
                            debug!(load_balancer = %id, "{}: already done ({e})", op.describe());
                            self.inventory.modify(id, |m| apply(m, op));
                            self.inventory.mark_stale(id);
                            continue;
                        }
                        (_, code) => {
                            self.inventory.mark_stale(id);
                            self.catalog.forget_certificates().await;
                            if code == Some(ErrorCode::Locked) {
                                return Err(CloudError::Retry {
                                    message: format!("{}: the Load Balancer is busy ({e}); trying again", what(op)),
                                    retry_after: LOCKED_RETRY,
                                });
                            }
                            return Err(api_error(&what(op), e));
                        }
                    }
                }
            }
            if let LbOp::AttachToNetwork(req) = op
                && req.ip.is_none()
            {
                reload = true;
            }
        }
        if reload {
            // The private IP the API picked is needed for the status.
            self.tracker.wait_for(id, since).await.map_err(wait_error(id))?;
            self.inventory.mark_stale(id);
        }
        let current = match self.inventory.get(id).await {
            Ok(Some(lb)) => lb,
            Ok(None) => {
                self.tracker.forget(id);
                return Err(CloudError::transient(
                    "LoadBalancerNotFound",
                    format!("Load Balancer {} ({id}) is gone", lb.name),
                    None,
                ));
            }
            Err(e) => return Err(api_error(&format!("Load Balancer {id}: reading it"), e)),
        };
        Ok(current)
    }

    /// The status spec even when some annotations are bad (status must not block deletion).
    fn lenient_status(&self, svc: &Service) -> StatusSpec {
        match LbSpec::from_service(svc, &self.defaults, self.network) {
            Ok(spec) => spec.status,
            Err(invalid) => invalid.status,
        }
    }
}

impl LoadBalancerCapability for HcloudLoadBalancers {
    async fn get_load_balancer(&self, _cluster: &str, svc: &Service) -> Result<Option<LoadBalancerStatus>, CloudError> {
        self.metrics.operation("hcloud/loadBalancers.GetLoadBalancer");
        let uid = svc.metadata.uid.as_deref().unwrap_or_default();
        let service = service_name(svc);
        let mut lb =
            self.inventory.find_by_label(uid).await.map_err(|e| reason_in_message(lookup_error(&service, e)))?;
        if lb.is_none() {
            let what = format!("Service {service}: looking up its shared Load Balancer");
            let shared = self.inventory.matching(|lb| sharing::is_member(lb, uid)).await;
            lb = shared.map_err(|e| reason_in_message(api_error(&what, e)))?.into_iter().next();
        }
        if lb.is_none() && leaving(svc) {
            // The controller deletes nothing when nothing is found: forgotten here (the API was
            // asked if a create was uncertain).
            self.inventory.forget_uncertain(uid);
        }
        Ok(lb.map(|lb| status(&lb, &self.lenient_status(svc))))
    }

    fn get_load_balancer_name(&self, _cluster: &str, svc: &Service) -> String {
        match svc.metadata.annotations.as_ref().and_then(|m| m.get(a::NAME)) {
            Some(n) if !n.is_empty() => n.clone(),
            _ => cloud_provider::default_load_balancer_name(svc),
        }
    }

    async fn ensure_load_balancer(
        &self,
        cluster: &str,
        svc: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, CloudError> {
        self.metrics.operation("hcloud/loadBalancers.EnsureLoadBalancer");
        let status = self.reconcile(svc, nodes, Mode::Ensure, cluster).await.map_err(reason_in_message)?;
        // Ensure always creates when nothing is found, so a status exists.
        Ok(status.unwrap_or_default())
    }

    async fn update_load_balancer(&self, cluster: &str, svc: &Service, nodes: &[Node]) -> Result<(), CloudError> {
        self.metrics.operation("hcloud/loadBalancers.UpdateLoadBalancer");
        self.reconcile(svc, nodes, Mode::Update, cluster).await.map(|_| ()).map_err(reason_in_message)
    }

    /// The keys the `node-selector` annotation looks at (none when it is absent or invalid:
    /// the sync reports an invalid one).
    fn node_label_keys(&self, svc: &Service) -> Vec<String> {
        node_selector_keys(svc)
    }

    async fn ensure_load_balancer_deleted(&self, cluster: &str, svc: &Service) -> Result<(), CloudError> {
        self.metrics.operation("hcloud/loadBalancers.EnsureLoadBalancerDeleted");
        let uid = svc.metadata.uid.clone().unwrap_or_default();
        let service = service_name(svc);
        self.health.unwatch(&uid);
        self.metrics.forget_target_ports(&service);
        self.leave_groups(svc, &uid, cluster, None, After::Nothing).await.map_err(reason_in_message)?;
        self.delete(svc, &uid, &service).await.map_err(reason_in_message)
    }

    /// No: a sync reads the Load Balancer, plans against what it read and sends the plan, so
    /// two syncs of one Service at once would act on each other's half-sent plans (an update
    /// re-adding targets to a Load Balancer being deleted, both adding the same target, or
    /// waiting out each other's actions as `locked`).
    fn calls_for_one_service_may_overlap(&self) -> bool {
        false
    }
}

#[path = "adoption.rs"]
mod adoption;
#[path = "deletion.rs"]
mod deletion;
#[path = "errors.rs"]
mod errors;
use errors::{INVALID, catalog_error, conflict_error, invalid, lookup_error, reason_in_message, wait_error};
#[path = "shared.rs"]
mod shared;
#[path = "type_lookup.rs"]
mod type_lookup;

/// The Load Balancer a sync works on.
pub(super) enum Target {
    /// The one found, and the type it changes to, if any.
    Existing { lb: Arc<LoadBalancer>, change: Option<LoadBalancerType> },
    /// A new one, of this type.
    New(LoadBalancerType),
}
