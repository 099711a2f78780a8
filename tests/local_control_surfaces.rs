//! Sandbox code cannot drive the local backend's control surfaces (issue
//! 22, section 1). Sandbox code shares the host's network, so a cell can
//! find every listening loopback port in `/proc/net/tcp`. This test runs
//! such a scan as guest code (python3 in a sandbox of the embedded local
//! backend) and, on every port, tries what an attacker would:
//!
//! - `GET /2025-09-09/microvms` with a forged SigV4 header (the emulator
//!   used to check its shape only, and answered 200);
//! - the same with a foreign `Host` (a page whose DNS name was rebound);
//! - `POST /_emulator/faults`, unsigned and forged (it needed nothing);
//! - `POST .../runtime/v1/validate` and `.../run` on every agent's hooks
//!   port (they needed nothing: a `/run` with the attacker's payload on the
//!   warm spare installed the attacker's token and locked out the next
//!   sandbox).
//!
//! The host side keeps the answers of the ports this test process owns (the
//! embedded emulator, its agents and proxies run in it), checks that the
//! scan reached the emulator and at least two hooks servers (the sandbox's
//! own and the warm spare's), and that every attempt there was refused.
//! Then a new sandbox (the warm spare) still works for its real owner.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rayito::Sandbox;
use serde_json::Value;

/// The guest's scan: one JSON line, `{port: {probe: [status, errortype, body]}}`.
const PROBE: &str = r#"
import json, time, urllib.request, urllib.error

def listening():
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            local, state = f[1], f[3]
            addr, port = local.split(":")
            loopback = addr.endswith("0100007F") or addr == "00000000000000000000000001000000"
            if state == "0A" and (loopback or set(addr) == {"0"}):
                ports.add(int(port, 16))
    return sorted(ports)

def forged_auth():
    date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return date, ("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/" + date[:8] +
                  "/us-east-1/lambda/aws4_request, SignedHeaders=host;x-amz-date, Signature=" + "ab" * 32)

def call(port, method, path, body=None, headers=None):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=body, method=method)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=3) as r:
            return [r.status, r.headers.get("x-amzn-errortype"), r.read(200).decode("utf-8", "replace")]
    except urllib.error.HTTPError as e:
        return [e.code, e.headers.get("x-amzn-errortype"), e.read(200).decode("utf-8", "replace")]
    except Exception as e:
        return [0, None, type(e).__name__]

attacker_payload = json.dumps({"v": 1, "token_sha256": "00" * 32, "user": "user", "workdir": "/home/user"})
run_body = json.dumps({"microvmId": "microvm-attacker", "runHookPayload": attacker_payload}).encode()
hooks = "/aws/lambda-microvms/runtime/v1/"

def probes(port):
    date, auth = forged_auth()
    forged = {"Authorization": auth, "X-Amz-Date": date}
    return {
        "list_forged": (port, "GET", "/2025-09-09/microvms", None, forged),
        "list_foreign_host": (port, "GET", "/2025-09-09/microvms", None,
                              dict(forged, Host="rebound.example:%d" % port)),
        "faults_unsigned": (port, "POST", "/_emulator/faults", b'{"fault": "clear"}',
                            {"Content-Type": "application/json"}),
        "faults_forged": (port, "POST", "/_emulator/faults", b'{"fault": "clear"}',
                          dict(forged, **{"Content-Type": "application/json"})),
        "hook_validate": (port, "POST", hooks + "validate", b"", None),
        "hook_run": (port, "POST", hooks + "run", run_body, {"Content-Type": "application/json"}),
    }

# Every port of the host is tried, other programs' too (some accept and
# never answer): all at once, so the scan takes a few timeouts, not one
# per call.
import concurrent.futures
out = {}
with concurrent.futures.ThreadPoolExecutor(max_workers=64) as pool:
    pending = {}
    for port in listening():
        out[port] = {}
        for name, args in probes(port).items():
            pending[pool.submit(call, *args)] = (port, name)
    for done, (port, name) in pending.items():
        out[port][name] = done.result()
print(json.dumps(out))
"#;

/// The loopback TCP ports this process listens on: the sockets in
/// `/proc/net/tcp{,6}` in state LISTEN whose inode is one of our fds.
fn own_listening_ports() -> BTreeSet<u16> {
    let mut inodes = BTreeSet::new();
    for entry in std::fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .flatten()
    {
        if let Ok(target) = std::fs::read_link(entry.path()) {
            let target = target.to_string_lossy().into_owned();
            if let Some(inode) = target
                .strip_prefix("socket:[")
                .and_then(|s| s.strip_suffix(']'))
            {
                inodes.insert(inode.to_owned());
            }
        }
    }
    let mut ports = BTreeSet::new();
    for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 9 && f[3] == "0A" && inodes.contains(f[9]) {
                let port = f[1].rsplit(':').next().unwrap_or("0");
                if let Ok(port) = u16::from_str_radix(port, 16) {
                    ports.insert(port);
                }
            }
        }
    }
    ports
}

/// Runs the scan in `sbx`; the answers of the ports this process owns.
async fn scan(sbx: &Sandbox) -> BTreeMap<u16, Value> {
    // Other tests' servers on this host are scanned too: a bound of the
    // test's own, not the default minute.
    let out = sbx
        .commands()
        .run_with(
            "python3 /home/user/probe.py",
            rayito::CommandOptions::new().timeout(Duration::from_secs(300)),
        )
        .await
        .expect("the probe runs");
    assert_eq!(out.exit_code, 0, "{}", out.stderr);
    let all: BTreeMap<String, Value> =
        serde_json::from_str(out.stdout.trim()).expect("the probe's JSON");
    let own = own_listening_ports();
    all.into_iter()
        .filter_map(|(port, answers)| {
            let port: u16 = port.parse().ok()?;
            own.contains(&port).then_some((port, answers))
        })
        .collect()
}

/// Whether a port answered `/validate` as an agent's hooks server does
/// (`forbidden` without the emulator's token; `ok` when hooks were open).
fn is_hooks_server(answers: &Value) -> bool {
    answers["hook_validate"][2]
        .as_str()
        .is_some_and(|body| body == "forbidden" || body == "ok")
}

fn status(answers: &Value, probe: &str) -> u64 {
    answers[probe][0].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_code_cannot_drive_the_emulator_or_the_agents_hooks() {
    if std::process::Command::new("python3")
        .arg("-c")
        .arg("import urllib.request")
        .status()
        .map_or(true, |s| !s.success())
    {
        eprintln!(
            "SKIPPED: guest_code_cannot_drive_the_emulator_or_the_agents_hooks: no python3 on this host"
        );
        assert!(
            std::env::var_os("RAYITO_TEST_STRICT").is_none(),
            "RAYITO_TEST_STRICT is set: a skip is a failure"
        );
        return;
    }
    let attacker = Sandbox::builder()
        .local()
        .create()
        .await
        .expect("create on the local backend");
    attacker
        .files()
        .write("/home/user/probe.py", PROBE)
        .await
        .expect("write the probe");

    // The warm spare is prepared in the background after the create that
    // took the first one: scan until its hooks server is among the ports.
    let by = Instant::now() + Duration::from_secs(90);
    let answers = loop {
        let answers = scan(&attacker).await;
        let hooks = answers.values().filter(|a| is_hooks_server(a)).count();
        if hooks >= 2 || Instant::now() > by {
            break answers;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };

    // Every attempt on every port of ours was refused.
    for (port, a) in &answers {
        for probe in [
            "list_forged",
            "list_foreign_host",
            "faults_unsigned",
            "faults_forged",
            "hook_validate",
            "hook_run",
        ] {
            let got = status(a, probe);
            assert!(
                !(200..300).contains(&got),
                "port {port}: {probe} was accepted: {}",
                a[probe]
            );
        }
    }
    // The scan reached the emulator (it answers with an AWS error type)...
    let emulator_ports: Vec<u16> = answers
        .iter()
        .filter(|(_, a)| a["list_forged"][1].is_string())
        .map(|(port, _)| *port)
        .collect();
    assert_eq!(emulator_ports.len(), 1, "{answers:#?}");
    let emulator = &answers[&emulator_ports[0]];
    // ...and two hooks servers at least (this sandbox's and the spare's).
    let hooks_ports: Vec<u16> = answers
        .iter()
        .filter(|(_, a)| is_hooks_server(a))
        .map(|(port, _)| *port)
        .collect();
    assert!(hooks_ports.len() >= 2, "{answers:#?}");

    // With AWS's answers on the emulator, and the hooks' own on the agents.
    assert_eq!(emulator["list_forged"][0], 403);
    assert_eq!(emulator["list_forged"][1], "UnrecognizedClientException");
    assert_eq!(emulator["list_foreign_host"][0], 403);
    assert_eq!(emulator["list_foreign_host"][1], "AccessDeniedException");
    assert_eq!(
        emulator["faults_unsigned"][1],
        "MissingAuthenticationTokenException"
    );
    assert_eq!(emulator["faults_forged"][1], "UnrecognizedClientException");
    for port in &hooks_ports {
        for probe in ["hook_validate", "hook_run"] {
            assert_eq!(
                answers[port][probe],
                serde_json::json!([403, null, "forbidden"]),
                "port {port}: {probe}"
            );
        }
    }

    // The next sandbox (the spare the guest tried to /run) is its owner's.
    let next = Sandbox::builder()
        .local()
        .create()
        .await
        .expect("the next create works");
    let out = next.commands().run("echo mine").await.expect("run");
    assert_eq!(out.stdout, "mine\n");
    assert!(next.kill().await.expect("kill"));
    assert!(attacker.kill().await.expect("kill"));
}
