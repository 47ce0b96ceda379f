//! Reverse DNS of a server's public IPs (`change_dns_ptr`).
//!
//! The IPv4 has one entry (by default `static.<reversed>.clients.your-server.de`); the IPv6
//! /64 has one per address that got one (none by default). `ip` must be the server's IPv4 or
//! an address in its IPv6 network (`invalid_input` naming `ip` otherwise); `dns_ptr: null`
//! resets the IPv4's entry to the default and removes an IPv6 entry. The change happens when
//! the action finishes.

use std::net::{IpAddr, Ipv4Addr};

use crate::control::{ResourceKind, ResourceRef};
use crate::error::ApiError;
use crate::state::effect::Effect;
use crate::state::records::PublicV6;
use crate::state::store::State;
use crate::wire::DnsPtr;
use crate::wire::request::ChangeDnsPtrRequest;

/// The default reverse DNS entry of a public IPv4.
pub(crate) fn dns_ptr_v4(ip: Ipv4Addr) -> String {
    let o = ip.octets();
    format!("static.{}.{}.{}.{}.clients.your-server.de", o[3], o[2], o[1], o[0])
}

/// The reverse DNS entries of an IPv6 network as served.
pub(crate) fn v6_dns_ptrs(v6: &PublicV6) -> Vec<DnsPtr> {
    v6.dns_ptrs.iter().map(|(ip, ptr)| DnsPtr { ip: ip.to_string(), dns_ptr: ptr.clone() }).collect()
}

impl State {
    /// `change_dns_ptr` of a server.
    pub fn change_server_dns_ptr(&mut self, id: u64, req: &ChangeDnsPtrRequest) -> Result<u64, ApiError> {
        let server = self.server_record(id)?;
        let ip: IpAddr =
            req.ip.parse().map_err(|_| ApiError::invalid_input("ip", format!("'{}' is not an IP address", req.ip)))?;
        let ours = match ip {
            IpAddr::V4(v4) => server.ipv4.as_ref().is_some_and(|p| p.ip == v4),
            IpAddr::V6(v6) => server.ipv6.as_ref().is_some_and(|p| p.net.contains(&v6)),
        };
        if !ours {
            return Err(ApiError::invalid_input("ip", format!("{ip} is not an IP of server {id}")));
        }
        if let Some(ptr) = &req.dns_ptr
            && (ptr.is_empty() || ptr.contains(char::is_whitespace))
        {
            return Err(ApiError::invalid_input("dns_ptr", format!("'{ptr}' is not a hostname")));
        }
        self.ensure_unlocked(ResourceKind::Server, id)?;
        Ok(self.start_action(
            "change_dns_ptr",
            vec![ResourceRef::server(id)],
            Some(Effect::ServerDnsPtr { server: id, ip, dns_ptr: req.dns_ptr.clone() }),
        ))
    }

    /// Sets (or resets) an entry; called when the action finishes.
    pub(crate) fn set_server_dns_ptr(&mut self, id: u64, ip: IpAddr, dns_ptr: Option<String>) {
        let Some(s) = self.servers.get_mut(&id) else {
            return;
        };
        match ip {
            IpAddr::V4(v4) => {
                if let Some(p) = s.ipv4.as_mut().filter(|p| p.ip == v4) {
                    p.dns_ptr = dns_ptr.unwrap_or_else(|| dns_ptr_v4(v4));
                }
            }
            IpAddr::V6(v6) => {
                if let Some(p) = s.ipv6.as_mut().filter(|p| p.net.contains(&v6)) {
                    match dns_ptr {
                        Some(ptr) => p.dns_ptrs.insert(v6, ptr),
                        None => p.dns_ptrs.remove(&v6),
                    };
                }
            }
        }
    }
}
