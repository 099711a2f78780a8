//! The deliverer's resolve-time check (extras §4.3, "SSRF check at
//! resolve"): a webhook's host is resolved once, every address must be a
//! public one, and the connection goes to those addresses only (no second
//! lookup a DNS answer could change in between). The SDK applies the
//! deliverable-URL rule at registration; this is the same rule for
//! addresses, applied again where the request is made.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether `ip` is a public unicast address: not loopback, private,
/// link-local (the metadata service's 169.254.169.254 included),
/// shared (100.64.0.0/10), multicast, broadcast, documentation, reserved
/// or unspecified. An IPv4-mapped or -compatible IPv6 address is judged
/// as its IPv4 address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (b == 18 || b == 19))
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let seg = ip.segments();
    // ::/96 (IPv4-compatible, deprecated) carries an IPv4 address too.
    if seg[..6].iter().all(|s| *s == 0) && !ip.is_loopback() && !ip.is_unspecified() {
        let [.., c, d] = ip.octets().map(u32::from);
        let v4 = Ipv4Addr::from((seg[6] as u32) << 16 | (c << 8) | d);
        return is_public_v4(v4);
    }
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (seg[0] & 0xfe00) == 0xfc00 // unique local
        || (seg[0] & 0xffc0) == 0xfe80 // link-local
        || (seg[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
        || (seg[0] == 0x2001 && seg[1] == 0x0db8) // documentation
        || (seg[0] == 0x0064 && seg[1] == 0xff9b) // NAT64: an IPv4 behind it
        || (seg[0] == 0x0100 && seg[1..4] == [0, 0, 0])) // discard-only
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_unicast_addresses_pass() {
        for blocked in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::10.0.0.1",
            "64:ff9b::a00:1",
            "2001:db8::1",
        ] {
            assert!(!is_public(blocked.parse().unwrap()), "{blocked}");
        }
        for public in [
            "1.1.1.1",
            "93.184.216.34",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }
}
