//! Load balancers as served: targets with health, the `load_balancer` shape, listing.

use super::targets::health_for;
use crate::catalog::catalog;
use crate::label_selector::LabelSelector;
use crate::pagination::PageRequest;
use crate::sort::SortRequest;
use crate::state::records::{HealthKey, LoadBalancerRecord, TargetRecord};
use crate::state::store::{State, sort_records};
use crate::time::rfc3339;
use crate::wire::{
    Algorithm, LoadBalancer, LoadBalancerPrivateNet, LoadBalancerPublicIp, LoadBalancerPublicNet, Meta, ResourceId,
    SelectedTarget, Target, TargetIp, TargetLabelSelector,
};
/// Filters of `GET /load_balancers`.
#[derive(Debug, Default)]
pub(crate) struct LoadBalancerFilter {
    pub name: Option<String>,
    pub label_selector: Option<LabelSelector>,
    /// Requested order (`id`, `name`, `created`).
    pub sort: SortRequest,
}

impl State {
    pub(super) fn render_target(&self, lb: &LoadBalancerRecord, t: &TargetRecord) -> Target {
        match t {
            TargetRecord::Server { id, use_private_ip } => Target {
                kind: "server".to_owned(),
                server: Some(ResourceId { id: *id }),
                ip: None,
                label_selector: None,
                health_status: Some(health_for(self, lb.id, &HealthKey::Server(*id), &lb.services)),
                use_private_ip: Some(*use_private_ip),
                targets: None,
            },
            TargetRecord::Ip { ip } => Target {
                kind: "ip".to_owned(),
                server: None,
                ip: Some(TargetIp { ip: ip.clone() }),
                label_selector: None,
                health_status: Some(health_for(self, lb.id, &HealthKey::Ip(ip.clone()), &lb.services)),
                use_private_ip: None,
                targets: None,
            },
            TargetRecord::LabelSelector { selector, use_private_ip } => Target {
                kind: "label_selector".to_owned(),
                server: None,
                ip: None,
                label_selector: Some(TargetLabelSelector { selector: selector.to_string() }),
                health_status: None,
                use_private_ip: Some(*use_private_ip),
                targets: Some(
                    self.servers
                        .values()
                        .filter(|s| selector.matches(&s.labels))
                        .map(|s| SelectedTarget {
                            kind: "server".to_owned(),
                            server: ResourceId { id: s.id },
                            health_status: health_for(self, lb.id, &HealthKey::Server(s.id), &lb.services),
                            use_private_ip: *use_private_ip,
                        })
                        .collect(),
                ),
            },
        }
    }

    /// The load balancer as served.
    pub fn render_load_balancer(&self, lb: &LoadBalancerRecord) -> LoadBalancer {
        LoadBalancer {
            id: lb.id,
            name: lb.name.clone(),
            public_net: LoadBalancerPublicNet {
                enabled: lb.public_enabled,
                ipv4: LoadBalancerPublicIp { ip: Some(lb.ipv4.to_string()), dns_ptr: Some(lb.ipv4_dns_ptr.clone()) },
                ipv6: LoadBalancerPublicIp { ip: Some(lb.ipv6.to_string()), dns_ptr: Some(lb.ipv6_dns_ptr.clone()) },
            },
            private_net: lb
                .private_net
                .iter()
                .map(|(network, ip)| LoadBalancerPrivateNet { network: *network, ip: ip.to_string() })
                .collect(),
            location: lb.location.clone(),
            load_balancer_type: self.load_balancer_type_view(lb.lb_type),
            protection: lb.protection,
            labels: lb.labels.clone(),
            created: rfc3339(lb.created),
            services: lb.services.clone(),
            targets: lb.targets.iter().map(|t| self.render_target(lb, t)).collect(),
            algorithm: Algorithm { kind: lb.algorithm.clone() },
            outgoing_traffic: Some(0),
            ingoing_traffic: Some(0),
            included_traffic: catalog().lb_included_traffic(lb.lb_type, &lb.location.name),
        }
    }

    /// A load balancer as served.
    pub fn load_balancer(&self, id: u64) -> Option<LoadBalancer> {
        self.load_balancers.get(&id).map(|l| self.render_load_balancer(l))
    }

    /// `GET /load_balancers`.
    pub fn list_load_balancers(&self, filter: &LoadBalancerFilter, page: PageRequest) -> (Vec<LoadBalancer>, Meta) {
        let mut matching: Vec<&LoadBalancerRecord> = self
            .load_balancers
            .values()
            .filter(|l| filter.name.as_ref().is_none_or(|n| &l.name == n))
            .filter(|l| filter.label_selector.as_ref().is_none_or(|sel| sel.matches(&l.labels)))
            .collect();
        sort_records(&filter.sort, &mut matching, |l| (l.id, &l.name, l.created));
        let (slice, meta) = page.apply(&matching);
        (slice.iter().map(|l| self.render_load_balancer(l)).collect(), meta)
    }
}
