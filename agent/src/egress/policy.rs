//! The egress policy as the proxy applies it: parsed once per
//! UpdateNetwork, consulted once per connection.
//!
//! Rules (spec C): allow beats deny; an IP target passes when an allow CIDR
//! holds it or no deny CIDR does; a hostname matching an allow entry
//! (case-insensitive, `*.` = any subdomain) passes whatever it resolves to;
//! any other hostname is resolved by the agent and only its addresses that
//! pass the IP rule are dialled. A policy with no deny entry is
//! unrestricted.
//!
//! The proxy dials from the host's namespace, so under a restricting policy
//! the host's own addresses are denied by default, whatever `deny_out`
//! says (issue 41): loopback, unspecified (Linux connects it to loopback),
//! link-local (the cloud's metadata service, which hands out the role's
//! credentials) and the AWS metadata service's IPv6 address. Only an
//! `allow_out` entry that names them opens them: a single address, a CIDR
//! inside the range, or (loopback only) the hostname `localhost` itself;
//! `0.0.0.0/0` or an allowed hostname that resolves there does not.

use std::net::IpAddr;

use ipnet::IpNet;

/// At most this many entries per list.
pub(crate) const MAX_ENTRIES: usize = 256;
/// At most this many hostname entries.
pub(crate) const MAX_HOSTNAMES: usize = 64;
/// The longest hostname, `*.` and a trailing dot stripped.
const MAX_HOSTNAME_CHARS: usize = 253;

/// The ranges denied by default under a restricting policy (module doc).
const HOST_LOCAL_NETS: [&str; 8] = [
    "127.0.0.0/8",
    "0.0.0.0/8",
    "169.254.0.0/16",
    "::1/128",
    "::/128",
    // IPv4-compatible IPv6 (deprecated): never a remote destination.
    "::/96",
    "fe80::/10",
    // The EC2 instance metadata service over IPv6.
    "fd00:ec2::254/128",
];

/// The default-denied ranges that hold `ip` (canonical).
fn host_local_nets(ip: IpAddr) -> impl Iterator<Item = IpNet> {
    HOST_LOCAL_NETS
        .iter()
        .filter_map(|n| n.parse::<IpNet>().ok())
        .filter(move |n| n.contains(&ip))
}

/// Whether `ip` is in a range denied by default (loopback, unspecified,
/// link-local, metadata).
pub(crate) fn is_host_local(ip: IpAddr) -> bool {
    host_local_nets(ip.to_canonical()).next().is_some()
}

/// A hostname entry, lower-cased, without `*.` and the trailing dot.
#[derive(Clone, Debug, PartialEq, Eq)]
struct HostPattern {
    name: String,
    /// `*.name`: subdomains of `name` (not `name` itself).
    wildcard: bool,
}

impl HostPattern {
    fn matches(&self, host: &str) -> bool {
        if self.wildcard {
            host.len() > self.name.len() + 1
                && host.ends_with(&self.name)
                && host.as_bytes()[host.len() - self.name.len() - 1] == b'.'
        } else {
            host == self.name
        }
    }
}

/// The policy in force, and the lists as given (what GetNetwork reports).
#[derive(Clone, Debug, Default)]
pub(crate) struct Policy {
    pub(crate) allow_out: Vec<String>,
    pub(crate) deny_out: Vec<String>,
    allow_nets: Vec<IpNet>,
    deny_nets: Vec<IpNet>,
    allow_hosts: Vec<HostPattern>,
}

/// Why a policy was refused (INVALID_ARGUMENT's message; names the list
/// and the index, never the entry).
pub(crate) type Refusal = String;

/// What an entry is.
enum Entry {
    Net(IpNet),
    Host(HostPattern),
}

fn parse_entry(entry: &str) -> Option<Entry> {
    if let Ok(net) = entry.parse::<IpNet>() {
        return Some(Entry::Net(net));
    }
    if let Ok(ip) = entry.parse::<IpAddr>() {
        return Some(Entry::Net(IpNet::from(ip)));
    }
    let (wildcard, rest) = match entry.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, entry),
    };
    let name = rest.strip_suffix('.').unwrap_or(rest).to_ascii_lowercase();
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    (name.len() <= MAX_HOSTNAME_CHARS && name.split('.').all(label_ok))
        .then_some(Entry::Host(HostPattern { name, wildcard }))
}

impl Policy {
    /// Everything denied: the policy from `/run` until the first UpdateNetwork.
    pub(crate) fn deny_all() -> Self {
        Self::parse(Vec::new(), vec!["0.0.0.0/0".to_owned()]).unwrap_or_default()
    }

    /// Parses and checks a policy.
    ///
    /// # Errors
    /// A refusal naming the list and the entry's index.
    pub(crate) fn parse(allow_out: Vec<String>, deny_out: Vec<String>) -> Result<Self, Refusal> {
        let mut policy = Policy::default();
        let mut hostnames = 0usize;
        for (list, entries) in [("allow_out", &allow_out), ("deny_out", &deny_out)] {
            if entries.len() > MAX_ENTRIES {
                return Err(format!("{list} has more than {MAX_ENTRIES} entries"));
            }
            for (index, entry) in entries.iter().enumerate() {
                match parse_entry(entry) {
                    None => {
                        return Err(format!(
                            "entry {index} of {list} is not an IP address, a CIDR or a hostname"
                        ));
                    }
                    Some(Entry::Host(_)) if list == "deny_out" => {
                        return Err(format!(
                            "entry {index} of deny_out is a hostname; deny_out takes IP addresses and CIDRs"
                        ));
                    }
                    Some(Entry::Host(host)) => {
                        hostnames += 1;
                        policy.allow_hosts.push(host);
                    }
                    Some(Entry::Net(net)) if list == "allow_out" => policy.allow_nets.push(net),
                    Some(Entry::Net(net)) => {
                        // Denying every IPv4 address denies IPv6 too: the
                        // proxy dials from the host, whose IPv6 (its ::1
                        // included) would otherwise be a way around it.
                        if net == IpNet::V4(ipnet::Ipv4Net::default()) {
                            policy.deny_nets.push(IpNet::V6(ipnet::Ipv6Net::default()));
                        }
                        policy.deny_nets.push(net);
                    }
                }
            }
        }
        if hostnames > MAX_HOSTNAMES {
            return Err(format!(
                "the policy has more than {MAX_HOSTNAMES} hostname entries"
            ));
        }
        policy.allow_out = allow_out;
        policy.deny_out = deny_out;
        Ok(policy)
    }

    /// Whether anything is denied (else every target passes).
    pub(crate) fn restricts(&self) -> bool {
        !self.deny_nets.is_empty()
    }

    /// Whether the IP rule lets `ip` through (the default denials
    /// included).
    pub(crate) fn ip_allowed(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        if self.restricts() && is_host_local(ip) {
            return self.names_ip(ip);
        }
        self.allow_nets.iter().any(|n| n.contains(&ip))
            || !self.deny_nets.iter().any(|n| n.contains(&ip))
    }

    /// Whether an `allow_out` entry names `ip` itself: a single address,
    /// or a CIDR inside a default-denied range that holds it (so
    /// `0.0.0.0/0` or `10.0.0.0/8` never opens loopback or metadata).
    pub(crate) fn names_ip(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.allow_nets.iter().any(|n| {
            n.contains(&ip)
                && (n.prefix_len() == n.max_prefix_len()
                    || host_local_nets(ip).any(|local| local.contains(n)))
        })
    }

    /// Whether the proxy may dial `ip`, which `host` (as the client sent
    /// it) resolved to: a name allowed by `allow_out` passes whatever it
    /// resolves to, except a default-denied address, which only an entry
    /// naming it (or, for loopback, `localhost` named as such) opens.
    pub(crate) fn resolved_allowed(&self, host: &str, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        if self.restricts() && is_host_local(ip) {
            return self.names_ip(ip) || (ip.is_loopback() && self.names_localhost(host));
        }
        self.host_allowed(host) || self.ip_allowed(ip)
    }

    /// Whether `host` is `localhost` and `allow_out` names it exactly.
    fn names_localhost(&self, host: &str) -> bool {
        let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        host == "localhost"
            && self
                .allow_hosts
                .iter()
                .any(|p| !p.wildcard && p.name == "localhost")
    }

    /// Whether the hostname `host` (as the client sent it) is allowed by
    /// name, so that what it resolves to is not checked.
    pub(crate) fn host_allowed(&self, host: &str) -> bool {
        let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        self.allow_hosts.iter().any(|p| p.matches(&host))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], deny: &[&str]) -> Policy {
        Policy::parse(
            allow.iter().map(|s| (*s).to_owned()).collect(),
            deny.iter().map(|s| (*s).to_owned()).collect(),
        )
        .expect("valid")
    }

    #[test]
    fn allow_beats_deny_and_no_deny_is_open() {
        let p = policy(&["10.1.0.0/16"], &["10.0.0.0/8"]);
        assert!(p.ip_allowed("10.1.2.3".parse().unwrap()));
        assert!(!p.ip_allowed("10.2.0.1".parse().unwrap()));
        assert!(p.ip_allowed("192.168.0.1".parse().unwrap()));
        let open = policy(&["1.1.1.1"], &[]);
        assert!(open.ip_allowed("8.8.8.8".parse().unwrap()));
    }

    #[test]
    fn all_traffic_denies_ipv6_and_mapped_addresses() {
        let p = policy(&[], &["0.0.0.0/0"]);
        assert!(!p.ip_allowed("::1".parse().unwrap()));
        assert!(!p.ip_allowed("::ffff:127.0.0.1".parse().unwrap()));
        let allowed = policy(&["127.0.0.1"], &["0.0.0.0/0"]);
        assert!(allowed.ip_allowed("::ffff:127.0.0.1".parse().unwrap()));
    }

    /// Issue 41: loopback, unspecified and link-local are denied under
    /// every restricting policy unless `allow_out` names them.
    #[test]
    fn host_local_ranges_are_denied_unless_named() {
        let p = policy(&[], &["10.0.0.0/8"]);
        for ip in [
            "127.0.0.1",
            "127.1.2.3",
            "0.0.0.0",
            "0.1.2.3",
            "169.254.169.254",
            "::1",
            "::",
            "::ffff:127.0.0.1",
            "::ffff:0.0.0.0",
            "::127.0.0.1",
            "fe80::1",
            "fd00:ec2::254",
        ] {
            assert!(!p.ip_allowed(ip.parse().unwrap()), "{ip}");
            assert!(!p.resolved_allowed("x", ip.parse().unwrap()), "{ip}");
        }
        assert!(p.ip_allowed("8.8.8.8".parse().unwrap()));
        assert!(p.ip_allowed("192.168.1.1".parse().unwrap()));
        // Broad allows do not name them; an address or an inner CIDR does.
        let broad = policy(&["0.0.0.0/0", "::/0"], &["0.0.0.0/0"]);
        assert!(!broad.ip_allowed("127.0.0.1".parse().unwrap()));
        assert!(!broad.ip_allowed("169.254.169.254".parse().unwrap()));
        assert!(broad.ip_allowed("8.8.8.8".parse().unwrap()));
        let named = policy(&["127.0.0.1", "169.254.0.0/16"], &["0.0.0.0/0"]);
        assert!(named.ip_allowed("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!named.ip_allowed("127.0.0.2".parse().unwrap()));
        assert!(named.ip_allowed("169.254.169.254".parse().unwrap()));
        // A hostname entry passes whatever it resolves to, except these;
        // `localhost` named as such opens loopback (only).
        let names = policy(
            &["localhost", "evil.example", "*.localhost"],
            &["0.0.0.0/0"],
        );
        assert!(names.resolved_allowed("LOCALHOST.", "127.0.0.1".parse().unwrap()));
        assert!(names.resolved_allowed("localhost", "::1".parse().unwrap()));
        assert!(!names.resolved_allowed("localhost", "169.254.169.254".parse().unwrap()));
        assert!(!names.resolved_allowed("evil.example", "127.0.0.1".parse().unwrap()));
        assert!(!names.resolved_allowed("a.localhost", "127.0.0.1".parse().unwrap()));
        assert!(names.resolved_allowed("evil.example", "8.8.8.8".parse().unwrap()));
        // An unrestricted policy restricts nothing.
        assert!(policy(&["1.1.1.1"], &[]).ip_allowed("127.0.0.1".parse().unwrap()));
    }

    /// docs/network.md lists every default-denied range.
    #[test]
    fn the_docs_list_every_default_denial() {
        let doc = include_str!("../../../docs/network.md");
        for net in HOST_LOCAL_NETS {
            let shown = format!("`{}`", net.trim_end_matches("/128"));
            assert!(doc.contains(&shown), "docs/network.md lacks {shown}");
        }
        assert!(doc.contains(&format!("(`{}`)", super::super::NO_PROXY)));
    }

    #[test]
    fn hostnames_match_case_insensitively_with_wildcards() {
        let p = policy(&["Example.COM.", "*.pypi.org"], &["0.0.0.0/0"]);
        assert!(p.host_allowed("example.com"));
        assert!(p.host_allowed("EXAMPLE.com."));
        assert!(!p.host_allowed("www.example.com"));
        assert!(p.host_allowed("files.PyPI.org"));
        assert!(p.host_allowed("a.b.pypi.org"));
        assert!(!p.host_allowed("pypi.org"));
        assert!(!p.host_allowed("evilpypi.org"));
    }

    #[test]
    fn refusals_name_the_list_and_index_never_the_entry() {
        let err = Policy::parse(vec![], vec!["ok.example".into()]).unwrap_err();
        assert_eq!(
            err,
            "entry 0 of deny_out is a hostname; deny_out takes IP addresses and CIDRs"
        );
        let err = Policy::parse(vec!["1.1.1.1".into(), "bad host!".into()], vec![]).unwrap_err();
        assert_eq!(
            err,
            "entry 1 of allow_out is not an IP address, a CIDR or a hostname"
        );
        let many = (0..65).map(|i| format!("h{i}.example")).collect();
        assert_eq!(
            Policy::parse(many, vec![]).unwrap_err(),
            "the policy has more than 64 hostname entries"
        );
        assert!(Policy::parse(vec!["1.1.1.1".into(); 257], vec![]).is_err());
    }
}
