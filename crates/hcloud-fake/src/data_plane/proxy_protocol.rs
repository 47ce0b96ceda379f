//! PROXY protocol headers (HAProxy's specification, versions 1 and 2), pure encoders.
//!
//! The header describes the client's connection to the Load Balancer: source = the client's
//! address and port, destination = the Load Balancer's address and listen port. It is written
//! to the target before any byte of the client's.

use std::net::{IpAddr, SocketAddr};

use super::config::ProxyProtocolVersion;

/// The 12-byte signature every version 2 header starts with.
pub const V2_SIGNATURE: [u8; 12] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A];

/// The header of `version` for a connection from `source` to `destination`.
pub fn encode(version: ProxyProtocolVersion, source: SocketAddr, destination: SocketAddr) -> Vec<u8> {
    match version {
        ProxyProtocolVersion::V1 => v1(source, destination).into_bytes(),
        ProxyProtocolVersion::V2 => v2(source, destination),
    }
}

/// Version 1: `PROXY TCP4 <src> <dst> <sport> <dport>\r\n` (`TCP6` for IPv6; `PROXY UNKNOWN\r\n`
/// when the two addresses are of different families, which a single TCP connection never is).
pub fn v1(source: SocketAddr, destination: SocketAddr) -> String {
    let family = match (source.ip(), destination.ip()) {
        (IpAddr::V4(_), IpAddr::V4(_)) => "TCP4",
        (IpAddr::V6(_), IpAddr::V6(_)) => "TCP6",
        _ => return "PROXY UNKNOWN\r\n".to_owned(),
    };
    format!("PROXY {family} {} {} {} {}\r\n", source.ip(), destination.ip(), source.port(), destination.port())
}

/// Version 2: signature, `0x21` (version 2, command PROXY), family and protocol (`0x11` TCP
/// over IPv4, `0x21` TCP over IPv6), the length of the address block, then source address,
/// destination address, source port, destination port (network byte order). Mixed families
/// give family `0x00` (unspecified) with no address block.
pub fn v2(source: SocketAddr, destination: SocketAddr) -> Vec<u8> {
    let mut out = V2_SIGNATURE.to_vec();
    out.push(0x21);
    let addresses: Vec<u8> = match (source.ip(), destination.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            out.push(0x11);
            [s.octets().as_slice(), d.octets().as_slice()].concat()
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            out.push(0x21);
            [s.octets().as_slice(), d.octets().as_slice()].concat()
        }
        _ => {
            out.extend_from_slice(&[0x00, 0x00, 0x00]);
            return out;
        }
    };
    // 2 * 16 + 4 bytes at most: always fits the 16-bit length.
    let len = u16::try_from(addresses.len() + 4).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&addresses);
    out.extend_from_slice(&source.port().to_be_bytes());
    out.extend_from_slice(&destination.port().to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn version_1_text() {
        assert_eq!(v1(addr("127.0.0.1:51234"), addr("127.10.0.1:80")), "PROXY TCP4 127.0.0.1 127.10.0.1 51234 80\r\n");
        assert_eq!(
            v1(addr("[2001:db8::1]:4000"), addr("[2001:db8::2]:443")),
            "PROXY TCP6 2001:db8::1 2001:db8::2 4000 443\r\n"
        );
        assert_eq!(v1(addr("127.0.0.1:1"), addr("[::1]:2")), "PROXY UNKNOWN\r\n");
        assert_eq!(
            encode(ProxyProtocolVersion::V1, addr("1.2.3.4:5"), addr("6.7.8.9:10")),
            b"PROXY TCP4 1.2.3.4 6.7.8.9 5 10\r\n".to_vec()
        );
    }

    #[test]
    fn version_2_binary() {
        let h = v2(addr("127.0.0.1:51234"), addr("127.10.0.1:80"));
        let mut want = V2_SIGNATURE.to_vec();
        want.extend_from_slice(&[0x21, 0x11, 0x00, 0x0C, 127, 0, 0, 1, 127, 10, 0, 1, 0xC8, 0x22, 0x00, 0x50]);
        assert_eq!(h, want);
        let h6 = v2(addr("[::1]:1"), addr("[::2]:2"));
        assert_eq!(h6.len(), 16 + 36);
        assert_eq!(&h6[12..16], &[0x21, 0x21, 0x00, 0x24]);
        assert_eq!(&h6[48..], &[0, 1, 0, 2]);
        let mixed = v2(addr("127.0.0.1:1"), addr("[::1]:2"));
        assert_eq!(&mixed[12..], &[0x21, 0x00, 0x00, 0x00]);
        assert_eq!(encode(ProxyProtocolVersion::V2, addr("127.0.0.1:51234"), addr("127.10.0.1:80")), want);
    }
}
