//! Provider IDs, compatible with the official Hetzner CCM: `hcloud://<server-id>` for cloud
//! servers, `hrobot://<server-number>` for Robot (dedicated) servers and the legacy Syself
//! format `hcloud://bm-<server-number>`. The prefixes must never change, or existing nodes
//! would be abandoned.

use std::fmt;

use hcloud_api::models::ServerId;

/// Prefix of cloud server provider IDs.
pub const CLOUD_PREFIX: &str = "hcloud://";
/// Prefix of Robot server provider IDs.
pub const ROBOT_PREFIX: &str = "hrobot://";
/// Prefix of legacy (Syself) Robot provider IDs; checked before [`CLOUD_PREFIX`].
pub const LEGACY_ROBOT_PREFIX: &str = "hcloud://bm-";

/// A parsed provider ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderId {
    /// A cloud server.
    Cloud(ServerId),
    /// A Robot server (`hrobot://`).
    Robot(u64),
    /// A Robot server in the legacy format (`hcloud://bm-`).
    LegacyRobot(u64),
}

/// Why a provider ID could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderIdError {
    /// The prefix is none of ours: the node belongs to another provider.
    #[error(
        "providerID {0:?} has an unknown prefix; expected hcloud://<server-id>, hrobot://<server-number> or hcloud://bm-<server-number>"
    )]
    UnknownPrefix(String),
    /// Our prefix, but no valid number after it.
    #[error("providerID {0:?} does not end in a positive integer id (expected e.g. hcloud://12345)")]
    InvalidId(String),
}

impl ProviderId {
    /// Parses a provider ID.
    pub fn parse(s: &str) -> Result<ProviderId, ProviderIdError> {
        let number = |rest: &str| -> Result<u64, ProviderIdError> {
            match rest.parse::<u64>() {
                Ok(n) if n > 0 && !rest.starts_with('+') => Ok(n),
                _ => Err(ProviderIdError::InvalidId(s.to_owned())),
            }
        };
        if let Some(rest) = s.strip_prefix(LEGACY_ROBOT_PREFIX) {
            return number(rest).map(ProviderId::LegacyRobot);
        }
        if let Some(rest) = s.strip_prefix(CLOUD_PREFIX) {
            let n = number(rest)?;
            let id = i64::try_from(n).map_err(|_| ProviderIdError::InvalidId(s.to_owned()))?;
            return Ok(ProviderId::Cloud(ServerId(id)));
        }
        if let Some(rest) = s.strip_prefix(ROBOT_PREFIX) {
            return number(rest).map(ProviderId::Robot);
        }
        Err(ProviderIdError::UnknownPrefix(s.to_owned()))
    }
}

impl ProviderId {
    /// The same server in the format this provider writes (`hcloud://bm-<n>` becomes
    /// `hrobot://<n>`); its [`Display`](fmt::Display) is then the one spelling of the server
    /// (no leading zeros), by which provider IDs are compared.
    pub fn canonical(self) -> ProviderId {
        match self {
            ProviderId::LegacyRobot(n) => ProviderId::Robot(n),
            other => other,
        }
    }
}

impl fmt::Display for ProviderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProviderId::Cloud(id) => write!(f, "{CLOUD_PREFIX}{id}"),
            ProviderId::Robot(n) => write!(f, "{ROBOT_PREFIX}{n}"),
            ProviderId::LegacyRobot(n) => write!(f, "{LEGACY_ROBOT_PREFIX}{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for s in ["hcloud://42", "hrobot://7", "hcloud://bm-9"] {
            assert_eq!(ProviderId::parse(s).expect("parses").to_string(), s);
        }
        assert_eq!(ProviderId::parse("hcloud://42"), Ok(ProviderId::Cloud(ServerId(42))));
        assert_eq!(ProviderId::parse("hcloud://bm-9"), Ok(ProviderId::LegacyRobot(9)));
        assert_eq!(ProviderId::parse("hrobot://7"), Ok(ProviderId::Robot(7)));
    }

    #[test]
    fn leading_zeros_parse_like_the_official_ccm_and_canonicalize_away() {
        assert_eq!(ProviderId::parse("hcloud://007"), Ok(ProviderId::Cloud(ServerId(7))));
        assert_eq!(ProviderId::parse("hrobot://0042"), Ok(ProviderId::Robot(42)));
        for (written, canonical) in [
            ("hcloud://007", "hcloud://7"),
            ("hcloud://7", "hcloud://7"),
            ("hrobot://0042", "hrobot://42"),
            ("hcloud://bm-09", "hrobot://9"),
        ] {
            assert_eq!(ProviderId::parse(written).expect("parses").canonical().to_string(), canonical, "{written}");
        }
    }

    #[test]
    fn rejects_bad_ids() {
        assert!(matches!(ProviderId::parse("aws:///eu-west-1/i-1"), Err(ProviderIdError::UnknownPrefix(_))));
        assert!(matches!(ProviderId::parse(""), Err(ProviderIdError::UnknownPrefix(_))));
        for bad in [
            "hcloud://",
            "hcloud://abc",
            "hcloud://-1",
            "hcloud://0",
            "hcloud://+5",
            "hrobot://x",
            "hcloud://bm-",
            "hcloud://99999999999999999999",
        ] {
            assert!(matches!(ProviderId::parse(bad), Err(ProviderIdError::InvalidId(_))), "{bad}");
        }
        let msg = ProviderId::parse("gce://x").unwrap_err().to_string();
        assert!(msg.contains("hcloud://<server-id>"), "{msg}");
    }
}
