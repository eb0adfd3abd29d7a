//! Which upstream addresses the gateway will connect to.
//!
//! Host names are resolved on the host. A name that resolves to any non-public address is
//! refused as a whole (no "pick the public one"), so a DNS answer cannot steer the gateway to
//! the host's own loopback, link-local (cloud metadata), private or unique-local ranges.
//! Only an origin that names an IP literal, or `localhost`, may reach such an address, because
//! the maintainer wrote it down; unspecified, multicast and broadcast are refused always.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// How an address may be used as an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrClass {
    /// Globally routable: always allowed.
    Public,
    /// Loopback, private, link-local, unique-local, shared, reserved: only when named literally.
    NonPublic,
    /// Unspecified, multicast, broadcast: never.
    Never,
}

/// Classifies one address.
pub fn classify(ip: IpAddr) -> AddrClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddrClass {
    let o = ip.octets();
    if ip.is_unspecified() || ip.is_multicast() || ip.is_broadcast() {
        return AddrClass::Never;
    }
    let non_public = o[0] == 0 // "this network"
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // 100.64/10 shared address space
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // 192.0.0/24 IETF protocol assignments
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // 198.18/15 benchmarking
        || o[0] >= 240 // reserved
        || ip.is_documentation();
    if non_public {
        AddrClass::NonPublic
    } else {
        AddrClass::Public
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddrClass {
    if ip.is_unspecified() || ip.is_multicast() {
        return AddrClass::Never;
    }
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    let s = ip.segments();
    // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) embed an IPv4 address: judge that address.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        let v4 = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
        return classify_v4(v4);
    }
    if s[0] == 0x2002 {
        let v4 = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
        return classify_v4(v4);
    }
    let non_public = ip.is_loopback()
        || s[0..6] == [0, 0, 0, 0, 0, 0] // IPv4-compatible and other ::/96
        || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
        || (s[0] == 0x2001 && s[1] == 0) // Teredo
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || s[0] == 0x0100; // discard-only 100::/64
    if non_public {
        AddrClass::NonPublic
    } else {
        AddrClass::Public
    }
}

/// Whether the gateway may connect to `ip` for an origin whose host was written as `host`.
///
/// `named_literally` is true when the origin's host is that IP literal or `localhost`.
pub fn may_connect(ip: IpAddr, named_literally: bool) -> bool {
    match classify(ip) {
        AddrClass::Public => true,
        AddrClass::NonPublic => named_literally,
        AddrClass::Never => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> AddrClass {
        classify(s.parse().unwrap())
    }

    #[test]
    fn classes() {
        for s in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.1.2.3",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "::127.0.0.1",
        ] {
            assert_eq!(c(s), AddrClass::NonPublic, "{s}");
        }
        for s in ["0.0.0.0", "::", "224.0.0.1", "255.255.255.255", "ff02::1"] {
            assert_eq!(c(s), AddrClass::Never, "{s}");
        }
        for s in [
            "1.1.1.1",
            "93.184.216.34",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(c(s), AddrClass::Public, "{s}");
        }
        assert!(may_connect("127.0.0.1".parse().unwrap(), true));
        assert!(!may_connect("127.0.0.1".parse().unwrap(), false));
        assert!(!may_connect("0.0.0.0".parse().unwrap(), true));
    }
}
