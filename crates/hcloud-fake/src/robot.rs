//! The Robot webservice part of the fake (dedicated servers, `https://robot-ws.your-server.de`),
//! served under `/robot` (see [`crate::http`]): its state, wire format, seeds and patches.
//!
//! Wire format (as the webservice): lists are arrays of wrapped objects
//! (`[{"server": {...}}]`), single objects are wrapped (`{"server": {...}}`,
//! `{"reset": {...}}`), errors are `{"error": {"status", "code", "message"}}` with codes such
//! as `SERVER_NOT_FOUND`, `RATE_LIMIT_EXCEEDED` (HTTP 403) and `UNAUTHORIZED` (401). Requests
//! need HTTP basic auth with the fake's Robot credentials ([`RobotCredentials`]).
//!
//! Seeded servers get numbers from 100001 up, public IPv4s from `198.19.0.0/16` and IPv6
//! networks `2a01:4f8:0:<n>::` unless the seed names them.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::ApiError;

/// The basic-auth credentials the fake's Robot part accepts (default `robot` / `robot-password`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RobotCredentials {
    /// Basic-auth user name (default `robot`).
    pub user: String,
    /// Basic-auth password (default `robot-password`; redacted in `Debug`).
    pub password: String,
}

impl std::fmt::Debug for RobotCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RobotCredentials").field("user", &self.user).field("password", &"[redacted]").finish()
    }
}

impl Default for RobotCredentials {
    fn default() -> Self {
        RobotCredentials { user: "robot".to_owned(), password: "robot-password".to_owned() }
    }
}

/// One dedicated server to create.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedRobotServer {
    /// Server number (default: the next free one from 100001).
    #[serde(default)]
    pub number: Option<u64>,
    /// Server name.
    pub name: String,
    /// Product (default `AX41-NVMe`).
    #[serde(default)]
    pub product: Option<String>,
    /// Datacenter (default `FSN1-DC14`).
    #[serde(default)]
    pub dc: Option<String>,
    /// Public IPv4 (default: the next free one in `198.19.0.0/16`).
    #[serde(default)]
    pub ipv4: Option<Ipv4Addr>,
    /// No public IPv4 at all.
    #[serde(default)]
    pub no_ipv4: bool,
    /// IPv6 network (default `2a01:4f8:0:<n>::`).
    #[serde(default)]
    pub ipv6_net: Option<Ipv6Addr>,
    /// Operating status of the reset endpoint (default `running`; `shut off`, `not supported`).
    #[serde(default)]
    pub operating_status: Option<String>,
}

impl SeedRobotServer {
    /// A server with this name and defaults for everything else.
    pub fn new(name: &str) -> Self {
        SeedRobotServer { name: name.to_owned(), ..Self::default() }
    }

    /// With this number.
    #[must_use]
    pub fn number(mut self, number: u64) -> Self {
        self.number = Some(number);
        self
    }

    /// With this product.
    #[must_use]
    pub fn product(mut self, product: &str) -> Self {
        self.product = Some(product.to_owned());
        self
    }

    /// With this datacenter.
    #[must_use]
    pub fn dc(mut self, dc: &str) -> Self {
        self.dc = Some(dc.to_owned());
        self
    }

    /// With this public IPv4.
    #[must_use]
    pub fn ipv4(mut self, ip: Ipv4Addr) -> Self {
        self.ipv4 = Some(ip);
        self
    }
}

/// Changes to a dedicated server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RobotServerPatch {
    /// New name.
    #[serde(default)]
    pub name: Option<String>,
    /// New operating status of the reset endpoint.
    #[serde(default)]
    pub operating_status: Option<String>,
    /// New IPv6 network (`server_ipv6_net`), e.g. `2a01:4f8:0:1::`.
    #[serde(default)]
    pub ipv6_net: Option<Ipv6Addr>,
}

/// A dedicated server as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RobotServer {
    /// Server number, sent as `server_number` (the key of the Robot state; from 100001 unless seeded).
    pub number: u64,
    /// Server name, sent as `server_name` (the name given in Robot).
    pub name: String,
    /// Product name, sent as `product` (e.g. `AX41-NVMe`).
    pub product: String,
    /// Datacenter, sent as `dc` (e.g. `FSN1-DC14`).
    pub dc: String,
    /// Public IPv4.
    pub ipv4: Option<Ipv4Addr>,
    /// IPv6 network.
    pub ipv6_net: Ipv6Addr,
    /// Reset endpoint's operating status.
    pub operating_status: String,
}

impl RobotServer {
    /// The `server` object as the webservice sends it.
    pub fn wire(&self) -> Value {
        json!({
            "server_ip": self.ipv4.map(|ip| ip.to_string()),
            "server_ipv6_net": self.ipv6_net.to_string(),
            "server_number": self.number,
            "server_name": self.name,
            "product": self.product,
            "dc": self.dc,
            "traffic": "unlimited",
            "status": "ready",
            "cancelled": false,
            "paid_until": "2030-12-31",
            "ip": self.ipv4.map(|ip| vec![ip.to_string()]).unwrap_or_default(),
            "subnet": [{"ip": self.ipv6_net.to_string(), "mask": "64"}],
        })
    }

    /// The `reset` object as the webservice sends it.
    pub fn reset_wire(&self) -> Value {
        json!({
            "server_ip": self.ipv4.map(|ip| ip.to_string()),
            "server_ipv6_net": self.ipv6_net.to_string(),
            "server_number": self.number,
            "type": ["sw", "hw", "man"],
            "operating_status": self.operating_status,
        })
    }
}

/// The Robot part's state.
#[derive(Debug, Default)]
pub(crate) struct RobotState {
    servers: BTreeMap<u64, RobotServer>,
    ipv4_counter: u32,
}

impl RobotState {
    pub fn seed(&mut self, seed: &SeedRobotServer) -> Result<u64, ApiError> {
        if seed.name.is_empty() {
            return Err(ApiError::invalid_input("name", "a Robot server needs a name"));
        }
        let number = match seed.number {
            Some(0) => return Err(ApiError::invalid_input("number", "server numbers are positive")),
            Some(n) if self.servers.contains_key(&n) => {
                return Err(ApiError::new("uniqueness_error", format!("Robot server {n} already exists")));
            }
            Some(n) => n,
            None => self.servers.keys().next_back().map_or(100_001, |n| (n + 1).max(100_001)),
        };
        let ipv4 = match (seed.no_ipv4, seed.ipv4) {
            (true, _) => None,
            (false, Some(ip)) => Some(ip),
            (false, None) => Some(self.next_ipv4()),
        };
        if let Some(ip) = ipv4
            && self.servers.values().any(|s| s.ipv4 == Some(ip))
        {
            return Err(ApiError::new("ip_not_available", format!("{ip} is already in use by a Robot server")));
        }
        let ipv6_net = seed.ipv6_net.unwrap_or_else(|| {
            // 2a01:4f8:0:<low 16 bits of the number>:: (distinct for the fake's number range).
            Ipv6Addr::new(0x2a01, 0x4f8, (number >> 16) as u16, number as u16, 0, 0, 0, 0)
        });
        self.servers.insert(
            number,
            RobotServer {
                number,
                name: seed.name.clone(),
                product: seed.product.clone().unwrap_or_else(|| "AX41-NVMe".to_owned()),
                dc: seed.dc.clone().unwrap_or_else(|| "FSN1-DC14".to_owned()),
                ipv4,
                ipv6_net,
                operating_status: seed.operating_status.clone().unwrap_or_else(|| "running".to_owned()),
            },
        );
        Ok(number)
    }

    fn next_ipv4(&mut self) -> Ipv4Addr {
        loop {
            self.ipv4_counter += 1;
            let n = self.ipv4_counter;
            let ip = Ipv4Addr::new(198, 19, (n / 254) as u8, (n % 254 + 1) as u8);
            if !self.servers.values().any(|s| s.ipv4 == Some(ip)) {
                return ip;
            }
        }
    }

    pub fn delete(&mut self, number: u64) -> Result<(), ApiError> {
        self.servers.remove(&number).map(|_| ()).ok_or_else(|| not_found(number))
    }

    pub fn patch(&mut self, number: u64, patch: &RobotServerPatch) -> Result<(), ApiError> {
        let s = self.servers.get_mut(&number).ok_or_else(|| not_found(number))?;
        if let Some(name) = &patch.name {
            s.name = name.clone();
        }
        if let Some(status) = &patch.operating_status {
            s.operating_status = status.clone();
        }
        if let Some(net) = patch.ipv6_net {
            s.ipv6_net = net;
        }
        Ok(())
    }

    pub fn get(&self, number: u64) -> Option<&RobotServer> {
        self.servers.get(&number)
    }

    pub fn list(&self) -> Vec<RobotServer> {
        self.servers.values().cloned().collect()
    }
}

fn not_found(number: u64) -> ApiError {
    ApiError::new("not_found", format!("no Robot server {number}"))
}

/// The webservice's error envelope.
pub(crate) fn error_body(status: u16, code: &str, message: &str) -> Value {
    json!({"error": {"status": status, "code": code, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeding_assigns_numbers_and_ips() {
        let mut s = RobotState::default();
        let a = s.seed(&SeedRobotServer::new("a")).expect("seed");
        let b = s.seed(&SeedRobotServer::new("b")).expect("seed");
        assert_eq!((a, b), (100_001, 100_002));
        assert_ne!(s.get(a).and_then(|x| x.ipv4), s.get(b).and_then(|x| x.ipv4));
        assert!(s.seed(&SeedRobotServer::new("c").number(a)).is_err(), "numbers are unique");
        assert!(s.seed(&SeedRobotServer::new("")).is_err());
        let w = s.get(a).expect("a").wire();
        assert_eq!(w["server_number"], 100_001);
        assert_eq!(w["server_name"], "a");
        assert_eq!(w["dc"], "FSN1-DC14");
        assert_eq!(w["server_ipv6_net"], "2a01:4f8:1:86a1::");
        assert_eq!(s.get(b).expect("b").wire()["server_ipv6_net"], "2a01:4f8:1:86a2::", "a /64 each");
        let net = "2a01:4f8:ff:1::".parse().expect("net");
        s.patch(a, &RobotServerPatch { ipv6_net: Some(net), ..Default::default() }).expect("patch");
        assert_eq!(s.get(a).expect("a").wire()["server_ipv6_net"], "2a01:4f8:ff:1::");
    }
}
