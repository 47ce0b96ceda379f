//! Primary IPs: the public addresses of servers (derived from the servers: assigned,
//! deleted with them unless `auto_delete` is off) and unassigned ones (created with
//! `POST /primary_ips`, or unassigned from a server).
//!
//! Modelled: list (filters `name`, `label_selector`, `ip`; `sort`), get, create unassigned (in
//! a location), `PUT` (name, labels, auto_delete; of every Primary IP, a server's too), delete
//! (an assigned one answers `422 must_be_unassigned`), assign and unassign
//! ([`super::primary_ip_actions`]), `GET /primary_ips/actions` and
//! `GET /primary_ips/{id}/actions` (the `assign_primary_ip`/`unassign_primary_ip` actions of
//! those endpoints and of a swap made through the control surface). Not modelled: creating
//! one assigned to a server, the rDNS and protection endpoints.

use std::net::IpAddr;

use super::records::{PrimaryIpAddr, PrimaryIpMeta, PrimaryIpRecord, ServerRecord};
use super::servers::v6_dns_ptrs;
use super::store::{State, bump};
use super::validate::{validate_labels, validate_name};
use crate::catalog::catalog;
use crate::error::ApiError;
use crate::label_selector::LabelSelector;
use crate::pagination::PageRequest;
use crate::sort::{SortRequest, SortValue};
use crate::time::{now_unix, rfc3339};
use crate::wire::request::{CreatePrimaryIpRequest, UpdatePrimaryIpRequest};
use crate::wire::{DnsPtr, Meta, PrimaryIp, Protection};

/// Filters of `GET /primary_ips`.
#[derive(Debug, Default)]
pub(crate) struct PrimaryIpFilter {
    pub name: Option<String>,
    pub label_selector: Option<LabelSelector>,
    pub ip: Option<String>,
    /// Requested order (`id`, `created`).
    pub sort: SortRequest,
}

fn server_ips(s: &ServerRecord) -> Vec<PrimaryIp> {
    let mut out = Vec::new();
    let base = |id: u64, meta: &PrimaryIpMeta, ip: String, kind: &str, dns_ptr: Vec<DnsPtr>| PrimaryIp {
        id,
        name: meta.name.clone(),
        ip,
        kind: kind.to_owned(),
        assignee_id: Some(s.id),
        assignee_type: "server".to_owned(),
        auto_delete: meta.auto_delete,
        blocked: false,
        created: rfc3339(s.created),
        dns_ptr,
        labels: meta.labels.clone(),
        location: s.location.clone(),
        protection: Protection::default(),
    };
    if let Some(v4) = &s.ipv4 {
        let dns = vec![DnsPtr { ip: v4.ip.to_string(), dns_ptr: v4.dns_ptr.clone() }];
        out.push(base(v4.id, &v4.meta, v4.ip.to_string(), "ipv4", dns));
    }
    if let Some(v6) = &s.ipv6 {
        out.push(base(v6.id, &v6.meta, v6.net.to_string(), "ipv6", v6_dns_ptrs(v6)));
    }
    out
}

fn render_unassigned(p: &PrimaryIpRecord) -> PrimaryIp {
    let (ip, kind, dns_ptr) = match &p.addr {
        PrimaryIpAddr::V4(ip) => {
            let o = ip.octets();
            let ptr = format!("static.{}.{}.{}.{}.clients.your-server.de", o[3], o[2], o[1], o[0]);
            (ip.to_string(), "ipv4", vec![DnsPtr { ip: ip.to_string(), dns_ptr: ptr }])
        }
        PrimaryIpAddr::V6(net) => (net.to_string(), "ipv6", Vec::new()),
    };
    PrimaryIp {
        id: p.id,
        name: p.meta.name.clone(),
        ip,
        kind: kind.to_owned(),
        assignee_id: None,
        assignee_type: "unassigned".to_owned(),
        auto_delete: p.meta.auto_delete,
        blocked: false,
        created: rfc3339(p.created),
        dns_ptr,
        labels: p.meta.labels.clone(),
        location: p.location.clone(),
        protection: Protection::default(),
    }
}

impl State {
    /// Every Primary IP as served, by id.
    fn all_primary_ips(&self) -> Vec<PrimaryIp> {
        let mut all: Vec<PrimaryIp> = self.servers.values().flat_map(server_ips).collect();
        all.extend(self.primary_ips.values().map(render_unassigned));
        all.sort_by_key(|p| p.id);
        all
    }

    /// A Primary IP as served.
    pub fn primary_ip(&self, id: u64) -> Option<PrimaryIp> {
        if let Some(p) = self.primary_ips.get(&id) {
            return Some(render_unassigned(p));
        }
        self.servers.values().flat_map(server_ips).find(|p| p.id == id)
    }

    /// `GET /primary_ips`.
    pub fn list_primary_ips(&self, filter: &PrimaryIpFilter, page: PageRequest) -> (Vec<PrimaryIp>, Meta) {
        let wanted_ip = filter.ip.as_deref().and_then(|s| s.parse::<IpAddr>().ok());
        let mut matching: Vec<PrimaryIp> = self
            .all_primary_ips()
            .into_iter()
            .filter(|p| filter.name.as_ref().is_none_or(|n| &p.name == n))
            .filter(|p| filter.label_selector.as_ref().is_none_or(|sel| sel.matches(&p.labels)))
            .filter(|p| {
                filter.ip.is_none()
                    || wanted_ip.is_some_and(|w| p.ip.split('/').next().and_then(|a| a.parse().ok()) == Some(w))
            })
            .collect();
        filter.sort.apply(&mut matching, |p, field| match field {
            // RFC 3339 in one format and offset: text order is time order.
            "created" => SortValue::Text(Some(&p.created)),
            _ => SortValue::id(p.id),
        });
        let (slice, meta) = page.apply(&matching);
        (slice.to_vec(), meta)
    }

    /// `POST /primary_ips`: an unassigned Primary IP in a location.
    pub fn create_primary_ip(&mut self, req: &CreatePrimaryIpRequest) -> Result<u64, ApiError> {
        validate_name(&req.name)?;
        let labels = req.labels.clone().unwrap_or_default();
        validate_labels(&labels)?;
        if self.all_primary_ips().iter().any(|p| p.name == req.name) {
            return Err(ApiError::uniqueness("name"));
        }
        if let Some(t) = req.assignee_type.as_deref()
            && t != "server"
        {
            return Err(ApiError::invalid_input("assignee_type", format!("unknown assignee type '{t}'")));
        }
        if req.assignee_id.is_some() {
            return Err(ApiError::invalid_input(
                "assignee_id",
                "the fake creates unassigned Primary IPs only (give a location instead)",
            ));
        }
        let location = req
            .location
            .as_ref()
            .ok_or_else(|| ApiError::invalid_input("location", "location is required for an unassigned Primary IP"))?;
        let location = catalog()
            .location(location)
            .ok_or_else(|| ApiError::invalid_input("location", format!("unknown location '{}'", location.describe())))?
            .clone();
        let addr = match req.kind.as_str() {
            "ipv4" => PrimaryIpAddr::V4(self.public_ips.allocate_v4()?),
            "ipv6" => PrimaryIpAddr::V6(self.public_ips.allocate_v6()?),
            other => return Err(ApiError::invalid_input("type", format!("unknown type '{other}'"))),
        };
        let id = bump(&mut self.ids.primary_ip);
        self.primary_ips.insert(
            id,
            PrimaryIpRecord {
                id,
                addr,
                location,
                created: now_unix(),
                meta: PrimaryIpMeta { name: req.name.clone(), labels, auto_delete: req.auto_delete.unwrap_or(false) },
            },
        );
        Ok(id)
    }

    /// The changeable part of a Primary IP, a server's or an unassigned one.
    fn primary_ip_meta_mut(&mut self, id: u64) -> Option<&mut PrimaryIpMeta> {
        if let Some(p) = self.primary_ips.get_mut(&id) {
            return Some(&mut p.meta);
        }
        self.servers.values_mut().find_map(|s| {
            if let Some(v4) = s.ipv4.as_mut().filter(|v| v.id == id) {
                return Some(&mut v4.meta);
            }
            s.ipv6.as_mut().filter(|v| v.id == id).map(|v| &mut v.meta)
        })
    }

    /// `PUT /primary_ips/{id}`: name (unique), labels (they replace), auto_delete.
    pub fn update_primary_ip(&mut self, id: u64, req: &UpdatePrimaryIpRequest) -> Result<(), ApiError> {
        if self.primary_ip(id).is_none() {
            return Err(ApiError::not_found("primary_ip", id));
        }
        if let Some(name) = &req.name {
            validate_name(name)?;
            if self.all_primary_ips().iter().any(|p| &p.name == name && p.id != id) {
                return Err(ApiError::uniqueness("name"));
            }
        }
        if let Some(labels) = &req.labels {
            validate_labels(labels)?;
        }
        if let Some(meta) = self.primary_ip_meta_mut(id) {
            if let Some(name) = &req.name {
                meta.name.clone_from(name);
            }
            if let Some(labels) = &req.labels {
                meta.labels.clone_from(labels);
            }
            if let Some(auto_delete) = req.auto_delete {
                meta.auto_delete = auto_delete;
            }
        }
        Ok(())
    }

    /// `DELETE /primary_ips/{id}`: only unassigned ones (`must_be_unassigned` otherwise).
    pub fn delete_primary_ip(&mut self, id: u64) -> Result<(), ApiError> {
        if let Some(p) = self.primary_ips.remove(&id) {
            match p.addr {
                PrimaryIpAddr::V4(ip) => self.public_ips.release_v4(ip),
                PrimaryIpAddr::V6(net) => self.public_ips.release_v6(net),
            }
            return Ok(());
        }
        match self.primary_ip(id) {
            Some(p) => Err(ApiError::new(
                "must_be_unassigned",
                format!("primary IP {id} is assigned to server {}", p.assignee_id.unwrap_or_default()),
            )),
            None => Err(ApiError::not_found("primary_ip", id)),
        }
    }
}
