//! The secret gateway for real: Configure and ConfigureStatus over gRPC on
//! a real agent, then plain HTTP/1.1 to the route's loopback port, in front
//! of a real HTTPS upstream (rustls, a throwaway CA the agent is told to
//! trust through its local upstream settings) that records every request.

use crate::support;

use crate::skip_support;

use std::collections::HashMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use rayito_agent::AgentConfig;
use rayito_agent::gateway::{GatewayOptions, LocalUpstreams};
use rayito_agent::pb;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use support::TestAgent;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_rustls::rustls;

/// The secret every test injects; it must reach the upstream and nothing else.
const SECRET: &str = "sk-canary-7f3a9d1e5b";
/// The upstream's name (its certificate's only name; overridden to loopback).
const HOST: &str = "upstream.test";

// ---- logs, captured at TRACE for the whole binary ----

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logs() -> &'static Captured {
    static LOGS: OnceLock<Captured> = OnceLock::new();
    LOGS.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .init();
        captured
    })
}

// ---- the upstream ----

/// One request as the upstream saw it.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    target: String,
    headers: HashMap<String, Vec<String>>,
    body: Vec<u8>,
}

struct Upstream {
    addr: SocketAddr,
    ca_pem: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// An HTTPS server for `HOST`, signed by a fresh CA. `/slow` answers after
/// a minute; anything else 200 with a body, plus a response header named
/// like the injected one (the gateway must drop it).
async fn upstream() -> Upstream {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec![HOST.to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let record = record.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |req: http::Request<_>| {
                    let record = record.clone();
                    async move {
                        let (parts, body) = req.into_parts();
                        let body: hyper::body::Incoming = body;
                        let body = body
                            .collect()
                            .await
                            .map(|b| b.to_bytes())
                            .unwrap_or_default();
                        let mut headers: HashMap<String, Vec<String>> = HashMap::new();
                        for (k, v) in &parts.headers {
                            headers
                                .entry(k.as_str().to_owned())
                                .or_default()
                                .push(v.to_str().unwrap_or("?").to_owned());
                        }
                        let target = parts.uri.path_and_query().unwrap().as_str().to_owned();
                        record.lock().unwrap().push(Seen {
                            method: parts.method.to_string(),
                            target: target.clone(),
                            headers,
                            body: body.to_vec(),
                        });
                        if target == "/slow" {
                            tokio::time::sleep(Duration::from_secs(60)).await;
                        }
                        let response = http::Response::builder()
                            .header("x-api-key", "from-upstream")
                            .header("x-upstream", "yes")
                            .body(Full::new(Bytes::from_static(b"hello from upstream")))
                            .unwrap();
                        Ok::<_, std::convert::Infallible>(response)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Upstream {
        addr,
        ca_pem: ca_cert.pem(),
        seen,
    }
}

/// A loopback port nothing listens on.
fn dead_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// An agent that trusts `up`'s CA and dials `HOST` (and `dead.test`) on
/// loopback, with a short response head timeout.
async fn agent(up: &Upstream, enabled: bool) -> TestAgent {
    agent_with(up, enabled, serde_json::json!({})).await
}

/// [`agent`] with `extra` in its run payload.
async fn agent_with(up: &Upstream, enabled: bool, extra: serde_json::Value) -> TestAgent {
    let _ = logs();
    let local = LocalUpstreams::default();
    local.add_root_pem(up.ca_pem.clone());
    local.set_host(HOST, up.addr);
    local.set_host("dead.test", dead_addr());
    let t = TestAgent::start_config(AgentConfig {
        gateway: GatewayOptions {
            enabled,
            response_head_timeout: Duration::from_secs(2),
            local_upstreams: local,
        },
        ..AgentConfig::default()
    })
    .await;
    let (status, body) = t.run(&support::payload(extra)).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    t
}

fn client(t: &TestAgent) -> pb::configure_service_client::ConfigureServiceClient<support::Authed> {
    pb::configure_service_client::ConfigureServiceClient::with_interceptor(
        t.channel.clone(),
        t.interceptor(),
    )
}

fn route(name: &str, upstream: &str, rate: u32) -> pb::SecretGatewayRoute {
    pb::SecretGatewayRoute {
        name: name.into(),
        upstream: upstream.into(),
        headers: [("X-Api-Key".to_owned(), SECRET.to_owned())].into(),
        allow: vec![
            pb::SecretGatewayAllowRule {
                method: "POST".into(),
                path: "/v1/chat".into(),
            },
            pb::SecretGatewayAllowRule {
                method: "GET".into(),
                path: "/v1/models/*".into(),
            },
            pb::SecretGatewayAllowRule {
                method: "GET".into(),
                path: "/slow".into(),
            },
        ],
        rate_per_minute: rate,
    }
}

/// Applies `routes`; the section's (code, class).
async fn apply(t: &TestAgent, routes: Vec<pb::SecretGatewayRoute>) -> (pb::SectionCode, String) {
    let response = client(t)
        .configure(pb::ConfigureRequest {
            request_id: "0123456789abcdef0123456789abcdef".into(),
            secret_gateway: Some(pb::SecretGatewayConfig { routes }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(response.results.len(), 1, "{response:?}");
    let r = &response.results[0];
    assert_eq!(r.section(), pb::ConfigSection::SecretGateway);
    (r.code(), r.error_class.clone())
}

async fn status(t: &TestAgent) -> Vec<pb::SecretGatewayRouteStatus> {
    client(t)
        .configure_status(pb::ConfigureStatusRequest {})
        .await
        .unwrap()
        .into_inner()
        .secret_gateway
        .map(|s| s.routes)
        .unwrap_or_default()
}

async fn port_of(t: &TestAgent, name: &str) -> u16 {
    let routes = status(t).await;
    let r = routes
        .iter()
        .find(|r| r.name == name)
        .expect("route listed");
    assert_eq!(r.state(), pb::SecretGatewayRouteState::Listening);
    u16::try_from(r.port).unwrap()
}

/// One raw HTTP/1.1 exchange (`Connection: close`): status, head, body.
async fn send(port: u16, request: &str) -> (u16, String, String) {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("the gateway listens");
    s.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, head.to_ascii_lowercase(), body.to_owned())
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_reports_the_gateway_and_its_egress_class() {
    let up = upstream().await;
    let t = agent(&up, true).await;
    let f = t
        .health()
        .health(pb::HealthRequest {})
        .await
        .unwrap()
        .into_inner();
    let f = f.features.expect("features");
    assert!(f.configure && f.secret_gateway, "{f:?}");
    // Served by default; S3 mounts and EFS volumes need what this agent
    // was not given (a local S3, local volumes).
    assert!(f.lifecycle_events && f.telemetry_export, "{f:?}");
    assert!(!(f.s3_mounts || f.efs_volumes), "{f:?}");
    assert_eq!(
        f.root_egress,
        [pb::RootEgressClass::SecretGatewayUpstream as i32]
    );
}

/// The switch the emulator's `agent_secret_gateway: false` uses: the flag is
/// false and the section UNSUPPORTED, as on an agent built before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_without_the_feature_says_so() {
    let up = upstream().await;
    let t = agent(&up, false).await;
    let f = t
        .health()
        .health(pb::HealthRequest {})
        .await
        .unwrap()
        .into_inner();
    let f = f.features.expect("features");
    assert!(
        f.configure && !f.secret_gateway && f.root_egress.is_empty(),
        "{f:?}"
    );
    let got = apply(&t, vec![route("api", "https://upstream.test", 0)]).await;
    assert_eq!(got, (pb::SectionCode::Unsupported, String::new()));
    assert!(status(&t).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_injects_and_forwards_within_its_rules() {
    let up = upstream().await;
    let t = agent(&up, true).await;
    assert_eq!(
        apply(&t, vec![route("api", "https://upstream.test", 0)]).await,
        (pb::SectionCode::Applied, String::new())
    );
    let port = port_of(&t, "api").await;

    // Allowed, with a forged copy of the header (another spelling), a
    // hop-by-hop header and a body: the secret replaces the forgery.
    let (code, head, body) = send(
        port,
        "POST /v1/chat?stream=false&x=%2F HTTP/1.1\r\nHost: evil.example\r\nx-API-key: forged\r\n\
         Connection: close, x-drop-me\r\nx-drop-me: 1\r\nKeep-Alive: timeout=5\r\n\
         Content-Length: 5\r\n\r\nhello",
    )
    .await;
    assert_eq!(code, 200, "{head}");
    assert_eq!(body, "hello from upstream");
    assert!(head.contains("x-upstream: yes"), "{head}");
    assert!(
        !head.contains("x-api-key"),
        "a response header named like an injected one: {head}"
    );
    {
        let seen = up.seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        let s = &seen[0];
        assert_eq!(s.method, "POST");
        assert_eq!(s.target, "/v1/chat?stream=false&x=%2F", "the query as sent");
        assert_eq!(s.headers["x-api-key"], [SECRET]);
        assert_eq!(s.headers["host"], [HOST]);
        assert!(!s.headers.contains_key("x-drop-me"), "{:?}", s.headers);
        assert!(!s.headers.contains_key("keep-alive"), "{:?}", s.headers);
        assert_eq!(s.body, b"hello");
    }
    // A prefix rule.
    let (code, _, _) = send(port, &get("/v1/models/gpt-5")).await;
    assert_eq!(code, 200);

    // Refused before the upstream: another method, another path, an
    // unsafe path, an absolute-form target.
    for request in [
        get("/v1/chat"),
        get("/v1/models"),
        get("/admin"),
        get("/v1/models/../../admin"),
        get("/v1/models/%2e%2e/admin"),
        get("/v1/models/a%2Fb"),
        get("http://upstream.test/v1/models/x"),
        "DELETE /v1/models/x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".to_owned(),
    ] {
        let (code, _, body) = send(port, &request).await;
        assert_eq!((code, body.as_str()), (403, "not_allowed"), "{request}");
    }
    assert_eq!(
        up.seen.lock().unwrap().len(),
        2,
        "refused requests never reach it"
    );
    let routes = status(&t).await;
    assert_eq!(routes[0].last_error_class, "not_allowed");

    // The agent logged neither the secret nor the paths, at TRACE.
    let text = String::from_utf8_lossy(&logs().0.lock().unwrap()).into_owned();
    assert!(!text.is_empty(), "the capture works");
    assert!(!text.contains(SECRET), "the secret reached a log");
    assert!(!text.contains("/v1/models/gpt-5"), "a path reached a log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rate_limit_answers_429_and_refusals_do_not_spend_it() {
    let up = upstream().await;
    let t = agent(&up, true).await;
    assert_eq!(
        apply(&t, vec![route("api", "https://upstream.test", 2)])
            .await
            .0,
        pb::SectionCode::Applied
    );
    let port = port_of(&t, "api").await;
    let (code, _, _) = send(port, &get("/admin")).await;
    assert_eq!(code, 403);
    for _ in 0..2 {
        let (code, _, _) = send(port, &get("/v1/models/x")).await;
        assert_eq!(code, 200);
    }
    let (code, _, body) = send(port, &get("/v1/models/x")).await;
    assert_eq!((code, body.as_str()), (429, "rate_limited"));
    assert_eq!(up.seen.lock().unwrap().len(), 2);
    assert_eq!(status(&t).await[0].last_error_class, "rate_limited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_failures_are_502_and_504() {
    let up = upstream().await;
    let t = agent(&up, true).await;
    let loopback_literal = format!("https://127.0.0.1:{}", up.addr.port());
    assert_eq!(
        apply(
            &t,
            vec![
                route("dead", "https://dead.test", 0),
                route("slow", "https://upstream.test", 0),
                route("literal", &loopback_literal, 0),
            ]
        )
        .await
        .0,
        pb::SectionCode::Applied
    );
    let (code, _, body) = send(port_of(&t, "dead").await, &get("/v1/models/x")).await;
    assert_eq!((code, body.as_str()), (502, "upstream_unreachable"));
    // A loopback upstream not overridden is never dialled.
    let (code, _, body) = send(port_of(&t, "literal").await, &get("/v1/models/x")).await;
    assert_eq!((code, body.as_str()), (502, "upstream_unreachable"));
    let (code, _, body) = send(port_of(&t, "slow").await, &get("/slow")).await;
    assert_eq!((code, body.as_str()), (504, "upstream_timeout"));
    let classes: HashMap<String, String> = status(&t)
        .await
        .into_iter()
        .map(|r| (r.name, r.last_error_class))
        .collect();
    assert_eq!(classes["dead"], "upstream_unreachable");
    assert_eq!(classes["literal"], "upstream_unreachable");
    assert_eq!(classes["slow"], "upstream_timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reapply_rebinds_and_an_empty_section_stops_all() {
    let up = upstream().await;
    let t = agent(&up, true).await;
    apply(
        &t,
        vec![
            route("a", "https://upstream.test", 0),
            route("b", "https://upstream.test", 0),
        ],
    )
    .await;
    let (a, b) = (port_of(&t, "a").await, port_of(&t, "b").await);
    assert_ne!(a, b);

    apply(&t, vec![route("c", "https://upstream.test", 0)]).await;
    let routes = status(&t).await;
    assert_eq!(routes.len(), 1);
    let c = port_of(&t, "c").await;
    for old in [a, b] {
        if old != c {
            assert!(
                tokio::net::TcpStream::connect(("127.0.0.1", old))
                    .await
                    .is_err(),
                "the old listener on {old} still answers"
            );
        }
    }
    let (code, _, _) = send(c, &get("/v1/models/x")).await;
    assert_eq!(code, 200);

    // An INVALID section leaves the routes in force as they were.
    let mut bad = route("d", "https://upstream.test", 0);
    bad.rate_per_minute = 6001;
    assert_eq!(
        apply(&t, vec![bad]).await,
        (pb::SectionCode::Invalid, "rate_out_of_range".into())
    );
    assert_eq!(port_of(&t, "c").await, c);

    assert_eq!(apply(&t, Vec::new()).await.0, pb::SectionCode::Applied);
    assert!(status(&t).await.is_empty());
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", c))
            .await
            .is_err()
    );
}

/// Every INVALID class, pinned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_sections_name_their_class() {
    let up = upstream().await;
    let t = agent(&up, true).await;
    let ok = || route("api", "https://upstream.test", 0);
    let with = |f: &dyn Fn(&mut pb::SecretGatewayRoute)| {
        let mut r = ok();
        f(&mut r);
        vec![r]
    };
    let rule = |m: &str, p: &str| pb::SecretGatewayAllowRule {
        method: m.into(),
        path: p.into(),
    };
    let cases: Vec<(&str, Vec<pb::SecretGatewayRoute>)> = vec![
        ("empty_name", with(&|r| r.name.clear())),
        ("name_too_long", with(&|r| r.name = "a".repeat(65))),
        (
            "too_many_routes",
            (0..9)
                .map(|i| route(&format!("r{i}"), "https://upstream.test", 0))
                .collect(),
        ),
        ("duplicate_route_name", vec![ok(), ok()]),
        ("invalid_route_name", with(&|r| r.name = "Api".into())),
        (
            "upstream_not_https",
            with(&|r| r.upstream = "http://upstream.test".into()),
        ),
        (
            "upstream_has_path_or_query",
            with(&|r| r.upstream = "https://upstream.test/v1".into()),
        ),
        (
            "upstream_has_path_or_query",
            with(&|r| r.upstream = "https://upstream.test?x".into()),
        ),
        (
            "invalid_upstream_host",
            with(&|r| r.upstream = "https://".into()),
        ),
        (
            "invalid_upstream_host",
            with(&|r| r.upstream = "https://user@upstream.test".into()),
        ),
        (
            "invalid_upstream_host",
            with(&|r| r.upstream = "https://up_stream.test".into()),
        ),
        (
            "too_many_headers",
            with(&|r| {
                r.headers = (0..17)
                    .map(|i| (format!("x-h{i}"), "v".to_owned()))
                    .collect()
            }),
        ),
        (
            "invalid_header_name",
            with(&|r| {
                r.headers.insert("bad name".into(), "v".into());
            }),
        ),
        (
            "invalid_header_name",
            with(&|r| {
                r.headers.insert("Host".into(), "v".into());
            }),
        ),
        (
            "duplicate_header_name",
            with(&|r| {
                r.headers.insert("x-api-key".into(), "v".into());
            }),
        ),
        (
            "invalid_header_value",
            with(&|r| {
                r.headers.insert("x-other".into(), "a\r\nb".into());
            }),
        ),
        (
            "invalid_header_value",
            with(&|r| {
                r.headers.insert("x-other".into(), "a\0b".into());
            }),
        ),
        (
            "too_many_allow_rules",
            with(&|r| r.allow = (0..33).map(|i| rule("GET", &format!("/p{i}"))).collect()),
        ),
        ("empty_allow_list", with(&|r| r.allow.clear())),
        (
            "invalid_method",
            with(&|r| r.allow = vec![rule("get", "/x")]),
        ),
        ("invalid_method", with(&|r| r.allow = vec![rule("", "/x")])),
        ("empty_path", with(&|r| r.allow = vec![rule("GET", "")])),
        (
            "invalid_allow_path",
            with(&|r| r.allow = vec![rule("GET", "/a/../b")]),
        ),
        (
            "invalid_allow_path",
            with(&|r| r.allow = vec![rule("GET", "relative")]),
        ),
        (
            "invalid_allow_path",
            with(&|r| r.allow = vec![rule("GET", "/a%2Fb")]),
        ),
        ("rate_out_of_range", with(&|r| r.rate_per_minute = 6001)),
    ];
    for (class, routes) in cases {
        assert_eq!(
            apply(&t, routes).await,
            (pb::SectionCode::Invalid, class.to_owned()),
            "{class}"
        );
    }
    // Bounds that pass: no header at all (the agent allows 0), the top rate.
    assert_eq!(
        apply(
            &t,
            with(&|r| {
                r.headers.clear();
                r.rate_per_minute = 6000;
            })
        )
        .await,
        (pb::SectionCode::Applied, String::new())
    );
    let _ = std::io::stderr().flush();
}

/// With egress enforced, the listener is inside the sandbox's network
/// namespace: sandbox code reaches it on its own loopback (curl, with the
/// proxy variables set), the agent dials the upstream from outside, and the
/// secret is in no environment of the sandbox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_code_reaches_the_gateway_inside_its_network_namespace() {
    if !rustix::process::geteuid().is_root() {
        skip_support::skip("needs root (the sandbox's network namespace)");
        return;
    }
    let up = upstream().await;
    let t = agent_with(&up, true, serde_json::json!({"network": {"enforce": true}})).await;
    let health = t
        .health()
        .health(pb::HealthRequest {})
        .await
        .unwrap()
        .into_inner();
    if health.egress_enforcement != pb::EgressEnforcement::GuestRoutesAndProxy as i32 {
        skip_support::skip("needs network namespaces (the agent enforces nothing here)");
        return;
    }
    assert_eq!(
        apply(&t, vec![route("api", "https://upstream.test", 0)])
            .await
            .0,
        pb::SectionCode::Applied
    );
    let port = port_of(&t, "api").await;
    let out = support::run_bash(
        &t,
        &format!(
            "curl -s -H 'X-Api-Key: forged' -w ' %{{http_code}}' http://127.0.0.1:{port}/v1/models/x; \
             echo; cat /proc/self/environ | tr '\\0' '\\n' | grep -c {SECRET} || true"
        ),
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout,
        "hello from upstream 200\n0\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = up.seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["x-api-key"], [SECRET]);
}

/// A route serves at most 256 connections at once: sandbox code that opens
/// more waits in the listen backlog instead of costing the agent a task
/// each; one closing lets the next in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_serves_a_bounded_number_of_connections() {
    let up = upstream().await;
    let t = agent(&up, true).await;
    assert_eq!(
        apply(&t, vec![route("api", "https://upstream.test", 0)]).await,
        (pb::SectionCode::Applied, String::new())
    );
    let port = port_of(&t, "api").await;
    let mut idle = Vec::new();
    for _ in 0..256 {
        let s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("the gateway listens");
        idle.push(s);
    }
    // The 257th is accepted by the kernel, not served while all are open.
    let request = get("/admin");
    let waiting = tokio::spawn(async move { send(port, &request).await });
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "served past the bound");
    drop(idle.pop());
    let (code, _, body) = tokio::time::timeout(std::time::Duration::from_secs(60), waiting)
        .await
        .expect("served once a connection closed")
        .unwrap();
    assert_eq!((code, body.as_str()), (403, "not_allowed"));
}
