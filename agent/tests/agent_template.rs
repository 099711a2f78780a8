//! Templates: the agent reads the image's `template.json` and
//! `template-env.json`, runs the start command as a managed process, gates
//! `/ready` on the ready command, and gives the image's environment to
//! every command, terminal and code cell. Real processes throughout: the
//! start command is a Python HTTP server, the ready command bash's
//! `/dev/tcp` port check the template builder writes.

use crate::support;

use std::path::Path;
use std::time::{Duration, Instant};

use rayito_agent::AgentConfig;
use rayito_agent::pb;
use rayito_agent::template::{READY_WAITING, TEMPLATE_ENV_FILE, TEMPLATE_FILE, TEMPLATE_START_TAG};
use serde_json::json;
use support::{TestAgent, bash, collect_events, next_event, outcome, payload, python_stdout};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A port nobody listens on now (the OS picks it).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// A template directory holding `template.json` (if given) and
/// `template-env.json` with `envs` (if given), as the builder writes them.
fn template_dir(
    start: Option<serde_json::Value>,
    envs: Option<serde_json::Value>,
) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    if let Some(start) = start {
        let mut spec = json!({
            "version": "rayito.template/1",
            "ready_cmd": null,
            "user": "1000",
            "workdir": null,
            "envs": {},
            "ready_poll": null,
        });
        spec.as_object_mut()
            .unwrap()
            .extend(start.as_object().unwrap().clone());
        write(dir.path(), TEMPLATE_FILE, &format!("{spec:#}\n"));
    }
    if let Some(envs) = envs {
        let file = json!({"envs": envs, "version": "rayito.template-env/1"});
        write(dir.path(), TEMPLATE_ENV_FILE, &format!("{file:#}\n"));
    }
    dir
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("write a template file");
}

async fn start_agent(dir: &Path) -> TestAgent {
    TestAgent::start_config(AgentConfig {
        template_dir: Some(dir.to_path_buf()),
        ..AgentConfig::default()
    })
    .await
}

async fn ready(t: &TestAgent) -> (u16, String) {
    t.hook("ready", None).await
}

/// Posts `/ready` every 100 ms until it answers something else than 503.
async fn ready_settled(t: &TestAgent, within: Duration) -> (u16, String) {
    let deadline = Instant::now() + within;
    loop {
        let answer = ready(t).await;
        if answer.0 != 503 {
            return answer;
        }
        assert!(
            Instant::now() < deadline,
            "/ready still 503 after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn health(t: &TestAgent) -> pb::HealthResponse {
    t.health()
        .health(pb::HealthRequest {})
        .await
        .expect("Health")
        .into_inner()
}

/// One HTTP/1.0 GET of `/` on the port; the status line.
async fn http_status_line(port: u16) -> String {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("the start command's server accepts");
    stream
        .write_all(b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("the server answers within 10 s")
        .unwrap();
    String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_start_command_runs_as_a_listed_process_and_gates_ready() {
    let port = free_port();
    let dir = template_dir(
        Some(json!({
            // The sleep keeps the port closed long enough for a first 503.
            "start_cmd": format!(
                "echo started $IMAGE_VAR $START_VAR; sleep 2; \
                 exec python3 -m http.server {port} --bind 127.0.0.1"
            ),
            "ready_cmd": format!("cat < /dev/null > /dev/tcp/127.0.0.1/{port}"),
            "workdir": "/tmp",
            "envs": {"START_VAR": "from-start"},
            "ready_poll": {"interval_seconds": 0.5, "timeout_seconds": 30},
        })),
        Some(json!({"IMAGE_VAR": "from-image"})),
    );
    let t = start_agent(dir.path()).await;

    assert_eq!(ready(&t).await, (503, READY_WAITING.to_owned()));
    let h = health(&t).await;
    assert!(
        !h.agent_ready,
        "Health is not ready while the ready check runs"
    );
    assert!(h.features.expect("features").template_start);

    assert_eq!(
        ready_settled(&t, Duration::from_secs(30)).await,
        (200, "ok".to_owned())
    );
    assert!(health(&t).await.agent_ready);
    assert_eq!(http_status_line(port).await, "HTTP/1.0 200 OK");
    // Validate is not gated by the template (the spec gates `/ready` only).
    assert_eq!(t.hook("validate", None).await, (200, "ok".to_owned()));

    let (status, body) = t.run(&payload(json!({}))).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    let listed = t
        .process()
        .list(pb::ListRequest {})
        .await
        .expect("List")
        .into_inner()
        .processes;
    let start: Vec<_> = listed
        .iter()
        .filter(|p| p.tag.as_deref() == Some(TEMPLATE_START_TAG))
        .collect();
    assert_eq!(start.len(), 1, "{listed:?}");
    let config = start[0].config.clone().expect("config");
    assert_eq!(config.cwd.as_deref(), Some("/tmp"));
    assert_eq!(config.args.first().map(String::as_str), Some("-c"));

    // Its output is kept like any process's: Connect replays it.
    let mut replay = t
        .process()
        .connect(pb::ConnectRequest {
            pid: start[0].pid,
            from_seq: 1,
        })
        .await
        .expect("Connect")
        .into_inner();
    assert!(matches!(
        next_event(&mut replay).await,
        pb::process_event::Event::Start(_)
    ));
    match next_event(&mut replay).await {
        pb::process_event::Event::Data(d) => assert_eq!(
            d.output,
            Some(pb::data_event::Output::Stdout(
                b"started from-image from-start\n".to_vec()
            ))
        ),
        other => panic!("expected the start command's first line, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_command_that_never_passes_fails_ready_with_the_reason() {
    for (start_cmd, what_became_of_it) in [
        ("exit 3", "the start command exited with code 3"),
        ("sleep 60", "the start command is still running"),
    ] {
        let dir = template_dir(
            Some(json!({
                "start_cmd": start_cmd,
                "ready_cmd": "false",
                "ready_poll": {"interval_seconds": 0.2, "timeout_seconds": 1},
            })),
            None,
        );
        let began = Instant::now();
        let t = start_agent(dir.path()).await;
        assert_eq!(ready(&t).await, (503, READY_WAITING.to_owned()));
        let settled = ready_settled(&t, Duration::from_secs(20)).await;
        assert!(
            began.elapsed() >= Duration::from_secs(1),
            "{:?}",
            began.elapsed()
        );
        assert_eq!(
            settled,
            (
                500,
                format!(
                    "the template's ready command did not exit 0 within 1 s; {what_became_of_it}"
                )
            )
        );
        // The sandbox stays usable; only the image build fails.
        assert!(health(&t).await.agent_ready);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_env_reaches_commands_terminals_and_code_cells() {
    let dir = template_dir(
        None,
        Some(json!({"IMAGE_VAR": "from-image", "OVERRIDE_ME": "image", "CALL_ME": "image"})),
    );
    let t = start_agent(dir.path()).await;
    assert_eq!(ready(&t).await, (200, "ok".to_owned()));
    let (status, body) = t
        .run(&payload(json!({"envs": {"OVERRIDE_ME": "payload"}})))
        .await;
    assert_eq!((status, body.as_str()), (200, "ok"));

    // A command: image < payload < call.
    let mut request = bash("echo \"$IMAGE_VAR $OVERRIDE_ME $CALL_ME\"");
    if let Some(process) = request.process.as_mut() {
        process.envs.insert("CALL_ME".to_owned(), "call".to_owned());
    }
    let stream = t
        .process()
        .start(request)
        .await
        .expect("Start")
        .into_inner();
    let o = outcome(&collect_events(stream).await);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "from-image payload call\n"
    );

    // A terminal.
    let mut pty = pb::pty_service_client::PtyServiceClient::with_interceptor(
        t.channel.clone(),
        t.interceptor(),
    );
    let mut stream = pty
        .create(pb::PtyStart {
            size: Some(pb::PtySize {
                cols: 120,
                rows: 24,
            }),
            shell: Some("/bin/bash".to_owned()),
            ..Default::default()
        })
        .await
        .expect("Create")
        .into_inner();
    let pid = match stream.message().await.unwrap().unwrap().message {
        Some(pb::pty_server_message::Message::Started(s)) => s.pid,
        other => panic!("expected PtyStarted, got {other:?}"),
    };
    pty.send_input(pb::SendInputRequest {
        pid,
        data: b"echo \"[$IMAGE_VAR/$OVERRIDE_ME]\"; exit\n".to_vec(),
    })
    .await
    .expect("SendInput");
    let mut screen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = tokio::time::timeout(left, stream.message())
            .await
            .expect("the terminal exits within 20 s")
            .expect("stream ok");
        match message.and_then(|m| m.message) {
            Some(pb::pty_server_message::Message::Data(d)) => screen.extend_from_slice(&d),
            Some(pb::pty_server_message::Message::Exited(_)) | None => break,
            Some(_) => {}
        }
    }
    let screen = String::from_utf8_lossy(&screen);
    assert!(screen.contains("[from-image/payload]"), "{screen:?}");

    // A code cell (the default Python kernel).
    let printed = python_stdout(
        &t,
        "import os; print(os.environ['IMAGE_VAR'], os.environ['OVERRIDE_ME'])",
    )
    .await;
    assert_eq!(printed, "from-image payload\n");
}

#[tokio::test]
async fn without_a_template_ready_answers_200_at_once() {
    let t = TestAgent::start_without_run().await;
    assert_eq!(ready(&t).await, (200, "ok".to_owned()));
    assert_eq!(t.hook("validate", None).await, (200, "ok".to_owned()));
    let h = health(&t).await;
    assert!(h.agent_ready);
    assert!(h.features.expect("features").template_start);

    let empty = tempfile::tempdir().expect("tempdir");
    let t = start_agent(empty.path()).await;
    assert_eq!(ready(&t).await, (200, "ok".to_owned()));
}

/// Writes a template directory's files.
type MakeFiles = fn(&Path);

#[tokio::test]
async fn a_refused_template_fails_ready_with_500_and_runs_nothing() {
    let cases: Vec<(MakeFiles, &str)> = vec![
        (
            |dir: &Path| write(dir, TEMPLATE_FILE, "{\"version\": \"rayito.template/1\","),
            "template.json is not valid JSON (line 1, column 32)",
        ),
        (
            |dir: &Path| {
                write(
                    dir,
                    TEMPLATE_FILE,
                    r#"{"version":"rayito.template/1","start_cmd":"touch /tmp/ran","user":"root"}"#,
                )
            },
            "template.json: the start command cannot run as root: the local agent runs \
             every process as the sandbox user; use user 1000",
        ),
        (
            |dir: &Path| {
                write(
                    dir,
                    TEMPLATE_FILE,
                    r#"{"version":"rayito.template/1","start_cmd":"touch /tmp/ran"}"#,
                );
                write(
                    dir,
                    TEMPLATE_ENV_FILE,
                    r#"{"envs":{"A":"secret"},"version":"1"}"#,
                );
            },
            "template-env.json: version must be \"rayito.template-env/1\"",
        ),
        (
            |dir: &Path| {
                std::os::unix::fs::symlink("/etc/hostname", dir.join(TEMPLATE_FILE))
                    .expect("a symlink");
            },
            "template.json is a symbolic link; a template's files are regular files",
        ),
        (
            |dir: &Path| {
                write(
                    dir,
                    TEMPLATE_FILE,
                    r#"{"version":"rayito.template/1","start_cmd":"touch /tmp/ran","workdir":"/no/such/dir"}"#,
                )
            },
            "the template's start command could not start (cannot execute the command); \
             check its program and working directory",
        ),
    ];
    for (make, reason) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        make(dir.path());
        let t = start_agent(dir.path()).await;
        assert_eq!(ready(&t).await, (500, reason.to_owned()));
        assert!(health(&t).await.agent_ready);
        let (status, body) = t.run(&payload(json!({}))).await;
        assert_eq!((status, body.as_str()), (200, "ok"));
        // Nothing of the refused template runs or is injected.
        let o = support::run_bash(&t, "echo \"[${A:-}]\"; ls /tmp/ran 2>/dev/null").await;
        assert_eq!(String::from_utf8_lossy(&o.stdout), "[]\n");
        let listed = t
            .process()
            .list(pb::ListRequest {})
            .await
            .expect("List")
            .into_inner()
            .processes;
        assert!(
            listed
                .iter()
                .all(|p| p.tag.as_deref() != Some(TEMPLATE_START_TAG))
        );
    }
}

/// A kernel started before `/run` (the emulator's warm spare) has the
/// image's envs too: they are installed before anything starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prestarted_kernel_has_the_image_env() {
    let dir = template_dir(None, Some(json!({"IMAGE_VAR": "from-image"})));
    let t = TestAgent::start_config(AgentConfig {
        template_dir: Some(dir.path().to_path_buf()),
        prestart_kernel: true,
        ..AgentConfig::default()
    })
    .await;
    let (status, body) = t.run(&payload(json!({}))).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    let printed = python_stdout(&t, "import os; print(os.environ['IMAGE_VAR'])").await;
    assert_eq!(printed, "from-image\n");
}

/// `/terminate` kills the start command, and the ready check stops: no
/// try of it starts after the sandbox's processes were killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_ends_the_start_command_and_its_ready_check() {
    let dir = template_dir(
        Some(json!({
            "start_cmd": "sleep 60",
            // Each try lives long enough to be seen.
            "ready_cmd": "sleep 0.3; false",
            "ready_poll": {"interval_seconds": 0.05, "timeout_seconds": 30},
        })),
        None,
    );
    let t = start_agent(dir.path()).await;
    assert_eq!(ready(&t).await, (503, READY_WAITING.to_owned()));
    assert!(t.agent.env().has_processes());
    assert_eq!(t.hook("terminate", None).await, (200, "ok".to_owned()));
    // Several intervals of the ready check pass; nothing comes back.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut quiet_since = None;
    loop {
        if t.agent.env().has_processes() {
            quiet_since = None;
        } else if quiet_since.get_or_insert_with(Instant::now).elapsed()
            > Duration::from_millis(500)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the sandbox still has processes after terminate"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An agent made ahead (the emulator's warm spare of an image) runs the
/// image's start command only once `/run` makes the sandbox someone's, so
/// that a spare never holds what the start command takes (a port).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_start_command_waits_for_run() {
    let dir = template_dir(
        Some(json!({
            "start_cmd": "touch /tmp/started; exec sleep 600",
            "ready_cmd": "test -e /tmp/started",
            "ready_poll": {"interval_seconds": 0.1, "timeout_seconds": 30},
        })),
        None,
    );
    let t = TestAgent::start_config(AgentConfig {
        template_dir: Some(dir.path().to_path_buf()),
        defer_template_start: true,
        ..AgentConfig::default()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let marker = t.host_path("/tmp/started");
    assert!(!marker.exists(), "the start command ran before /run");

    let (status, body) = t.run(&payload(json!({}))).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    assert_eq!(
        ready_settled(&t, Duration::from_secs(30)).await,
        (200, "ok".to_owned())
    );
    assert!(marker.exists(), "the start command ran at /run");
    let listed = t
        .process()
        .list(pb::ListRequest {})
        .await
        .expect("List")
        .into_inner()
        .processes;
    let started = listed
        .iter()
        .filter(|p| p.tag.as_deref() == Some(TEMPLATE_START_TAG))
        .count();
    assert_eq!(started, 1, "{listed:?}");
    // A second /run (a retried hook) starts nothing more.
    let _ = t.run(&payload(json!({}))).await;
    let again = t
        .process()
        .list(pb::ListRequest {})
        .await
        .expect("List")
        .into_inner()
        .processes
        .iter()
        .filter(|p| p.tag.as_deref() == Some(TEMPLATE_START_TAG))
        .count();
    assert_eq!(again, 1);
}
