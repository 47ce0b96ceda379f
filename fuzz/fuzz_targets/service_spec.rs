//! The whole parse the provider does for a `type: LoadBalancer` Service: every
//! `load-balancer.hetzner.cloud/*` annotation, the ports, the `HCLOUD_LOAD_BALANCERS_*`
//! defaults (`defaults::from_env`), then the desired services and the targets the node
//! selector picks from the Nodes (`spec::LbSpec::from_service`, `services::desired_services`,
//! `targets::desired_targets`).
//!
//! Input: text, one item a line (see the seed corpus):
//! `annotation <name>=<value>` (`<name>` without the `load-balancer.hetzner.cloud/` prefix is
//! given it), `env <VARIABLE>=<value>`, `port <protocol> <port> [<nodePort>]`, `network <id>`,
//! `uid <uid>`, `name <name>`, `node <name> [<providerID> [<key>=<value> ...]]`.
//!
//! Properties: every problem names a setting that is in the input (an annotation that is set,
//! a port that exists, a variable that is set); a valid spec has every TCP port with its
//! NodePort, health checks within the API's ranges, one desired service per port, and targets
//! only for selected Nodes, sorted by Node name and each server once.

#![no_main]

use std::collections::{BTreeMap, BTreeSet};

use hcloud_api::models::{CertificateId, NetworkId};
use hcloud_provider::env::EnvReader;
use hcloud_provider::load_balancers::annotations::PREFIX;
use hcloud_provider::load_balancers::defaults;
use hcloud_provider::load_balancers::services::desired_services;
use hcloud_provider::load_balancers::spec::LbSpec;
use hcloud_provider::load_balancers::targets::desired_targets;
use k8s_openapi::api::core::v1::{Node, NodeSpec, Service, ServicePort, ServiceSpec};
use libfuzzer_sys::fuzz_target;

struct Input {
    service: Service,
    env: BTreeMap<String, String>,
    network: Option<NetworkId>,
    nodes: Vec<Node>,
}

fn parse(text: &str) -> Input {
    let mut service = Service::default();
    service.metadata.namespace = Some("default".to_owned());
    service.metadata.name = Some("web".to_owned());
    service.metadata.uid = Some("0b5e3c1a-4f5e-4d7b-9c0e-2f7a8b6c5d4e".to_owned());
    let mut annotations = BTreeMap::new();
    let mut ports = Vec::new();
    let mut env = BTreeMap::new();
    let mut network = None;
    let mut nodes = Vec::new();
    for line in text.lines() {
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        match kind {
            "annotation" => {
                let (name, value) = rest.split_once('=').unwrap_or((rest, ""));
                let name = if name.contains('/') { name.to_owned() } else { format!("{PREFIX}{name}") };
                annotations.insert(name, value.to_owned());
            }
            "env" => {
                let (name, value) = rest.split_once('=').unwrap_or((rest, ""));
                env.insert(name.to_owned(), value.to_owned());
            }
            "port" => {
                let mut words = rest.split(' ');
                let protocol = words.next().filter(|p| !p.is_empty()).map(str::to_owned);
                let number = |w: Option<&str>| w.and_then(|w| w.parse::<i32>().ok());
                let port = number(words.next()).unwrap_or(80);
                let node_port = number(words.next());
                ports.push(ServicePort { protocol, port, node_port, ..Default::default() });
            }
            "network" => network = rest.parse::<i64>().ok().map(NetworkId),
            "uid" => service.metadata.uid = Some(rest.to_owned()),
            "name" => service.metadata.name = Some(rest.to_owned()),
            "node" => {
                let mut words = rest.split(' ');
                let mut node = Node::default();
                node.metadata.name = words.next().map(str::to_owned);
                let provider_id = words.next().map(str::to_owned);
                node.spec = Some(NodeSpec { provider_id, ..Default::default() });
                let labels: BTreeMap<String, String> = words
                    .map(|w| w.split_once('=').unwrap_or((w, "")))
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect();
                node.metadata.labels = Some(labels);
                // Node names are unique in a cluster.
                if !nodes.iter().any(|n: &Node| n.metadata.name == node.metadata.name) {
                    nodes.push(node);
                }
            }
            _ => {}
        }
    }
    service.metadata.annotations = Some(annotations);
    service.spec =
        Some(ServiceSpec { type_: Some("LoadBalancer".to_owned()), ports: Some(ports), ..Default::default() });
    Input { service, env, network, nodes }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let input = parse(text);
    let env = &input.env;
    let var = |k: &str| env.get(k).filter(|v| !v.is_empty()).cloned();
    let mut reader = EnvReader::new(&var);
    let (_, lb_defaults, _) = defaults::from_env(&mut reader);
    let errors = reader.finish().err().map(|e| e.0).unwrap_or_default();
    for e in &errors {
        assert!(env.keys().any(|k| e.contains(k.as_str())), "{e:?} names no variable that is set");
    }

    let annotations = input.service.metadata.annotations.as_ref().expect("set above");
    let ports = input.service.spec.as_ref().and_then(|s| s.ports.as_ref()).expect("set above");
    match LbSpec::from_service(&input.service, &lb_defaults, input.network) {
        Err(invalid) => {
            assert!(!invalid.problems.is_empty());
            for p in &invalid.problems {
                let named = if let Some(name) = p.setting.strip_prefix("annotation ") {
                    annotations.contains_key(name)
                } else if let Some(names) = p.setting.strip_prefix("annotations ") {
                    names.split(" and ").all(|n| annotations.contains_key(n))
                } else if let Some(index) = p.setting.strip_prefix("spec.ports[") {
                    index.split(']').next().and_then(|i| i.parse::<usize>().ok()).is_some_and(|i| i < ports.len())
                } else {
                    env.contains_key(&p.setting)
                };
                // A missing setting that another one requires is named with an empty value.
                assert!(named || p.value.is_empty(), "{p} names nothing in the input");
            }
            assert!(invalid.to_string().contains(&invalid.service));
        }
        Ok(spec) => {
            assert_eq!(spec.ports.len() + spec.unsupported_ports.len(), ports.len());
            assert!(spec.ports.iter().all(|p| p.port > 0 && p.node_port > 0));
            let (min, max) = defaults::HEALTH_CHECK_SECONDS;
            for s in [spec.health.interval, spec.health.timeout].into_iter().flatten() {
                assert!((min..=max).contains(&s), "health check {s}s");
            }
            assert!(spec.health.retries.is_none_or(|r| r <= 100));
            let services = desired_services(&spec, &[CertificateId(1)]);
            assert_eq!(services.len(), spec.ports.len());

            let (targets, _events) = desired_targets(&input.nodes, &spec.node_selector, &spec.service, None);
            let empty = BTreeMap::new();
            for t in &targets {
                let node = input.nodes.iter().find(|n| n.metadata.name.as_deref() == Some(t.node.as_str()));
                let labels = node.and_then(|n| n.metadata.labels.as_ref()).unwrap_or(&empty);
                assert!(spec.node_selector.matches(labels), "{} is a target but not selected", t.node);
            }
            assert!(targets.windows(2).all(|w| w[0].node <= w[1].node), "sorted by Node name");
            let distinct: BTreeSet<_> = targets.iter().map(|t| format!("{:?}", t.target)).collect();
            assert_eq!(distinct.len(), targets.len(), "each server once");
        }
    }
});
