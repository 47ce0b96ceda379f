//! Start-up configuration of a fake and its token policy.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::data_plane::config::{DataPlaneConfig, DataPlaneConfigError, ProxyProtocolVersion};
use crate::rate_limit::RateLimitConfig;

/// Which bearer tokens are accepted on `/v1`.
///
/// JSON form (control surface): `{"mode":"accept_all"}`,
/// `{"mode":"deny","tokens":["bad"]}` or `{"mode":"allow","tokens":["good"]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum TokenPolicy {
    /// Any non-empty token (default).
    #[default]
    AcceptAll,
    /// Any non-empty token except these.
    Deny {
        /// Rejected tokens.
        tokens: BTreeSet<String>,
    },
    /// Only these tokens.
    Allow {
        /// Accepted tokens.
        tokens: BTreeSet<String>,
    },
}

impl TokenPolicy {
    /// An allow-list policy.
    pub fn allow<I, S>(tokens: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::Allow { tokens: tokens.into_iter().map(Into::into).collect() }
    }

    /// A deny-list policy.
    pub fn deny<I, S>(tokens: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::Deny { tokens: tokens.into_iter().map(Into::into).collect() }
    }

    /// Whether the policy names `token` as refused (a deny list holding it).
    pub fn denies(&self, token: &str) -> bool {
        matches!(self, Self::Deny { tokens } if tokens.contains(token))
    }

    /// Whether `token` (already taken out of `Bearer <token>`) is accepted.
    pub fn accepts(&self, token: &str) -> bool {
        if token.is_empty() {
            return false;
        }
        match self {
            Self::AcceptAll => true,
            Self::Deny { tokens } => !tokens.contains(token),
            Self::Allow { tokens } => tokens.contains(token),
        }
    }
}

/// Configuration of a fake; [`crate::FakeHandle::reset`] returns to it.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeConfig {
    /// Time from an action's start to its end (default 500 ms; zero finishes at once).
    pub action_delay: Duration,
    /// How long finished actions are kept before they are pruned (default 1 hour).
    pub action_retention: Duration,
    /// Rate limit (default capacity 3600, refill 1/s).
    pub rate_limit: RateLimitConfig,
    /// Token policy (default accept all).
    pub token_policy: TokenPolicy,
    /// Log one `tracing` line per request (default true).
    pub log_requests: bool,
    /// Basic-auth credentials of the Robot part under `/robot` (default `robot` / `robot-password`).
    pub robot_credentials: crate::robot::RobotCredentials,
    /// The opt-in Load Balancer data plane (default off): Load Balancers take their public
    /// IPv4 from its addresses and carry real traffic to their targets, whose health is
    /// checked for real (see [`crate::data_plane`]).
    pub load_balancer_data_plane: Option<DataPlaneConfig>,
}

impl Default for FakeConfig {
    fn default() -> Self {
        Self {
            action_delay: Duration::from_millis(500),
            action_retention: Duration::from_secs(3600),
            rate_limit: RateLimitConfig::default(),
            token_policy: TokenPolicy::AcceptAll,
            log_requests: true,
            robot_credentials: crate::robot::RobotCredentials::default(),
            load_balancer_data_plane: None,
        }
    }
}

impl FakeConfig {
    /// Sets the action delay.
    #[must_use]
    pub fn with_action_delay(mut self, delay: Duration) -> Self {
        self.action_delay = delay;
        self
    }

    /// Sets the rate limit.
    #[must_use]
    pub fn with_rate_limit(mut self, capacity: u32, refill_per_second: f64) -> Self {
        self.rate_limit = RateLimitConfig { capacity, refill_per_second };
        self
    }

    /// Sets the token policy.
    #[must_use]
    pub fn with_token_policy(mut self, policy: TokenPolicy) -> Self {
        self.token_policy = policy;
        self
    }

    /// Turns the Load Balancer data plane on, e.g. with
    /// `DataPlaneConfig::parse("127.10.0.0/16")?` (see [`crate::data_plane`]).
    #[must_use]
    pub fn with_load_balancer_data_plane(mut self, data_plane: DataPlaneConfig) -> Self {
        self.load_balancer_data_plane = Some(data_plane);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies() {
        assert!(TokenPolicy::AcceptAll.accepts("x"));
        assert!(!TokenPolicy::AcceptAll.accepts(""));
        assert!(!TokenPolicy::deny(["bad"]).accepts("bad"));
        assert!(TokenPolicy::deny(["bad"]).accepts("good"));
        assert!(TokenPolicy::allow(["good"]).accepts("good"));
        assert!(!TokenPolicy::allow(["good"]).accepts("other"));
        let json = serde_json::json!({"mode": "allow", "tokens": ["a"]});
        let parsed: Result<TokenPolicy, _> = serde_json::from_value(json);
        assert_eq!(parsed.ok(), Some(TokenPolicy::allow(["a"])));
    }
}
