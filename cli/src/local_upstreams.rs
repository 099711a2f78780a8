//! The local daemon's stand-in upstreams for secret gateways (docs/local.md):
//! on this host a gateway's `https://` upstream is usually a test server
//! with a CA of its own, so the daemon's agents can be told, at its start,
//! to trust more root certificates (`RAYITO_LOCAL_GATEWAY_ROOTS`, a PEM
//! file) and to dial some host names at a fixed address, loopback included
//! (`RAYITO_LOCAL_GATEWAY_HOSTS`, `host=ip:port` separated by commas). A
//! MicroVM's agent has no such setting.

use std::net::SocketAddr;

use rayito_agent::gateway::LocalUpstreams;

/// A PEM file of extra root CAs the gateways trust.
pub const ROOTS_ENV: &str = "RAYITO_LOCAL_GATEWAY_ROOTS";
/// `host=ip:port[,host=ip:port...]`: names the gateways dial there.
pub const HOSTS_ENV: &str = "RAYITO_LOCAL_GATEWAY_HOSTS";

/// The settings the environment gives (none when both are unset).
///
/// # Errors
/// A roots file that cannot be read, or a malformed hosts list (the
/// message names the variable).
pub fn from_env() -> Result<LocalUpstreams, String> {
    let upstreams = LocalUpstreams::default();
    if let Some(path) = std::env::var_os(ROOTS_ENV).filter(|v| !v.is_empty()) {
        let pem = std::fs::read_to_string(&path)
            .map_err(|e| format!("{ROOTS_ENV}: cannot read {}: {e}", path.display()))?;
        upstreams.add_root_pem(pem);
    }
    if let Ok(hosts) = std::env::var(HOSTS_ENV) {
        for entry in hosts.split(',').filter(|e| !e.trim().is_empty()) {
            let (host, addr) = parse_host(entry.trim())
                .ok_or_else(|| format!("{HOSTS_ENV}: expected host=ip:port, got {entry:?}"))?;
            upstreams.set_host(host, addr);
        }
    }
    Ok(upstreams)
}

fn parse_host(entry: &str) -> Option<(String, SocketAddr)> {
    let (host, addr) = entry.split_once('=')?;
    let addr = addr.parse().ok()?;
    (!host.is_empty()).then(|| (host.to_owned(), addr))
}

#[cfg(test)]
mod tests {
    use super::parse_host;

    #[test]
    fn a_host_entry_is_a_name_and_a_socket_address() {
        assert_eq!(
            parse_host("api.example.test=127.0.0.1:8443"),
            Some((
                "api.example.test".to_owned(),
                "127.0.0.1:8443".parse().unwrap()
            ))
        );
        assert_eq!(parse_host("api.example.test=127.0.0.1"), None);
        assert_eq!(parse_host("=127.0.0.1:1"), None);
        assert_eq!(parse_host("api.example.test"), None);
    }
}
