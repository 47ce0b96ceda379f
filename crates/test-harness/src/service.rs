//! A `type: LoadBalancer` Service as the end-to-end tests and benchmarks create them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};

/// A `type: LoadBalancer` Service `name` with `annotations`, selecting `app=<name>`, with one
/// TCP port named `p<port>` per entry of `ports` (node ports are left to the API server).
pub fn load_balancer_service(name: &str, annotations: &[(&str, &str)], ports: &[i32]) -> Service {
    let mut svc = Service::default();
    svc.metadata.name = Some(name.into());
    svc.metadata.annotations = Some(annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    svc.spec = Some(ServiceSpec {
        type_: Some("LoadBalancer".into()),
        selector: Some(BTreeMap::from([("app".to_owned(), name.to_owned())])),
        ports: Some(
            ports
                .iter()
                .map(|p| ServicePort {
                    name: Some(format!("p{p}")),
                    port: *p,
                    protocol: Some("TCP".into()),
                    ..Default::default()
                })
                .collect(),
        ),
        ..Default::default()
    });
    svc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_tcp_ports_and_a_selector() {
        let svc = load_balancer_service("web", &[("a/b", "c")], &[80, 443]);
        let spec = svc.spec.unwrap_or_default();
        assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
        assert_eq!(spec.selector, Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])));
        let ports: Vec<String> = spec
            .ports
            .unwrap_or_default()
            .into_iter()
            .map(|p| format!("{:?} {} {:?} {:?}", p.name, p.port, p.protocol, p.node_port))
            .collect();
        assert_eq!(ports, ["Some(\"p80\") 80 Some(\"TCP\") None", "Some(\"p443\") 443 Some(\"TCP\") None"]);
        assert_eq!(svc.metadata.annotations, Some(BTreeMap::from([("a/b".to_owned(), "c".to_owned())])));
    }
}
