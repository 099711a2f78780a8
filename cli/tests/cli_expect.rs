//! What people expect of a sandbox CLI (docker, e2b, modal, fly), tried
//! as a new user would, the binary run as a child process on the local
//! backend: `sandbox host` and `set-timeout`, the id from
//! `RAYITO_SANDBOX_ID` or a unique prefix, `kill` of several or all and
//! `prune`, readable `list`/`info`/`metrics`, `create --env` and
//! `run-code` from stdin or a file with a timeout.

use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use crate::session;
use session::Session;

/// Far above what anything here needs on a loaded 2-core machine; only a
/// hang reaches it.
const PATIENCE: Duration = Duration::from_secs(60);

fn create(s: &Session, extra: &[&str]) -> String {
    let mut args = vec!["sandbox", "create"];
    args.extend_from_slice(extra);
    s.ok(&args).trim().to_owned()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A port nobody listens on right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A plain HTTP/1.1 GET of `url` with `headers`; the raw answer ("" when
/// nothing answers yet).
fn get(url: &str, headers: &[(String, String)]) -> String {
    let authority = url.strip_prefix("http://").expect("a local URL");
    let Ok(mut stream) = std::net::TcpStream::connect(authority) else {
        return String::new();
    };
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut request =
        format!("GET /index.html HTTP/1.1\r\nhost: {authority}\r\nconnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    text(&answer)
}

#[test]
fn host_prints_the_url_and_headers_that_reach_a_port() {
    let s = Session::local();
    let id = create(&s, &[]);
    s.ok(&[
        "sandbox",
        "exec",
        &id,
        "--",
        "mkdir -p /home/user/site && echo '<h1>from the sandbox</h1>' > /home/user/site/index.html",
    ]);
    let port = free_port().to_string();
    s.ok(&[
        "sandbox",
        "exec",
        "--detach",
        &id,
        "--",
        &format!("python3 -m http.server {port} --bind 127.0.0.1 --directory /home/user/site"),
    ]);

    // Text: the URL alone, then the headers with --show-headers.
    let url = s.ok(&["sandbox", "host", &id, &port]);
    let url = url.trim_end();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let shown = s.ok(&["sandbox", "host", &id, &port, "--show-headers"]);
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), 3, "{shown}");
    assert_eq!(lines[0], url);
    assert_eq!(lines[1], format!("x-aws-proxy-port: {port}"));
    assert!(lines[2].starts_with("x-aws-proxy-auth: "), "{shown}");

    // JSON: the same, and the headers reach the server.
    let doc = s.json(&[
        "--output",
        "json",
        "sandbox",
        "host",
        &id,
        &port,
        "--show-headers",
    ]);
    assert_eq!(doc["url"], url);
    assert_eq!(doc["port"].as_u64().unwrap().to_string(), port);
    let headers: Vec<(String, String)> = doc["headers"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(headers.len(), 2, "{doc}");
    let started = Instant::now();
    let answer = loop {
        let answer = get(url, &headers);
        if answer.contains(" 200 ") || started.elapsed() > PATIENCE {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(answer.ends_with("<h1>from the sandbox</h1>\n"), "{answer}");
    // Without them the proxy refuses.
    assert!(get(url, &[]).starts_with("HTTP/1.1 403"));

    // Port 9000 (the agent's hooks) and 0 are refused.
    let out = s.run(&["sandbox", "host", &id, "9000"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("port 9000 cannot be opened"),
        "{}",
        text(&out.stderr)
    );
    let out = s.run(&["sandbox", "host", &id, "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn set_timeout_moves_the_end_of_a_sandbox_created_with_a_max_lifetime() {
    let s = Session::local();
    // Without --max-lifetime the timeout stays where it is: said in flags.
    let fixed = create(&s, &[]);
    let out = s.run(&["sandbox", "set-timeout", &fixed, "10m"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: this sandbox's timeout cannot be moved: it was created without --max-lifetime; create it with `rayito sandbox create --max-lifetime DURATION` to make its timeout movable (up to that cap)\n"
    );
    // A duration that is none: a usage error naming the forms.
    let out = s.run(&["sandbox", "set-timeout", &fixed, "soon"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("expected a duration: seconds (300) or a number with a unit, s, m or h (90s, 10m, 2h, 1h30m)"),
        "{}",
        text(&out.stderr)
    );

    let id = create(&s, &["--timeout", "600", "--max-lifetime", "15m"]);
    let said = s.ok(&["sandbox", "set-timeout", &id, "13m"]);
    assert!(
        said.starts_with(&format!("{id} now ends in 13m (at 20")),
        "{said}"
    );
    let doc = s.json(&["--output", "json", "sandbox", "set-timeout", &id, "800"]);
    assert_eq!(doc["timeout_secs"], 800);
    assert!(doc["ends_at"].as_u64().is_some(), "{doc}");
    // Beyond the cap (15m less 60 s): the SDK's refusal.
    let out = s.run(&["sandbox", "set-timeout", &id, "1h"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    // Shortened: a long command meets the new end.
    s.ok(&["sandbox", "set-timeout", &id, "2s"]);
    let out = s.run(&["sandbox", "exec", &id, "--", "sleep 600"]);
    assert_eq!(out.status.code(), Some(125), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("error: the sandbox reached its timeout"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_id_comes_from_the_environment_or_a_unique_start_of_it() {
    let s = Session::local();
    let a = create(&s, &[]);
    let b = create(&s, &[]);

    // Omitted: RAYITO_SANDBOX_ID, what `sandbox connect` exports.
    let exports = s.ok(&["sandbox", "connect", &a]);
    assert!(
        exports.contains(&format!("export RAYITO_SANDBOX_ID={a}\n")),
        "{exports}"
    );
    let out = s
        .cmd(&["sandbox", "exec", "--", "echo from the environment"])
        .env("RAYITO_SANDBOX_ID", &a)
        .output()
        .unwrap();
    assert_eq!(
        text(&out.stdout),
        "from the environment\n",
        "{}",
        text(&out.stderr)
    );
    let out = s
        .cmd(&["--output", "json", "sandbox", "info"])
        .env("RAYITO_SANDBOX_ID", &b)
        .output()
        .unwrap();
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["sandbox_id"], b.as_str());
    // Neither: a usage error (exit 2; exec's own failures are 125).
    const NO_ID: &str = "error: no sandbox id: pass one, or set RAYITO_SANDBOX_ID (eval \"$(rayito sandbox connect ID)\" does)\n";
    let out = s
        .cmd(&["sandbox", "info"])
        .env_remove("RAYITO_SANDBOX_ID")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(text(&out.stderr), NO_ID);
    let out = s
        .cmd(&["sandbox", "exec", "--", "true"])
        .env_remove("RAYITO_SANDBOX_ID")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert_eq!(text(&out.stderr), NO_ID);

    // A unique start, with or without `microvm-`, names the sandbox.
    let uuid_a = a.strip_prefix("microvm-").unwrap();
    let uuid_b = b.strip_prefix("microvm-").unwrap();
    let common = uuid_a
        .chars()
        .zip(uuid_b.chars())
        .take_while(|(x, y)| x == y)
        .count();
    let short = &uuid_a[..=common];
    let out = s.ok(&["sandbox", "exec", short, "--", "echo short"]);
    assert_eq!(out, "short\n");
    let info = s.json(&[
        "--output",
        "json",
        "sandbox",
        "info",
        &format!("microvm-{short}"),
    ]);
    assert_eq!(info["sandbox_id"], a.as_str());

    // Ambiguous: the candidates, sorted.
    let (first, second) = if a < b { (&a, &b) } else { (&b, &a) };
    let out = s.run(&["sandbox", "info", "microvm-"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: the id prefix microvm- is ambiguous: 2 sandboxes of this cache start with it: {first}, {second}; give more of the id\n"
        )
    );
    // Unknown: what the cache holds.
    let unknown = "0123456789abcdef"
        .chars()
        .find(|c| !uuid_a.starts_with(*c) && !uuid_b.starts_with(*c))
        .unwrap()
        .to_string();
    let out = s.run(&["--output", "json", "sandbox", "metrics", &unknown]);
    assert_eq!(out.status.code(), Some(2));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["kind"], "usage");
    assert_eq!(
        doc["error"]["message"],
        format!(
            "no sandbox of this cache has an id starting with {unknown}; its sandboxes: {first}, {second}"
        )
    );

    // At most five candidates are listed.
    let tokens = s.cache.path().join("tokens");
    for n in 0..5 {
        std::fs::write(
            tokens.join(format!(
                "microvm-{unknown}{n}000000-0000-4000-8000-000000000000"
            )),
            "not a real token",
        )
        .unwrap();
    }
    let out = s.run(&["sandbox", "exec", "microvm-", "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    let said = text(&out.stderr);
    assert!(
        said.starts_with(
            "error: the id prefix microvm- is ambiguous: 7 sandboxes of this cache start with it: "
        ) && said.ends_with(" and 2 more; give more of the id\n"),
        "{said}"
    );
}

#[test]
fn a_prefix_needs_a_cache_that_holds_sandboxes() {
    let s = Session::local();
    let out = s.run(&["sandbox", "info", "3f2a"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: no sandbox of this cache ({}) has an id starting with 3f2a: it holds none; pass a whole id\n",
            s.cache.path().display()
        )
    );
}

/// The ids whose tokens the session's cache keeps, sorted.
fn cached(s: &Session) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(s.cache.path().join("tokens"))
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                // Beside a local sandbox's token: its daemon's pid.
                .filter(|name| !name.ends_with(".local"))
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

#[test]
fn kill_takes_several_ids_or_all_of_the_cache_by_metadata() {
    let s = Session::local();
    let a = create(&s, &["--metadata", "team=x"]);
    let b = create(&s, &["--metadata", "team=x"]);
    let c = create(&s, &["--metadata", "team=y"]);
    let d = create(&s, &[]);

    // Usage: ids and --all exclude each other; --metadata needs --all.
    for args in [
        &["sandbox", "kill", &a, "--all"][..],
        &["sandbox", "kill", "--metadata", "team=x"],
    ] {
        assert_eq!(s.run(args).status.code(), Some(2), "{args:?}");
    }

    // Several: one line each, their tokens forgotten.
    let out = s.ok(&["sandbox", "kill", &a, &b]);
    assert_eq!(out, format!("killed {a}\nkilled {b}\n"));
    assert_eq!(cached(&s), sorted(vec![c.clone(), d.clone()]));
    // One already gone among several (its id given whole).
    let out = s.ok(&["sandbox", "kill", &a, &d]);
    assert_eq!(out, format!("{a} was already gone\nkilled {d}\n"));

    // --all --metadata: only this cache's sandboxes with the metadata.
    let e = create(&s, &["--metadata", "team=y"]);
    let f = create(&s, &[]);
    let doc = s.json(&[
        "--output",
        "json",
        "sandbox",
        "kill",
        "--all",
        "--metadata",
        "team=y",
    ]);
    let mut killed: Vec<String> = doc
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            assert_eq!(row["killed"], true, "{row}");
            row["sandbox_id"].as_str().unwrap().to_owned()
        })
        .collect();
    killed.sort();
    assert_eq!(killed, sorted(vec![c, e]));
    assert_eq!(cached(&s), vec![f.clone()]);
    // --all: the rest; then nothing is left to kill.
    assert_eq!(s.ok(&["sandbox", "kill", "--all"]), format!("killed {f}\n"));
    assert!(cached(&s).is_empty());
    let out = s.run(&["sandbox", "kill", "--all"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), "");
    assert_eq!(text(&out.stderr), "no sandbox of this cache to kill\n");
    assert_eq!(
        s.json(&["--output", "json", "-q", "sandbox", "kill", "--all"]),
        serde_json::json!([])
    );
}

#[test]
fn prune_forgets_the_tokens_of_ended_sandboxes_only() {
    let s = Session::local();
    let alive = create(&s, &[]);
    let tokens = s.cache.path().join("tokens");
    let daemon_pid = std::fs::read_to_string(tokens.join(format!("{alive}.local"))).unwrap();
    // A token of the running daemon whose sandbox it does not know, and
    // one of a daemon that stopped since (pid 1 is never ours).
    let gone = "microvm-00000000-0000-4000-8000-000000000000";
    let stale = "microvm-00000000-0000-4000-8000-000000000001";
    for (id, pid) in [(gone, daemon_pid.as_str()), (stale, "1")] {
        std::fs::write(tokens.join(id), "old").unwrap();
        std::fs::write(tokens.join(format!("{id}.local")), pid).unwrap();
    }

    let out = s.run(&["sandbox", "prune", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!(
            "would forget {gone} (not found)\nwould forget {stale} (its local backend stopped)\n"
        )
    );
    assert_eq!(
        text(&out.stderr),
        "2 token(s) to forget, 1 kept (sandboxes still there)\n"
    );
    assert_eq!(cached(&s).len(), 3);

    let doc = s.json(&["--output", "json", "sandbox", "prune"]);
    assert_eq!(
        doc,
        serde_json::json!({
            "forgot": [
                { "sandbox_id": gone, "reason": "not found" },
                { "sandbox_id": stale, "reason": "its local backend stopped" },
            ],
            "kept": [alive],
            "dry_run": false,
        })
    );
    assert_eq!(cached(&s), vec![alive.clone()]);
    // The one left still works.
    assert_eq!(
        s.ok(&["sandbox", "exec", &alive, "--", "echo still"]),
        "still\n"
    );
}

/// Whether `text` starts with an RFC 3339 UTC time to the second.
fn starts_with_rfc3339(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() >= 20
        && text[..20].char_indices().all(|(i, c)| match i {
            4 | 7 => c == '-',
            10 => c == 'T',
            13 | 16 => c == ':',
            19 => c == 'Z',
            _ => c.is_ascii_digit(),
        })
}

#[test]
fn list_info_and_metrics_read_as_text_and_keep_their_json() {
    let s = Session::local();
    let id = create(&s, &["--metadata", "owner=me"]);

    // list: a header, then a row with state, age, template name and
    // metadata (read when --metadata asks each agent).
    let listed = s.ok(&["sandbox", "list", "--metadata", "owner=me"]);
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 2, "{listed}");
    let header: Vec<&str> = lines[0]
        .split("  ")
        .filter(|c| !c.is_empty())
        .map(str::trim)
        .collect();
    assert_eq!(
        header,
        ["SANDBOX ID", "STATE", "AGE", "TEMPLATE", "METADATA"],
        "{listed}"
    );
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(row[0], id);
    assert_eq!(row[1], "RUNNING");
    assert!(row[2].ends_with('s') || row[2].ends_with('m'), "{listed}");
    assert_eq!(&row[3..], ["rayito-base", "owner=me"], "{listed}");
    // Without --metadata the metadata is not read: `-`.
    let plain = s.ok(&["sandbox", "list"]);
    assert!(
        plain.lines().nth(1).unwrap().ends_with("rayito-base  -"),
        "{plain}"
    );
    let json = s.json(&["--output", "json", "sandbox", "list"]);
    assert!(json[0]["started_at"].is_u64(), "{json}");

    // info: dates in RFC 3339 with their age, the lifetime as a duration.
    let info = s.ok(&["sandbox", "info", &id]);
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("no {name} in {info}"))
            .to_owned()
    };
    let started = field("started_at");
    assert!(
        starts_with_rfc3339(&started) && started.ends_with(" ago)"),
        "{info}"
    );
    assert_eq!(field("terminated_at"), "-");
    assert_eq!(field("max_duration"), "1h00m (3600 s)");
    assert_eq!(field("state"), "RUNNING");
    let json = s.json(&["--output", "json", "sandbox", "info", &id]);
    assert!(json["started_at"].is_u64(), "{json}");

    // metrics: one line per sample, with units.
    let out = s.ok(&["sandbox", "metrics", &id]);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(starts_with_rfc3339(&out), "{out}");
    for part in ["  cpu ", " CPU", "  mem ", "iB / ", "  disk "] {
        assert!(out.contains(part), "{part:?} in {out}");
    }
    let json = s.json(&["--output", "json", "sandbox", "metrics", &id]);
    assert!(json["mem_used_bytes"].is_u64(), "{json}");
}

#[test]
fn create_env_reaches_every_command_and_run_code_reads_stdin_or_a_file() {
    let s = Session::local();
    let out = s
        .cmd(&[
            "sandbox",
            "create",
            "--env",
            "GREETING=hello there",
            "-e",
            "RAYITO_TEST_FROM_HOST",
        ])
        .env("RAYITO_TEST_FROM_HOST", "from the host")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let id = text(&out.stdout).trim().to_owned();
    let said = s.ok(&[
        "sandbox",
        "exec",
        &id,
        "--",
        "printf '%s|%s' \"$GREETING\" \"$RAYITO_TEST_FROM_HOST\"",
    ]);
    assert_eq!(said, "hello there|from the host");

    // The cell from stdin (`-`), seeing the sandbox's environment.
    let mut child = s
        .cmd(&["sandbox", "run-code", &id, "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"import os\nprint(os.environ['GREETING'])\n6 * 7\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        text(&out.stdout),
        "hello there\n42\n",
        "{}",
        text(&out.stderr)
    );

    // The cell from a file; a file that cannot be read is named.
    let file = s.tmp.path().join("cell.py");
    std::fs::write(&file, "total = sum(range(10))\nprint(total)\n").unwrap();
    assert_eq!(
        s.ok(&["sandbox", "run-code", &id, "--file", file.to_str().unwrap()]),
        "45\n"
    );
    let missing = s.tmp.path().join("missing.py");
    let out = s.run(&[
        "sandbox",
        "run-code",
        &id,
        "--file",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: cannot read {}: No such file or directory (os error 2)\n",
            missing.display()
        )
    );
    // Neither code nor --file, or both: usage errors.
    assert_eq!(s.run(&["sandbox", "run-code", &id]).status.code(), Some(2));
    assert_eq!(
        s.run(&[
            "sandbox",
            "run-code",
            &id,
            "1",
            "--file",
            file.to_str().unwrap()
        ])
        .status
        .code(),
        Some(2)
    );

    // --timeout interrupts a cell that runs past it.
    let out = s.run(&[
        "--output",
        "json",
        "sandbox",
        "run-code",
        &id,
        "--timeout",
        "1s",
        "import time\ntime.sleep(120)",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["error"]["name"], "ExecutionTimeout", "{doc}");
    assert_eq!(
        doc["error"]["value"],
        "execution did not finish within its timeout of 1,000 ms"
    );
}

#[test]
fn create_cwd_is_where_commands_start_unless_exec_gives_its_own() {
    let s = Session::local();
    let id = create(&s, &["--cwd", "/tmp"]);
    assert_eq!(s.ok(&["sandbox", "exec", &id, "--", "pwd"]), "/tmp\n");
    assert_eq!(
        s.ok(&["sandbox", "exec", &id, "--cwd", "/home/user", "--", "pwd"]),
        "/home/user\n"
    );
    let out = s.run(&["sandbox", "create", "--cwd", "tmp"]);
    assert_eq!(
        text(&out.stderr),
        "error: invalid workdir: a working directory is an absolute path (starting with /) of at most 4,096 bytes without control characters\n\
         kind: invalid_argument (a value was refused, by the SDK before any call, by the agent or by AWS)\n"
    );
    assert!(!out.status.success());
}
