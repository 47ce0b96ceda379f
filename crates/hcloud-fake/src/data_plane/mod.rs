//! The opt-in Load Balancer data plane, so far its configuration: with
//! [`crate::FakeConfig::load_balancer_data_plane`] set, Load Balancers take their public IPv4
//! from its addresses (a range inside `127.0.0.0/8` or a list of local addresses) instead of
//! 198.18.0.0/15.

mod config;

pub use config::{
    AddressSource, DEFAULT_RECONCILE_INTERVAL, DataPlaneConfig, DataPlaneConfigError, ProxyProtocolVersion,
};
