//! A secret gateway section checked whole before anything changes: the
//! first problem found is the section's INVALID class (docs/extras §1.4),
//! and the routes in force stay as they were.

use http::{HeaderName, HeaderValue};
use zeroize::Zeroizing;

use super::path::Rule;
use crate::pb;

/// At most this many routes per section (the SDK's bound).
pub(crate) const MAX_ROUTES: usize = 8;
/// At most this many injected headers per route.
pub(crate) const MAX_HEADERS: usize = 16;
/// At most this many allow rules per route.
pub(crate) const MAX_RULES: usize = 32;
/// A route name's longest length.
const MAX_NAME: usize = 64;
/// The rate a route gets when the section says 0.
pub(crate) const DEFAULT_RATE: u32 = 600;
/// The highest rate per minute.
const MAX_RATE: u32 = 6000;

/// Headers a route may never inject: they frame or route the request.
const RESERVED: [&str; 11] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "trailer",
    "upgrade",
];

/// One route, checked. Its header values are the secrets: held only here,
/// wiped when the route is dropped, never in a Debug.
pub(crate) struct RouteSpec {
    pub(crate) name: String,
    /// `https://host[:port]`.
    pub(crate) upstream: String,
    pub(crate) headers: Vec<(HeaderName, Zeroizing<Vec<u8>>)>,
    pub(crate) rules: Vec<Rule>,
    pub(crate) rate_per_minute: u32,
}

impl std::fmt::Debug for RouteSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteSpec").finish_non_exhaustive()
    }
}

/// Checks a whole section, consuming it (its header values move into
/// wiped buffers; the message's own strings are wiped too).
///
/// # Errors
/// The INVALID class of the first problem found.
pub(crate) fn section(config: pb::SecretGatewayConfig) -> Result<Vec<RouteSpec>, &'static str> {
    let mut routes = config.routes;
    let checked = check(&mut routes);
    for route in &mut routes {
        for value in route.headers.values_mut() {
            zeroize::Zeroize::zeroize(value);
        }
    }
    checked
}

fn check(routes: &mut [pb::SecretGatewayRoute]) -> Result<Vec<RouteSpec>, &'static str> {
    if routes.len() > MAX_ROUTES {
        return Err("too_many_routes");
    }
    let mut specs: Vec<RouteSpec> = Vec::with_capacity(routes.len());
    for route in routes.iter_mut() {
        let spec = one(route)?;
        if specs.iter().any(|s| s.name == spec.name) {
            return Err("duplicate_route_name");
        }
        specs.push(spec);
    }
    Ok(specs)
}

fn one(route: &mut pb::SecretGatewayRoute) -> Result<RouteSpec, &'static str> {
    name(&route.name)?;
    upstream(&route.upstream)?;
    if route.headers.len() > MAX_HEADERS {
        return Err("too_many_headers");
    }
    let mut headers: Vec<(HeaderName, Zeroizing<Vec<u8>>)> = Vec::new();
    // Sorted by name: which of two faulty headers is reported does not
    // depend on the map's order.
    let mut names: Vec<&String> = route.headers.keys().collect();
    names.sort();
    for raw in names {
        let lower = raw.to_ascii_lowercase();
        let header = HeaderName::from_bytes(lower.as_bytes())
            .ok()
            .filter(|_| !lower.is_empty() && !RESERVED.contains(&lower.as_str()))
            .ok_or("invalid_header_name")?;
        if headers.iter().any(|(h, _)| *h == header) {
            return Err("duplicate_header_name");
        }
        let value = &route.headers[raw];
        if value.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0))
            || HeaderValue::from_bytes(value.as_bytes()).is_err()
        {
            return Err("invalid_header_value");
        }
        headers.push((header, Zeroizing::new(value.as_bytes().to_vec())));
    }
    if route.allow.len() > MAX_RULES {
        return Err("too_many_allow_rules");
    }
    if route.allow.is_empty() {
        return Err("empty_allow_list");
    }
    let mut rules = Vec::with_capacity(route.allow.len());
    for rule in &route.allow {
        let m = &rule.method;
        if m.is_empty() || !m.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err("invalid_method");
        }
        if rule.path.is_empty() {
            return Err("empty_path");
        }
        rules.push(Rule::new(m, &rule.path).ok_or("invalid_allow_path")?);
    }
    let rate_per_minute = match route.rate_per_minute {
        0 => DEFAULT_RATE,
        r if r <= MAX_RATE => r,
        _ => return Err("rate_out_of_range"),
    };
    Ok(RouteSpec {
        name: route.name.clone(),
        upstream: route.upstream.clone(),
        headers,
        rules,
        rate_per_minute,
    })
}

fn name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        Err("empty_name")
    } else if name.len() > MAX_NAME {
        Err("name_too_long")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        Err("invalid_route_name")
    } else {
        Ok(())
    }
}

/// `https://host[:port]` and nothing more.
fn upstream(upstream: &str) -> Result<(), &'static str> {
    let rest = upstream
        .strip_prefix("https://")
        .ok_or("upstream_not_https")?;
    if rest.contains(['/', '?', '#']) {
        return Err("upstream_has_path_or_query");
    }
    let authority: http::uri::Authority = rest.parse().map_err(|_| "invalid_upstream_host")?;
    let host = authority.host();
    let host_ok = !host.is_empty()
        && !rest.contains('@')
        && (host.starts_with('[')
            || host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.'));
    let port_ok = authority.port_u16() != Some(0)
        && (authority.port().is_none() || authority.port_u16().is_some());
    if host_ok && port_ok {
        Ok(())
    } else {
        Err("invalid_upstream_host")
    }
}
