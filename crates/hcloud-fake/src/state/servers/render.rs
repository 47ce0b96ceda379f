//! Servers as served: rendering and listing.

use super::rdns::v6_dns_ptrs;
use crate::catalog::catalog;
use crate::control::ResourceKind;
use crate::label_selector::LabelSelector;
use crate::pagination::PageRequest;
use crate::sort::SortRequest;
use crate::state::records::{ServerRecord, TargetRecord};
use crate::state::store::{State, sort_records};
use crate::time::rfc3339;
use crate::wire::{Ipv4, Ipv6, Meta, Server, ServerPrivateNet, ServerPublicNet, ServerStatus};

/// Filters of `GET /servers`.
#[derive(Debug, Default)]
pub(crate) struct ServerFilter {
    pub name: Option<String>,
    pub label_selector: Option<LabelSelector>,
    pub status: Vec<ServerStatus>,
    /// Requested order (`id`, `name`, `created`).
    pub sort: SortRequest,
}

impl State {
    /// Load balancers that target a server (directly or by label selector).
    fn load_balancers_of(&self, s: &ServerRecord) -> Vec<u64> {
        self.load_balancers
            .values()
            .filter(|lb| {
                lb.targets.iter().any(|t| match t {
                    TargetRecord::Server { id, .. } => *id == s.id,
                    TargetRecord::LabelSelector { selector, .. } => selector.matches(&s.labels),
                    TargetRecord::Ip { .. } => false,
                })
            })
            .map(|lb| lb.id)
            .collect()
    }

    /// The server as served.
    pub fn render_server(&self, s: &ServerRecord) -> Server {
        let cat = catalog();
        Server {
            id: s.id,
            name: s.name.clone(),
            status: s.status,
            created: rfc3339(s.created),
            public_net: ServerPublicNet {
                ipv4: s.ipv4.as_ref().map(|v| Ipv4 {
                    id: v.id,
                    ip: v.ip.to_string(),
                    blocked: false,
                    dns_ptr: v.dns_ptr.clone(),
                }),
                ipv6: s.ipv6.as_ref().map(|v| Ipv6 {
                    id: v.id,
                    ip: v.net.to_string(),
                    blocked: false,
                    dns_ptr: Some(v6_dns_ptrs(v)),
                }),
                floating_ips: Vec::new(),
                firewalls: Vec::new(),
            },
            private_net: s
                .private_net
                .iter()
                .map(|n| ServerPrivateNet {
                    network: n.network,
                    ip: n.ip.to_string(),
                    alias_ips: n.alias_ips.iter().map(ToString::to_string).collect(),
                    mac_address: n.mac.clone(),
                })
                .collect(),
            server_type: s.server_type.clone(),
            location: s.location.clone(),
            image: s.image.cloned(),
            iso: None,
            rescue_enabled: false,
            locked: self.is_locked(ResourceKind::Server, s.id),
            backup_window: None,
            outgoing_traffic: Some(0),
            ingoing_traffic: Some(0),
            included_traffic: Some(cat.server_included_traffic(s.server_type, &s.location.name)),
            protection: s.protection,
            labels: s.labels.clone(),
            volumes: Vec::new(),
            load_balancers: self.load_balancers_of(s),
            // The server type's disk (whole GB) is the primary disk.
            primary_disk_size: s.server_type.disk,
            placement_group: None,
        }
    }

    /// A server as served.
    pub fn server(&self, id: u64) -> Option<Server> {
        self.servers.get(&id).map(|s| self.render_server(s))
    }

    /// `GET /servers`: one page, only that page is rendered.
    pub fn list_servers(&self, filter: &ServerFilter, page: PageRequest) -> (Vec<Server>, Meta) {
        let mut matching: Vec<&ServerRecord> = self
            .servers
            .values()
            .filter(|s| filter.name.as_ref().is_none_or(|n| &s.name == n))
            .filter(|s| filter.label_selector.as_ref().is_none_or(|sel| sel.matches(&s.labels)))
            .filter(|s| filter.status.is_empty() || filter.status.contains(&s.status))
            .collect();
        sort_records(&filter.sort, &mut matching, |s| (s.id, &s.name, s.created));
        let (slice, meta) = page.apply(&matching);
        (slice.iter().map(|s| self.render_server(s)).collect(), meta)
    }
}
