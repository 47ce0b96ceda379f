//! [`ElectionConfig`]: which Lease, who we are, and the three timings; validated once.

use std::fmt;
use std::time::Duration;

/// Default `lease_duration` (upstream `--leader-elect-lease-duration`).
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// Default `renew_deadline` (upstream `--leader-elect-renew-deadline`).
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// Default `retry_period` (upstream `--leader-elect-retry-period`).
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// The largest `lease_duration`: the Lease stores it as `leaseDurationSeconds`, an `int32`.
pub const MAX_LEASE_DURATION: Duration = Duration::from_secs(i32::MAX as u64);

/// What to elect on and how fast.
///
/// The rules (checked by [`ElectionConfig::validate`], as client-go checks them, plus what the
/// Lease format needs): `namespace`, `name` and `identity` are non-empty (`name` a DNS subdomain,
/// `namespace` a DNS label); all durations are greater than zero; `lease_duration >
/// renew_deadline > retry_period × 1.2`; `lease_duration` is a whole number of seconds (the Lease
/// stores `leaseDurationSeconds`; rounding it down would let another replica take over while we
/// still believe we lead) and at most [`MAX_LEASE_DURATION`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionConfig {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This replica's holder identity; unique per process (see [`default_identity`]).
    pub identity: String,
    /// How long other replicas wait, after they last saw the Lease change, before taking it
    /// over. Default 15 s.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up and reports the lease lost.
    /// Default 10 s.
    pub renew_deadline: Duration,
    /// How often the leader renews and a standby polls. Default 2 s.
    pub retry_period: Duration,
}

impl ElectionConfig {
    /// A config for the Lease `namespace/name` and `identity` with the default timings
    /// (15 s / 10 s / 2 s).
    pub fn new(namespace: impl Into<String>, name: impl Into<String>, identity: impl Into<String>) -> Self {
        ElectionConfig {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }

    /// Checks every rule in the type's documentation; the error names the field and the rule.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (field, value) in [("namespace", &self.namespace), ("name", &self.name), ("identity", &self.identity)] {
            if value.is_empty() {
                return Err(ConfigError::Empty { field });
            }
        }
        if !is_dns_label(&self.namespace) {
            return Err(ConfigError::InvalidName {
                field: "namespace",
                value: self.namespace.clone(),
                rule: "a DNS label: at most 63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit",
            });
        }
        if !is_dns_subdomain(&self.name) {
            return Err(ConfigError::InvalidName {
                field: "name",
                value: self.name.clone(),
                rule: "a DNS subdomain: at most 253 characters of a-z, 0-9, '-' and '.', each dot-separated part \
                       starting and ending with a letter or digit",
            });
        }
        for (field, value) in [
            ("lease_duration", self.lease_duration),
            ("renew_deadline", self.renew_deadline),
            ("retry_period", self.retry_period),
        ] {
            if value.is_zero() {
                return Err(ConfigError::NotPositive { field });
            }
        }
        if self.lease_duration.subsec_nanos() != 0 {
            return Err(ConfigError::LeaseDurationNotWholeSeconds { lease_duration: self.lease_duration });
        }
        if self.lease_duration > MAX_LEASE_DURATION {
            return Err(ConfigError::LeaseDurationTooLong { lease_duration: self.lease_duration });
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(ConfigError::LeaseNotLongerThanRenewDeadline {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
            });
        }
        // renew_deadline > retry_period × 1.2, in integers: 5 × renew > 6 × retry (u128: no overflow).
        if self.renew_deadline.as_nanos() * 5 <= self.retry_period.as_nanos() * 6 {
            return Err(ConfigError::RenewDeadlineTooShort {
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
            });
        }
        Ok(())
    }

    /// `namespace/name`, for messages.
    pub fn lease_ref(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// `lease_duration` as the Lease's `leaseDurationSeconds` (valid after [`Self::validate`]).
    pub(crate) fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }
}

/// An [`ElectionConfig`] rule that does not hold. The message names the field and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A string field is empty.
    #[error("leader election: {field} must not be empty")]
    Empty {
        /// The [`ElectionConfig`] field that is empty: `namespace`, `name` or `identity`.
        field: &'static str,
    },
    /// `namespace` or `name` is not a valid Kubernetes name.
    #[error("leader election: {field} {value:?} is not valid: it must be {rule}")]
    InvalidName {
        /// The [`ElectionConfig`] field: `namespace` or `name`.
        field: &'static str,
        /// The rejected value.
        value: String,
        /// What is accepted.
        rule: &'static str,
    },
    /// A duration is zero.
    #[error("leader election: {field} must be greater than zero")]
    NotPositive {
        /// The [`ElectionConfig`] field that is zero: `lease_duration`, `renew_deadline` or
        /// `retry_period`.
        field: &'static str,
    },
    /// `lease_duration` has a fractional second.
    #[error(
        "leader election: lease_duration ({}) must be a whole number of seconds (the Lease stores \
         leaseDurationSeconds)",
        Secs(*lease_duration)
    )]
    LeaseDurationNotWholeSeconds {
        /// The rejected value.
        lease_duration: Duration,
    },
    /// `lease_duration` does not fit the Lease's `int32` seconds.
    #[error("leader election: lease_duration ({}) must be at most {}", Secs(*lease_duration), Secs(MAX_LEASE_DURATION))]
    LeaseDurationTooLong {
        /// The rejected value.
        lease_duration: Duration,
    },
    /// `lease_duration <= renew_deadline`.
    #[error(
        "leader election: lease_duration ({}) must be greater than renew_deadline ({})",
        Secs(*lease_duration),
        Secs(*renew_deadline)
    )]
    LeaseNotLongerThanRenewDeadline {
        /// The configured lease duration.
        lease_duration: Duration,
        /// The configured renew deadline.
        renew_deadline: Duration,
    },
    /// `renew_deadline <= retry_period × 1.2`.
    #[error(
        "leader election: renew_deadline ({}) must be greater than retry_period × 1.2 ({} × 1.2 = {})",
        Secs(*renew_deadline),
        Secs(*retry_period),
        Secs(Duration::from_nanos(u64::try_from(retry_period.as_nanos() * 6 / 5).unwrap_or(u64::MAX)))
    )]
    RenewDeadlineTooShort {
        /// The configured renew deadline.
        renew_deadline: Duration,
        /// The configured retry period.
        retry_period: Duration,
    },
}

/// Formats a duration as seconds, like `2.4s` or `15s`.
struct Secs(Duration);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s", self.0.as_secs_f64())
    }
}

/// `<hostname>_<random UUID v4>`: upstream cloud-controller-manager's holder identity, unique
/// per process so a restarted replica never mistakes the old holder for itself.
pub fn default_identity() -> String {
    let host = hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "unknown-host".to_owned());
    format!("{host}_{}", uuid_v4())
}

/// A random (version 4, RFC 9562 variant) UUID in its hyphenated lowercase form.
fn uuid_v4() -> String {
    let mut bytes = [0u8; 16];
    bytes.iter_mut().for_each(|b| *b = fastrand::u8(..));
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        hex[0..4].concat(),
        hex[4..6].concat(),
        hex[6..8].concat(),
        hex[8..10].concat(),
        hex[10..16].concat()
    )
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(|part| !part.is_empty() && is_dns_label(part))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> ElectionConfig {
        ElectionConfig::new("kube-system", "cloud-controller-manager", "host_1")
    }

    fn error(change: impl FnOnce(&mut ElectionConfig)) -> String {
        let mut config = valid();
        change(&mut config);
        match config.validate() {
            Ok(()) => panic!("{config:?} should be rejected"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn defaults_are_upstreams_and_valid() {
        let config = valid();
        assert_eq!(config.lease_duration, Duration::from_secs(15));
        assert_eq!(config.renew_deadline, Duration::from_secs(10));
        assert_eq!(config.retry_period, Duration::from_secs(2));
        assert_eq!(config.validate(), Ok(()));
        assert_eq!(config.lease_duration_seconds(), 15);
        assert_eq!(config.lease_ref(), "kube-system/cloud-controller-manager");
    }

    #[test]
    fn short_test_timings_are_valid() {
        let mut config = valid();
        config.lease_duration = Duration::from_secs(3);
        config.renew_deadline = Duration::from_secs(2);
        config.retry_period = Duration::from_millis(500);
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn empty_fields_are_named() {
        assert_eq!(error(|c| c.identity.clear()), "leader election: identity must not be empty");
        assert_eq!(error(|c| c.name.clear()), "leader election: name must not be empty");
        assert_eq!(error(|c| c.namespace.clear()), "leader election: namespace must not be empty");
    }

    #[test]
    fn invalid_names_say_what_is_accepted() {
        let message = error(|c| c.namespace = "Kube_System".to_owned());
        assert!(message.starts_with("leader election: namespace \"Kube_System\" is not valid: it must be a DNS label"));
        let message = error(|c| c.name = "ccm..lock".to_owned());
        assert!(message.starts_with("leader election: name \"ccm..lock\" is not valid: it must be a DNS subdomain"));
        let mut config = valid();
        config.name = "cloud-controller-manager.example.com".to_owned();
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn zero_durations_are_named() {
        assert_eq!(
            error(|c| c.retry_period = Duration::ZERO),
            "leader election: retry_period must be greater than zero"
        );
        assert_eq!(
            error(|c| c.renew_deadline = Duration::ZERO),
            "leader election: renew_deadline must be greater than zero"
        );
        assert_eq!(
            error(|c| c.lease_duration = Duration::ZERO),
            "leader election: lease_duration must be greater than zero"
        );
    }

    #[test]
    fn lease_duration_must_exceed_renew_deadline() {
        assert_eq!(
            error(|c| c.renew_deadline = Duration::from_secs(15)),
            "leader election: lease_duration (15s) must be greater than renew_deadline (15s)"
        );
        assert_eq!(
            error(|c| c.lease_duration = Duration::from_secs(9)),
            "leader election: lease_duration (9s) must be greater than renew_deadline (10s)"
        );
    }

    #[test]
    fn renew_deadline_must_exceed_one_point_two_retry_periods() {
        // 2.4 s is exactly 1.2 × 2 s: rejected (client-go requires strictly greater).
        assert_eq!(
            error(|c| c.renew_deadline = Duration::from_millis(2400)),
            "leader election: renew_deadline (2.4s) must be greater than retry_period × 1.2 (2s × 1.2 = 2.4s)"
        );
        let mut config = valid();
        config.renew_deadline = Duration::from_millis(2401);
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn lease_duration_must_fit_the_lease_format() {
        assert_eq!(
            error(|c| c.lease_duration = Duration::from_millis(15_500)),
            "leader election: lease_duration (15.5s) must be a whole number of seconds (the Lease stores \
             leaseDurationSeconds)"
        );
        assert_eq!(
            error(|c| c.lease_duration = MAX_LEASE_DURATION + Duration::from_secs(1)),
            "leader election: lease_duration (2147483648s) must be at most 2147483647s"
        );
        // Huge durations do not overflow the arithmetic of the checks.
        let mut config = valid();
        config.lease_duration = MAX_LEASE_DURATION;
        config.renew_deadline = Duration::MAX;
        assert!(matches!(config.validate(), Err(ConfigError::LeaseNotLongerThanRenewDeadline { .. })));
        config.renew_deadline = Duration::from_secs(100);
        config.retry_period = Duration::MAX;
        assert!(matches!(config.validate(), Err(ConfigError::RenewDeadlineTooShort { .. })));
    }

    #[test]
    fn default_identity_is_host_underscore_uuid_v4() {
        let a = default_identity();
        let b = default_identity();
        assert_ne!(a, b);
        let (host, uuid) = a.rsplit_once('_').expect("host_uuid");
        assert!(!host.is_empty());
        let groups: Vec<&str> = uuid.split('-').collect();
        assert_eq!(groups.iter().map(|g| g.len()).collect::<Vec<_>>(), [8, 4, 4, 4, 12], "{uuid}");
        assert!(uuid.chars().all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c)), "{uuid}");
        assert!(groups[2].starts_with('4'), "version 4: {uuid}");
        assert!(matches!(groups[3].chars().next(), Some('8' | '9' | 'a' | 'b')), "variant: {uuid}");
    }
}
