//! The emulated proxy through a real tonic client (h2c to the MicroVM's
//! endpoint): forwarding of unary, server-streaming and client-streaming
//! calls to the agent, the 403/400/502 rules, header stripping, and the
//! proxy-side faults.

use crate::emulator_support;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_lambdamicrovms::types::{IdlePolicy, MicrovmState, PortSpecification};
use bytes::Bytes;
use emulator_support::*;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rayito_agent::pb;
use rayito_emulator::EmulatorConfig;
use tonic::Code;

fn start_request(script: &str) -> pb::StartRequest {
    pb::StartRequest {
        process: Some(pb::ProcessConfig {
            cmd: "/bin/bash".into(),
            args: vec!["-c".into(), script.into()],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn missing_status(code: u16) -> String {
    format!("grpc-status header missing, mapped from HTTP status code {code}")
}

/// Health through the proxy with `headers`; the error's code and message.
async fn health_err(ch: &tonic::transport::Channel, headers: ProxyHeaders) -> (Code, String) {
    let s = health(ch, headers)
        .health(pb::HealthRequest {})
        .await
        .expect_err("refused");
    (s.code(), s.message().to_string())
}

#[tokio::test]
async fn forwards_process_output_in_order() {
    let h = Harness::start().await;
    let (id, endpoint) = h.run_ready().await;
    let token = h.mint(&id, &[8080]).await;
    let ch = channel(&endpoint).await;
    let ready = wait_ready(&ch, &token).await;
    assert_eq!(
        ready.sandbox_id, id,
        "the agent got /run with this MicroVM's id"
    );

    // Server streaming, in order.
    let mut stream = process(&ch, ProxyHeaders::sdk(&token))
        .start(start_request("echo one; sleep 0.2; echo two"))
        .await
        .expect("Start")
        .into_inner();
    let (first_is_start, stdout, exit) = drain(&mut stream).await;
    assert_eq!(first_is_start, Some(true));
    assert_eq!(stdout, "one\ntwo\n");
    assert_eq!(exit, Some(0));
}

/// Reads a process stream to its end: whether its first event was the
/// start, its stdout, its exit code.
async fn drain(
    stream: &mut tonic::Streaming<pb::ProcessEvent>,
) -> (Option<bool>, String, Option<i32>) {
    let mut stdout = Vec::new();
    let mut first_is_start = None;
    let mut exit = None;
    while let Some(ev) = stream.message().await.expect("stream") {
        match ev.event {
            Some(pb::process_event::Event::Start(_)) => {
                first_is_start.get_or_insert(true);
            }
            Some(pb::process_event::Event::Data(d)) => {
                first_is_start.get_or_insert(false);
                if let Some(pb::data_event::Output::Stdout(b)) = d.output {
                    stdout.extend_from_slice(&b);
                }
            }
            Some(pb::process_event::Event::End(e)) => exit = Some(e.exit_code),
            _ => {}
        }
    }
    (
        first_is_start,
        String::from_utf8_lossy(&stdout).into_owned(),
        exit,
    )
}

#[tokio::test]
async fn forwards_client_and_server_streams_of_files() {
    let h = Harness::start().await;
    let (id, endpoint) = h.run_ready().await;
    let token = h.mint(&id, &[8080]).await;
    let ch = channel(&endpoint).await;
    wait_ready(&ch, &token).await;

    // Client streaming up (3 MiB in 1 MiB chunks), server streaming down.
    let data: Vec<u8> = (0..3 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    let chunks: Vec<pb::WriteRequest> = data
        .chunks(1024 * 1024)
        .enumerate()
        .map(|(i, c)| pb::WriteRequest {
            path: (i == 0).then(|| "/home/user/big.bin".to_string()),
            chunk: c.to_vec().into(),
            ..Default::default()
        })
        .collect();
    let written = files(&ch, ProxyHeaders::sdk(&token))
        .write(tokio_stream::iter(chunks))
        .await
        .expect("Write")
        .into_inner();
    assert_eq!(written.entries.len(), 1);
    let mut read = files(&ch, ProxyHeaders::sdk(&token))
        .read(pb::ReadRequest {
            path: "/home/user/big.bin".into(),
            user: None,
        })
        .await
        .expect("Read")
        .into_inner();
    let mut back = Vec::new();
    while let Some(r) = read.message().await.expect("read stream") {
        back.extend_from_slice(&r.chunk);
    }
    assert!(back == data, "3 MiB round trip through the proxy");

    // A gRPC error status from the agent passes through unchanged.
    let s = files(&ch, ProxyHeaders::sdk(&token))
        .stat(pb::StatRequest {
            path: "/home/user/missing".into(),
            user: None,
        })
        .await
        .unwrap_err();
    assert_eq!(s.code(), Code::NotFound);
}

#[tokio::test]
async fn rejects_calls_without_a_valid_token_for_this_microvm_and_port() {
    let h = Harness::start().await;
    let (id, endpoint) = h.run_ready().await;
    let (other_id, other_endpoint) = h.run_ready().await;
    let token = h.mint(&id, &[8080]).await;
    let ch = channel(&endpoint).await;
    wait_ready(&ch, &token).await;
    let forbidden = (Code::PermissionDenied, missing_status(403));

    let none = ProxyHeaders {
        proxy_auth: None,
        ..ProxyHeaders::sdk(&token)
    };
    assert_eq!(health_err(&ch, none).await, forbidden);
    assert_eq!(
        health_err(&ch, ProxyHeaders::sdk("not-a-token")).await,
        forbidden
    );
    let other = h.mint(&other_id, &[8080]).await;
    assert_eq!(
        health_err(&ch, ProxyHeaders::sdk(&other)).await,
        forbidden,
        "another MicroVM's token"
    );
    let port_3000 = h.mint(&id, &[3000]).await;
    assert_eq!(
        health_err(&ch, ProxyHeaders::sdk(&port_3000)).await,
        forbidden,
        "token without 8080"
    );
    let no_port_header = ProxyHeaders {
        proxy_port: None,
        ..ProxyHeaders::sdk(&port_3000)
    };
    assert_eq!(
        health_err(&ch, no_port_header).await,
        forbidden,
        "absent port means 8080"
    );
    let wrong_port = ProxyHeaders {
        proxy_port: Some("3000".into()),
        ..ProxyHeaders::sdk(&token)
    };
    assert_eq!(
        health_err(&ch, wrong_port).await,
        forbidden,
        "port 3000 with an 8080 token"
    );

    // The hooks port is never reachable, even with an all-ports token.
    let all = h
        .client
        .create_microvm_auth_token()
        .microvm_identifier(&id)
        .expiration_in_minutes(5)
        .allowed_ports(PortSpecification::AllPorts)
        .send()
        .await
        .unwrap();
    let all = all.auth_token()["X-aws-proxy-auth"].clone();
    let hooks = ProxyHeaders {
        proxy_port: Some("9000".into()),
        ..ProxyHeaders::sdk(&all)
    };
    assert_eq!(health_err(&ch, hooks).await, forbidden);

    let malformed = ProxyHeaders {
        proxy_port: Some("80x".into()),
        ..ProxyHeaders::sdk(&token)
    };
    assert_eq!(
        health_err(&ch, malformed).await,
        (Code::Internal, missing_status(400))
    );

    // The same token works, and the 403 really is plain HTTP: no
    // grpc-status anywhere, an empty body for gRPC callers (so that clients
    // see the bare HTTP status), a short text for others.
    health(&ch, ProxyHeaders::sdk(&token))
        .health(pb::HealthRequest {})
        .await
        .expect("valid token");
    let client = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http::<Empty<Bytes>>();
    for (content_type, body) in [("application/grpc", ""), ("text/plain", "Forbidden\n")] {
        let resp = client
            .request(
                Request::post(format!("http://{endpoint}/rayito.v1.HealthService/Health"))
                    .header("content-type", content_type)
                    .body(Empty::new())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(resp.status(), 403);
        assert!(resp.headers().get("grpc-status").is_none());
        assert_eq!(resp.headers()["content-type"], "text/plain; charset=utf-8");
        let collected = resp.into_body().collect().await.unwrap();
        assert!(
            collected
                .trailers()
                .is_none_or(|t| t.get("grpc-status").is_none())
        );
        assert_eq!(collected.to_bytes(), body);
    }

    // Tokens die with their MicroVM: the other MicroVM's token works on its
    // own endpoint until the MicroVM terminates, then reaches nothing.
    let other_ch = channel(&other_endpoint).await;
    health(&other_ch, ProxyHeaders::sdk(&other))
        .health(pb::HealthRequest {})
        .await
        .expect("a token works while its MicroVM runs");
    h.client
        .terminate_microvm()
        .microvm_identifier(&other_id)
        .send()
        .await
        .unwrap();
    wait_state(&h.client, &other_id, MicrovmState::Terminated).await;
    let dead = health(&other_ch, ProxyHeaders::sdk(&other))
        .health(pb::HealthRequest {})
        .await
        .expect_err("a terminated MicroVM's token reaches nothing");
    assert_eq!(dead.code(), Code::Unavailable, "{dead:?}");
}

#[tokio::test]
async fn expired_tokens_are_refused() {
    const TTL: Duration = Duration::from_secs(5);
    let h = Harness::start_with(EmulatorConfig {
        auth_token_ttl: Some(TTL),
        ..EmulatorConfig::default()
    })
    .await;
    let (id, endpoint) = h.run_ready().await;
    let ch = channel(&endpoint).await;
    let minted = std::time::Instant::now();
    let token = h.mint(&id, &[8080]).await;
    // Well inside the TTL even on a loaded machine.
    health(&ch, ProxyHeaders::sdk(&token))
        .health(pb::HealthRequest {})
        .await
        .expect("fresh token");
    // Time itself is what this test waits for: until just past the TTL.
    tokio::time::sleep((TTL + Duration::from_millis(300)).saturating_sub(minted.elapsed())).await;
    assert_eq!(
        health_err(&ch, ProxyHeaders::sdk(&token)).await,
        (Code::PermissionDenied, missing_status(403))
    );
    // The emulator does not keep expired tokens: neither its grants nor
    // its list of minted tokens grow with every token ever minted.
    assert!(!h.emulator.minted_proxy_tokens().contains(&token));
    let fresh = h.mint(&id, &[8080]).await;
    assert_eq!(h.emulator.minted_proxy_tokens(), vec![fresh]);
    assert_eq!(h.emulator.proxy_grant_count(), 1);
}

/// A plain HTTP/1.1 server on loopback that records the headers it receives.
async fn header_recorder() -> (u16, Arc<Mutex<Vec<http::HeaderMap>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    record.lock().unwrap().push(req.headers().clone());
                    async {
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"seen"))))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (port, seen)
}

/// A server inside the sandbox on `port`, answering each GET with the
/// request's headers as a JSON object (names lower-cased).
fn header_echo(port: u16) -> String {
    format!(
        r#"exec python3 -c '
import http.server, json
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({{k.lower(): v for k, v in self.headers.items()}}).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", {port}), H).serve_forever()
'"#
    )
}

/// A free loopback port (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET `/anything` through the proxy to `port` with `token` and extra
/// headers; the status and body.
async fn get_through(endpoint: &str, token: &str, port: u16) -> (u16, Bytes) {
    let client = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http::<Empty<Bytes>>();
    let resp = client
        .request(
            Request::get(format!("http://{endpoint}/anything"))
                .header("x-aws-proxy-auth", token)
                .header("x-aws-proxy-port", port.to_string())
                .header("x-aws-proxy-something-else", "1")
                .header("x-access-token", "kept")
                .body(Empty::new())
                .unwrap(),
        )
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.into_body().collect().await.unwrap().to_bytes())
}

#[tokio::test]
async fn strips_every_proxy_header_and_adds_a_request_id() {
    let h = Harness::start().await;
    let (id, endpoint) = h.run_ready().await;
    let port = free_port();
    let token = h.mint(&id, &[8080, i32::from(port)]).await;
    let ch = channel(&endpoint).await;
    wait_ready(&ch, &token).await;
    let _server = process(&ch, ProxyHeaders::sdk(&token))
        .start(start_request(&header_echo(port)))
        .await
        .expect("Start")
        .into_inner();
    // The server takes a moment to listen: 502 until then.
    let mut answer = get_through(&endpoint, &token, port).await;
    for _ in 0..100 {
        if answer.0 == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        answer = get_through(&endpoint, &token, port).await;
    }
    assert_eq!(answer.0, 200);
    let headers: std::collections::BTreeMap<String, String> =
        serde_json::from_slice(&answer.1).unwrap();
    let leaked: Vec<&String> = headers
        .keys()
        .filter(|k| k.starts_with("x-aws-proxy-"))
        .collect();
    assert!(leaked.is_empty(), "leaked {leaked:?}");
    assert_eq!(headers["x-access-token"], "kept");
    assert_eq!(headers["x-amzn-requestid"].len(), 36);
}

/// Issue 22: the emulated proxy forwarded any port a token covered to the
/// host's loopback, so a token for a port reached whatever listened there
/// (another sandbox's server, a host service). Only the MicroVM's own
/// sandbox's servers are reached now; anything else is a 502 and the host
/// server sees nothing.
#[tokio::test]
async fn a_port_served_by_the_host_not_the_sandbox_is_never_reached() {
    let h = Harness::start().await;
    let (id, endpoint) = h.run_ready().await;
    let (port, seen) = header_recorder().await;
    let token = h.mint(&id, &[i32::from(port)]).await;
    let (status, _) = get_through(&endpoint, &token, port).await;
    assert_eq!(status, 502);
    assert!(
        seen.lock().unwrap().is_empty(),
        "the host server was reached"
    );
}

#[tokio::test]
async fn suspended_microvms_answer_502_unless_auto_resume() {
    let h = Harness::start().await;
    let (id, endpoint) = h.run_ready().await;
    let token = h.mint(&id, &[8080]).await;
    let ch = channel(&endpoint).await;
    wait_ready(&ch, &token).await;
    h.client
        .suspend_microvm()
        .microvm_identifier(&id)
        .send()
        .await
        .unwrap();
    wait_state(&h.client, &id, MicrovmState::Suspended).await;
    assert_eq!(
        health_err(&ch, ProxyHeaders::sdk(&token)).await,
        (Code::Unavailable, missing_status(502))
    );
    h.client
        .resume_microvm()
        .microvm_identifier(&id)
        .send()
        .await
        .unwrap();
    let r = health(&ch, ProxyHeaders::sdk(&token))
        .health(pb::HealthRequest {})
        .await
        .expect("after resume")
        .into_inner();
    assert_eq!(r.resume_generation, 1);

    let policy = IdlePolicy::builder()
        .max_idle_duration_seconds(300)
        .suspended_duration_seconds(600)
        .auto_resume_enabled(true)
        .build()
        .unwrap();
    let (auto_id, auto_endpoint) = h.run_ready_with(|r| r.idle_policy(policy)).await;
    let auto_token = h.mint(&auto_id, &[8080]).await;
    let auto_ch = channel(&auto_endpoint).await;
    wait_ready(&auto_ch, &auto_token).await;
    h.client
        .suspend_microvm()
        .microvm_identifier(&auto_id)
        .send()
        .await
        .unwrap();
    wait_state(&h.client, &auto_id, MicrovmState::Suspended).await;
    let r = health(&auto_ch, ProxyHeaders::sdk(&auto_token))
        .health(pb::HealthRequest {})
        .await
        .expect("auto-resumed")
        .into_inner();
    assert_eq!(r.resume_generation, 1);
    assert_eq!(
        h.emulator.state(&auto_id),
        Some(rayito_emulator::MicrovmState::Running)
    );
}

#[tokio::test]
async fn proxy_status_faults_answer_the_next_calls() {
    let h = Harness::start().await;
    let (id, endpoint) = h.run_ready().await;
    let token = h.mint(&id, &[8080]).await;
    let ch = channel(&endpoint).await;
    wait_ready(&ch, &token).await;
    assert!(h.emulator.faults().proxy_status(1, 403));
    assert!(h.emulator.faults().proxy_status(1, 429));
    assert!(h.emulator.faults().proxy_status(1, 502));
    assert!(!h.emulator.faults().proxy_status(1, 200));
    assert_eq!(
        health_err(&ch, ProxyHeaders::sdk(&token)).await,
        (Code::PermissionDenied, missing_status(403))
    );
    assert_eq!(
        health_err(&ch, ProxyHeaders::sdk(&token)).await,
        (Code::Unavailable, missing_status(429))
    );
    assert_eq!(
        health_err(&ch, ProxyHeaders::sdk(&token)).await,
        (Code::Unavailable, missing_status(502))
    );
    health(&ch, ProxyHeaders::sdk(&token))
        .health(pb::HealthRequest {})
        .await
        .expect("faults used up");
}

#[tokio::test]
async fn cut_connections_breaks_live_streams() {
    let h = Harness::start().await;
    let (id, endpoint) = h.run_ready().await;
    let token = h.mint(&id, &[8080]).await;
    let ch = channel(&endpoint).await;
    wait_ready(&ch, &token).await;
    let faults = h.emulator.faults();

    // Cut mid-stream: the open stream fails, a new connection works.
    let mut stream = process(&ch, ProxyHeaders::sdk(&token))
        .start(start_request("echo started; sleep 30"))
        .await
        .unwrap()
        .into_inner();
    loop {
        let ev = stream.message().await.unwrap().expect("event");
        if matches!(ev.event, Some(pb::process_event::Event::Data(_))) {
            break;
        }
    }
    assert!(faults.cut_connections(&id));
    let after = tokio::time::timeout(Duration::from_secs(5), stream.message())
        .await
        .expect("cut is prompt");
    // A reset mid-stream, as tonic reports a dropped HTTP/2 connection.
    let broken = after.expect_err("the stream broke");
    assert_eq!(broken.code(), Code::Unknown, "{broken:?}");
    assert!(
        broken.message().starts_with("h2 protocol error"),
        "{broken:?}"
    );
    let fresh = channel(&endpoint).await;
    wait_ready(&fresh, &token).await;
}

#[tokio::test]
async fn agent_faults_disk_deadline_and_kill() {
    let h = Harness::start().await;
    let (id, endpoint) = h.run_ready().await;
    let token = h.mint(&id, &[8080]).await;
    let fresh = channel(&endpoint).await;
    wait_ready(&fresh, &token).await;
    let faults = h.emulator.faults();

    // Disk reserve: the next write fails with exactly `disk_reserve`.
    assert!(faults.set_disk_reserve(&id, u64::MAX));
    let write = pb::WriteRequest {
        path: Some("/home/user/x".into()),
        chunk: b"x".to_vec().into(),
        ..Default::default()
    };
    let s = files(&fresh, ProxyHeaders::sdk(&token))
        .write(tokio_stream::iter(vec![write]))
        .await
        .unwrap_err();
    assert_eq!(
        (s.code(), s.message()),
        (Code::ResourceExhausted, "disk_reserve")
    );

    // Deadline now: calls get FAILED_PRECONDITION `sandbox_timeout`.
    assert!(faults.expire_deadline(&id));
    let s = files(&fresh, ProxyHeaders::sdk(&token))
        .stat(pb::StatRequest {
            path: "/home/user".into(),
            user: None,
        })
        .await
        .unwrap_err();
    assert_eq!(
        (s.code(), s.message()),
        (Code::FailedPrecondition, "sandbox_timeout")
    );

    // Kill: the MicroVM dies as if its init crashed.
    assert!(faults.kill_agent(&id));
    let end = wait_state(&h.client, &id, MicrovmState::Terminated).await;
    assert_eq!(
        end.state_reason(),
        Some("Container Stopped with Exit Code: 137")
    );
    assert!(
        health(&fresh, ProxyHeaders::sdk(&token))
            .health(pb::HealthRequest {})
            .await
            .is_err()
    );
    assert!(!faults.kill_agent(&id), "nothing left to kill");
    assert!(!faults.set_disk_reserve(&id, 1));
}

#[tokio::test]
async fn stall_faults_hold_requests_and_stop_streams() {
    use rayito_emulator::ProxyStall;
    let h = Harness::start().await;
    let (id, endpoint) = h.run_ready().await;
    let token = h.mint(&id, &[8080]).await;
    let ch = channel(&endpoint).await;
    wait_ready(&ch, &token).await;
    let faults = h.emulator.faults();

    // A held request gets no answer at all; the caller's own deadline ends
    // it, and the rule is used up.
    faults.stall_proxy(
        1,
        Some("/rayito.v1.HealthService/Health"),
        ProxyStall::Request,
    );
    let held = tokio::time::timeout(
        Duration::from_secs(2),
        health(&ch, ProxyHeaders::sdk(&token)).health(pb::HealthRequest {}),
    )
    .await;
    assert!(held.is_err(), "the request was answered: {held:?}");
    health(&ch, ProxyHeaders::sdk(&token))
        .health(pb::HealthRequest {})
        .await
        .expect("one request stalled, the next is answered");

    // A stream stopped after its first frame: the end event never comes,
    // though the command ends at once, until the connections are cut.
    faults.stall_proxy(
        1,
        Some("/rayito.v1.ProcessService/Start"),
        ProxyStall::ResponseAfter { frames: 1 },
    );
    let mut stream = process(&ch, ProxyHeaders::sdk(&token))
        .start(start_request("echo one; echo two"))
        .await
        .unwrap()
        .into_inner();
    let first = stream
        .message()
        .await
        .unwrap()
        .expect("the first frame passes");
    assert!(
        matches!(first.event, Some(pb::process_event::Event::Start(_))),
        "{first:?}"
    );
    loop {
        match tokio::time::timeout(Duration::from_secs(2), stream.message()).await {
            Err(_) => break,
            Ok(Ok(Some(ev))) => assert!(
                !matches!(ev.event, Some(pb::process_event::Event::End(_))),
                "the end passed the stall: {ev:?}"
            ),
            Ok(other) => panic!("the stalled stream ended: {other:?}"),
        }
    }
    assert!(faults.cut_connections(&id));
    let after = tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .expect("the cut ends the stall");
    assert!(after.is_err(), "{after:?}");
}

/// The established TCP connections of this host whose local port is
/// `port` (IPv4, from `/proc/net/tcp`).
fn established_on(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = fields
                .get(1)
                .and_then(|addr| addr.rsplit_once(':'))
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            local_port == Some(port) && fields.get(3) == Some(&"01")
        })
        .count()
}

/// The proxy reaches the agent, which runs in the emulator's process, over
/// an in-memory connection: calls and streams go through while no socket
/// is connected to the agent's gRPC port (docs/local.md, "The proxy").
#[tokio::test]
async fn the_proxy_reaches_the_agent_without_a_loopback_socket() {
    let h = Harness::start().await;
    let (id, endpoint) = h.run_ready().await;
    let token = h.mint(&id, &[8080]).await;
    let ch = channel(&endpoint).await;
    wait_ready(&ch, &token).await;
    let mut stream = process(&ch, ProxyHeaders::sdk(&token))
        .start(start_request("echo through"))
        .await
        .expect("Start through the proxy")
        .into_inner();
    let (first_is_start, stdout, exit) = drain(&mut stream).await;
    assert_eq!(
        (first_is_start, stdout.as_str(), exit),
        (Some(true), "through\n", Some(0))
    );
    let agent = h
        .emulator
        .agent_grpc_addr(&id)
        .expect("the agent's address");
    let proxy_port: u16 = endpoint
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .expect("the endpoint's port");
    assert!(
        established_on(proxy_port) >= 1,
        "the check sees the client's own connection to the proxy"
    );
    assert_eq!(
        established_on(agent.port()),
        0,
        "no socket connects the proxy to the agent"
    );
}
