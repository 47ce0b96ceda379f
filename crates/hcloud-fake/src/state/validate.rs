//! Input checks shared by every resource kind: labels, names, IPv4 addresses and networks.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use crate::error::ApiError;
use crate::label_selector::LabelSelector;
use crate::wire::Labels;

/// Validates labels like the API (`labels` schema patterns).
pub(crate) fn validate_labels(labels: &Labels) -> Result<(), ApiError> {
    for (k, v) in labels {
        let probe = format!("{k}={v}");
        if LabelSelector::parse(&probe).is_err() || k.contains(['=', '!', ' ', ',']) {
            return Err(ApiError::invalid_input("labels", format!("invalid label '{k}': '{v}'")));
        }
    }
    Ok(())
}

/// Checks a resource name: non-empty, at most 63 characters, no whitespace.
pub(crate) fn validate_name(name: &str) -> Result<(), ApiError> {
    if name.is_empty() || name.len() > 63 || name.contains(char::is_whitespace) {
        return Err(ApiError::invalid_input("name", "name must be 1-63 characters without whitespace"));
    }
    Ok(())
}

/// Parses an IPv4 address or answers `invalid_input` naming `field`.
pub(crate) fn parse_ipv4(field: &str, s: &str) -> Result<Ipv4Addr, ApiError> {
    s.parse().map_err(|_| ApiError::invalid_input(field, format!("'{s}' is not a valid IPv4 address")))
}

/// Parses an IPv4 CIDR (host bits must be zero) or answers `invalid_input` naming `field`.
pub(crate) fn parse_ipv4_net(field: &str, s: &str) -> Result<Ipv4Net, ApiError> {
    let net: Ipv4Net =
        s.parse().map_err(|_| ApiError::invalid_input(field, format!("'{s}' is not a valid IPv4 CIDR")))?;
    if net.trunc() != net {
        return Err(ApiError::invalid_input(field, format!("'{s}' has host bits set; expected '{}'", net.trunc())));
    }
    Ok(net)
}
