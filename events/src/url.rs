//! Where a webhook may point (extras §4.1): the SDK refuses an
//! undeliverable URL at `register_webhook` (AWS) and the stack's deliverer
//! applies the same rule again when it resolves a host, so a webhook that
//! could never be delivered is never registered.
//!
//! [`parse`] reads the URL's shape, scheme, host and port (the rule every
//! backend shares: the local backend delivers to any `http`/`https` host);
//! [`deliverable`] adds AWS's rule: `https`, and the host neither a
//! non-public IP literal ([`is_blocked`]) nor `localhost`.
//!
//! Where this reads a URL the way the WHATWG URL standard does (the IPv4
//! number forms `0x7f.1` and `2130706433`, IDNA mapping before that check)
//! it is on purpose: it is how the TypeScript SDK and `getaddrinfo` read the
//! host, so a host that reaches loopback through one of those forms is
//! refused here too. The reference judges the number forms only before IDNA
//! mapping (a full-width `０x7f.1` passes its check); this module maps first.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The scheme the stack's deliverer speaks.
pub const DELIVERABLE_SCHEME: &str = "https";
/// RFC 1035 §2.3.4: octets per label (ASCII form).
pub const MAX_LABEL_CHARS: usize = 63;
/// RFC 1035 §2.3.4: characters per name (ASCII form, no final dot).
pub const MAX_NAME_CHARS: usize = 253;

/// Why a URL is refused: the caller maps it to its own message (the SDK's
/// is one pinned sentence that never repeats the URL, which may carry a
/// credential).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// Not `scheme://authority...`, or a space, a control character or a
    /// backslash anywhere (parsers disagree on those, so none is accepted).
    Shape,
    /// Not a scheme the rule accepts (`https` on AWS; `http`/`https` locally).
    Scheme,
    /// A port that is not a number in 1..=65535.
    Port,
    /// No host, or a host that is neither an IP literal nor a DNS name
    /// (IDNA, labels `[A-Za-z0-9_-]{1,63}`, at most 253 characters).
    Host,
    /// An IP literal that is not public (loopback, private, link-local,
    /// metadata, multicast, reserved, unspecified, shared 100.64.0.0/10).
    BlockedAddress,
    /// `localhost` or a name under `.localhost` (RFC 6761 §6.3: loopback).
    Localhost,
}

impl Rejection {
    /// A stable snake_case name for logs and counters.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Shape => "shape",
            Self::Scheme => "scheme",
            Self::Port => "port",
            Self::Host => "host",
            Self::BlockedAddress => "blocked_address",
            Self::Localhost => "localhost",
        }
    }
}

/// A URL's host as the rule reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    /// An IP literal (`[v6]`, or any WHATWG IPv4 form).
    Ip(IpAddr),
    /// A DNS name in ASCII form (IDNA-mapped, lower case, no final dot).
    Name(String),
}

/// The parts of a URL the rule judges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookUrl {
    /// The scheme, lower case.
    pub scheme: String,
    /// The host.
    pub host: Host,
    /// The explicit port, if any (an empty `:` is none).
    pub port: Option<u16>,
}

/// Reads `url`'s shape, scheme, host and port; any scheme is returned
/// (the caller decides which it accepts).
///
/// # Errors
/// [`Rejection::Shape`], [`Rejection::Port`] or [`Rejection::Host`].
pub fn parse(url: &str) -> Result<WebhookUrl, Rejection> {
    let (scheme, rest) = url.split_once("://").ok_or(Rejection::Shape)?;
    if !valid_scheme(scheme) || !valid_rest(rest) {
        return Err(Rejection::Shape);
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = split_host_port(host_port)?;
    Ok(WebhookUrl {
        scheme: scheme.to_ascii_lowercase(),
        host: parse_host(host)?,
        port: parse_port(port)?,
    })
}

/// AWS's rule (the stack's deliverer): [`parse`], then `https`, and a host
/// that is a public IP or a DNS name other than `localhost`.
///
/// # Errors
/// The [`Rejection`] that refuses `url`.
pub fn deliverable(url: &str) -> Result<WebhookUrl, Rejection> {
    let parsed = parse(url)?;
    if parsed.scheme != DELIVERABLE_SCHEME {
        return Err(Rejection::Scheme);
    }
    match &parsed.host {
        Host::Ip(ip) if is_blocked(*ip) => Err(Rejection::BlockedAddress),
        Host::Name(name) if is_localhost(name) => Err(Rejection::Localhost),
        _ => Ok(parsed),
    }
}

/// `true` for an address the deliverer never sends to: loopback, private,
/// link-local (the metadata service included), multicast, reserved,
/// unspecified, documentation and benchmarking ranges, and 100.64.0.0/10;
/// an IPv6 address carrying an IPv4 one (`::ffff:a.b.c.d`) is judged as
/// that IPv4 address, and IPv6 is public only inside global unicast
/// 2000::/3 (less 2001::/23 and 2001:db8::/32).
pub fn is_blocked(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_blocked_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_blocked_v4(v4),
            None => is_blocked_v6(v6),
        },
    }
}

/// IPv4 ranges that are not publicly routable (IANA special-purpose registry).
const BLOCKED_V4: &[([u8; 4], u8)] = &[
    ([0, 0, 0, 0], 8),
    ([10, 0, 0, 0], 8),
    ([100, 64, 0, 0], 10),
    ([127, 0, 0, 0], 8),
    ([169, 254, 0, 0], 16),
    ([172, 16, 0, 0], 12),
    ([192, 0, 0, 0], 24),
    ([192, 0, 2, 0], 24),
    ([192, 88, 99, 0], 24),
    ([192, 168, 0, 0], 16),
    ([198, 18, 0, 0], 15),
    ([198, 51, 100, 0], 24),
    ([203, 0, 113, 0], 24),
    ([224, 0, 0, 0], 4),
    ([240, 0, 0, 0], 4),
];

fn is_blocked_v4(ip: Ipv4Addr) -> bool {
    let bits = u32::from(ip);
    BLOCKED_V4.iter().any(|&(net, len)| {
        let mask = u32::MAX << (32 - u32::from(len));
        bits & mask == u32::from_be_bytes(net) & mask
    })
}

fn is_blocked_v6(ip: Ipv6Addr) -> bool {
    let bits = u128::from(ip);
    let within = |net: u128, len: u32| bits & (u128::MAX << (128 - len)) == net;
    let global_unicast = within(0x2000 << 112, 3);
    !global_unicast || within(0x2001 << 112, 23) || within(0x2001_0db8 << 96, 32)
}

fn is_localhost(name: &str) -> bool {
    name == "localhost" || name.ends_with(".localhost")
}

fn valid_scheme(scheme: &str) -> bool {
    let mut bytes = scheme.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'.' | b'-'))
}

/// After `://`: an authority that does not start empty, and no space,
/// control character or backslash anywhere.
fn valid_rest(rest: &str) -> bool {
    let forbidden = |c: char| c == '\\' || c <= ' ' || c == '\x7f';
    rest.chars()
        .next()
        .is_some_and(|c| !matches!(c, '/' | '?' | '#'))
        && !rest.contains(forbidden)
}

/// `[v6]:port` or `host:port`; the port part may be absent or empty.
fn split_host_port(hp: &str) -> Result<(&str, &str), Rejection> {
    if let Some(bracketed) = hp.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']').ok_or(Rejection::Host)?;
        let port = match after {
            "" => "",
            _ => after.strip_prefix(':').ok_or(Rejection::Host)?,
        };
        return Ok((hp.get(..host.len() + 2).unwrap_or(hp), port));
    }
    if hp.contains(['[', ']']) {
        return Err(Rejection::Host);
    }
    Ok(hp.split_once(':').unwrap_or((hp, "")))
}

fn parse_port(port: &str) -> Result<Option<u16>, Rejection> {
    if port.is_empty() {
        return Ok(None);
    }
    if !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Rejection::Port);
    }
    let trimmed = port.trim_start_matches('0');
    match trimmed.parse::<u16>() {
        Ok(p) if p >= 1 => Ok(Some(p)),
        _ => Err(Rejection::Port),
    }
}

fn parse_host(host: &str) -> Result<Host, Rejection> {
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6
            .parse::<Ipv6Addr>()
            .map(|ip| Host::Ip(IpAddr::V6(ip)))
            .map_err(|_| Rejection::Host);
    }
    if host.is_empty() {
        return Err(Rejection::Host);
    }
    let ascii = idna::domain_to_ascii_cow(host.as_bytes(), idna::AsciiDenyList::EMPTY)
        .map_err(|_| Rejection::Host)?
        .to_ascii_lowercase();
    let name = ascii.strip_suffix('.').unwrap_or(&ascii);
    if let Some(ip) = whatwg_ipv4(name)? {
        return Ok(Host::Ip(IpAddr::V4(ip)));
    }
    let label_ok = |l: &str| {
        (1..=MAX_LABEL_CHARS).contains(&l.len())
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
    };
    if name.is_empty() || name.len() > MAX_NAME_CHARS || !name.split('.').all(label_ok) {
        return Err(Rejection::Host);
    }
    Ok(Host::Name(name.to_owned()))
}

/// WHATWG's "ends in a number" test and IPv4 parser: `None` for a name;
/// a host whose last label is a number must be a valid IPv4 address in one
/// of the 1-4 part decimal, octal (`0..`) or hex (`0x..`) forms.
fn whatwg_ipv4(name: &str) -> Result<Option<Ipv4Addr>, Rejection> {
    let parts: Vec<&str> = name.split('.').collect();
    let last = parts.last().copied().unwrap_or_default();
    let numeric = (!last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()))
        || last
            .strip_prefix("0x")
            .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
    if !numeric {
        return Ok(None);
    }
    if parts.len() > 4 || parts.contains(&"") {
        return Err(Rejection::Host);
    }
    let numbers = parts
        .iter()
        .map(|p| ipv4_number(p))
        .collect::<Option<Vec<u64>>>()
        .ok_or(Rejection::Host)?;
    let (last, leading) = numbers.split_last().ok_or(Rejection::Host)?;
    if leading.iter().any(|&n| n > 255) {
        return Err(Rejection::Host);
    }
    let room = 8 * (5 - numbers.len() as u32);
    if *last >= 1u64 << room {
        return Err(Rejection::Host);
    }
    let value = leading
        .iter()
        .enumerate()
        .fold(*last, |acc, (i, &n)| acc + (n << (8 * (3 - i as u32))));
    let value = u32::try_from(value).map_err(|_| Rejection::Host)?;
    Ok(Some(Ipv4Addr::from(value)))
}

/// One IPv4 part: `0x` hex (possibly empty = 0), `0` octal, or decimal;
/// `None` when it is not a number or exceeds 2^32.
fn ipv4_number(part: &str) -> Option<u64> {
    let (digits, radix) = if let Some(hex) = part.strip_prefix("0x") {
        (hex, 16)
    } else if part.len() > 1 && part.starts_with('0') {
        (&part[1..], 8)
    } else {
        (part, 10)
    };
    if digits.is_empty() {
        return Some(0);
    }
    let n = u64::from_str_radix(digits, radix).ok()?;
    (n <= u64::from(u32::MAX)).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (url, AWS's verdict): `Ok(())` deliverable, else the rejection.
    const TABLE: &[(&str, Result<(), Rejection>)] = &[
        ("https://hooks.example.com/rayito", Ok(())),
        ("https://hooks.example.com", Ok(())),
        ("HTTPS://Hooks.Example.COM:443/x?y#z", Ok(())),
        ("https://user:pw@hooks.example.com/", Ok(())),
        ("https://hooks.example.com.:8443/", Ok(())),
        ("https://under_score.example.com/", Ok(())),
        ("https://bücher.example/", Ok(())),
        ("https://8.8.8.8/", Ok(())),
        ("https://[2606:4700::1111]/", Ok(())),
        ("https://hooks.example.com:/", Ok(())),
        ("http://hooks.example.com/", Err(Rejection::Scheme)),
        ("ftp://hooks.example.com/", Err(Rejection::Scheme)),
        ("hooks.example.com/x", Err(Rejection::Shape)),
        ("https:///x", Err(Rejection::Shape)),
        ("https://", Err(Rejection::Shape)),
        ("https://a b.example/", Err(Rejection::Shape)),
        ("https://example.com/a\\b", Err(Rejection::Shape)),
        ("https://example.com/\x7f", Err(Rejection::Shape)),
        ("https://example.com/\t", Err(Rejection::Shape)),
        ("1https://example.com/", Err(Rejection::Shape)),
        ("https://example.com:0/", Err(Rejection::Port)),
        ("https://example.com:65536/", Err(Rejection::Port)),
        ("https://example.com:+80/", Err(Rejection::Port)),
        ("https://example.com:http/", Err(Rejection::Port)),
        ("https://example.com:00443/", Ok(())),
        ("https://localhost/", Err(Rejection::Localhost)),
        ("https://LOCALHOST./", Err(Rejection::Localhost)),
        ("https://api.localhost/", Err(Rejection::Localhost)),
        ("https://localhost.example.com/", Ok(())),
        ("https://127.0.0.1/", Err(Rejection::BlockedAddress)),
        ("https://2130706433/", Err(Rejection::BlockedAddress)),
        ("https://0x7f.1/", Err(Rejection::BlockedAddress)),
        ("https://0177.0.0.1/", Err(Rejection::BlockedAddress)),
        ("https://127.1/", Err(Rejection::BlockedAddress)),
        ("https://０x7f.1/", Err(Rejection::BlockedAddress)),
        ("https://0x/", Err(Rejection::BlockedAddress)),
        ("https://10.1.2.3/", Err(Rejection::BlockedAddress)),
        ("https://172.31.255.255/", Err(Rejection::BlockedAddress)),
        ("https://172.32.0.1/", Ok(())),
        ("https://192.168.1.1/", Err(Rejection::BlockedAddress)),
        (
            "https://169.254.169.254/latest",
            Err(Rejection::BlockedAddress),
        ),
        ("https://100.64.0.1/", Err(Rejection::BlockedAddress)),
        ("https://100.128.0.1/", Ok(())),
        ("https://0.0.0.0/", Err(Rejection::BlockedAddress)),
        ("https://224.0.0.1/", Err(Rejection::BlockedAddress)),
        ("https://255.255.255.255/", Err(Rejection::BlockedAddress)),
        ("https://198.18.0.1/", Err(Rejection::BlockedAddress)),
        ("https://192.0.2.1/", Err(Rejection::BlockedAddress)),
        ("https://[::1]/", Err(Rejection::BlockedAddress)),
        ("https://[::]/", Err(Rejection::BlockedAddress)),
        (
            "https://[::ffff:127.0.0.1]/",
            Err(Rejection::BlockedAddress),
        ),
        ("https://[::ffff:8.8.8.8]/", Ok(())),
        ("https://[fe80::1]/", Err(Rejection::BlockedAddress)),
        ("https://[fec0::1]/", Err(Rejection::BlockedAddress)),
        ("https://[fd00::1]/", Err(Rejection::BlockedAddress)),
        ("https://[ff02::1]/", Err(Rejection::BlockedAddress)),
        ("https://[2001:db8::1]/", Err(Rejection::BlockedAddress)),
        ("https://[64:ff9b::7f00:1]/", Err(Rejection::BlockedAddress)),
        ("https://[fe80::1%25eth0]/", Err(Rejection::Host)),
        ("https://[not-an-ip]/", Err(Rejection::Host)),
        ("https://[::1/", Err(Rejection::Host)),
        ("https://::1/", Err(Rejection::Host)),
        ("https://256.0.0.1/", Err(Rejection::Host)),
        ("https://1.2.3.4.5/", Err(Rejection::Host)),
        ("https://1.2.3.09/", Err(Rejection::Host)),
        ("https://4294967296/", Err(Rejection::Host)),
        ("https://example..com/", Err(Rejection::Host)),
        ("https://exa%6dple.com/", Err(Rejection::Host)),
        ("https://exa!mple.com/", Err(Rejection::Host)),
        ("https://user@:443/", Err(Rejection::Host)),
    ];

    #[test]
    fn the_table() {
        for (url, want) in TABLE {
            assert_eq!(deliverable(url).map(|_| ()), *want, "{url:?}");
        }
    }

    #[test]
    fn names_and_lengths() {
        let label = "a".repeat(63);
        assert!(deliverable(&format!("https://{label}.example/")).is_ok());
        let long = "a".repeat(64);
        assert_eq!(
            deliverable(&format!("https://{long}.example/")).map(|_| ()),
            Err(Rejection::Host)
        );
        let name = ["abcdefghi"; 25].join(".");
        assert_eq!(name.len(), 249);
        assert!(deliverable(&format!("https://{name}.com/")).is_ok());
        assert_eq!(
            deliverable(&format!("https://{name}.comx/")).map(|_| ()),
            Err(Rejection::Host)
        );
        assert_eq!(
            parse("https://Bücher.Example:8443/").unwrap(),
            WebhookUrl {
                scheme: "https".into(),
                host: Host::Name("xn--bcher-kva.example".into()),
                port: Some(8443),
            }
        );
    }

    #[test]
    fn parse_accepts_any_scheme_and_loopback() {
        let u = parse("http://127.0.0.1:8080/hook").unwrap();
        assert_eq!(u.scheme, "http");
        assert_eq!(u.host, Host::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        assert_eq!(u.port, Some(8080));
        assert_eq!(
            parse("http://localhost/").unwrap().host,
            Host::Name("localhost".into())
        );
    }
}
