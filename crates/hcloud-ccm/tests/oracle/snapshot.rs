//! What a CCM produced, normalised so two runs from the same seed compare field by field:
//! Nodes (providerID, every label, addresses in order, taints), the Services' status and
//! finalizers, and in the fake every Load Balancer (name, type, location, labels, algorithm,
//! public and private network, every field of every service, targets), certificate and
//! network route.
//!
//! Normalised: ids become names (servers, networks, certificates), Service UIDs become
//! `<uid:NAME>` (also inside Load Balancer names and labels), addresses the fake handed out
//! to a Load Balancer become `<lb:NAME:ipv4|ipv6|private>` unless the scenario asked for that
//! address itself, node ports `<nodePort:SERVICE:PORT>` (the API server picks them at random),
//! the fake's default reverse DNS `<default rdns>`; creation times, traffic counters and
//! resource versions are dropped.

use std::collections::BTreeMap;

use hcloud_fake::FakeHandle;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, ListParams};
use serde_json::{Map, Value, json};

/// A normalised snapshot: a JSON document with sorted keys.
pub type Snapshot = Value;

/// What a run's snapshots have seen so far: Service UIDs (UID -> name) and node ports
/// (port -> `<nodePort:SERVICE:PORT>`).
#[derive(Debug, Clone, Default)]
pub struct Seen {
    uids: BTreeMap<String, String>,
    node_ports: BTreeMap<u64, String>,
}

/// Reads the cluster (all Nodes, the Services of `namespace`) and the fake. `keep_ips` are
/// addresses a scenario asked for (e.g. `private-ipv4`): they stay literal.
///
/// `seen` remembers every Service UID and node port of the run, so a Load Balancer or
/// certificate that outlives its Service is still normalised.
pub async fn take(
    client: &kube::Client,
    namespace: &str,
    fake: &FakeHandle,
    keep_ips: &[&str],
    seen: &mut Seen,
) -> Snapshot {
    let nodes: Api<Node> = Api::all(client.clone());
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let nodes = nodes.list(&ListParams::default()).await.expect("list nodes").items;
    let services = services.list(&ListParams::default()).await.expect("list services").items;
    let state = fake.snapshot();

    let server_names: BTreeMap<u64, String> = state.servers.iter().map(|s| (s.id, s.name.clone())).collect();
    let network_names: BTreeMap<u64, String> = state.networks.iter().map(|n| (n.id, n.name.clone())).collect();
    let cert_names: BTreeMap<u64, String> = state.certificates.iter().map(|c| (c.id, c.name.clone())).collect();
    let name_of =
        |names: &BTreeMap<u64, String>, id: u64| names.get(&id).cloned().unwrap_or_else(|| format!("<unknown {id}>"));

    let mut out = Map::new();
    out.insert("nodes".into(), Value::Object(nodes.iter().map(node).collect()));
    out.insert("services".into(), Value::Object(services.iter().map(service).collect()));

    let mut lbs = Map::new();
    let mut replacements: Vec<(String, String)> = Vec::new();
    for lb in &state.load_balancers {
        let mut v = serde_json::to_value(lb).expect("a Load Balancer serialises");
        let o = v.as_object_mut().expect("an object");
        for dropped in ["id", "created", "outgoing_traffic", "ingoing_traffic", "included_traffic"] {
            o.remove(dropped);
        }
        o.insert("location".into(), json!(lb.location.name));
        o.insert("load_balancer_type".into(), json!(lb.load_balancer_type.name));
        let ip_name = |kind: &str| format!("<lb:{}:{kind}>", lb.name);
        for (ip, kind) in [(&lb.public_net.ipv4.ip, "ipv4"), (&lb.public_net.ipv6.ip, "ipv6")] {
            if let Some(ip) = ip {
                replacements.push((ip.clone(), ip_name(kind)));
            }
        }
        let private: Vec<Value> = lb
            .private_net
            .iter()
            .map(|p| {
                replacements.push((p.ip.clone(), ip_name("private")));
                json!({"network": name_of(&network_names, p.network), "ip": p.ip})
            })
            .collect();
        o.insert("private_net".into(), Value::Array(private));
        let mut services: Vec<Value> = lb
            .services
            .iter()
            .map(|s| {
                let mut v = serde_json::to_value(s).expect("a service serialises");
                if let Some(certs) = v.pointer_mut("/http/certificates").and_then(Value::as_array_mut) {
                    for c in certs.iter_mut() {
                        *c = json!(name_of(&cert_names, c.as_u64().unwrap_or_default()));
                    }
                    certs.sort_by_key(Value::to_string);
                }
                v
            })
            .collect();
        services.sort_by_key(|s| s["listen_port"].as_u64());
        o.insert("services".into(), Value::Array(services));
        let mut targets: Vec<Value> = lb
            .targets
            .iter()
            .map(|t| {
                let mut v = serde_json::to_value(t).expect("a target serialises");
                if let Some(id) = t.server.as_ref().map(|s| s.id) {
                    v["server"] = json!(name_of(&server_names, id));
                }
                if let Some(selected) = v.get_mut("targets").and_then(Value::as_array_mut) {
                    for s in selected.iter_mut() {
                        let id = s["server"]["id"].as_u64().unwrap_or_default();
                        s["server"] = json!(name_of(&server_names, id));
                    }
                    selected.sort_by_key(|s| s["server"].to_string());
                }
                v
            })
            .collect();
        targets.sort_by_key(|t| format!("{}{}{}{}", t["type"], t["server"], t["ip"], t["label_selector"]));
        o.insert("targets".into(), Value::Array(targets));
        lbs.insert(lb.name.clone(), v);
    }
    out.insert("load_balancers".into(), Value::Object(lbs));

    let certificates: Map<String, Value> = state
        .certificates
        .iter()
        .map(|c| {
            let mut domains = c.domain_names.clone();
            domains.sort();
            (c.name.clone(), json!({"type": c.kind, "domain_names": domains, "labels": c.labels}))
        })
        .collect();
    out.insert("certificates".into(), Value::Object(certificates));
    let routes: Map<String, Value> = state
        .networks
        .iter()
        .map(|n| {
            let mut routes: Vec<String> =
                n.routes.iter().map(|r| format!("{} via {}", r.destination, r.gateway)).collect();
            routes.sort();
            (n.name.clone(), json!({"routes": routes}))
        })
        .collect();
    out.insert("networks".into(), Value::Object(routes));

    let mut snapshot = Value::Object(out);
    replacements.retain(|(ip, _)| !keep_ips.contains(&ip.as_str()));
    for svc in &services {
        if let (Some(uid), Some(name)) = (&svc.metadata.uid, &svc.metadata.name) {
            seen.uids.insert(uid.clone(), name.clone());
        }
    }
    for (uid, name) in seen.uids.iter() {
        replacements.push((uid.clone(), format!("<uid:{name}>")));
        let plain = uid.replace('-', "");
        // Upstream's default name: "a" + the UID without dashes, cut to 32 characters.
        replacements.push((format!("a{}", &plain[..plain.len().min(31)]), format!("a<uid:{name}>")));
        replacements.push((plain, format!("<uid:{name}>")));
    }
    // The API server picks node ports at random: `<nodePort:SERVICE:PORT>` instead.
    for svc in &services {
        let name = svc.metadata.name.clone().unwrap_or_default();
        let spec = svc.spec.clone().unwrap_or_default();
        for p in spec.ports.unwrap_or_default() {
            if let Some(np) = p.node_port {
                seen.node_ports.insert(np as u64, format!("<nodePort:{name}:{}>", p.port));
            }
        }
        if let Some(hc) = spec.health_check_node_port {
            seen.node_ports.insert(hc as u64, format!("<healthCheckNodePort:{name}>"));
        }
    }
    let node_ports: Vec<(u64, String)> = seen.node_ports.iter().map(|(p, n)| (*p, n.clone())).collect();
    normalise_strings(&mut snapshot, &replacements, &node_ports);
    snapshot
}

fn node(n: &Node) -> (String, Value) {
    let spec = n.spec.clone().unwrap_or_default();
    let mut taints: Vec<String> = spec
        .taints
        .unwrap_or_default()
        .iter()
        .map(|t| format!("{}={}:{}", t.key, t.value.clone().unwrap_or_default(), t.effect))
        .collect();
    taints.sort();
    let addresses: Vec<String> = n
        .status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default()
        .iter()
        .map(|a| format!("{} {}", a.type_, a.address))
        .collect();
    let value = json!({
        "providerID": spec.provider_id,
        "labels": n.metadata.labels.clone().unwrap_or_default(),
        "annotations": n.metadata.annotations.clone().unwrap_or_default(),
        "addresses": addresses,
        "taints": taints,
        "podCIDRs": spec.pod_cidrs,
    });
    (n.metadata.name.clone().unwrap_or_default(), value)
}

fn service(s: &Service) -> (String, Value) {
    let ingress = s.status.as_ref().and_then(|s| s.load_balancer.as_ref()).and_then(|l| l.ingress.clone());
    let value = json!({
        "ingress": serde_json::to_value(ingress).expect("ingress serialises"),
        "finalizers": s.metadata.finalizers.clone().unwrap_or_default(),
        "annotations": s.metadata.annotations.clone().unwrap_or_default(),
    });
    (s.metadata.name.clone().unwrap_or_default(), value)
}

/// Replaces, in every string and object key, each whole string equal to a `from` (addresses)
/// and every occurrence of a `from` of 32+ characters (UIDs) by its `to`, the fake's default
/// reverse DNS names by `<default rdns>`, and every number that is a node port by its name.
fn normalise_strings(v: &mut Value, replacements: &[(String, String)], node_ports: &[(u64, String)]) {
    let fix = |s: &str| -> String {
        let mut out = match replacements.iter().find(|(from, _)| from == s) {
            Some((_, to)) => to.clone(),
            // The fake's default reverse DNS names an address ("static.5.0.18.198.clients...").
            None if s.starts_with("static.") && s.ends_with(".clients.your-server.de") => "<default rdns>".to_owned(),
            None => s.to_owned(),
        };
        for (from, to) in replacements.iter().filter(|(from, _)| from.len() >= 32) {
            out = out.replace(from.as_str(), to);
        }
        out
    };
    match v {
        Value::String(s) => *s = fix(s),
        Value::Number(n) => {
            let to = n.as_u64().and_then(|n| node_ports.iter().find(|(p, _)| *p == n)).map(|(_, to)| to.clone());
            if let Some(to) = to {
                *v = Value::String(to);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| normalise_strings(x, replacements, node_ports)),
        Value::Object(o) => {
            let old = std::mem::take(o);
            for (k, mut x) in old {
                normalise_strings(&mut x, replacements, node_ports);
                o.insert(fix(&k), x);
            }
        }
        _ => {}
    }
}

/// One field that differs: its path (`/load_balancers/<uid:web>/services/0/proxyprotocol`) and
/// the two values (`None`: absent on that side).
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// JSON pointer of the leaf.
    pub path: String,
    /// What the official CCM produced.
    pub official: Option<Value>,
    /// What hcloud-ccm produced.
    pub ours: Option<Value>,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<Value>| v.as_ref().map_or_else(|| "(absent)".to_owned(), Value::to_string);
        write!(f, "{}: official {} | hcloud-ccm {}", self.path, show(&self.official), show(&self.ours))
    }
}

/// Every leaf (and every empty object or array) of `v` by JSON pointer.
pub fn flatten(v: &Value) -> BTreeMap<String, Value> {
    fn walk(v: &Value, path: String, out: &mut BTreeMap<String, Value>) {
        match v {
            Value::Object(o) if !o.is_empty() => {
                for (k, x) in o {
                    walk(x, format!("{path}/{}", k.replace('~', "~0").replace('/', "~1")), out);
                }
            }
            Value::Array(a) if !a.is_empty() => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, format!("{path}/{i}"), out);
                }
            }
            leaf => {
                out.insert(path, leaf.clone());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(v, String::new(), &mut out);
    out
}

/// The fields in which two snapshots differ.
pub fn differences(official: &Snapshot, ours: &Snapshot) -> Vec<Difference> {
    let (a, b) = (flatten(official), flatten(ours));
    let mut paths: Vec<&String> = a.keys().chain(b.keys()).collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .filter(|p| a.get(*p) != b.get(*p))
        .map(|p| Difference { path: p.clone(), official: a.get(p).cloned(), ours: b.get(p).cloned() })
        .collect()
}
