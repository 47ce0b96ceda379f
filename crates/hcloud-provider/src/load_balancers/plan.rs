//! Observed Load Balancer + desired state → the exact API operations, pure.
//!
//! The order is the official CCM's: identity label and name, reverse DNS, algorithm, type,
//! networks (detach foreign or mis-addressed ones, then attach `HCLOUD_NETWORK`), public
//! interface; then one LB service per Service port (stale ones first removed, then changed
//! ones updated, then missing ones added); then targets (stale ones removed, missing ones
//! added up to the type's `max_targets`, the rest reported as `MaxTargetsReached`).
//!
//! Nothing is planned for what already matches, so a reconcile of an unchanged Service sends
//! no request. [`apply`] is the effect of one operation on the observed Load Balancer — the
//! model the shared inventory keeps instead of re-reading the Load Balancer; planning again on
//! the result yields nothing (tested).

use std::net::IpAddr;
use std::sync::Arc;

use hcloud_api::models::{
    Algorithm, AlgorithmSpec, AttachLbToNetworkRequest, CreateLoadBalancerRequest, IdRef, IpRef, LbPrivateNet,
    LbService, LbTarget, LoadBalancer, LoadBalancerId, LoadBalancerType, NetworkId, TargetKind, TargetSpec,
    UpdateLoadBalancerRequest, UpdateServiceRequest,
};

use super::annotations::{self as a, Invalid, LABEL_SERVICE_UID};
use super::groups::LABEL_KEY as LABEL_SHARING_KEY;
use super::ownership::Record;
use super::services::{DesiredService, apply_update};
use super::spec::{LbSpec, Placement};
use super::targets::{ServerTarget, TargetRef};

/// One API operation on an existing Load Balancer.
#[derive(Debug, Clone, PartialEq)]
pub enum LbOp {
    /// `PUT /load_balancers/{id}`: name and/or labels.
    Update(UpdateLoadBalancerRequest),
    /// `change_dns_ptr`.
    ChangeDnsPtr {
        /// The public IP.
        ip: IpAddr,
        /// The PTR record.
        dns_ptr: String,
    },
    /// `change_algorithm`.
    ChangeAlgorithm(Algorithm),
    /// `change_type` (the full type, so the model knows its limits).
    ChangeType(LoadBalancerType),
    /// `detach_from_network`.
    DetachFromNetwork(NetworkId),
    /// `attach_to_network`.
    AttachToNetwork(AttachLbToNetworkRequest),
    /// `enable_public_interface`.
    EnablePublicInterface,
    /// `disable_public_interface`.
    DisablePublicInterface,
    /// `delete_service`.
    DeleteService(u16),
    /// `update_service`.
    UpdateService(UpdateServiceRequest),
    /// `add_service`.
    AddService(LbService),
    /// `remove_target`.
    RemoveTarget(TargetSpec),
    /// `add_target`, for the named Node.
    AddTarget {
        /// The target as `add_target` takes it (a server, with `use_private_ip`, or a Robot IP).
        target: TargetSpec,
        /// The Node's name.
        node: String,
    },
}

impl LbOp {
    /// A short description for logs and errors.
    pub fn describe(&self) -> String {
        match self {
            LbOp::Update(r) => match (&r.name, &r.labels) {
                (Some(n), Some(_)) => format!("renaming to {n} and setting the {LABEL_SERVICE_UID} label"),
                (Some(n), None) => format!("renaming to {n}"),
                _ => "setting its labels".to_owned(),
            },
            LbOp::ChangeDnsPtr { ip, dns_ptr } => format!("setting the reverse DNS of {ip} to {dns_ptr}"),
            LbOp::ChangeAlgorithm(alg) => format!("changing the algorithm to {}", alg.as_str()),
            LbOp::ChangeType(t) => format!("changing the type to {}", t.name),
            LbOp::DetachFromNetwork(n) => format!("detaching from network {n}"),
            LbOp::AttachToNetwork(r) => format!("attaching to network {}", r.network),
            LbOp::EnablePublicInterface => "enabling the public interface".to_owned(),
            LbOp::DisablePublicInterface => "disabling the public interface".to_owned(),
            LbOp::DeleteService(p) => format!("removing the service on port {p}"),
            LbOp::UpdateService(r) => format!("updating the service on port {}", r.listen_port),
            LbOp::AddService(s) => format!("adding a service on port {}", s.listen_port),
            LbOp::RemoveTarget(t) => format!("removing target {}", describe_target(t)),
            LbOp::AddTarget { node, .. } => format!("adding node {node} as a target"),
        }
    }

    /// Whether the API answers it with an action (everything but the `PUT`).
    pub fn is_action(&self) -> bool {
        !matches!(self, LbOp::Update(_))
    }
}

fn describe_target(t: &TargetSpec) -> String {
    match t {
        TargetSpec::Server { id, .. } => format!("server {id}"),
        TargetSpec::Ip(ip) => format!("IP {ip}"),
        TargetSpec::LabelSelector { selector, .. } => format!("label selector {selector}"),
    }
}

/// The operations for one Load Balancer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// Operations, in order.
    pub ops: Vec<LbOp>,
    /// Nodes that are not added because the type's `max_targets` is reached.
    pub max_targets_reached: Vec<ServerTarget>,
}

/// Everything a plan needs besides the observed Load Balancer.
#[derive(Debug, Clone, Copy)]
pub struct Desired<'a> {
    /// The desired Load Balancer.
    pub spec: &'a LbSpec,
    /// Its services (certificates resolved).
    pub services: &'a [DesiredService],
    /// The servers (and Robot IPs) that should be targets, one per server or IP, from the Nodes
    /// the `node-selector` selects.
    pub targets: &'a [ServerTarget],
    /// The configured type, if `spec.lb_type` is set (needed to change it).
    pub lb_type: Option<&'a LoadBalancerType>,
}

/// A Load Balancer found by name that carries another owner's identity label: never adopted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Load Balancer {name} ({id}) carries the label {label}={owner}: it belongs to another Service (or \
     another cluster) and is not adopted, nothing was changed; choose another name with the annotation {}, or \
     remove the label from that Load Balancer to hand it over",
    a::NAME
)]
pub struct OwnedElsewhere {
    /// The Load Balancer's name.
    pub name: String,
    /// The Load Balancer's id.
    pub id: LoadBalancerId,
    /// The label that makes it someone else's: the identity label, or a shared one's key.
    pub label: &'static str,
    /// The label's value.
    pub owner: String,
}

/// Whether the Service `uid` may adopt `lb`, found by its name: only a Load Balancer without
/// the identity label (created by an official CCM before the label existed, or imported) or
/// with this Service's UID. One labelled for anyone else is refused: adopting it would
/// rewrite its label, services and targets, two Services would fight over it, and deleting
/// either Service would delete it.
pub fn check_adoption(lb: &LoadBalancer, uid: &str) -> Result<(), OwnedElsewhere> {
    let elsewhere =
        |label, owner: &String| OwnedElsewhere { name: lb.name.clone(), id: lb.id, label, owner: owner.clone() };
    // A shared Load Balancer belongs to its group's members: never adopted by name.
    if let Some(key) = lb.labels.get(LABEL_SHARING_KEY) {
        return Err(elsewhere(LABEL_SHARING_KEY, key));
    }
    match lb.labels.get(LABEL_SERVICE_UID) {
        None => Ok(()),
        Some(owner) if owner == uid => Ok(()),
        Some(owner) => Err(elsewhere(LABEL_SERVICE_UID, owner)),
    }
}

/// Whether the Service `uid` adopts the Load Balancer named `name`, given `fresh`, that Load
/// Balancer as read just now (`None`: gone). Adoption writes the labels it read, so it is
/// decided on this read and never on the shared list: `Ok(Some(lb))` to adopt (the labels of
/// this read are the ones kept), `Ok(None)` if it is gone or renamed meanwhile (nothing named
/// like the Service's to adopt), [`OwnedElsewhere`] if it is labelled for someone else now.
pub fn decide_adoption(
    fresh: Option<Arc<LoadBalancer>>,
    name: &str,
    uid: &str,
) -> Result<Option<Arc<LoadBalancer>>, OwnedElsewhere> {
    match fresh {
        Some(lb) if lb.name == name => check_adoption(&lb, uid).map(|()| Some(lb)),
        _ => Ok(None),
    }
}

/// A max of 0 means the limit is unknown: no limit is applied (the API enforces its own).
fn max_targets(t: &LoadBalancerType) -> usize {
    if t.max_targets == 0 { usize::MAX } else { t.max_targets as usize }
}

/// The operations that turn `lb` into `want`.
pub fn plan_update(lb: &LoadBalancer, want: &Desired<'_>) -> Plan {
    let spec = want.spec;
    let mut ops = Vec::new();

    let label_ok = lb.labels.get(LABEL_SERVICE_UID) == Some(&spec.uid);
    let rename = spec.name_annotated && spec.name != lb.name;
    if !label_ok || rename {
        let labels = (!label_ok).then(|| {
            let mut l = lb.labels.clone();
            l.insert(LABEL_SERVICE_UID.to_owned(), spec.uid.clone());
            l
        });
        ops.push(LbOp::Update(UpdateLoadBalancerRequest { name: rename.then(|| spec.name.clone()), labels }));
    }
    ops.extend(plan_settings(lb, want));

    // Services and targets are planned against the Load Balancer as the settings leave it
    // (e.g. a re-attached network has dropped the private-IP targets).
    let mut model = lb.clone();
    for op in &ops {
        apply(&mut model, op);
    }

    // With keep-foreign only what is recorded as ours is removed.
    let owned = Record::from_labels(&lb.labels);
    let ours_port = |p: &u16| !spec.keep_foreign || owned.ports.contains(p);
    let ours_target = |t: &TargetSpec| !spec.keep_foreign || target_ref(t).is_some_and(|r| owned.targets.contains(&r));
    let (parts, max_targets_reached) = plan_parts(&model, lb, want, ours_port, ours_target);
    ops.extend(parts);
    record_ownership(lb, want, &owned, &max_targets_reached, &mut ops);
    Plan { ops, max_targets_reached }
}

/// The Load Balancer-wide settings `want` asks for and `lb` lacks: reverse DNS, algorithm,
/// type (only when configured), networks, public interface. The name and labels are not
/// among them.
pub fn plan_settings(lb: &LoadBalancer, want: &Desired<'_>) -> Vec<LbOp> {
    let spec = want.spec;
    let mut ops = Vec::new();
    if let (Some(ptr), Some(ip)) = (&spec.ipv4_rdns, lb.public_net.ipv4.ip)
        && lb.public_net.ipv4.dns_ptr.as_ref() != Some(ptr)
    {
        ops.push(LbOp::ChangeDnsPtr { ip: IpAddr::V4(ip), dns_ptr: ptr.clone() });
    }
    if let (Some(ptr), Some(ip)) = (&spec.ipv6_rdns, lb.public_net.ipv6.ip)
        && lb.public_net.ipv6.dns_ptr.as_ref() != Some(ptr)
    {
        ops.push(LbOp::ChangeDnsPtr { ip: IpAddr::V6(ip), dns_ptr: ptr.clone() });
    }
    if let Some(alg) = &spec.algorithm
        && lb.algorithm.kind != *alg
    {
        ops.push(LbOp::ChangeAlgorithm(alg.clone()));
    }
    // The type changes only when configured (annotation or env), never back to the default.
    if let (Some(name), Some(t)) = (&spec.lb_type, want.lb_type)
        && lb.load_balancer_type.name != *name
    {
        ops.push(LbOp::ChangeType(t.clone()));
    }
    let wanted_net = |n: &LbPrivateNet| {
        spec.network.as_ref().is_some_and(|w| w.id == n.network && w.ip.is_none_or(|ip| n.ip == Some(IpAddr::V4(ip))))
    };
    for n in &lb.private_net {
        if !wanted_net(n) {
            ops.push(LbOp::DetachFromNetwork(n.network));
        }
    }
    if let Some(w) = &spec.network
        && !lb.private_net.iter().any(wanted_net)
    {
        ops.push(LbOp::AttachToNetwork(AttachLbToNetworkRequest {
            network: w.id,
            ip: w.ip.map(IpAddr::V4),
            ip_range: w.ip_range,
        }));
    }
    match spec.public_interface {
        Some(true) if !lb.public_net.enabled => ops.push(LbOp::EnablePublicInterface),
        Some(false) if lb.public_net.enabled => ops.push(LbOp::DisablePublicInterface),
        _ => {}
    }

    ops
}

/// The services and targets that turn `model` (the Load Balancer as its settings leave it;
/// `lb` as observed, for its type) into `want`: only ports and targets for which `ours_port` /
/// `ours_target` hold are removed. Returns the operations and the Nodes left out for the
/// type's target limit.
pub fn plan_parts(
    model: &LoadBalancer,
    lb: &LoadBalancer,
    want: &Desired<'_>,
    ours_port: impl Fn(&u16) -> bool,
    ours_target: impl Fn(&TargetSpec) -> bool,
) -> (Vec<LbOp>, Vec<ServerTarget>) {
    let spec = want.spec;
    let mut ops = Vec::new();
    let mut stale: Vec<u16> = model
        .services
        .iter()
        .map(|s| s.listen_port)
        .filter(|p| !want.services.iter().any(|d| d.listen_port == *p) && ours_port(p))
        .collect();
    stale.sort_unstable();
    ops.extend(stale.into_iter().map(LbOp::DeleteService));
    for d in want.services {
        match model.services.iter().find(|s| s.listen_port == d.listen_port) {
            Some(have) => {
                if let Some(req) = d.update_for(have) {
                    ops.push(LbOp::UpdateService(req));
                }
            }
            None => ops.push(LbOp::AddService(d.to_add())),
        }
    }

    let wanted_server =
        |id, upi| want.targets.iter().any(|t| t.target == TargetRef::Server(id)) && upi == spec.use_private_ip;
    let wanted_ip = |ip| want.targets.iter().any(|t| t.target == TargetRef::Ip(ip));
    let mut count = model.targets.len();
    for t in &model.targets {
        let remove = match t.kind {
            TargetKind::Server => match t.server {
                Some(s) if !wanted_server(s.id, t.use_private_ip) => {
                    Some(TargetSpec::Server { id: s.id, use_private_ip: t.use_private_ip })
                }
                _ => None,
            },
            // IP targets are the Robot Nodes' (official CCM): every other one is removed (all of
            // them with Robot off). Label-selector targets are left alone.
            TargetKind::Ip => t.ip.as_ref().filter(|ip| !wanted_ip(ip.ip)).map(|ip| TargetSpec::Ip(ip.ip)),
            _ => None,
        };
        if let Some(r) = remove.filter(|r| ours_target(r)) {
            ops.push(LbOp::RemoveTarget(r));
            count -= 1;
        }
    }
    let limit = max_targets(match &spec.lb_type {
        Some(name) if *name != lb.load_balancer_type.name => want.lb_type.unwrap_or(&lb.load_balancer_type),
        _ => &lb.load_balancer_type,
    });
    let mut max_targets_reached = Vec::new();
    for t in want.targets {
        let present = model.targets.iter().any(|have| match t.target {
            TargetRef::Server(id) => {
                have.kind == TargetKind::Server
                    && have.server.is_some_and(|s| s.id == id)
                    && have.use_private_ip == spec.use_private_ip
            }
            TargetRef::Ip(ip) => have.kind == TargetKind::Ip && have.ip.as_ref().is_some_and(|have| have.ip == ip),
        });
        if present {
            continue;
        }
        if count >= limit {
            max_targets_reached.push(t.clone());
            continue;
        }
        ops.push(LbOp::AddTarget { target: target_spec(t.target, spec.use_private_ip), node: t.node.clone() });
        count += 1;
    }
    (ops, max_targets_reached)
}

/// The record `want` leaves on the Load Balancer: with keep-foreign, its ports and the targets
/// it has (present or added, not those over the limit); without, none.
fn wanted_record(want: &Desired<'_>, left_out: &[ServerTarget]) -> Record {
    if !want.spec.keep_foreign {
        return Record::default();
    }
    Record {
        ports: want.services.iter().map(|s| s.listen_port).collect(),
        targets: want.targets.iter().filter(|t| !left_out.contains(t)).map(|t| t.target).collect(),
    }
}

/// Adds the record's label writes to `ops`: new entries before anything is added (in the
/// first `PUT`, merged with the identity label and name), dropped ones after the stale
/// targets and services are removed (a last `PUT`). Nothing when the record stays the same.
fn record_ownership(
    lb: &LoadBalancer,
    want: &Desired<'_>,
    owned: &Record,
    left_out: &[ServerTarget],
    ops: &mut Vec<LbOp>,
) {
    let wanted = wanted_record(want, left_out);
    let first = owned.union(&wanted);
    let mut labels = match ops.first() {
        Some(LbOp::Update(UpdateLoadBalancerRequest { labels: Some(l), .. })) => l.clone(),
        _ => lb.labels.clone(),
    };
    if first != *owned {
        labels = first.into_labels(&labels);
        match ops.first_mut() {
            Some(LbOp::Update(req)) => req.labels = Some(labels.clone()),
            _ => ops.insert(0, LbOp::Update(UpdateLoadBalancerRequest { name: None, labels: Some(labels.clone()) })),
        }
    }
    if wanted != first {
        ops.push(LbOp::Update(UpdateLoadBalancerRequest { name: None, labels: Some(wanted.into_labels(&labels)) }));
    }
}

/// The record entry of a target (label-selector targets are never recorded).
fn target_ref(t: &TargetSpec) -> Option<TargetRef> {
    match t {
        TargetSpec::Server { id, .. } => Some(TargetRef::Server(*id)),
        TargetSpec::Ip(ip) => Some(TargetRef::Ip(*ip)),
        TargetSpec::LabelSelector { .. } => None,
    }
}

/// The request form of a wanted target (`use_private_ip` applies to server targets only).
fn target_spec(target: TargetRef, use_private_ip: bool) -> TargetSpec {
    match target {
        TargetRef::Server(id) => TargetSpec::Server { id, use_private_ip },
        TargetRef::Ip(ip) => TargetSpec::Ip(ip),
    }
}

/// The `POST /load_balancers` request that creates `want` in one request: services, targets
/// (up to the type's `max_targets`), network and labels. What the create request cannot carry
/// — a fixed private IP or subnet (attach with options), reverse DNS — is left to
/// [`plan_update`] on the created Load Balancer. `lb_type` is the type it is created with.
pub fn plan_create(
    want: &Desired<'_>,
    lb_type: &LoadBalancerType,
) -> Result<(CreateLoadBalancerRequest, Vec<ServerTarget>), Invalid> {
    let spec = want.spec;
    let (location, network_zone) = match &spec.placement {
        Placement::Location(l) => (Some(l.clone()), None),
        Placement::NetworkZone(z) => (None, Some(z.clone())),
        Placement::Unset => {
            return Err(Invalid::new(
                format!("annotations {} and {}", a::LOCATION, a::NETWORK_ZONE),
                "",
                "a new Load Balancer needs one of them (or HCLOUD_LOAD_BALANCERS_LOCATION / \
                 HCLOUD_LOAD_BALANCERS_NETWORK_ZONE)",
            ));
        }
    };
    // The create request attaches a network without options; with a fixed IP or a subnet
    // the Load Balancer is attached afterwards (and private targets wait for that).
    let network = spec.network.as_ref().filter(|n| n.ip.is_none() && n.ip_range.is_none()).map(|n| n.id);
    let targets_now = !spec.use_private_ip || network.is_some();
    let mut targets = Vec::new();
    let mut max_targets_reached = Vec::new();
    if targets_now {
        for t in want.targets {
            if targets.len() >= max_targets(lb_type) {
                max_targets_reached.push(t.clone());
            } else {
                targets.push(target_spec(t.target, spec.use_private_ip));
            }
        }
    }
    let request = CreateLoadBalancerRequest {
        name: spec.name.clone(),
        load_balancer_type: lb_type.name.clone(),
        location,
        network_zone,
        algorithm: spec.algorithm.clone().map(|kind| AlgorithmSpec { kind }),
        labels: wanted_record(want, &max_targets_reached)
            .into_labels(&[(LABEL_SERVICE_UID.to_owned(), spec.uid.clone())].into_iter().collect()),
        network,
        public_interface: spec.public_interface,
        services: want.services.iter().map(DesiredService::to_add).collect(),
        targets,
    };
    Ok((request, max_targets_reached))
}

/// `lb` after `op` succeeded (the inventory's write-through model). An attach without a fixed
/// IP leaves the private IP unknown (`None`) until the Load Balancer is read again.
pub fn apply(lb: &mut LoadBalancer, op: &LbOp) {
    match op {
        LbOp::Update(r) => {
            if let Some(n) = &r.name {
                lb.name.clone_from(n);
            }
            if let Some(l) = &r.labels {
                lb.labels.clone_from(l);
            }
        }
        LbOp::ChangeDnsPtr { ip, dns_ptr } => match ip {
            IpAddr::V4(v4) if lb.public_net.ipv4.ip == Some(*v4) => lb.public_net.ipv4.dns_ptr = Some(dns_ptr.clone()),
            IpAddr::V6(v6) if lb.public_net.ipv6.ip == Some(*v6) => lb.public_net.ipv6.dns_ptr = Some(dns_ptr.clone()),
            _ => {}
        },
        LbOp::ChangeAlgorithm(alg) => lb.algorithm.kind = alg.clone(),
        LbOp::ChangeType(t) => lb.load_balancer_type = t.clone(),
        LbOp::DetachFromNetwork(n) => {
            lb.private_net.retain(|p| p.network != *n);
            // The API drops private-IP targets with the last network.
            if lb.private_net.is_empty() {
                lb.targets.retain(|t| !t.use_private_ip);
            }
        }
        LbOp::AttachToNetwork(r) => lb.private_net.push(LbPrivateNet { network: r.network, ip: r.ip }),
        LbOp::EnablePublicInterface => lb.public_net.enabled = true,
        LbOp::DisablePublicInterface => lb.public_net.enabled = false,
        LbOp::DeleteService(p) => lb.services.retain(|s| s.listen_port != *p),
        LbOp::UpdateService(r) => {
            if let Some(s) = lb.services.iter_mut().find(|s| s.listen_port == r.listen_port) {
                apply_update(s, r);
            }
        }
        LbOp::AddService(s) => {
            lb.services.retain(|have| have.listen_port != s.listen_port);
            lb.services.push(s.clone());
        }
        LbOp::RemoveTarget(t) => lb.targets.retain(|have| !same_target(have, t)),
        LbOp::AddTarget { target, .. } => {
            lb.targets.retain(|have| !same_target(have, target));
            lb.targets.push(target_record(target));
        }
    }
}

/// Whether `have` is the target `t` names (servers by id, IPs by address).
pub fn same_target(have: &LbTarget, t: &TargetSpec) -> bool {
    match t {
        TargetSpec::Server { id, .. } => have.kind == TargetKind::Server && have.server.is_some_and(|s| s.id == *id),
        TargetSpec::Ip(ip) => have.kind == TargetKind::Ip && have.ip.as_ref().is_some_and(|i| i.ip == *ip),
        TargetSpec::LabelSelector { selector, .. } => {
            have.kind == TargetKind::LabelSelector
                && have.label_selector.as_ref().is_some_and(|s| s.selector == *selector)
        }
    }
}

fn target_record(t: &TargetSpec) -> LbTarget {
    match t {
        TargetSpec::Server { id, use_private_ip } => LbTarget {
            kind: TargetKind::Server,
            server: Some(IdRef { id: *id }),
            use_private_ip: *use_private_ip,
            ..Default::default()
        },
        TargetSpec::Ip(ip) => LbTarget { kind: TargetKind::Ip, ip: Some(IpRef { ip: *ip }), ..Default::default() },
        TargetSpec::LabelSelector { selector, use_private_ip } => LbTarget {
            kind: TargetKind::LabelSelector,
            label_selector: Some(hcloud_api::models::SelectorRef { selector: selector.clone() }),
            use_private_ip: *use_private_ip,
            ..Default::default()
        },
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
