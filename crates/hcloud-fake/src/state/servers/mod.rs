//! Servers: create (with public and private IPs), power actions, network attach/detach,
//! delete, instant test mutations; [`networks`]: attach/detach and private interfaces;
//! [`render`]: the served shape and listing.

mod networks;
mod rdns;
mod render;

pub(crate) use rdns::{dns_ptr_v4, v6_dns_ptrs};
pub(crate) use render::ServerFilter;

use std::net::Ipv4Addr;

use ipnet::Ipv6Net;

use super::effect::Effect;
use super::records::{
    Member, PrimaryIpAddr, PrimaryIpMeta, PrimaryIpRecord, PrivateNic, PublicV4, PublicV6, ServerRecord, TargetRecord,
};
use super::store::{State, bump};
use super::validate::{parse_ipv4, validate_labels};
use crate::catalog::catalog;
use crate::control::{
    NetworkRef, PublicIpv6Change, ResourceKind, ResourceRef, SeedServer, SeedServerBatch, ServerPatch,
};
use crate::error::ApiError;
use crate::time::now_unix;
use crate::wire::request::{ChangeServerProtectionRequest, CreateServerRequest, IdOrName, UpdateRequest};
use crate::wire::{Labels, ServerProtection, ServerStatus};

/// Everything needed to insert a server (shared by the API and seeding).
pub(crate) struct ServerSpec {
    pub name: String,
    pub server_type: IdOrName,
    pub image: IdOrName,
    pub location: Option<IdOrName>,
    pub labels: Labels,
    pub status: ServerStatus,
    pub enable_ipv4: bool,
    pub enable_ipv6: bool,
    pub fixed_ipv4: Option<Ipv4Addr>,
    pub fixed_ipv6: Option<Ipv6Net>,
    /// (network, fixed ip, alias ips)
    pub networks: Vec<(u64, Option<Ipv4Addr>, Vec<Ipv4Addr>)>,
    pub protection_delete: bool,
}

/// Server names must be valid hostnames (RFC 1123), like the API requires.
fn validate_hostname(name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    if ok { Ok(()) } else { Err(ApiError::invalid_input("name", format!("'{name}' is not a valid hostname"))) }
}

/// A fixed public IPv6 network: a /64 in CIDR notation, or an address meaning its /64.
fn parse_ipv6_net(s: &str) -> Result<Ipv6Net, ApiError> {
    s.parse::<Ipv6Net>()
        .or_else(|_| s.parse().map(|a| Ipv6Net::new(a, 64).unwrap_or_default()))
        .map_err(|_| ApiError::invalid_input("public_ipv6", format!("'{s}' is not an IPv6 /64")))
}

fn root_password(id: u64) -> String {
    let mut x = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    let alphabet = b"abcdefghjkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let len = alphabet.len() as u64;
    (0..20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // The modulo keeps the index below the alphabet length.
            char::from(alphabet[usize::try_from(x % len).unwrap_or(0)])
        })
        .collect()
}

impl State {
    /// The server record or `not_found`.
    pub fn server_record(&self, id: u64) -> Result<&ServerRecord, ApiError> {
        self.servers.get(&id).ok_or_else(|| ApiError::not_found("server", id))
    }

    /// The id of a server with this name, if any.
    pub fn server_id_by_name(&self, name: &str) -> Option<u64> {
        self.servers.values().find(|s| s.name == name).map(|s| s.id)
    }

    /// A network by reference, or `invalid_input` naming `field`.
    pub fn resolve_network(&self, r: &NetworkRef, field: &str) -> Result<u64, ApiError> {
        let found = match r {
            NetworkRef::Id(id) => self.networks.get(id).map(|n| n.id),
            NetworkRef::Name(name) => {
                self.networks.values().find(|n| &n.name == name || name.parse::<u64>().ok() == Some(n.id)).map(|n| n.id)
            }
        };
        found.ok_or_else(|| ApiError::invalid_input(field, format!("network {r:?} not found")))
    }

    fn insert_server(&mut self, spec: ServerSpec) -> Result<u64, ApiError> {
        let cat = catalog();
        validate_hostname(&spec.name)?;
        if self.server_id_by_name(&spec.name).is_some() {
            return Err(ApiError::uniqueness("name"));
        }
        let server_type = cat.server_type(&spec.server_type).ok_or_else(|| {
            ApiError::invalid_input("server_type", format!("unknown server type '{}'", spec.server_type.describe()))
        })?;
        let image = cat.image(&spec.image, server_type.architecture).ok_or_else(|| {
            ApiError::invalid_input("image", format!("unknown image '{}' for this architecture", spec.image.describe()))
        })?;
        let location = match &spec.location {
            Some(r) => cat
                .location(r)
                .ok_or_else(|| ApiError::invalid_input("location", format!("unknown location '{}'", r.describe())))?,
            None => cat
                .location(&IdOrName::Name("fsn1".into()))
                .ok_or_else(|| ApiError::new("server_error", "catalogue without fsn1"))?,
        };
        validate_labels(&spec.labels)?;
        if let Some(ip) = spec.fixed_ipv4
            && self.public_ips.is_used_v4(ip)
        {
            return Err(ApiError::new("ip_not_available", format!("{ip} is already in use")));
        }
        // Plan private IPs before changing anything, so a failure leaves no trace.
        let mut plan = Vec::new();
        for (network, ip, aliases) in &spec.networks {
            if plan.iter().any(|(n, _, _)| n == network) {
                return Err(ApiError::invalid_input("networks", format!("network {network} given twice")));
            }
            if !self.networks.contains_key(network) {
                return Err(ApiError::invalid_input("networks", format!("network {network} not found")));
            }
            let primary = self.pick_private_ip(*network, &location.network_zone, *ip, None)?;
            for alias in aliases {
                self.check_private_ip(*network, &location.network_zone, *alias, None)?;
            }
            plan.push((*network, primary, aliases.clone()));
        }

        let id = bump(&mut self.ids.server);
        let ipv4 = if spec.enable_ipv4 {
            let ip = match spec.fixed_ipv4 {
                Some(ip) => {
                    self.public_ips.reserve_v4(ip)?;
                    ip
                }
                None => self.public_ips.allocate_v4()?,
            };
            let id = self.next_primary_ip_id();
            Some(PublicV4 { id, ip, dns_ptr: dns_ptr_v4(ip), meta: PrimaryIpMeta::of_server(id) })
        } else {
            None
        };
        let ipv6 = if spec.enable_ipv6 {
            let net = match spec.fixed_ipv6 {
                Some(net) => {
                    self.public_ips.reserve_v6(net)?;
                    net.trunc()
                }
                None => self.public_ips.allocate_v6()?,
            };
            let id = self.next_primary_ip_id();
            Some(PublicV6 { id, net, meta: PrimaryIpMeta::of_server(id), dns_ptrs: Default::default() })
        } else {
            None
        };
        self.servers.insert(
            id,
            ServerRecord {
                id,
                name: spec.name,
                status: spec.status,
                created: now_unix(),
                server_type,
                location,
                image: Some(image),
                labels: spec.labels,
                ipv4,
                ipv6,
                private_net: Vec::new(),
                protection: ServerProtection { delete: spec.protection_delete, rebuild: spec.protection_delete },
            },
        );
        for (network, ip, alias_ips) in plan {
            let mac = self.next_mac();
            self.attach_server_nic(id, PrivateNic { network, ip, alias_ips, mac });
        }
        Ok(id)
    }

    /// `POST /servers`: returns (server id, action id, root password).
    pub fn create_server(&mut self, req: CreateServerRequest) -> Result<(u64, u64, Option<String>), ApiError> {
        let public = req.public_net.clone().unwrap_or_default();
        let spec = ServerSpec {
            name: req.name,
            server_type: req.server_type,
            image: req.image,
            location: req.location.or_else(|| {
                req.datacenter.as_deref().map(|dc| IdOrName::Name(dc.split('-').next().unwrap_or(dc).to_owned()))
            }),
            labels: req.labels.unwrap_or_default(),
            status: ServerStatus::Initializing,
            enable_ipv4: public.enable_ipv4.unwrap_or(true),
            enable_ipv6: public.enable_ipv6.unwrap_or(true),
            fixed_ipv4: None,
            fixed_ipv6: None,
            networks: req.networks.unwrap_or_default().into_iter().map(|n| (n, None, Vec::new())).collect(),
            protection_delete: false,
        };
        let id = self.insert_server(spec)?;
        let target = if req.start_after_create.unwrap_or(true) { ServerStatus::Running } else { ServerStatus::Off };
        let action = self.start_action(
            "create_server",
            vec![ResourceRef::server(id)],
            Some(Effect::ServerStatus { server: id, status: target }),
        );
        let password = match &req.ssh_keys {
            Some(keys) if !keys.is_empty() => None,
            _ => Some(root_password(id)),
        };
        Ok((id, action, password))
    }

    /// Seeds one server instantly.
    pub fn seed_server(&mut self, seed: &SeedServer) -> Result<u64, ApiError> {
        let fixed_ipv4 = seed.public_ipv4.as_deref().map(|s| parse_ipv4("public_ipv4", s)).transpose()?;
        let fixed_ipv6 = seed.public_ipv6.as_deref().map(parse_ipv6_net).transpose()?;
        let mut networks = Vec::new();
        for n in &seed.networks {
            let id = self.resolve_network(&n.network, "networks")?;
            let ip = n.ip.as_deref().map(|s| parse_ipv4("networks.ip", s)).transpose()?;
            let aliases =
                n.alias_ips.iter().map(|s| parse_ipv4("networks.alias_ips", s)).collect::<Result<Vec<_>, _>>()?;
            networks.push((id, ip, aliases));
        }
        self.insert_server(ServerSpec {
            name: seed.name.clone(),
            server_type: IdOrName::Name(seed.server_type.clone()),
            image: IdOrName::Name(seed.image.clone()),
            location: Some(IdOrName::Name(seed.location.clone())),
            labels: seed.labels.clone(),
            status: seed.status,
            enable_ipv4: seed.enable_ipv4,
            enable_ipv6: seed.enable_ipv6,
            fixed_ipv4,
            fixed_ipv6,
            networks,
            protection_delete: seed.protection_delete,
        })
    }

    /// Seeds a batch of servers.
    pub fn seed_server_batch(&mut self, batch: &SeedServerBatch) -> Result<Vec<u64>, ApiError> {
        let networks =
            batch.networks.iter().map(|n| self.resolve_network(n, "networks")).collect::<Result<Vec<_>, _>>()?;
        let mut ids = Vec::with_capacity(usize::try_from(batch.count).unwrap_or(0));
        for i in 0..batch.count {
            let index = u64::from(batch.start) + u64::from(i);
            ids.push(self.insert_server(ServerSpec {
                name: format!("{}{index}", batch.prefix),
                server_type: IdOrName::Name(batch.server_type.clone()),
                image: IdOrName::Name(batch.image.clone()),
                location: Some(IdOrName::Name(batch.location.clone())),
                labels: batch.labels.clone(),
                status: batch.status,
                enable_ipv4: true,
                enable_ipv6: true,
                fixed_ipv4: None,
                fixed_ipv6: None,
                networks: networks.iter().map(|n| (*n, None, Vec::new())).collect(),
                protection_delete: false,
            })?);
        }
        Ok(ids)
    }

    /// `poweron` / `poweroff` / `shutdown` / `reset` / `reboot`: the status changes to `status`
    /// when the action finishes (`None`: it stays, as after an ACPI reboot).
    pub fn server_power(&mut self, id: u64, command: &str, status: Option<ServerStatus>) -> Result<u64, ApiError> {
        self.server_record(id)?;
        self.ensure_unlocked(ResourceKind::Server, id)?;
        let effect = status.map(|status| Effect::ServerStatus { server: id, status });
        Ok(self.start_action(command, vec![ResourceRef::server(id)], effect))
    }

    /// `PUT /servers/{id}`: name (a valid hostname, unique) and labels (they replace).
    pub fn update_server(&mut self, id: u64, req: &UpdateRequest) -> Result<(), ApiError> {
        self.server_record(id)?;
        self.ensure_unlocked(ResourceKind::Server, id)?;
        if let Some(name) = &req.name {
            validate_hostname(name)?;
            if self.server_id_by_name(name).is_some_and(|other| other != id) {
                return Err(ApiError::uniqueness("name"));
            }
        }
        if let Some(labels) = &req.labels {
            validate_labels(labels)?;
        }
        if let Some(s) = self.servers.get_mut(&id) {
            if let Some(name) = &req.name {
                s.name.clone_from(name);
            }
            if let Some(labels) = &req.labels {
                s.labels.clone_from(labels);
            }
        }
        Ok(())
    }

    /// `change_protection`: delete and rebuild protection change together (the API wants both
    /// equal; an absent one takes the other's value, or keeps the current setting).
    pub fn change_server_protection(&mut self, id: u64, req: &ChangeServerProtectionRequest) -> Result<u64, ApiError> {
        let current = self.server_record(id)?.protection;
        self.ensure_unlocked(ResourceKind::Server, id)?;
        let delete = req.delete.or(req.rebuild).unwrap_or(current.delete);
        let rebuild = req.rebuild.or(req.delete).unwrap_or(current.rebuild);
        if delete != rebuild {
            return Err(ApiError::invalid_input("rebuild", "delete and rebuild protection must have the same value"));
        }
        Ok(self.start_action(
            "change_protection",
            vec![ResourceRef::server(id)],
            Some(Effect::ServerProtection { server: id, delete, rebuild }),
        ))
    }

    /// `DELETE /servers/{id}`: status `deleting` until the action removes it.
    pub fn delete_server(&mut self, id: u64) -> Result<u64, ApiError> {
        let server = self.server_record(id)?;
        let protected = server.protection.delete;
        let previous = server.status;
        self.ensure_unlocked(ResourceKind::Server, id)?;
        if protected {
            return Err(ApiError::protected("server", id));
        }
        if let Some(s) = self.servers.get_mut(&id) {
            s.status = ServerStatus::Deleting;
        }
        Ok(self.start_action(
            "delete_server",
            vec![ResourceRef::server(id)],
            Some(Effect::ServerDelete { server: id, previous }),
        ))
    }

    /// Control: removes a server at once (ignores locks and protection).
    pub fn delete_server_now(&mut self, id: u64) -> Result<(), ApiError> {
        self.server_record(id)?;
        self.remove_server(id);
        Ok(())
    }

    /// Control: instant changes to a server.
    pub fn patch_server(&mut self, id: u64, patch: &ServerPatch) -> Result<(), ApiError> {
        self.server_record(id)?;
        if let Some(name) = &patch.name {
            validate_hostname(name)?;
            if self.server_id_by_name(name).is_some_and(|other| other != id) {
                return Err(ApiError::uniqueness("name"));
            }
        }
        if let Some(labels) = &patch.labels {
            validate_labels(labels)?;
        }
        // Last of the checks: it is also the first change (a failure leaves the server as it was).
        if let Some(change) = &patch.public_ipv6 {
            self.change_public_ipv6(id, change)?;
        }
        if let Some(s) = self.servers.get_mut(&id) {
            if let Some(name) = &patch.name {
                s.name.clone_from(name);
            }
            if let Some(status) = patch.status {
                s.status = status;
            }
            if let Some(labels) = &patch.labels {
                s.labels.clone_from(labels);
            }
        }
        Ok(())
    }

    /// Control: gives the server another public IPv6 network, or none (see [`PublicIpv6Change`]).
    fn change_public_ipv6(&mut self, id: u64, change: &PublicIpv6Change) -> Result<(), ApiError> {
        let old = self.server_record(id)?.ipv6.as_ref().map(|v| v.net);
        let new = match change {
            PublicIpv6Change::Remove => None,
            // Allocated while the old one is still in use: never the same network.
            PublicIpv6Change::Next => Some(self.public_ips.allocate_v6()?),
            PublicIpv6Change::Net(s) => {
                let net = parse_ipv6_net(s)?.trunc();
                if old == Some(net) {
                    return Ok(());
                }
                self.public_ips.reserve_v6(net)?;
                Some(net)
            }
        };
        if let Some(old) = old {
            self.public_ips.release_v6(old);
        }
        let old_id = self.server_record(id)?.ipv6.as_ref().map(|v| v.id);
        let ipv6 = new.map(|net| {
            let pid = self.next_primary_ip_id();
            PublicV6 { id: pid, net, meta: PrimaryIpMeta::of_server(pid), dns_ptrs: Default::default() }
        });
        let new_id = ipv6.as_ref().map(|v| v.id);
        if let Some(s) = self.servers.get_mut(&id) {
            s.ipv6 = ipv6;
        }
        // The actions the API records for such a swap (`POST /primary_ips/{id}/actions/unassign`,
        // then `assign`), finished at once like the change itself.
        if let Some(pid) = old_id {
            self.record_finished_action(
                "unassign_primary_ip",
                vec![ResourceRef::server(id), ResourceRef::primary_ip(pid)],
            );
        }
        if let Some(pid) = new_id {
            self.record_finished_action(
                "assign_primary_ip",
                vec![ResourceRef::server(id), ResourceRef::primary_ip(pid)],
            );
        }
        Ok(())
    }

    /// Removes a server and every reference to it.
    pub(crate) fn remove_server(&mut self, id: u64) {
        let Some(server) = self.servers.remove(&id) else {
            return;
        };
        for nic in &server.private_net {
            if let Some(n) = self.networks.get_mut(&nic.network) {
                n.members.retain(|_, m| *m != Member::Server(id) && *m != Member::Alias(id));
            }
        }
        for lb in self.load_balancers.values_mut() {
            lb.targets.retain(|t| !matches!(t, TargetRecord::Server { id: s, .. } if *s == id));
        }
        // A Primary IP without `auto_delete` outlives its server, unassigned.
        let keep = |id: u64, addr: PrimaryIpAddr, meta: PrimaryIpMeta| PrimaryIpRecord {
            id,
            addr,
            location: server.location.clone(),
            created: server.created,
            meta,
        };
        if let Some(v4) = server.ipv4.clone() {
            match v4.meta.auto_delete {
                true => self.public_ips.release_v4(v4.ip),
                false => _ = self.primary_ips.insert(v4.id, keep(v4.id, PrimaryIpAddr::V4(v4.ip), v4.meta)),
            }
        }
        if let Some(v6) = server.ipv6.clone() {
            match v6.meta.auto_delete {
                true => self.public_ips.release_v6(v6.net),
                false => _ = self.primary_ips.insert(v6.id, keep(v6.id, PrimaryIpAddr::V6(v6.net), v6.meta)),
            }
        }
    }
}
