//! Listen addresses in Go's `net.Listen` syntax (`:8233`, `127.0.0.1:8233`, `[::1]:8233`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Parse a TCP listen address written like Go's `net.Listen("tcp", s)`:
///
/// - `:8233` — all interfaces (returned as `[::]:8233`; [`crate::serve_plain`] binds it
///   dual-stack and falls back to `0.0.0.0` where IPv6 is unavailable);
/// - `127.0.0.1:8233`, `0.0.0.0:8233` — an IPv4 address;
/// - `[::1]:8233`, `[::]:8233` — an IPv6 address in brackets;
/// - `localhost:8233` — the IPv4 loopback address.
///
/// The port is a decimal number from 0 to 65535 (0 picks a free port). Host names other than
/// `localhost` and named ports (`:http`) are rejected, because resolving them at start-up would
/// make the listener depend on DNS. The error names what is wrong and what is accepted.
pub fn parse_listen_address(s: &str) -> Result<SocketAddr, String> {
    const ACCEPTED: &str = "expected [host]:port such as \":8233\", \"127.0.0.1:8233\" or \"[::1]:8233\"";
    let s = s.trim();
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!("{s:?} has no port; {ACCEPTED}"));
    };
    let port = parse_port(port).map_err(|reason| format!("{s:?}: {reason}; {ACCEPTED}"))?;
    let ip = if host.is_empty() {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    } else if let Some(inner) = host.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or_else(|| format!("{s:?}: the IPv6 address lacks its closing \"]\"; {ACCEPTED}"))?;
        // Go accepts a zone (`[fe80::1%eth0]`), which `Ipv6Addr` cannot hold.
        let ip: Ipv6Addr = inner.parse().map_err(|_| format!("{s:?}: {inner:?} is not an IPv6 address; {ACCEPTED}"))?;
        IpAddr::V6(ip)
    } else if host.eq_ignore_ascii_case("localhost") {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else if host.contains(':') {
        return Err(format!("{s:?}: an IPv6 address must be written in brackets, e.g. \"[::1]:8233\""));
    } else {
        let ip: Ipv4Addr = host.parse().map_err(|_| {
            format!(
                "{s:?}: {host:?} is not an IP address (host names other than localhost are not resolved); {ACCEPTED}"
            )
        })?;
        IpAddr::V4(ip)
    };
    Ok(SocketAddr::new(ip, port))
}

fn parse_port(port: &str) -> Result<u16, String> {
    if port.is_empty() {
        return Err("the port is empty".to_owned());
    }
    if !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("the port {port:?} is not a number (named ports are not supported)"));
    }
    port.parse().map_err(|_| format!("the port {port} is out of range 0-65535"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_listen_syntax() {
        let cases = [
            (":8233", "[::]:8233"),
            ("127.0.0.1:8233", "127.0.0.1:8233"),
            ("0.0.0.0:1", "0.0.0.0:1"),
            ("[::1]:8233", "[::1]:8233"),
            ("[::]:0", "[::]:0"),
            ("localhost:9000", "127.0.0.1:9000"),
            (" :8233 ", "[::]:8233"),
            (":65535", "[::]:65535"),
        ];
        for (input, expected) in cases {
            assert_eq!(parse_listen_address(input).map(|a| a.to_string()), Ok(expected.to_owned()), "{input:?}");
        }
    }

    #[test]
    fn rejects_with_a_reason() {
        let cases = [
            ("8233", "has no port"),
            ("", "has no port"),
            (":", "the port is empty"),
            (":http", "named ports are not supported"),
            (":-1", "is not a number"),
            (":65536", "out of range"),
            ("::1:8233", "must be written in brackets"),
            ("[::1:8233", "closing"),
            ("[1.2.3.4]:80", "is not an IPv6 address"),
            ("example.com:8233", "host names other than localhost are not resolved"),
            ("300.1.1.1:80", "is not an IP address"),
        ];
        for (input, fragment) in cases {
            match parse_listen_address(input) {
                Ok(addr) => panic!("{input:?} parsed as {addr}"),
                Err(message) => assert!(message.contains(fragment), "{input:?}: {message}"),
            }
        }
    }
}
