//! Robot webservice models: the JSON objects of `GET /server`, `GET /server/{n}` and
//! `GET /reset/{n}`, forward compatible (unknown fields ignored, absent ones defaulted).

use std::net::Ipv4Addr;

use serde::Deserialize;

/// A dedicated server as the Robot webservice lists it (the `server` object).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RobotServer {
    /// The server number, unique per Robot account and reused after cancellation.
    pub server_number: u64,
    /// The name given in Robot (the Node's name must equal it).
    #[serde(default)]
    pub server_name: String,
    /// The main public IPv4, if the server has one.
    #[serde(default)]
    pub server_ip: Option<Ipv4Addr>,
    /// The public IPv6 network, e.g. `2a01:4f8:111:4221::` (no prefix length).
    #[serde(default)]
    pub server_ipv6_net: Option<String>,
    /// Product name, e.g. `AX41-NVMe` or `Server Auction`.
    #[serde(default)]
    pub product: String,
    /// Datacenter, e.g. `FSN1-DC14`.
    #[serde(default)]
    pub dc: String,
    /// `ready` or `in process`.
    #[serde(default)]
    pub status: String,
    /// Whether the server is cancelled.
    #[serde(default)]
    pub cancelled: bool,
}

/// The reset state of a server (the `reset` object).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RobotReset {
    /// The server number the reset state belongs to (as in [`RobotServer::server_number`]).
    pub server_number: u64,
    /// `running`, `shut off`, or `not supported` (tower models).
    #[serde(default)]
    pub operating_status: String,
}

impl RobotReset {
    /// Whether the server is powered off. Anything else (including "not supported") is not.
    pub fn is_shut_off(&self) -> bool {
        self.operating_status == "shut off"
    }
}

/// `{"server": {...}}`
#[derive(Deserialize)]
pub(crate) struct ServerWrap {
    pub server: RobotServer,
}

/// `{"reset": {...}}`
#[derive(Deserialize)]
pub(crate) struct ResetWrap {
    pub reset: RobotReset,
}

/// `{"error": {...}}`
#[derive(Deserialize)]
pub(crate) struct ErrorWrap {
    pub error: ErrorBody,
}

#[derive(Deserialize)]
pub(crate) struct ErrorBody {
    #[serde(default)]
    pub status: u16,
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_wrapped_server_list() {
        let body = r#"[{"server":{"server_ip":"123.123.123.123","server_ipv6_net":"2a01:f48:111:4221::",
            "server_number":321,"server_name":"server1","product":"DS 3000","dc":"NBG1-DC1","traffic":"5 TB",
            "status":"ready","cancelled":false,"paid_until":"2010-09-02","ip":["123.123.123.123"],
            "subnet":[{"ip":"2a01:4f8:111:4221::","mask":"64"}],"linked_storagebox":null,"future":1}},
            {"server":{"server_number":9,"server_ip":null}}]"#;
        let list: Vec<ServerWrap> = serde_json::from_str(body).expect("parses");
        let s = &list[0].server;
        assert_eq!(s.server_number, 321);
        assert_eq!(s.server_name, "server1");
        assert_eq!(s.server_ip, Some(Ipv4Addr::new(123, 123, 123, 123)));
        assert_eq!(s.server_ipv6_net.as_deref(), Some("2a01:f48:111:4221::"));
        assert_eq!(s.product, "DS 3000");
        assert_eq!(s.dc, "NBG1-DC1");
        assert_eq!(list[1].server.server_ip, None);
        assert_eq!(list[1].server.server_name, "");
    }

    #[test]
    fn reset_operating_status() {
        let r: ResetWrap = serde_json::from_str(
            r#"{"reset":{"server_ip":"1.2.3.4","server_number":1,"type":["sw","hw"],"operating_status":"shut off"}}"#,
        )
        .expect("parses");
        assert!(r.reset.is_shut_off());
        for other in ["running", "not supported", ""] {
            assert!(!RobotReset { server_number: 1, operating_status: other.into() }.is_shut_off(), "{other}");
        }
    }
}
