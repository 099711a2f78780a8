//! The egress proxy: listens inside the sandbox's network namespace and
//! dials from the agent's (the host's), after checking the policy in force
//! at that moment. One port speaks both HTTP (CONNECT, and absolute-form
//! requests for `http://` URLs) and SOCKS5 (CONNECT, no authentication),
//! told apart by the first byte.
//!
//! Everything the client sends is hostile: the handshake is bounded in
//! size and time, and nothing is allocated from a peer's number beyond
//! those bounds.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};

use super::EgressShared;
use super::policy::Policy;
use crate::server::ServeState;

/// The whole handshake (request line and headers, or the SOCKS5 greeting
/// and request) must arrive within this.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Dialling (name resolution included) must finish within this.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest HTTP request head the proxy reads.
const MAX_HEAD_BYTES: usize = 8 * 1024;
/// At most this many connections through the proxy at once.
const MAX_CONNECTIONS: usize = 512;

/// What the policy answered for a target, in the proxy's replies.
pub(crate) const DENIED_BODY: &str = "egress denied by the sandbox's network policy\n";

/// Where a client wants to go.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    Ip(IpAddr),
    Name(String),
}

#[derive(Debug)]
enum Dialled {
    Open(TcpStream),
    Denied,
    Failed,
}

/// Accepts until the agent stops serving.
pub(crate) async fn serve(
    listener: TcpListener,
    egress: Arc<EgressShared>,
    mut stop: watch::Receiver<ServeState>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let Ok(permit) = slots.clone().try_acquire_owned() else {
                    // Over the bound: refuse by closing.
                    continue;
                };
                let egress = egress.clone();
                tokio::spawn(async move {
                    handle(stream, &egress).await;
                    drop(permit);
                });
            }
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow_and_update() != ServeState::Serving {
                    return;
                }
            }
        }
    }
}

async fn handle(client: TcpStream, egress: &EgressShared) {
    let mut first = [0u8; 1];
    let Ok(Ok(1)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, client.peek(&mut first)).await else {
        return;
    };
    if first[0] == 5 {
        socks5(client, egress).await;
    } else {
        http(client, egress).await;
    }
}

/// Resolves (when needed) and dials `host:port` if the current policy
/// allows it; never the agent's own listeners. Every check is on the
/// addresses dialled (a name resolved, `127.1` or `2130706433` parsed by the
/// resolver, a mapped IPv6 address made IPv4), never on the client's
/// spelling; and a connection that lands on the host itself is checked
/// again once made.
async fn dial(egress: &EgressShared, host: &Host, port: u16) -> Dialled {
    let policy = egress.policy();
    let candidates: Vec<SocketAddr> = match host {
        Host::Ip(ip) => {
            if !policy.ip_allowed(*ip) {
                return Dialled::Denied;
            }
            vec![SocketAddr::new(*ip, port)]
        }
        Host::Name(name) => {
            let Ok(Ok(resolved)) =
                tokio::time::timeout(DIAL_TIMEOUT, tokio::net::lookup_host((name.as_str(), port)))
                    .await
            else {
                return if policy.host_allowed(name) || !policy.restricts() {
                    Dialled::Failed
                } else {
                    Dialled::Denied
                };
            };
            let addrs: Vec<SocketAddr> = resolved
                .take(16)
                .filter(|a| policy.resolved_allowed(name, a.ip()))
                .collect();
            if addrs.is_empty() {
                return Dialled::Denied;
            }
            addrs
        }
    };
    let candidates: Vec<SocketAddr> = candidates
        .into_iter()
        .filter(|a| {
            if egress.is_own(*a) {
                return false;
            }
            // The host's own (non-loopback) address: the agent's ports
            // never, the rest only when `allow_out` names the address.
            !is_host_address(a.ip())
                || !egress.own_port(a.port()) && (!policy.restricts() || policy.names_ip(a.ip()))
        })
        .collect();
    if candidates.is_empty() {
        return Dialled::Denied;
    }
    for addr in candidates {
        if let Ok(Ok(stream)) = tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(addr)).await {
            if !landed_allowed(egress, &policy, &stream) {
                return Dialled::Denied;
            }
            let _ = stream.set_nodelay(true);
            return Dialled::Open(stream);
        }
    }
    Dialled::Failed
}

/// Whether `ip` is one of the host's own addresses (what the kernel lets
/// a socket bind to), so that dialling it lands on the host itself.
/// Loopback and unspecified addresses are default-denied already.
/// Where the host lets a socket bind any address (`ip_nonlocal_bind`),
/// binding tells nothing: the check after connecting (`landed_allowed`)
/// is then the only one.
fn is_host_address(ip: IpAddr) -> bool {
    static NONLOCAL_BIND: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let nonlocal = *NONLOCAL_BIND.get_or_init(|| {
        ["ipv4", "ipv6"].iter().any(|family| {
            std::fs::read_to_string(format!("/proc/sys/net/{family}/ip_nonlocal_bind"))
                .is_ok_and(|v| v.trim() != "0")
        })
    });
    let ip = ip.to_canonical();
    !nonlocal
        && !ip.is_unspecified()
        && !ip.is_loopback()
        && std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// Whether a connection just made may be used: one that landed on the
/// host itself (its peer is loopback, or the host's own address, which the
/// kernel then also picks as the source) never reaches the agent's own
/// ports, and reaches another port of the host's own (non-loopback)
/// addresses only when `allow_out` names that address.
fn landed_allowed(egress: &EgressShared, policy: &Policy, stream: &TcpStream) -> bool {
    let (Ok(peer), Ok(local)) = (stream.peer_addr(), stream.local_addr()) else {
        return false;
    };
    let peer_ip = peer.ip().to_canonical();
    let on_host = peer_ip.is_loopback() || peer_ip == local.ip().to_canonical();
    if !on_host {
        return true;
    }
    if egress.own_port(peer.port()) {
        return false;
    }
    // Loopback was checked before dialling (it is default-denied).
    peer_ip.is_loopback() || !policy.restricts() || policy.names_ip(peer_ip)
}

/// Reads exactly `buf.len()` bytes.
async fn read_exact<R: AsyncRead + Unpin>(r: &mut R, buf: &mut [u8]) -> Option<()> {
    r.read_exact(buf).await.ok().map(drop)
}

/// SOCKS5 (RFC 1928), CONNECT only, method "no authentication".
async fn socks5(mut client: TcpStream, egress: &EgressShared) {
    let request = tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
        let mut head = [0u8; 2];
        read_exact(&mut client, &mut head).await?;
        // At most 255 methods: a u8 count, into a fixed buffer.
        let mut methods = [0u8; 255];
        let methods = &mut methods[..usize::from(head[1])];
        read_exact(&mut client, methods).await?;
        if !methods.contains(&0) {
            let _ = client.write_all(&[5, 0xff]).await;
            return None;
        }
        client.write_all(&[5, 0]).await.ok()?;
        let mut req = [0u8; 4];
        read_exact(&mut client, &mut req).await?;
        if req[0] != 5 {
            return None;
        }
        let host = match req[3] {
            1 => {
                let mut a = [0u8; 4];
                read_exact(&mut client, &mut a).await?;
                Host::Ip(IpAddr::from(a))
            }
            4 => {
                let mut a = [0u8; 16];
                read_exact(&mut client, &mut a).await?;
                Host::Ip(IpAddr::from(a))
            }
            3 => {
                let mut len = [0u8; 1];
                read_exact(&mut client, &mut len).await?;
                let mut name = [0u8; 255];
                let name = &mut name[..usize::from(len[0])];
                read_exact(&mut client, name).await?;
                Host::Name(std::str::from_utf8(name).ok()?.to_owned())
            }
            _ => {
                // Address type not supported.
                let _ = client.write_all(&socks_reply(8)).await;
                return None;
            }
        };
        let mut port = [0u8; 2];
        read_exact(&mut client, &mut port).await?;
        if req[1] != 1 {
            // Command not supported (BIND, UDP ASSOCIATE).
            let _ = client.write_all(&socks_reply(7)).await;
            return None;
        }
        Some((host, u16::from_be_bytes(port)))
    })
    .await;
    let Ok(Some((host, port))) = request else {
        return;
    };
    match dial(egress, &host, port).await {
        Dialled::Open(mut upstream) => {
            if client.write_all(&socks_reply(0)).await.is_ok() {
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            }
        }
        // 2: connection not allowed by ruleset.
        Dialled::Denied => {
            let _ = client.write_all(&socks_reply(2)).await;
        }
        // 4: host unreachable.
        Dialled::Failed => {
            let _ = client.write_all(&socks_reply(4)).await;
        }
    }
}

fn socks_reply(code: u8) -> [u8; 10] {
    [5, code, 0, 1, 0, 0, 0, 0, 0, 0]
}

/// The request head (up to the blank line) and whatever followed it.
async fn read_head(client: &mut TcpStream) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = client.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Some((buf, rest));
        }
        if buf.len() > MAX_HEAD_BYTES {
            return None;
        }
    }
}

/// `host[:port]` (or `[v6][:port]`) with a default port.
fn host_port(authority: &str, default_port: Option<u16>) -> Option<(Host, u16)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p.parse().ok()?),
            None if after.is_empty() => None,
            None => return None,
        };
        (Host::Ip(IpAddr::V6(v6.parse().ok()?)), port)
    } else {
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p.parse().ok()?)),
            None => (authority, None),
        };
        if host.is_empty() || host.contains(':') {
            return None;
        }
        let host = match host.parse::<IpAddr>() {
            Ok(ip) => Host::Ip(ip),
            Err(_) => Host::Name(host.to_owned()),
        };
        (host, port)
    };
    let port = port.or(default_port)?;
    (port != 0).then_some((host, port))
}

/// What an HTTP client asked for.
#[derive(Debug, PartialEq, Eq)]
enum HttpAsk {
    /// `CONNECT host:port`.
    Tunnel(Host, u16),
    /// `METHOD http://host[:port]/path`: the head to send upstream,
    /// origin-form, with `Connection: close`.
    Forward(Host, u16, Vec<u8>),
}

fn parse_http(head: &[u8]) -> Option<HttpAsk> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next()?;
    let mut parts = request_line.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || !version.starts_with("HTTP/1.") {
        return None;
    }
    if method == "CONNECT" {
        let (host, port) = host_port(target, None)?;
        return Some(HttpAsk::Tunnel(host, port));
    }
    let rest = target.strip_prefix("http://")?;
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    if authority.contains('@') {
        return None;
    }
    let (host, port) = host_port(authority, Some(80))?;
    let mut out = format!("{method} {path} {version}\r\n");
    for line in lines.filter(|l| !l.is_empty()) {
        let name = line
            .split(':')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if name.starts_with("proxy-") || name == "connection" || name == "keep-alive" {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    Some(HttpAsk::Forward(host, port, out.into_bytes()))
}

async fn http(mut client: TcpStream, egress: &EgressShared) {
    let Ok(Some((head, rest))) =
        tokio::time::timeout(HANDSHAKE_TIMEOUT, read_head(&mut client)).await
    else {
        return;
    };
    let Some(ask) = parse_http(&head) else {
        let _ = client
            .write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            )
            .await;
        return;
    };
    let (host, port) = match &ask {
        HttpAsk::Tunnel(h, p) | HttpAsk::Forward(h, p, _) => (h.clone(), *p),
    };
    match dial(egress, &host, port).await {
        Dialled::Open(mut upstream) => {
            let ok = match ask {
                HttpAsk::Tunnel(..) => {
                    client
                        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                        .await
                        .is_ok()
                        && upstream.write_all(&rest).await.is_ok()
                }
                HttpAsk::Forward(_, _, head) => {
                    upstream.write_all(&head).await.is_ok()
                        && upstream.write_all(&rest).await.is_ok()
                }
            };
            if ok {
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            }
        }
        Dialled::Denied => {
            let reply = format!(
                "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{DENIED_BODY}",
                DENIED_BODY.len()
            );
            let _ = client.write_all(reply.as_bytes()).await;
        }
        Dialled::Failed => {
            let _ = client
                .write_all(
                    b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_and_absolute_form_are_parsed() {
        assert_eq!(
            parse_http(b"CONNECT example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n"),
            Some(HttpAsk::Tunnel(Host::Name("example.com".into()), 443))
        );
        assert_eq!(
            parse_http(b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n"),
            Some(HttpAsk::Tunnel(Host::Ip("::1".parse().unwrap()), 8443))
        );
        let Some(HttpAsk::Forward(host, port, head)) = parse_http(
            b"GET http://127.0.0.1:8080/a?b HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive\r\n\r\n",
        ) else {
            panic!("forward");
        };
        assert_eq!((host, port), (Host::Ip("127.0.0.1".parse().unwrap()), 8080));
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET /a?b HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nConnection: close\r\n\r\n"
        );
        for bad in [
            &b"CONNECT example.com HTTP/1.1\r\n\r\n"[..],
            b"GET https://x/ HTTP/1.1\r\n\r\n",
            b"GET http://u@x/ HTTP/1.1\r\n\r\n",
            b"GET /x HTTP/1.1\r\n\r\n",
            b"CONNECT x:0 HTTP/1.1\r\n\r\n",
            b"CONNECT x:99999 HTTP/1.1\r\n\r\n",
            b"\xff\xfe",
        ] {
            assert_eq!(parse_http(bad), None, "{bad:?}");
        }
    }
}
