//! What the data plane should run, read from the state: one listener per service of every
//! Load Balancer with a public interface, one health checker per (service, target); and the
//! diff between that and what runs. Pure (reads `&State`, no I/O).
//!
//! Target addresses: a server target goes to the server's public IPv4, or with
//! `use_private_ip` to its private IP in a network the Load Balancer is attached to; a label
//! selector target stands for every matching server, by the same rule; an IP target goes to
//! that IP. A server that is both a target and selected by a label selector (or selected by
//! two selectors) is one target: the first occurrence decides its address.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use super::board::CheckKey;
use super::config::DataPlaneConfig;
use super::select::Algorithm;
use crate::state::{HealthKey, State, TargetRecord};
use crate::wire::HealthCheck;

/// A listener: one Load Balancer's address and listen port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ListenerKey {
    pub lb: u64,
    pub addr: SocketAddr,
}

/// How a listener forwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ForwardSpec {
    pub lb: u64,
    pub listen_port: u16,
    pub protocol: String,
    pub destination_port: u16,
    pub proxyprotocol: bool,
    pub algorithm: Algorithm,
    /// Every target with its address (`None`: it has none; it never gets traffic).
    pub backends: Vec<(HealthKey, Option<IpAddr>)>,
    /// What a connection gets: bytes forwarded, HTTP proxied, or a redirect.
    pub mode: ForwardMode,
}

/// What a listener does with a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ForwardMode {
    /// `tcp`: the bytes both ways, to one target per connection.
    Tcp,
    /// `http` and `https`: requests proxied one by one (module `http`), over TLS for `https`.
    Http(HttpSpec),
    /// The port 80 of an `https` service with `redirect_http`: every request is sent to
    /// `https://` on the service's listen port.
    RedirectToHttps {
        /// The `https` service's listen port.
        https_port: u16,
    },
}

/// An `http`/`https` service's settings the data plane acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpSpec {
    /// `https`: the service's certificates that have a PEM and a key, in the service's order
    /// (a managed certificate not yet issued is left out; none at all: the handshake cannot
    /// happen and connections are closed). `None` for `http`. An `https` service without
    /// certificates passes TLS through to its targets ([`ForwardMode::Tcp`]).
    pub tls: Option<Vec<TlsCertificate>>,
    /// `sticky_sessions`: the cookie's name and lifetime in seconds.
    pub sticky: Option<(String, u64)>,
}

/// A certificate an `https` listener presents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsCertificate {
    pub id: u64,
    pub domain_names: Vec<String>,
    pub certificate: String,
    pub private_key: String,
}

/// How one target is checked for one service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CheckSpec {
    /// The target's address, or why it has none.
    pub target: Result<IpAddr, String>,
    pub health_check: HealthCheck,
    /// Whether the service sends the PROXY protocol header (then `http` checks send it too).
    pub proxyprotocol: bool,
}

/// Everything the data plane should run.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub listeners: BTreeMap<ListenerKey, ForwardSpec>,
    pub checks: BTreeMap<CheckKey, CheckSpec>,
}

/// The targets of one Load Balancer with their addresses, deduplicated.
fn targets(state: &State, lb: u64) -> Vec<(HealthKey, Result<IpAddr, String>)> {
    let Some(record) = state.load_balancers.get(&lb) else {
        return Vec::new();
    };
    let server_ip = |id: u64, private: bool| -> Result<IpAddr, String> {
        let server = state.servers.get(&id).ok_or_else(|| format!("server {id} does not exist"))?;
        if private {
            server
                .private_net
                .iter()
                .find(|nic| record.private_net.iter().any(|(network, _)| *network == nic.network))
                .map(|nic| IpAddr::V4(nic.ip))
                .ok_or_else(|| format!("server {id} has no private IP in a network of load balancer {lb}"))
        } else {
            server.ipv4.as_ref().map(|v4| IpAddr::V4(v4.ip)).ok_or_else(|| format!("server {id} has no public IPv4"))
        }
    };
    let mut out: Vec<(HealthKey, Result<IpAddr, String>)> = Vec::new();
    let mut push = |key: HealthKey, ip: Result<IpAddr, String>| {
        if !out.iter().any(|(k, _)| *k == key) {
            out.push((key, ip));
        }
    };
    for t in &record.targets {
        match t {
            TargetRecord::Server { id, use_private_ip } => {
                push(HealthKey::Server(*id), server_ip(*id, *use_private_ip))
            }
            TargetRecord::Ip { ip } => {
                let addr = ip.parse::<IpAddr>().map_err(|e| format!("'{ip}' is not an IP address: {e}"));
                push(HealthKey::Ip(ip.clone()), addr);
            }
            TargetRecord::LabelSelector { selector, use_private_ip } => {
                for s in state.servers.values().filter(|s| selector.matches(&s.labels)) {
                    push(HealthKey::Server(s.id), server_ip(s.id, *use_private_ip));
                }
            }
        }
    }
    out
}

/// How a service's connections are handled (see [`ForwardMode`]).
fn mode(state: &State, service: &crate::wire::Service) -> ForwardMode {
    let http = service.http.as_ref();
    let sticky = http.filter(|h| h.sticky_sessions).map(|h| (h.cookie_name.clone(), h.cookie_lifetime));
    match service.protocol.as_str() {
        "http" => ForwardMode::Http(HttpSpec { tls: None, sticky }),
        "https" => {
            let ids = http.map(|h| h.certificates.as_slice()).unwrap_or_default();
            if ids.is_empty() {
                // "empty for TLS/SSL passthrough" (the API reference's `certificates`).
                return ForwardMode::Tcp;
            }
            let certificates = ids
                .iter()
                .filter_map(|id| {
                    let c = state.certificates.get(id)?;
                    Some(TlsCertificate {
                        id: *id,
                        domain_names: c.domain_names.clone(),
                        certificate: c.certificate.clone()?,
                        private_key: c.private_key.clone()?,
                    })
                })
                .collect();
            ForwardMode::Http(HttpSpec { tls: Some(certificates), sticky })
        }
        _ => ForwardMode::Tcp,
    }
}

/// The plan for the current state. Listeners only for Load Balancers whose public interface
/// is enabled and whose public IPv4 is one of the data plane's addresses; an `https` service
/// with `redirect_http` also gets port 80 (unless a service of its own listens there).
pub(crate) fn plan(state: &State, config: &DataPlaneConfig) -> Plan {
    let mut plan = Plan::default();
    for lb in state.load_balancers.values() {
        let targets = targets(state, lb.id);
        let serve = lb.public_enabled && config.contains(lb.ipv4);
        for s in &lb.services {
            if serve {
                let key = ListenerKey { lb: lb.id, addr: SocketAddr::from((lb.ipv4, s.listen_port)) };
                let spec = ForwardSpec {
                    lb: lb.id,
                    listen_port: s.listen_port,
                    protocol: s.protocol.clone(),
                    destination_port: s.destination_port,
                    proxyprotocol: s.proxyprotocol,
                    algorithm: Algorithm::from_api(&lb.algorithm),
                    backends: targets.iter().map(|(k, ip)| (k.clone(), ip.as_ref().ok().copied())).collect(),
                    mode: mode(state, s),
                };
                let redirect = s.protocol == "https"
                    && s.http.as_ref().is_some_and(|h| h.redirect_http)
                    && !lb.services.iter().any(|other| other.listen_port == 80);
                if redirect {
                    let key = ListenerKey { lb: lb.id, addr: SocketAddr::from((lb.ipv4, 80)) };
                    let mode = ForwardMode::RedirectToHttps { https_port: s.listen_port };
                    let redirect = ForwardSpec { listen_port: 80, protocol: "http".to_owned(), mode, ..spec.clone() };
                    plan.listeners.insert(key, redirect);
                }
                plan.listeners.insert(key, spec);
            }
            for (target, ip) in &targets {
                plan.checks.insert(
                    CheckKey { lb: lb.id, listen_port: s.listen_port, target: target.clone() },
                    CheckSpec {
                        target: ip.clone(),
                        health_check: s.health_check.clone(),
                        proxyprotocol: s.proxyprotocol,
                    },
                );
            }
        }
    }
    plan
}

/// How what runs differs from what is wanted.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Diff<K> {
    /// Running, not wanted.
    pub removed: Vec<K>,
    /// Wanted, not running.
    pub added: Vec<K>,
    /// Both, with another configuration.
    pub changed: Vec<K>,
}

/// Compares running and wanted entries; `same` tells whether a running entry matches the
/// wanted one.
pub(crate) fn diff<K: Ord + Clone, A, B>(
    running: &BTreeMap<K, A>,
    wanted: &BTreeMap<K, B>,
    same: impl Fn(&A, &B) -> bool,
) -> Diff<K> {
    let mut d = Diff { removed: Vec::new(), added: Vec::new(), changed: Vec::new() };
    for (k, a) in running {
        match wanted.get(k) {
            None => d.removed.push(k.clone()),
            Some(b) if !same(a, b) => d.changed.push(k.clone()),
            Some(_) => {}
        }
    }
    d.added = wanted.keys().filter(|k| !running.contains_key(k)).cloned().collect();
    d
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::control::{SeedLoadBalancer, SeedNetwork, SeedServer};

    fn seed_lb(
        state: &mut State,
        name: &str,
        network: Option<u64>,
        services: serde_json::Value,
        targets: serde_json::Value,
    ) -> u64 {
        let mut seed = SeedLoadBalancer::new(name);
        seed.network = network.map(Into::into);
        seed.services = serde_json::from_value(services).unwrap();
        seed.targets = serde_json::from_value(targets).unwrap();
        state.seed_load_balancer(&seed).unwrap()
    }

    #[test]
    fn plan_follows_targets_services_and_the_public_interface() {
        let config = DataPlaneConfig::parse("127.10.0.0/24").unwrap();
        let mut state = State::new(Duration::ZERO, Duration::ZERO)
            .with_data_plane(&config, crate::data_plane::board::SharedBoard::default());
        let net =
            state.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central")).unwrap();
        let web = |name: &str, ip: &str| SeedServer {
            public_ipv4: Some(ip.to_owned()),
            ..SeedServer::new(name).label("role", "web")
        };
        let a = state.seed_server(&web("a", "127.0.0.11").network_ip(net, "10.0.0.11")).unwrap();
        let b = state.seed_server(&web("b", "127.0.0.12")).unwrap();
        let services = json!([{"protocol": "tcp", "listen_port": 80, "destination_port": 8080, "proxyprotocol": true},
                              {"protocol": "http", "listen_port": 81, "destination_port": 8081}]);
        let targets = json!([{"type": "server", "server": {"id": a}, "use_private_ip": true},
                             {"type": "label_selector", "label_selector": {"selector": "role=web"}},
                             {"type": "ip", "ip": {"ip": "127.0.0.13"}}]);
        let lb = seed_lb(&mut state, "lb", Some(net), services, targets);
        let lb_ip = state.load_balancers[&lb].ipv4;
        assert_eq!(lb_ip, Ipv4Addr::new(127, 10, 0, 1), "the address comes from the data plane's range");

        let p = plan(&state, &config);
        let keys: Vec<_> = p.listeners.keys().map(|k| (k.lb, k.addr)).collect();
        assert_eq!(keys, vec![(lb, SocketAddr::from((lb_ip, 80))), (lb, SocketAddr::from((lb_ip, 81)))]);
        let spec = &p.listeners[&ListenerKey { lb, addr: SocketAddr::from((lb_ip, 80)) }];
        assert_eq!((spec.destination_port, spec.proxyprotocol, spec.algorithm), (8080, true, Algorithm::RoundRobin));
        // `a` is a direct target (private IP) and selected again by the selector: once, private.
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        assert_eq!(
            spec.backends,
            vec![
                (HealthKey::Server(a), ip("10.0.0.11")),
                (HealthKey::Server(b), ip("127.0.0.12")),
                (HealthKey::Ip("127.0.0.13".to_owned()), ip("127.0.0.13")),
            ]
        );
        assert_eq!(p.checks.len(), 6, "3 targets x 2 services");
        let check = &p.checks[&CheckKey { lb, listen_port: 81, target: HealthKey::Server(b) }];
        assert_eq!(
            (check.target.clone(), check.health_check.port, check.proxyprotocol),
            (Ok(ip("127.0.0.12").unwrap()), 8081, false)
        );

        // Without the public interface: no listener, the checks go on.
        if let Some(record) = state.load_balancers.get_mut(&lb) {
            record.public_enabled = false;
        }
        let p = plan(&state, &config);
        assert!(p.listeners.is_empty());
        assert_eq!(p.checks.len(), 6);
    }

    #[test]
    fn a_target_without_an_address_says_why() {
        let config = DataPlaneConfig::parse("127.10.0.0/24").unwrap();
        let mut state = State::new(Duration::ZERO, Duration::ZERO)
            .with_data_plane(&config, crate::data_plane::board::SharedBoard::default());
        let net =
            state.seed_network(&SeedNetwork::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/24", "eu-central")).unwrap();
        let s = state.seed_server(&SeedServer::new("s").network(net)).unwrap();
        let targets = json!([{"type": "server", "server": {"id": s}, "use_private_ip": true}]);
        let lb = seed_lb(
            &mut state,
            "lb",
            Some(net),
            json!([{"protocol": "tcp", "listen_port": 80, "destination_port": 80}]),
            targets,
        );
        // The server leaves the network after the target was added.
        if let Some(server) = state.servers.get_mut(&s) {
            server.private_net.clear();
        }
        let p = plan(&state, &config);
        let check = &p.checks[&CheckKey { lb, listen_port: 80, target: HealthKey::Server(s) }];
        assert!(matches!(&check.target, Err(why) if why.contains("no private IP")), "{:?}", check.target);
        assert_eq!(p.listeners.values().next().map(|l| l.backends.clone()), Some(vec![(HealthKey::Server(s), None)]));
    }

    #[test]
    fn diff_sorts_keys_into_removed_added_changed() {
        let running: BTreeMap<u8, &str> = [(1, "a"), (2, "b"), (3, "c")].into();
        let wanted: BTreeMap<u8, &str> = [(2, "b"), (3, "C"), (4, "d")].into();
        let d = diff(&running, &wanted, |a, b| a == b);
        assert_eq!(d, Diff { removed: vec![1], added: vec![4], changed: vec![3] });
        let empty: BTreeMap<u8, &str> = BTreeMap::new();
        assert_eq!(diff(&empty, &empty, |a, b| a == b), Diff::default());
    }
}
