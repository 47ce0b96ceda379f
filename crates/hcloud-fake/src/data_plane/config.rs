//! [`DataPlaneConfig`]: where Load Balancers take their public IPv4 from when the data plane
//! is on, and which PROXY protocol version they send.
//!
//! Only addresses this machine can bind are accepted: a range inside `127.0.0.0/8` (Linux
//! answers on every loopback address without any setup), or a list of addresses the caller
//! vouches for (e.g. addresses a test put on a bridge in a network namespace it created).
//! `0.0.0.0` is always refused: listening there would open the Load Balancer's ports on every
//! interface of the machine.

use std::net::Ipv4Addr;
use std::time::Duration;

use ipnet::Ipv4Net;

/// Which PROXY protocol version a service with `proxyprotocol: true` sends (see
/// [`crate::data_plane`] for the choice of the default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProxyProtocolVersion {
    /// The text header `PROXY TCP4 <src> <dst> <sport> <dport>\r\n` (default).
    #[default]
    V1,
    /// The binary header (12-byte signature, version/command, family, addresses).
    V2,
}

impl std::str::FromStr for ProxyProtocolVersion {
    type Err = DataPlaneConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "v1" | "1" => Ok(Self::V1),
            "v2" | "2" => Ok(Self::V2),
            other => Err(DataPlaneConfigError::Parse {
                input: other.to_owned(),
                reason: "the PROXY protocol version is v1 or v2".to_owned(),
            }),
        }
    }
}

/// Where Load Balancer addresses come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressSource {
    /// A range inside `127.0.0.0/8`; its network and broadcast addresses are skipped
    /// (except for /31 and /32, whose every address is used).
    LoopbackRange(Ipv4Net),
    /// Addresses the caller says are local to this machine, handed out in this order.
    LocalAddresses(Vec<Ipv4Addr>),
}

/// Why a data plane configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DataPlaneConfigError {
    /// `0.0.0.0` (or a range holding it) was given.
    #[error(
        "{0} holds 0.0.0.0 (unspecified): a Load Balancer listening there would listen on every interface; give a range inside 127.0.0.0/8 (e.g. 127.10.0.0/16) or local addresses"
    )]
    Unspecified(String),
    /// A range outside `127.0.0.0/8`.
    #[error(
        "{0} is not inside 127.0.0.0/8; only loopback ranges are taken as a range (give other addresses one by one, as local addresses you have set up)"
    )]
    NotLoopback(Ipv4Net),
    /// A listed address that cannot be a host address (multicast or broadcast).
    #[error("{addr} cannot be a Load Balancer address: {reason}")]
    NotUsable {
        /// The address.
        addr: Ipv4Addr,
        /// Why.
        reason: &'static str,
    },
    /// No address at all.
    #[error("the data plane needs at least one address")]
    Empty,
    /// Text that is not a range, an address list or a PROXY protocol version.
    #[error("cannot parse '{input}': {reason}")]
    Parse {
        /// The text.
        input: String,
        /// Why.
        reason: String,
    },
}

/// Configuration of the opt-in Load Balancer data plane ([`crate::data_plane`]).
///
/// Built only through the checked constructors, so a value always names addresses that are
/// safe to bind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataPlaneConfig {
    source: AddressSource,
    proxy_protocol: ProxyProtocolVersion,
    reconcile_interval: Duration,
}

/// How often the data plane compares what runs with what the state wants, when no change
/// wakes it earlier.
pub const DEFAULT_RECONCILE_INTERVAL: Duration = Duration::from_millis(200);

impl DataPlaneConfig {
    /// Load Balancers take addresses from `range`, which must lie inside `127.0.0.0/8`.
    pub fn loopback_range(range: Ipv4Net) -> Result<Self, DataPlaneConfigError> {
        let range = range.trunc();
        if range.contains(&Ipv4Addr::UNSPECIFIED) {
            return Err(DataPlaneConfigError::Unspecified(range.to_string()));
        }
        let loopback = Ipv4Net::new(Ipv4Addr::new(127, 0, 0, 0), 8)
            .map_err(|e| DataPlaneConfigError::Parse { input: "127.0.0.0/8".to_owned(), reason: e.to_string() })?;
        if !loopback.contains(&range) {
            return Err(DataPlaneConfigError::NotLoopback(range));
        }
        Ok(Self::with_source(AddressSource::LoopbackRange(range)))
    }

    /// Load Balancers take these addresses, in this order (duplicates are dropped). The caller
    /// vouches that they are local to this machine; `0.0.0.0`, broadcast and multicast
    /// addresses are refused.
    pub fn local_addresses(addresses: impl IntoIterator<Item = Ipv4Addr>) -> Result<Self, DataPlaneConfigError> {
        let mut list: Vec<Ipv4Addr> = Vec::new();
        for addr in addresses {
            if addr.is_unspecified() {
                return Err(DataPlaneConfigError::Unspecified(addr.to_string()));
            }
            if addr.is_broadcast() {
                return Err(DataPlaneConfigError::NotUsable { addr, reason: "it is the broadcast address" });
            }
            if addr.is_multicast() {
                return Err(DataPlaneConfigError::NotUsable { addr, reason: "it is a multicast address" });
            }
            if !list.contains(&addr) {
                list.push(addr);
            }
        }
        if list.is_empty() {
            return Err(DataPlaneConfigError::Empty);
        }
        Ok(Self::with_source(AddressSource::LocalAddresses(list)))
    }

    /// Parses the binary's flag: a range (`127.10.0.0/16`, inside `127.0.0.0/8`) or a
    /// comma-separated list of local addresses (`10.99.0.1,10.99.0.2`).
    pub fn parse(spec: &str) -> Result<Self, DataPlaneConfigError> {
        let spec = spec.trim();
        if spec.contains('/') {
            let range: Ipv4Net = spec.parse().map_err(|e: ipnet::AddrParseError| DataPlaneConfigError::Parse {
                input: spec.to_owned(),
                reason: e.to_string(),
            })?;
            return Self::loopback_range(range);
        }
        let addresses = spec
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<Ipv4Addr>().map_err(|e| DataPlaneConfigError::Parse {
                    input: s.to_owned(),
                    reason: format!("{e} (expected an IPv4 range like 127.10.0.0/16 or IPv4 addresses)"),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::local_addresses(addresses)
    }

    fn with_source(source: AddressSource) -> Self {
        Self { source, proxy_protocol: ProxyProtocolVersion::default(), reconcile_interval: DEFAULT_RECONCILE_INTERVAL }
    }

    /// Sets the PROXY protocol version (default [`ProxyProtocolVersion::V1`]).
    #[must_use]
    pub fn with_proxy_protocol(mut self, version: ProxyProtocolVersion) -> Self {
        self.proxy_protocol = version;
        self
    }

    /// Sets how often the data plane reconciles without a change notification (default
    /// [`DEFAULT_RECONCILE_INTERVAL`]; at least 10 ms).
    #[must_use]
    pub fn with_reconcile_interval(mut self, interval: Duration) -> Self {
        self.reconcile_interval = interval.max(Duration::from_millis(10));
        self
    }

    /// Where addresses come from.
    pub fn source(&self) -> &AddressSource {
        &self.source
    }

    /// The PROXY protocol version sent.
    pub fn proxy_protocol(&self) -> ProxyProtocolVersion {
        self.proxy_protocol
    }

    /// The reconcile interval.
    pub fn reconcile_interval(&self) -> Duration {
        self.reconcile_interval
    }

    /// Whether `ip` is one of the data plane's addresses.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        match &self.source {
            AddressSource::LoopbackRange(net) => net.contains(&ip),
            AddressSource::LocalAddresses(list) => list.contains(&ip),
        }
    }

    /// The `n`-th address handed out when none was released (`None` past the end).
    pub(crate) fn nth_address(&self, n: u64) -> Option<Ipv4Addr> {
        match &self.source {
            AddressSource::LoopbackRange(net) => {
                let first = u32::from(net.network());
                let last = u32::from(net.broadcast());
                // /31 and /32 have no network or broadcast address to skip.
                let (first, last) = if net.prefix_len() >= 31 { (first, last) } else { (first + 1, last - 1) };
                let ip = u64::from(first).checked_add(n)?;
                if ip > u64::from(last) { None } else { u32::try_from(ip).ok().map(Ipv4Addr::from) }
            }
            AddressSource::LocalAddresses(list) => usize::try_from(n).ok().and_then(|i| list.get(i)).copied(),
        }
    }
}

impl std::fmt::Display for DataPlaneConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.source {
            AddressSource::LoopbackRange(net) => write!(f, "{net}")?,
            AddressSource::LocalAddresses(list) => {
                let list: Vec<String> = list.iter().map(ToString::to_string).collect();
                write!(f, "{}", list.join(","))?;
            }
        }
        write!(f, " (PROXY protocol {:?})", self.proxy_protocol)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> Ipv4Net {
        s.parse().unwrap()
    }

    #[test]
    fn loopback_ranges_only() {
        assert!(DataPlaneConfig::loopback_range(net("127.10.0.0/16")).is_ok());
        assert!(DataPlaneConfig::loopback_range(net("127.0.0.0/8")).is_ok());
        assert_eq!(
            DataPlaneConfig::loopback_range(net("10.0.0.0/8")),
            Err(DataPlaneConfigError::NotLoopback(net("10.0.0.0/8")))
        );
        assert_eq!(
            DataPlaneConfig::loopback_range(net("0.0.0.0/0")),
            Err(DataPlaneConfigError::Unspecified("0.0.0.0/0".to_owned()))
        );
        let e = DataPlaneConfig::parse("0.0.0.0/8").unwrap_err();
        assert!(e.to_string().contains("unspecified"), "{e}");
    }

    #[test]
    fn local_addresses_are_checked() {
        let c = DataPlaneConfig::parse("10.99.0.2, 10.99.0.1,10.99.0.2").unwrap();
        assert_eq!(c.source(), &AddressSource::LocalAddresses(vec![[10, 99, 0, 2].into(), [10, 99, 0, 1].into()]));
        assert_eq!(c.nth_address(1), Some(Ipv4Addr::new(10, 99, 0, 1)));
        assert_eq!(c.nth_address(2), None);
        assert!(matches!(DataPlaneConfig::parse("0.0.0.0"), Err(DataPlaneConfigError::Unspecified(_))));
        assert!(matches!(DataPlaneConfig::parse("224.0.0.1"), Err(DataPlaneConfigError::NotUsable { .. })));
        assert!(matches!(DataPlaneConfig::parse(""), Err(DataPlaneConfigError::Empty)));
        assert!(matches!(DataPlaneConfig::parse("localhost"), Err(DataPlaneConfigError::Parse { .. })));
    }

    #[test]
    fn range_addresses_skip_network_and_broadcast() {
        let c = DataPlaneConfig::parse("127.10.0.0/30").unwrap();
        assert_eq!(c.nth_address(0), Some(Ipv4Addr::new(127, 10, 0, 1)));
        assert_eq!(c.nth_address(1), Some(Ipv4Addr::new(127, 10, 0, 2)));
        assert_eq!(c.nth_address(2), None);
        let one = DataPlaneConfig::parse("127.10.0.7/32").unwrap();
        assert_eq!(one.nth_address(0), Some(Ipv4Addr::new(127, 10, 0, 7)));
        assert_eq!(one.nth_address(1), None);
        assert!(c.contains(Ipv4Addr::new(127, 10, 0, 3)));
        assert!(!c.contains(Ipv4Addr::new(127, 10, 0, 4)));
    }

    #[test]
    fn proxy_protocol_versions() {
        assert_eq!("v2".parse::<ProxyProtocolVersion>(), Ok(ProxyProtocolVersion::V2));
        assert_eq!("V1".parse::<ProxyProtocolVersion>(), Ok(ProxyProtocolVersion::V1));
        assert!("v3".parse::<ProxyProtocolVersion>().is_err());
        let c = DataPlaneConfig::parse("127.10.0.0/16").unwrap().with_proxy_protocol(ProxyProtocolVersion::V2);
        assert_eq!(c.proxy_protocol(), ProxyProtocolVersion::V2);
        assert_eq!(c.to_string(), "127.10.0.0/16 (PROXY protocol V2)");
    }
}
