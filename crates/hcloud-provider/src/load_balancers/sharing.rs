//! Several Services on one Load Balancer (hcloud-ccm only, opt-in: the `sharing-key`
//! annotation), pure.
//!
//! Services that carry the same key in one namespace share a Load Balancer; across namespaces
//! only those in the namespaces `HCLOUD_LOAD_BALANCERS_SHARING_NAMESPACES` lists (their keys are
//! one pool). The Load Balancer is found by its group labels (cluster, scope and key), never by
//! name, and carries no Service's identity label. What each member owns is written on it:
//!
//! ```text
//!  hcloud-ccm/sharing-cluster=<cluster>  hcloud-ccm/sharing-namespace=<namespace | across.namespaces>
//!  hcloud-ccm/sharing-key=<key>          hcloud-ccm.sharing/targets=<fingerprint of node-selector, use-private-ip>
//!  hcloud-ccm.sharing/member-<uid>=<Service name>     one per member
//!  hcloud-ccm.sharing/port-<listen port>=<uid>        one per Load Balancer service: its owner
//! ```
//!
//! A member owns the Load Balancer services of its ports (each with its own health check) and
//! never touches another's. Targets are the group's: every member must select the same Nodes
//! (the fingerprint), so each member's sync plans the same set. The Load Balancer-wide settings
//! (type, placement, network, algorithm, public interface, reverse DNS, name) are those of the
//! Load Balancer; a member alone on it may change them, a member with company must agree
//! ([`Conflict`]). Labels are written before what they describe is added, and dropped after it is
//! removed, so a failure in between never leaves a part without its owner.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use cloud_provider::helpers::label_selector::is_name_segment;
use hcloud_api::models::{Labels, LoadBalancer, UpdateLoadBalancerRequest};

use super::annotations::LABEL_SERVICE_UID;
use super::plan::{Desired, LbOp, Plan, apply, plan_parts, plan_settings};
use super::spec::{LbSpec, Placement};

use super::groups::fnv32;
pub use super::groups::{
    ACROSS_NAMESPACES, Group, LABEL_CLUSTER, LABEL_KEY, LABEL_NAMESPACE, LABEL_TARGETS, MEMBER_PREFIX, PORT_PREFIX,
    SharingNamespaces,
};

/// Which Nodes a member's targets are: members that disagree would take each other's targets
/// away at every sync.
pub fn targets_fingerprint(spec: &LbSpec) -> String {
    format!("{:08x}", fnv32(&format!("{}\n{}", spec.node_selector, spec.use_private_ip)))
}

/// The members and port owners a shared Load Balancer's labels record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Members {
    /// Service UID → Service name.
    pub members: BTreeMap<String, String>,
    /// Listen port → owning Service UID.
    pub ports: BTreeMap<u16, String>,
}

impl Members {
    /// What `labels` record (entries it cannot read are ignored).
    pub fn from_labels(labels: &Labels) -> Members {
        let mut m = Members::default();
        for (k, v) in labels {
            if let Some(uid) = k.strip_prefix(MEMBER_PREFIX) {
                m.members.insert(uid.to_owned(), v.clone());
            } else if let Some(port) = k.strip_prefix(PORT_PREFIX).and_then(|p| p.parse().ok()) {
                m.ports.insert(port, v.clone());
            }
        }
        m
    }

    /// `labels` with this record instead of the one they carry.
    pub fn into_labels(&self, labels: &Labels) -> Labels {
        let mut out: Labels = labels
            .iter()
            .filter(|(k, _)| !k.starts_with(MEMBER_PREFIX) && !k.starts_with(PORT_PREFIX))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (uid, name) in &self.members {
            out.insert(format!("{MEMBER_PREFIX}{uid}"), name.clone());
        }
        for (port, uid) in &self.ports {
            out.insert(format!("{PORT_PREFIX}{port}"), uid.clone());
        }
        out
    }

    /// The names of the members other than `uid`, for messages.
    fn others(&self, uid: &str) -> Vec<&str> {
        self.members.iter().filter(|(u, _)| *u != uid).map(|(_, n)| n.as_str()).collect()
    }

    fn name_of(&self, uid: &str) -> String {
        self.members.get(uid).cloned().unwrap_or_else(|| format!("a Service with UID {uid}"))
    }
}

/// Why a Service cannot use its group's Load Balancer as it asks; nothing of it was changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conflict {
    /// A Load Balancer-wide setting that differs from the one in force.
    Setting {
        /// The annotation (or variable) that sets it.
        setting: &'static str,
        /// What the Service asks for.
        wanted: String,
        /// What the Load Balancer has.
        in_force: String,
    },
    /// A port another member (or something hcloud-ccm did not add) already listens on.
    Port {
        /// The listen port.
        port: u16,
        /// Who has it.
        owner: String,
    },
    /// More services than the type holds.
    Full {
        /// The type.
        lb_type: String,
        /// Its limit.
        limit: u32,
        /// How many the members would need.
        needed: usize,
    },
}

impl Conflict {
    /// The event reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Conflict::Setting { .. } => "SharedLoadBalancerSettingConflict",
            Conflict::Port { .. } => "SharedLoadBalancerPortConflict",
            Conflict::Full { .. } => "SharedLoadBalancerFull",
        }
    }
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Conflict::Setting { setting, wanted, in_force } => {
                write!(f, "{setting} is {wanted}, but the shared Load Balancer has {in_force} (in force)")
            }
            Conflict::Port { port, owner } => write!(f, "port {port} is already used by {owner}"),
            Conflict::Full { lb_type, limit, needed } => write!(
                f,
                "the members need {needed} services, and a {lb_type} holds {limit} (choose a larger type with the \
                 annotation load-balancer.hetzner.cloud/type, or fewer ports)"
            ),
        }
    }
}

/// The settings `spec` asks for that differ from `lb`'s (those it leaves unset never differ).
fn setting_conflicts(lb: &LoadBalancer, spec: &LbSpec, fingerprint: &str, members: &Members) -> Vec<Conflict> {
    let mut out = Vec::new();
    let mut differ = |setting, wanted: String, in_force: String| {
        if wanted != in_force {
            out.push(Conflict::Setting { setting, wanted, in_force });
        }
    };
    if let Some(t) = &spec.lb_type {
        differ("load-balancer.hetzner.cloud/type", t.clone(), lb.load_balancer_type.name.clone());
    }
    match &spec.placement {
        Placement::Location(l) => differ("load-balancer.hetzner.cloud/location", l.clone(), lb.location.name.clone()),
        Placement::NetworkZone(z) => {
            differ("load-balancer.hetzner.cloud/network-zone", z.clone(), lb.location.network_zone.clone());
        }
        Placement::Unset => {}
    }
    if let Some(alg) = &spec.algorithm {
        differ(
            "load-balancer.hetzner.cloud/algorithm-type",
            alg.as_str().to_owned(),
            lb.algorithm.kind.as_str().to_owned(),
        );
    }
    if let Some(on) = spec.public_interface {
        differ(
            "load-balancer.hetzner.cloud/disable-public-network",
            (!on).to_string(),
            (!lb.public_net.enabled).to_string(),
        );
    }
    if spec.name_annotated {
        differ("load-balancer.hetzner.cloud/name", spec.name.clone(), lb.name.clone());
    }
    if let Some(ptr) = &spec.ipv4_rdns {
        differ(
            "load-balancer.hetzner.cloud/ipv4-rdns",
            ptr.clone(),
            lb.public_net.ipv4.dns_ptr.clone().unwrap_or_default(),
        );
    }
    if let Some(ptr) = &spec.ipv6_rdns {
        differ(
            "load-balancer.hetzner.cloud/ipv6-rdns",
            ptr.clone(),
            lb.public_net.ipv6.dns_ptr.clone().unwrap_or_default(),
        );
    }
    if let Some(net) = &spec.network {
        let attached = lb.private_net.iter().find(|n| n.network == net.id);
        let have = attached.map_or_else(|| "no attachment".to_owned(), |n| format!("network {}", n.network));
        differ("HCLOUD_NETWORK", format!("network {}", net.id), have);
        if let (Some(ip), Some(n)) = (net.ip, attached) {
            let have = n.ip.map(|i| i.to_string()).unwrap_or_default();
            differ("load-balancer.hetzner.cloud/private-ipv4", ip.to_string(), have);
        }
    }
    if let Some(have) = lb.labels.get(LABEL_TARGETS)
        && have != fingerprint
    {
        out.push(Conflict::Setting {
            setting: "load-balancer.hetzner.cloud/node-selector and use-private-ip",
            wanted: format!("a selection with fingerprint {fingerprint}"),
            in_force: format!("the selection of {} (fingerprint {have})", members.others(&spec.uid).join(", ")),
        });
    }
    out
}

/// What a member's sync does to its group's Load Balancer `lb`: the exact writes, or every
/// conflict (nothing is sent then). `want` is the member's; `group` and `cluster` its group.
/// Converts `lb` when it is the member's own dedicated Load Balancer (identity label dropped).
pub fn plan_shared(lb: &LoadBalancer, want: &Desired<'_>, group: &Group, cluster: &str) -> Result<Plan, Vec<Conflict>> {
    let spec = want.spec;
    let uid = spec.uid.as_str();
    let members = Members::from_labels(&lb.labels);
    let converting = lb.labels.get(LABEL_SERVICE_UID).is_some_and(|u| u == uid);
    let alone = members.members.keys().all(|u| u == uid);
    let fingerprint = targets_fingerprint(spec);
    let owner_of = |port: u16| -> Option<&str> {
        match members.ports.get(&port) {
            Some(u) => Some(u.as_str()),
            // Before a conversion the Service's own ports carry no owner yet.
            None if converting => Some(uid),
            None => None,
        }
    };

    let mut conflicts = if alone { Vec::new() } else { setting_conflicts(lb, spec, &fingerprint, &members) };
    for d in want.services {
        let port = d.listen_port;
        let present = lb.services.iter().any(|s| s.listen_port == port);
        match owner_of(port) {
            Some(u) if u == uid => {}
            Some(u) => conflicts.push(Conflict::Port { port, owner: format!("Service {}", members.name_of(u)) }),
            None if present => {
                conflicts.push(Conflict::Port { port, owner: "a service hcloud-ccm did not add".to_owned() });
            }
            None => {}
        }
    }
    let lb_type = match (&spec.lb_type, want.lb_type) {
        (Some(name), Some(t)) if alone && *name != lb.load_balancer_type.name => t,
        _ => &lb.load_balancer_type,
    };
    let others_ports = lb.services.iter().filter(|s| owner_of(s.listen_port) != Some(uid)).count();
    let needed = others_ports + want.services.len();
    if lb_type.max_services > 0 && needed > lb_type.max_services as usize {
        conflicts.push(Conflict::Full { lb_type: lb_type.name.clone(), limit: lb_type.max_services, needed });
    }
    if !conflicts.is_empty() {
        return Err(conflicts);
    }

    // The labels: group, fingerprint, membership and the ports wanted, added first.
    let wanted_ports: BTreeSet<u16> = want.services.iter().map(|d| d.listen_port).collect();
    let mut first = members.clone();
    first.members.insert(uid.to_owned(), member_name(spec));
    for p in &wanted_ports {
        first.ports.insert(*p, uid.to_owned());
    }
    let mut first_labels = first.into_labels(&lb.labels);
    for (k, v) in group.labels(cluster) {
        first_labels.insert(k.to_owned(), v);
    }
    first_labels.insert(LABEL_TARGETS.to_owned(), fingerprint);
    if converting {
        first_labels.remove(LABEL_SERVICE_UID);
    }
    let rename = alone && spec.name_annotated && spec.name != lb.name;
    let mut ops = Vec::new();
    if first_labels != lb.labels || rename {
        let labels = (first_labels != lb.labels).then(|| first_labels.clone());
        ops.push(LbOp::Update(UpdateLoadBalancerRequest { name: rename.then(|| spec.name.clone()), labels }));
    }
    if alone {
        ops.extend(plan_settings(lb, want));
    }
    let mut model = lb.clone();
    for op in &ops {
        apply(&mut model, op);
    }
    // Only the member's own ports go; the targets are the group's, and all members agree.
    let ours_port = |p: &u16| owner_of(*p) == Some(uid);
    let (parts, max_targets_reached) = plan_parts(&model, lb, want, ours_port, |_| true);
    ops.extend(parts);
    // Ports it no longer has lose their owner label last.
    let mut last = first;
    last.ports.retain(|p, u| u != uid || wanted_ports.contains(p));
    let last_labels = last.into_labels(&first_labels);
    if last_labels != first_labels {
        ops.push(LbOp::Update(UpdateLoadBalancerRequest { name: None, labels: Some(last_labels) }));
    }
    Ok(Plan { ops, max_targets_reached })
}

/// The labels of a new Load Balancer that the member `spec` creates for `group` in `cluster`
/// with its `ports`, from those `labels` of a Service's own one: no identity label.
pub fn create_labels(labels: &Labels, spec: &LbSpec, group: &Group, cluster: &str, ports: &[u16]) -> Labels {
    let mut members = Members::default();
    members.members.insert(spec.uid.clone(), member_name(spec));
    for p in ports {
        members.ports.insert(*p, spec.uid.clone());
    }
    let mut out = members.into_labels(labels);
    out.remove(LABEL_SERVICE_UID);
    for (k, v) in group.labels(cluster) {
        out.insert(k.to_owned(), v);
    }
    out.insert(LABEL_TARGETS.to_owned(), targets_fingerprint(spec));
    out
}

/// A member's name as its label records it (a label value holds no `/`).
fn member_name(spec: &LbSpec) -> String {
    let name = spec.service.rsplit('/').next().unwrap_or_default();
    if is_name_segment(name) { name.to_owned() } else { String::new() }
}

/// What happens to a Service after it leaves its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// It keeps a Load Balancer of its own (annotation removed or changed): a Load Balancer
    /// it was alone on becomes its own, with its address.
    OwnLoadBalancer,
    /// It needs none (deleted, or no longer of type LoadBalancer).
    Nothing,
}

/// What leaving its group does to the shared Load Balancer.
#[derive(Debug, Clone, PartialEq)]
pub enum Leave {
    /// The last member goes: delete the Load Balancer.
    Delete,
    /// Send these: the member's services go, then its labels (others stay, or the Load Balancer
    /// becomes the member's own or is kept for parts hcloud-ccm did not add).
    Ops(Vec<LbOp>),
}

/// What the member `uid` leaving `lb` does, then `after`; with `keep_foreign`, a Load Balancer
/// whose last member leaves is kept (not deleted) while it has services no member owns.
pub fn plan_leave(lb: &LoadBalancer, uid: &str, after: After, keep_foreign: bool) -> Leave {
    let members = Members::from_labels(&lb.labels);
    let others = members.members.keys().any(|u| u != uid);
    let own: Vec<u16> = members.ports.iter().filter(|(_, u)| *u == uid).map(|(p, _)| *p).collect();
    let present = |p: &u16| lb.services.iter().any(|s| s.listen_port == *p);
    let foreign = lb.services.iter().any(|s| !members.ports.contains_key(&s.listen_port));
    let group_labels = |labels: &mut Labels| {
        for k in [LABEL_CLUSTER, LABEL_NAMESPACE, LABEL_KEY, LABEL_TARGETS] {
            labels.remove(k);
        }
    };
    if !others && after == After::OwnLoadBalancer {
        let mut labels = Members::default().into_labels(&lb.labels);
        group_labels(&mut labels);
        labels.insert(LABEL_SERVICE_UID.to_owned(), uid.to_owned());
        return Leave::Ops(vec![LbOp::Update(UpdateLoadBalancerRequest { name: None, labels: Some(labels) })]);
    }
    let kept_for_foreign_parts = keep_foreign && foreign;
    if !others && !kept_for_foreign_parts {
        return Leave::Delete;
    }
    let mut ops: Vec<LbOp> = own.iter().filter(|p| present(p)).map(|p| LbOp::DeleteService(*p)).collect();
    let mut rest = members;
    rest.members.remove(uid);
    rest.ports.retain(|_, u| u != uid);
    let mut labels = rest.into_labels(&lb.labels);
    if !others {
        group_labels(&mut labels);
    }
    ops.push(LbOp::Update(UpdateLoadBalancerRequest { name: None, labels: Some(labels) }));
    Leave::Ops(ops)
}

/// The member UIDs `lb` records, if it is a shared Load Balancer.
pub fn is_member(lb: &LoadBalancer, uid: &str) -> bool {
    lb.labels.contains_key(&format!("{MEMBER_PREFIX}{uid}"))
}

/// The group `lb` belongs to in `cluster`, if it is a shared one of that cluster.
pub fn group_of(lb: &LoadBalancer, cluster: &str) -> Option<Group> {
    (lb.labels.get(LABEL_CLUSTER).map(String::as_str) == Some(cluster)).then_some(())?;
    Some(Group { scope: lb.labels.get(LABEL_NAMESPACE)?.clone(), key: lb.labels.get(LABEL_KEY)?.clone() })
}

#[cfg(test)]
#[path = "sharing_tests.rs"]
mod tests;
