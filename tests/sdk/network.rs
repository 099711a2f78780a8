//! The egress policy (docs/network.md, issue 28 section 1) on the emulator:
//! a 127.0.0.1 server on the host is reached through the agent's proxy when
//! allowed, refused when denied, and access flips at runtime with
//! `update_network`; a direct connection fails; the create gate on an agent
//! without enforcement terminates the sandbox and fails `Unimplemented`
//! even with keep-on-failure; every limit is refused before any call with
//! a message naming the list and the index, never the entry.
//!
//! Enforcement needs root (network namespaces); elsewhere the runtime test
//! prints `SKIPPED: <test>: <reason>` and returns.

use crate::sdk_support;

use rayito::error::ErrorKind;
use rayito::{ALL_TRAFFIC, EgressEnforcement, EgressProxy, NetworkPolicy, Sandbox, SandboxError};
use rayito_emulator::{Emulator, EmulatorConfig, MicrovmState};

#[path = "../hello_server/mod.rs"]
mod hello_server;

/// A one-line HTTP server on the host's 127.0.0.1: answers every request
/// with `hello from the host`.
async fn host_server() -> u16 {
    hello_server::hello_server("127.0.0.1:0").await
}

/// `curl`'s HTTP status for `url` inside the sandbox (`extra` before the
/// URL), `000` when it could not connect at all. The host's server is on
/// 127.0.0.1, which the sandbox's `NO_PROXY` keeps local: `--noproxy ''`
/// sends it through the proxy all the same (unless `extra` says otherwise).
async fn status(sbx: &Sandbox, extra: &str, url: &str) -> String {
    let through = if extra.contains("--noproxy") {
        ""
    } else {
        "--noproxy ''"
    };
    let out = sbx
        .commands()
        .run(&format!(
            "curl -s -o /dev/null -w '%{{http_code}}' --max-time 8 {through} {extra} {url} || true"
        ))
        .await
        .expect("curl runs");
    out.stdout.trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn egress_follows_the_policy_and_flips_at_runtime() {
    if !rustix::process::geteuid().is_root() {
        sdk_support::skip::skip("needs root (the agent enforces egress with a network namespace)");
        return;
    }
    let port = host_server().await;
    let url = format!("http://127.0.0.1:{port}/");
    let emu = sdk_support::emulator().await;
    let sbx = sdk_support::builder(&emu)
        .network(NetworkPolicy::new().allow_out(["127.0.0.1/32"]))
        .allow_internet_access(false)
        .create()
        .await
        .expect("a sandbox with a restricting policy");

    let state = sbx.network().get().await.expect("get_network");
    assert_eq!(state.enforcement, EgressEnforcement::GuestRoutesAndProxy);
    assert_eq!(state.allow_out, vec!["127.0.0.1/32".to_owned()]);
    assert_eq!(state.deny_out, vec![ALL_TRAFFIC.to_owned()]);
    assert!(!state.egress_proxy_configured);
    let proxy_port = state.local_proxy_port.expect("the agent's proxy port");
    let env = sbx
        .commands()
        .run("echo $HTTPS_PROXY $ALL_PROXY $NO_PROXY $no_proxy")
        .await
        .expect("env");
    assert_eq!(
        env.stdout.trim(),
        format!(
            "http://127.0.0.1:{proxy_port} socks5h://127.0.0.1:{proxy_port} \
             localhost,127.0.0.1,::1 localhost,127.0.0.1,::1"
        )
    );

    // Allowed: through HTTP_PROXY (absolute form), CONNECT and SOCKS5.
    assert_eq!(status(&sbx, "", &url).await, "200");
    assert_eq!(status(&sbx, "--proxytunnel", &url).await, "200");
    let socks = format!("--proxy socks5h://127.0.0.1:{proxy_port}");
    assert_eq!(status(&sbx, &socks, &url).await, "200");
    let body = sbx
        .commands()
        .run(&format!("curl -s --max-time 8 --noproxy '' {url}"))
        .await
        .expect("curl");
    assert_eq!(body.stdout, "hello from the host");
    // Direct (no proxy): nothing but loopback in the sandbox's namespace.
    assert_eq!(status(&sbx, "--noproxy '*'", &url).await, "000");

    // Denied at runtime: the proxy answers 403, SOCKS5 refuses.
    let denied = sbx
        .network()
        .update(NetworkPolicy::new().deny_internet())
        .await
        .expect("update_network");
    assert!(denied.allow_out.is_empty());
    assert_eq!(status(&sbx, "", &url).await, "403");
    assert_eq!(status(&sbx, "--proxytunnel", &url).await, "000");
    assert_eq!(status(&sbx, &socks, &url).await, "000");

    // A hostname entry (case-insensitive), resolved by the agent: the name
    // passes, the bare address does not.
    sbx.network()
        .update(
            NetworkPolicy::new()
                .allow_out(["LOCALHOST."])
                .deny_internet(),
        )
        .await
        .expect("update_network by name");
    assert_eq!(
        status(&sbx, "", &format!("http://localhost:{port}/")).await,
        "200"
    );
    assert_eq!(status(&sbx, "", &url).await, "403");

    // And back, by id with the access token.
    let token = sbx.access_token().clone();
    let back = sdk_support::builder(&emu)
        .client()
        .await
        .unwrap()
        .update_network_by_id(
            sbx.id(),
            token,
            NetworkPolicy::new()
                .allow_out(["127.0.0.0/8"])
                .deny_internet(),
        )
        .await
        .expect("update_network_by_id");
    assert_eq!(back.allow_out, vec!["127.0.0.0/8".to_owned()]);
    assert_eq!(status(&sbx, "", &url).await, "200");

    // The operator's proxy is not supported by the local agent yet.
    let err = sbx
        .network()
        .update(
            NetworkPolicy::new()
                .deny_internet()
                .egress_proxy(EgressProxy::new("proxy.internal:3128")),
        )
        .await
        .expect_err("no egress proxy locally");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(!err.to_string().contains("proxy.internal"), "{err}");
    assert!(sbx.kill().await.expect("kill"));
}

/// The gate: an agent that enforces nothing gets its sandbox terminated,
/// with keep-on-failure too, and create fails `Unimplemented` naming the
/// feature.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_terminates_a_sandbox_its_agent_cannot_bound() {
    let emu = Emulator::start(EmulatorConfig {
        agent_egress: false,
        ..EmulatorConfig::default()
    })
    .await
    .expect("the emulator starts");
    let cases = [
        (
            sdk_support::builder(&emu).allow_internet_access(false),
            "allow_internet_access=False",
        ),
        (
            sdk_support::builder(&emu)
                .network(NetworkPolicy::new().allow_out(["10.0.0.1"]))
                .allow_internet_access(false),
            "network",
        ),
        (
            sdk_support::builder(&emu)
                .network(NetworkPolicy::new().deny_out(["10.0.0.0/8"]))
                .execution_role_arn("arn:aws:iam::000000000000:role/rayito-sandbox")
                .persist(rayito::persistence::S3Prefix::new("bucket"))
                .persist_keep_on_failure(true),
            "network",
        ),
    ];
    for (builder, feature) in cases {
        let before = emu.microvm_ids();
        let err = builder.create().await.expect_err("the gate refuses");
        let SandboxError::Unimplemented {
            feature: got,
            reason,
            doc,
            ..
        } = &err
        else {
            panic!("not Unimplemented: {err:?}");
        };
        assert_eq!(&**got, feature);
        assert_eq!(
            &**reason,
            "the sandbox's agent does not enforce egress policies, so the sandbox was terminated (even with keep-on-failure); create it where the agent enforces them (the local backend as root)"
        );
        assert_eq!(doc.as_deref(), Some("docs/network.md"));
        if feature == "network" {
            assert!(
                include_str!("../../docs/network.md").contains(&err.to_string()),
                "docs/network.md transcribes {err}"
            );
        }
        assert_eq!(
            err.to_string(),
            format!(
                "feature {feature} is not available: the sandbox's agent does not enforce egress policies, so the sandbox was terminated (even with keep-on-failure); create it where the agent enforces them (the local backend as root); see docs/network.md"
            )
        );
        let new: Vec<String> = emu
            .microvm_ids()
            .into_iter()
            .filter(|id| !before.contains(id))
            .collect();
        assert_eq!(new.len(), 1, "{new:?}");
        let state = emu.state(&new[0]);
        assert!(
            matches!(
                state,
                Some(MicrovmState::Terminated | MicrovmState::Terminating)
            ),
            "{state:?}"
        );
    }

    // An unrestricting policy launches as always, and the agent answers
    // UpdateNetwork FAILED_PRECONDITION: `Unimplemented`.
    let sbx = sdk_support::builder(&emu)
        .network(NetworkPolicy::new().allow_out(["10.0.0.1"]))
        .create()
        .await
        .expect("nothing to enforce");
    let state = sbx.network().get().await.expect("get_network");
    assert_eq!(state.enforcement, EgressEnforcement::None);
    assert_eq!(state.local_proxy_port, None);
    let err = sbx
        .network()
        .update(NetworkPolicy::new().deny_internet())
        .await
        .expect_err("no enforcement here");
    assert_eq!(
        err.to_string(),
        "feature update_network is not available: the sandbox's agent cannot apply an egress policy to this sandbox (it was created without a restricting policy, or its image lacks CAP_NET_ADMIN); create the sandbox with a network policy; see docs/network.md"
    );
    assert!(include_str!("../../docs/network.md").contains(&err.to_string()));
    assert!(sbx.kill().await.expect("kill"));
}

/// Each limit: (argument, message), refused before any call (the builder
/// points at a closed port: any I/O would fail otherwise).
#[tokio::test]
async fn every_limit_is_refused_before_any_call_without_the_entry() {
    let secret_host = "secret-host.internal";
    let long = format!("{}.example", "a".repeat(250));
    let hosts: Vec<String> = (0..65).map(|i| format!("h{i}.example")).collect();
    let cases: Vec<(NetworkPolicy, &str, String)> = vec![
        (
            NetworkPolicy::new().allow_out(vec!["10.0.0.1".to_owned(); 257]),
            "allow_out",
            "invalid allow_out: allow_out has more than 256 entries; pass at most 256".into(),
        ),
        (
            NetworkPolicy::new().deny_out(["10.0.0.0/8", ""]),
            "deny_out",
            "invalid deny_out: entry 1 of deny_out is empty; pass an IP address, a CIDR or a hostname".into(),
        ),
        (
            NetworkPolicy::new().allow_out([format!("{secret_host}/8")]),
            "allow_out",
            "invalid allow_out: entry 0 of allow_out is not an IP address, a CIDR or a hostname; pass one of those (a hostname may start with *. and end with .)".into(),
        ),
        (
            NetworkPolicy::new().allow_out(["1.1.1.1".to_owned(), long.clone()]),
            "allow_out",
            "invalid allow_out: entry 1 of allow_out is a hostname longer than 253 characters; pass a shorter hostname".into(),
        ),
        (
            NetworkPolicy::new().deny_out([secret_host]),
            "deny_out",
            "invalid deny_out: entry 0 of deny_out is a hostname, and deny_out takes only IP addresses and CIDRs; deny 0.0.0.0/0 and allow the hostnames you need instead".into(),
        ),
        (
            NetworkPolicy::new().allow_out(hosts),
            "allow_out",
            "invalid allow_out: the policy has more than 64 hostname entries; pass at most 64, or use *. wildcards".into(),
        ),
        (
            NetworkPolicy::new().egress_proxy(EgressProxy::new(secret_host)),
            "egress_proxy",
            "invalid egress_proxy: the egress proxy address is empty or not host:port; pass host:port or [v6]:port".into(),
        ),
        (
            NetworkPolicy::new().egress_proxy(EgressProxy {
                address: format!("{secret_host}:3128"),
                username: None,
                password: Some("hunter2-password".into()),
            }),
            "egress_proxy",
            "invalid egress_proxy: the egress proxy has a password but no username; pass both or neither".into(),
        ),
        (
            NetworkPolicy::new().egress_proxy(
                EgressProxy::new(format!("{secret_host}:3128"))
                    .credentials("u".repeat(256), "hunter2-password"),
            ),
            "egress_proxy",
            "invalid egress_proxy: the egress proxy username must be 1 to 255 bytes (RFC 1929); pass a username of that length".into(),
        ),
        (
            NetworkPolicy::new().egress_proxy(
                EgressProxy::new("[::1]:3128").credentials("user", ""),
            ),
            "egress_proxy",
            "invalid egress_proxy: the egress proxy password must be 1 to 255 bytes (RFC 1929); pass a password of that length".into(),
        ),
    ];
    let closed = Sandbox::builder().aws(
        rayito::AwsOptions::new()
            .endpoint_url("http://127.0.0.1:9")
            .region("us-east-1")
            .static_credentials("AKIDEXAMPLE", "secret"),
    );
    const DOC: &str = include_str!("../../docs/network.md");
    for (policy, argument, message) in cases {
        assert!(
            DOC.contains(&format!("| `{argument}` | `{message}` |")),
            "docs/network.md lacks {message}"
        );
        assert!(policy.check().is_err());
        let debug = format!("{policy:?}");
        for hidden in [secret_host, "hunter2", "10.0.0", "1.1.1.1"] {
            assert!(!debug.contains(hidden), "{debug}");
        }
        let err = closed
            .clone()
            .network(policy.clone())
            .create()
            .await
            .expect_err("refused");
        let SandboxError::InvalidArgument { argument: got, .. } = &err else {
            panic!("not InvalidArgument: {err:?}");
        };
        assert_eq!(got.as_deref(), Some(argument));
        assert_eq!(err.to_string(), message);
        let wire = format!("{err:?}");
        for hidden in [secret_host, "hunter2", &long[..20]] {
            assert!(!err.to_string().contains(hidden), "{err}");
            assert!(!wire.contains(hidden), "{wire}");
        }
        let by_id = closed
            .client()
            .await
            .unwrap()
            .update_network_by_id("mvm-00000000000000000000000000", "dG9rZW4", policy)
            .await
            .expect_err("refused");
        assert_eq!(by_id.to_string(), message);
    }
    let proxy = EgressProxy::new("proxy.internal:3128").credentials("alice", "hunter2-password");
    let debug = format!("{proxy:?}");
    assert!(
        !debug.contains("proxy.internal") && !debug.contains("alice") && !debug.contains("hunter2"),
        "{debug}"
    );
}

/// A MicroVM made ahead (the local backend's warm spare) has its kernel
/// started before the sandbox is anyone's: with a restricting policy the
/// kernel is started again inside the sandbox's namespace, so that code
/// cells are bounded like commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_cells_of_a_warm_spare_are_bounded_too() {
    if !rustix::process::geteuid().is_root() {
        sdk_support::skip::skip("needs root (the agent enforces egress with a network namespace)");
        return;
    }
    let port = host_server().await;
    let emu = Emulator::start(EmulatorConfig {
        warm_spare: true,
        ..EmulatorConfig::default()
    })
    .await
    .expect("the emulator starts");
    for _ in 0..600 {
        if emu.warm_spare_ready() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let sbx = sdk_support::builder(&emu)
        .network(NetworkPolicy::new().allow_out(["127.0.0.1"]))
        .allow_internet_access(false)
        .create()
        .await
        .expect("a sandbox with a restricting policy");
    let cell = sbx
        .run_code(&format!(
            "import os, socket, urllib.request\n\
             try:\n    socket.create_connection(('127.0.0.1', {port}), 3).close(); direct = 'open'\n\
             except OSError:\n    direct = 'closed'\n\
             assert os.environ.pop('NO_PROXY') == os.environ.pop('no_proxy') == 'localhost,127.0.0.1,::1'\n\
             body = urllib.request.urlopen('http://127.0.0.1:{port}/', timeout=8).read().decode()\n\
             (direct, body, os.environ['HTTPS_PROXY'].startswith('http://127.0.0.1:'))"
        ))
        .await
        .expect("run_code");
    assert_eq!(cell.error, None, "{cell:?}");
    assert_eq!(cell.text(), Some("('closed', 'hello from the host', True)"));
    assert!(sbx.kill().await.expect("kill"));
}
