//! Load Balancer → Service status, pure (the official CCM's rules):
//! - with the `hostname` annotation: only `{hostname}` (works around kubernetes#66607);
//! - else the public IPv4 (if the public interface is enabled), the IPv6 (also unless
//!   `ipv6-disabled`), then every private-network IP (unless `disable-private-ingress`);
//! - every IP entry carries `ipMode` `VIP`, or `Proxy` with the PROXY protocol, so kube-proxy
//!   does not short-circuit traffic that must pass the Load Balancer (#727). API servers older
//!   than 1.29 prune `ipMode`; the service controller writes what this returns.

use cloud_provider::{LoadBalancerIngress, LoadBalancerStatus};
use hcloud_api::models::LoadBalancer;

use super::spec::StatusSpec;

/// The status `lb` gives a Service configured with `spec`.
pub fn status(lb: &LoadBalancer, spec: &StatusSpec) -> LoadBalancerStatus {
    if let Some(hostname) = &spec.hostname {
        return LoadBalancerStatus {
            ingress: vec![LoadBalancerIngress { hostname: Some(hostname.clone()), ..Default::default() }],
        };
    }
    let entry = |ip: String| LoadBalancerIngress { ip: Some(ip), hostname: None, ip_mode: Some(spec.ip_mode) };
    let mut ingress = Vec::new();
    if lb.public_net.enabled {
        if let Some(v4) = lb.public_net.ipv4.ip {
            ingress.push(entry(v4.to_string()));
        }
        if spec.ipv6
            && let Some(v6) = lb.public_net.ipv6.ip
        {
            ingress.push(entry(v6.to_string()));
        }
    }
    if spec.private_ingress {
        ingress.extend(lb.private_net.iter().filter_map(|n| n.ip).map(|ip| entry(ip.to_string())));
    }
    LoadBalancerStatus { ingress }
}

#[cfg(test)]
mod tests {
    use cloud_provider::IpMode;
    use hcloud_api::models::{LbIpv4, LbIpv6, LbPrivateNet, LbPublicNet, NetworkId};

    use super::*;

    fn lb(public: bool, private: &[&str]) -> LoadBalancer {
        LoadBalancer {
            public_net: LbPublicNet {
                enabled: public,
                ipv4: LbIpv4 { ip: Some("198.51.100.7".parse().expect("ip")), dns_ptr: None },
                ipv6: LbIpv6 { ip: Some("2001:db8::1".parse().expect("ip")), dns_ptr: None },
            },
            private_net: private
                .iter()
                .map(|ip| LbPrivateNet { network: NetworkId(1), ip: Some(ip.parse().expect("ip")) })
                .collect(),
            ..Default::default()
        }
    }

    fn spec(hostname: Option<&str>, ipv6: bool, private_ingress: bool, ip_mode: IpMode) -> StatusSpec {
        StatusSpec { hostname: hostname.map(str::to_owned), ipv6, private_ingress, ip_mode }
    }

    fn ips(s: &LoadBalancerStatus) -> Vec<(Option<&str>, Option<&str>, Option<IpMode>)> {
        s.ingress.iter().map(|i| (i.ip.as_deref(), i.hostname.as_deref(), i.ip_mode)).collect()
    }

    const VIP: Option<IpMode> = Some(IpMode::Vip);

    /// Official `get load balancer without host name IPv6 disabled`.
    #[test]
    fn get_load_balancer_without_host_name_ipv6_disabled() {
        let s = status(&lb(true, &[]), &spec(None, false, true, IpMode::Vip));
        assert_eq!(ips(&s), vec![(Some("198.51.100.7"), None, VIP)]);
    }

    /// Official `get load balancer without host name`.
    #[test]
    fn get_load_balancer_without_host_name() {
        let s = status(&lb(true, &[]), &spec(None, true, true, IpMode::Vip));
        assert_eq!(ips(&s), vec![(Some("198.51.100.7"), None, VIP), (Some("2001:db8::1"), None, VIP)]);
    }

    /// Official `get load balancer with host name`: only the hostname, no IPs, no ipMode.
    #[test]
    fn get_load_balancer_with_host_name() {
        let s = status(&lb(true, &["10.0.0.2"]), &spec(Some("lb.example.com"), true, true, IpMode::Proxy));
        assert_eq!(ips(&s), vec![(None, Some("lb.example.com"), None)]);
    }

    /// Official `get load balancer with private network` / `... without private ingress`.
    #[test]
    fn private_network_ips_follow_private_ingress() {
        let with = status(&lb(true, &["10.0.0.2"]), &spec(None, true, true, IpMode::Vip));
        assert_eq!(with.ingress.len(), 3);
        assert_eq!(with.ingress[2].ip.as_deref(), Some("10.0.0.2"));
        let without = status(&lb(true, &["10.0.0.2"]), &spec(None, true, false, IpMode::Vip));
        assert_eq!(without.ingress.len(), 2);
    }

    /// Official `attach Load Balancer to private network only`: no public addresses.
    #[test]
    fn attach_load_balancer_to_private_network_only() {
        let s = status(&lb(false, &["10.0.0.2"]), &spec(None, true, true, IpMode::Vip));
        assert_eq!(ips(&s), vec![(Some("10.0.0.2"), None, VIP)]);
    }

    /// Official `attach Load Balancer to public and private network (with proxy protocol)`:
    /// every IP entry says `Proxy`.
    #[test]
    fn attach_load_balancer_to_public_and_private_network_with_proxy_protocol() {
        let s = status(&lb(true, &["10.0.0.2"]), &spec(None, true, true, IpMode::Proxy));
        assert_eq!(s.ingress.len(), 3);
        assert!(s.ingress.iter().all(|i| i.ip_mode == Some(IpMode::Proxy)));
    }
}
