//! Issue 41, section 1: the egress proxy never dials the host's loopback,
//! unspecified or link-local addresses under a restricting policy unless
//! `allow_out` names them, never the agent's own ports however spelt, and
//! checks the address it dials, never the client's spelling. Real guest
//! code (Python's raw sockets inside the sandbox's network namespace)
//! speaks to the proxy over HTTP (absolute form), CONNECT and SOCKS5
//! (names, IPv4 and IPv6 addresses).
//!
//! Enforcement needs root (network namespaces); elsewhere the test prints
//! `SKIPPED: <test>: <reason>` and returns.

use crate::support;

use crate::skip_support;

use crate::hello_server;

use std::net::IpAddr;

use rayito_agent::pb;
use support::*;

/// The proxy's pinned refusals: what each protocol's line reads.
const HTTP_DENIED: &str = "403 egress denied by the sandbox's network policy";
const SOCKS_DENIED: &str = "socks 2";

/// Guest code: for each `kind host port` line of argv[1], asks the proxy
/// (`$HTTP_PROXY`) for `host:port` and prints one line: `<status> <body>`
/// for `http`/`connect` (a GET through the tunnel once established),
/// `socks <code>` then the body for `socks-name`/`socks-v4`/`socks-v6`.
const GUEST: &str = r#"
import os, socket, struct, sys
proxy = os.environ["HTTP_PROXY"].rsplit(":", 1)
paddr = (proxy[0].split("//")[1], int(proxy[1]))
NO_PROXY = os.environ.get("NO_PROXY", "")

def recv_all(s):
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    return out

def http_reply(data):
    head, _, body = data.partition(b"\r\n\r\n")
    line = head.split(b"\r\n")[0].decode()
    return line.split(" ")[1] + " " + body.decode(errors="replace").strip()

def get(s, host):
    s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host).encode())
    return http_reply(recv_all(s))

def one(kind, host, port):
    s = socket.create_connection(paddr, timeout=15)
    if kind == "http":
        h = "[%s]" % host if ":" in host else host
        s.sendall(("GET http://%s:%d/ HTTP/1.1\r\nHost: x\r\n\r\n" % (h, port)).encode())
        return http_reply(recv_all(s))
    if kind == "connect":
        h = "[%s]" % host if ":" in host else host
        s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: x\r\n\r\n" % (h, port)).encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            return http_reply(data + recv_all(s))
        return get(s, host)
    s.sendall(b"\x05\x01\x00")
    assert s.recv(2) == b"\x05\x00"
    if kind == "socks-name":
        addr = b"\x03" + bytes([len(host)]) + host.encode()
    elif kind == "socks-v4":
        addr = b"\x01" + socket.inet_pton(socket.AF_INET, host)
    else:
        addr = b"\x04" + socket.inet_pton(socket.AF_INET6, host)
    s.sendall(b"\x05\x01\x00" + addr + struct.pack(">H", port))
    reply = s.recv(10)
    if len(reply) < 2 or reply[1] != 0:
        return "socks %d" % (reply[1] if len(reply) > 1 else -1)
    return "socks 0 " + get(s, host)

print("NO_PROXY=" + NO_PROXY)
for case in sys.argv[1].strip().split("\n"):
    kind, host, port = case.split(" ")
    try:
        print(case + " => " + one(kind, host, int(port)))
    except Exception as e:
        print(case + " => error " + type(e).__name__)
"#;

/// A one-line HTTP server on the host's `0.0.0.0` (so on loopback and the
/// host's own addresses): answers `hello from the host`.
async fn host_server() -> u16 {
    hello_server::hello_server("0.0.0.0:0").await
}

/// The host's own non-loopback IPv4 address (the source of its route
/// out), if it has one.
fn host_address() -> Option<IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket
        .connect("192.0.2.1:9")
        .or_else(|_| socket.connect("8.8.8.8:53"))
        .ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

async fn set_policy(t: &TestAgent, allow_out: &[&str], deny_out: &[&str]) {
    let mut net = pb::network_service_client::NetworkServiceClient::with_interceptor(
        t.channel.clone(),
        t.interceptor(),
    );
    net.update_network(pb::UpdateNetworkRequest {
        policy: Some(pb::NetworkPolicy {
            allow_out: allow_out.iter().map(|s| (*s).to_owned()).collect(),
            deny_out: deny_out.iter().map(|s| (*s).to_owned()).collect(),
            ..Default::default()
        }),
    })
    .await
    .expect("UpdateNetwork");
}

/// Runs the guest over `cases` and returns `case => result` per case.
async fn probe(t: &TestAgent, cases: &[String]) -> Vec<(String, String)> {
    let mut req = bash("exec /usr/bin/python3 -c \"$GUEST\" \"$CASES\"");
    let process = req.process.as_mut().expect("process");
    process.envs.insert("GUEST".into(), GUEST.into());
    process.envs.insert("CASES".into(), cases.join("\n"));
    let stream = t.process().start(req).await.expect("Start").into_inner();
    let out = outcome(&collect_events(stream).await);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next(),
        Some("NO_PROXY=localhost,127.0.0.1,::1"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(" => "))
        .map(|(c, r)| (c.to_owned(), r.to_owned()))
        .collect();
    assert_eq!(results.len(), cases.len(), "{stdout}");
    results
}

/// Every spelling of `port` on the host's loopback, unspecified address,
/// mapped IPv6 and numeric forms, through each protocol.
fn spellings(port: u16) -> Vec<String> {
    let mut cases = Vec::new();
    for host in [
        "0.0.0.0",
        "0",
        "127.0.0.1",
        "127.1",
        "2130706433",
        "0x7f000001",
        "localhost",
        "::ffff:127.0.0.1",
        "::ffff:0.0.0.0",
        "::",
        "::1",
    ] {
        for kind in ["http", "connect"] {
            cases.push(format!("{kind} {host} {port}"));
        }
        cases.push(format!("socks-name {host} {port}"));
    }
    for host in ["0.0.0.0", "127.0.0.1", "127.0.0.2"] {
        cases.push(format!("socks-v4 {host} {port}"));
    }
    for host in ["::ffff:127.0.0.1", "::ffff:0.0.0.0", "::", "::1"] {
        cases.push(format!("socks-v6 {host} {port}"));
    }
    cases
}

/// Every case got the proxy's pinned refusal (all mismatches listed).
fn assert_refused(results: &[(String, String)]) {
    let wrong: Vec<String> = results
        .iter()
        .filter(|(case, result)| {
            let want = if case.starts_with("socks") {
                SOCKS_DENIED
            } else {
                HTTP_DENIED
            };
            result != want
        })
        .map(|(case, result)| format!("{case} => {result}"))
        .collect();
    assert!(wrong.is_empty(), "not refused:\n{}", wrong.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_never_dials_the_host_or_the_agent() {
    if !rustix::process::geteuid().is_root() {
        skip_support::skip("needs root (the agent enforces egress with a network namespace)");
        return;
    }
    let t = TestAgent::start_with(serde_json::json!({"network": {"enforce": true}})).await;
    let health = t
        .health()
        .health(pb::HealthRequest {})
        .await
        .expect("Health")
        .into_inner();
    if health.egress_enforcement != pb::EgressEnforcement::GuestRoutesAndProxy as i32 {
        skip_support::skip("needs network namespaces (the agent enforces nothing here)");
        return;
    }
    // NO_PROXY keeps the sandbox's own servers local: curl, with every
    // proxy variable set, reaches a server inside the sandbox on localhost.
    let local = run_bash(
        &t,
        "cd \"$(mktemp -d)\" && echo sandbox-local > index.html && \
         (exec /usr/bin/python3 -m http.server 18555 --bind 127.0.0.1 >/dev/null 2>&1) & \
         for i in $(seq 100); do \
           curl -s --max-time 2 http://localhost:18555/index.html && break; sleep 0.1; \
         done; kill $!",
    )
    .await;
    assert_eq!(
        String::from_utf8_lossy(&local.stdout),
        "sandbox-local\n",
        "{}",
        String::from_utf8_lossy(&local.stderr)
    );

    let server = host_server().await;
    let hooks = t.agent.hooks_addr().port();
    let grpc = t.agent.grpc_addr().port();
    let host_ip = host_address();

    // Private ranges only: the host itself (loopback, 0.0.0.0, its own
    // address), the metadata service and the agent stay out of reach.
    set_policy(&t, &[], &["10.0.0.0/8"]).await;
    let mut cases = spellings(hooks);
    cases.extend(spellings(server));
    for port in [grpc, 80] {
        cases.push(format!("connect 0.0.0.0 {port}"));
        cases.push(format!("socks-name 0 {port}"));
    }
    for kind in ["http", "connect", "socks-name", "socks-v4"] {
        cases.push(format!("{kind} 169.254.169.254 80"));
    }
    for kind in ["http", "connect", "socks-v6"] {
        cases.push(format!("{kind} fe80::1 80"));
        cases.push(format!("{kind} fd00:ec2::254 80"));
    }
    if let Some(ip) = host_ip {
        for port in [server, hooks] {
            cases.push(format!("connect {ip} {port}"));
            cases.push(format!("socks-name {ip} {port}"));
        }
    }
    assert_refused(&probe(&t, &cases).await);

    // `allow_out` naming the address opens it (the agent's ports never).
    let mut allow = vec!["127.0.0.1".to_owned()];
    allow.extend(host_ip.map(|ip| ip.to_string()));
    let allow: Vec<&str> = allow.iter().map(String::as_str).collect();
    set_policy(&t, &allow, &["10.0.0.0/8"]).await;
    let reached = "200 hello from the host";
    let mut open = vec![
        format!("http 127.0.0.1 {server}"),
        format!("connect 127.0.0.1 {server}"),
        format!("socks-v4 127.0.0.1 {server}"),
        format!("socks-name 127.0.0.1 {server}"),
        format!("socks-v6 ::ffff:127.0.0.1 {server}"),
    ];
    open.extend(host_ip.map(|ip| format!("connect {ip} {server}")));
    for (case, result) in probe(&t, &open).await {
        let want = if case.starts_with("socks") {
            format!("socks 0 {reached}")
        } else {
            reached.to_owned()
        };
        assert_eq!(result, want, "{case}");
    }
    let mut still = spellings(hooks);
    still.extend([
        format!("connect 127.0.0.1 {grpc}"),
        format!("socks-name 0 {grpc}"),
        format!("connect 127.0.0.2 {server}"),
        "connect 169.254.169.254 80".to_owned(),
    ]);
    if let Some(ip) = host_ip {
        still.push(format!("connect {ip} {hooks}"));
        still.push(format!("socks-v4 {ip} {grpc}"));
    }
    assert_refused(&probe(&t, &still).await);

    // A policy that allows everything but the private ranges by CIDR still
    // does not name loopback or the metadata service.
    set_policy(&t, &["0.0.0.0/0", "::/0"], &["10.0.0.0/8"]).await;
    assert_refused(
        &probe(
            &t,
            &[
                format!("connect 127.0.0.1 {server}"),
                format!("socks-name localhost {server}"),
                "http 169.254.169.254 80".to_owned(),
            ],
        )
        .await,
    );
}
