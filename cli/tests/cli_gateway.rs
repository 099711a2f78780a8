//! `rayito sandbox create --gateway` and `rayito sandbox gateways` on the
//! local backend, as a user runs them: the secret in a moto Secrets
//! Manager (`rayito secret create`), the API a test HTTPS server with a
//! CA of its own that the daemon is told to trust
//! (`RAYITO_LOCAL_GATEWAY_ROOTS`, `RAYITO_LOCAL_GATEWAY_HOSTS`). Sandbox
//! code calls the gateway with curl: the header reaches the API, the
//! sandbox's environment and every output of the CLI never hold the
//! value, a path outside the rules is 403 and shows as the gateway's last
//! error. Refusals are pinned.

use std::io::Write as _;
use std::process::{Output, Stdio};

use rayito_emulator::TestUpstream;
use serde_json::Value;

use crate::moto;
use crate::session;

use moto::MotoServer;
use session::Session;

/// The API key: no output, environment or error may show it.
const VALUE: &str = "cli-gateway-canary-7c41";
const HOST: &str = "api.example.test";

/// A local session whose daemon trusts `upstream` and whose Secrets
/// Manager is `moto`.
fn session(moto: &MotoServer, upstream: &TestUpstream) -> Session {
    let s = Session::local();
    let roots = s.tmp.path().join("upstream-ca.pem");
    std::fs::write(&roots, upstream.ca_pem()).unwrap();
    s.env("RAYITO_LOCAL_GATEWAY_ROOTS", roots.display().to_string())
        .env(
            "RAYITO_LOCAL_GATEWAY_HOSTS",
            format!("{HOST}={}", upstream.addr()),
        )
        .env("AWS_ENDPOINT_URL_SECRETS_MANAGER", moto.endpoint_url())
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
}

/// Runs `args`, checking that the value never shows.
fn run(s: &Session, args: &[&str]) -> Output {
    let out = s.run(args);
    for stream in [&out.stdout, &out.stderr] {
        assert!(
            !String::from_utf8_lossy(stream).contains(VALUE),
            "the value leaked: {args:?}"
        );
    }
    out
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

#[test]
fn a_gateway_forwards_with_the_secret_the_sandbox_never_sees() {
    let Some(moto) = MotoServer::start() else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime
        .block_on(TestUpstream::start(HOST))
        .expect("the upstream");
    let s = session(&moto, &upstream);

    // The secret, through `rayito secret create` (stdin).
    let mut child = s
        .cmd(&["secret", "create", "gw/api-key"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(VALUE.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));

    let file = s.tmp.path().join("api.toml");
    std::fs::write(
        &file,
        format!(
            "upstream = \"https://{HOST}\"\nallow = [[\"GET\", \"/v1/*\"]]\nrate_per_minute = 60\n\n[headers]\nauthorization = \"gw/api-key\"\n"
        ),
    )
    .unwrap();
    let arg = format!("api={}", file.display());
    let created = json(&run(
        &s,
        &["--output", "json", "sandbox", "create", "--gateway", &arg],
    ));
    let id = created["sandbox_id"].as_str().expect("an id").to_owned();
    let gateway = &created["gateways"][0];
    assert_eq!(gateway["name"], "api", "{created}");
    let port = gateway["port"].as_u64().expect("a port");
    assert!(port > 0, "{created}");
    assert_eq!(gateway["url"], format!("http://127.0.0.1:{port}"));
    assert_eq!(gateway["last_error_class"], Value::Null);

    // Sandbox code calls it: the upstream gets the header, the sandbox
    // gets the answer; its environment never has the value.
    let url = format!("http://127.0.0.1:{port}");
    let out = run(
        &s,
        &[
            "sandbox",
            "exec",
            &id,
            "--",
            &format!(
                "curl -s -o /dev/null -w '%{{http_code}} ' {url}/v1/models; curl -s -o /dev/null -w '%{{http_code}} ' {url}/v2/other; env"
            ),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("200 403 "), "{stdout}");
    let seen = upstream.requests();
    assert_eq!(
        seen.len(),
        1,
        "the 403 never reached the upstream: {seen:?}"
    );
    assert_eq!(seen[0].target, "/v1/models");
    assert_eq!(seen[0].header("authorization"), vec![VALUE]);

    // `sandbox gateways`: JSON and text, the 403's class kept.
    let listed = json(&run(&s, &["--output", "json", "sandbox", "gateways", &id]));
    assert_eq!(listed["sandbox_id"], id.as_str());
    assert_eq!(listed["gateways"][0]["name"], "api");
    assert_eq!(listed["gateways"][0]["port"], port);
    assert_eq!(listed["gateways"][0]["last_error_class"], "not_allowed");
    let text = s.ok(&["sandbox", "gateways", &id]);
    assert_eq!(
        text,
        format!("api\t{url}\tport {port}\tlast error: not_allowed\n")
    );

    // The same gateway as JSON on the command line, beside a second name.
    let body = format!(
        "{{\"upstream\": \"https://{HOST}\", \"headers\": {{\"x-api-key\": \"gw/api-key\"}}, \"allow\": [[\"POST\", \"/v1/chat\"]]}}"
    );
    let out = run(
        &s,
        &[
            "sandbox",
            "create",
            "--gateway",
            &arg,
            "--gateway-json",
            &format!("chat={body}"),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let second = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let notes = stderr(&out);
    assert!(notes.contains("gateway api: http://127.0.0.1:"), "{notes}");
    assert!(notes.contains("gateway chat: http://127.0.0.1:"), "{notes}");
    let text = s.ok(&["sandbox", "gateways", &second]);
    assert_eq!(text.lines().count(), 2, "{text}");

    // A sandbox without gateways says so on stderr, nothing on stdout.
    let plain = s.ok(&["sandbox", "create"]);
    let out = run(&s, &["sandbox", "gateways", plain.trim()]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    assert_eq!(
        stderr(&out),
        format!("sandbox {} has no secret gateway\n", plain.trim())
    );
    s.ok(&["sandbox", "kill", "--all"]);
}

#[test]
fn bad_gateway_arguments_are_refused_before_any_sandbox() {
    let s = Session::local();
    let out = s.run(&["sandbox", "create", "--gateway", "api"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "invalid value 'api' for '--gateway <NAME=FILE.toml>': expected NAME=FILE.toml"
        ),
        "{}",
        stderr(&out)
    );

    let file = s.tmp.path().join("bad.toml");
    std::fs::write(&file, "allow = [[\"GET\", \"/\"]]\n[headers]\nx = \"k\"\n").unwrap();
    let out = s.run(&[
        "sandbox",
        "create",
        "--gateway",
        &format!("api={}", file.display()),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).lines().next().unwrap(),
        format!(
            "error: invalid gateway: gateway api: {} is not a secret gateway (line 1, column 1): missing field `upstream`",
            file.display()
        )
    );

    std::fs::write(
        &file,
        "upstream = \"http://api.example.test\"\nallow = [[\"GET\", \"/\"]]\n[headers]\nx = \"k\"\n",
    )
    .unwrap();
    let out = s.run(&[
        "--output",
        "json",
        "sandbox",
        "create",
        "--gateway",
        &format!("api={}", file.display()),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let error: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(error["error"]["kind"], "invalid_argument", "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid upstream: "),
        "{error}"
    );

    let out = s.run(&[
        "sandbox",
        "create",
        "--gateway-json",
        "api={\"upstream\": \"https://a.test\", \"headers\": {}, \"allow\": [], \"extra\": 1}",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).lines().next().unwrap(),
        "error: invalid gateway: gateway api: --gateway-json is not a secret gateway (line 1, column 66): unknown field `extra`, expected one of `upstream`, `headers`, `allow`, `rate_per_minute`"
    );
    // Nothing was launched: no token in the cache.
    assert!(
        std::fs::read_dir(s.cache.path().join("tokens"))
            .map(|d| d.count() == 0)
            .unwrap_or(true)
    );
}
