//! Local builds for real: overlayfs, a mount namespace, `RUN` processes,
//! and an agent on the produced layer. Hosts that cannot build (not root,
//! no overlayfs, an upper directory refused) print `SKIPPED: <test>:
//! <reason>` (a failure under `RAYITO_TEST_STRICT=1`).

use std::path::Path;
use std::time::Duration;

use super::*;
use rayito_agent::sandbox::SpawnSpec;

#[path = "../../../tests/skip_support/mod.rs"]
mod skip_support;

/// The synthetic base image's lines and the layer's markers, as the SDK
/// composes them.
fn dockerfile(layer: &str) -> String {
    format!(
        "FROM public.ecr.aws/amazonlinux/amazonlinux:2023\n\
         COPY rayd /usr/local/bin/rayd\n\
         # >>> rayito template layer (m15-templates), no editar a mano\n\
         {layer}\
         # <<< rayito template layer\n\
         USER root\n\
         CMD [\"/usr/local/bin/rayd\"]\n"
    )
}

struct Built {
    result: BuildResult,
    lines: Vec<String>,
    _dirs: tempfile::TempDir,
}

/// Writes the artifact (`files` relative to it, then the Dockerfile) and
/// runs the build with the steps' deadline `within`.
async fn build(layer_text: &str, files: &[(&str, &str)], within: Duration) -> Built {
    build_with(layer_text, files, within, Duration::from_secs(30)).await
}

/// [`build`] with the hooks' timeout `hook_timeout`.
async fn build_with(
    layer_text: &str,
    files: &[(&str, &str)],
    within: Duration,
    hook_timeout: Duration,
) -> Built {
    let dirs = tempfile::tempdir().expect("tempdir");
    // Sandboxes on the layer run as an unprivileged uid: let it through.
    std::fs::set_permissions(
        dirs.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let artifact = dirs.path().join("artifact");
    let version = dirs.path().join("version");
    std::fs::create_dir_all(&artifact).unwrap();
    std::fs::create_dir_all(&version).unwrap();
    for (path, text) in files {
        let path = artifact.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    std::fs::write(artifact.join("Dockerfile"), dockerfile(layer_text)).unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let result = run_within(
        LocalBuild {
            artifact_dir: artifact,
            version_dir: version,
            hook_timeout,
            log: tx,
        },
        within,
    )
    .await;
    let mut lines = Vec::new();
    while let Ok(line) = rx.try_recv() {
        lines.push(line);
    }
    Built {
        result,
        lines,
        _dirs: dirs,
    }
}

/// Whether the build could not run on this host (records the skip).
fn cannot_build(built: &Built) -> bool {
    match &built.result {
        BuildResult::Failed { state_reason } if state_reason.starts_with(HOST_CANNOT_BUILD) => {
            skip_support::skip(state_reason);
            true
        }
        _ => false,
    }
}

/// A log line with its seconds replaced by `T`.
fn untimed(line: &str) -> String {
    line.split(' ')
        .map(|w| {
            if w.contains('.') && w.trim_end_matches('s').parse::<f64>().is_ok() {
                "T"
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `script` in a sandbox of `agent`; its stdout.
async fn sh(agent: &Agent, script: &str) -> String {
    use tokio::io::AsyncReadExt as _;
    let spec = SpawnSpec {
        program: "/bin/sh".to_owned(),
        args: vec!["-c".to_owned(), script.to_owned()],
        ..SpawnSpec::default()
    };
    let mut child = agent
        .env()
        .launch(
            &spec,
            launch_stdio::Null,
            launch_stdio::Piped,
            launch_stdio::Null,
        )
        .expect("launch");
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .await
        .unwrap();
    child.wait().await.unwrap();
    out
}

use rayito_agent::agent::{Agent, AgentConfig};

/// A host directory under `/opt` holding `kept` and `gone`, removed on drop.
struct HostDir(std::path::PathBuf);

impl HostDir {
    fn new() -> Self {
        let dir = std::path::PathBuf::from(format!(
            "/opt/rayito-build-test-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        // Without root, the build is skipped before it looks.
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(dir.join("kept"), "kept\n");
        let _ = std::fs::write(dir.join("gone"), "gone\n");
        Self(dir)
    }
}

impl Drop for HostDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
use rayito_agent::for_emulator::Stdio as launch_stdio;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_runs_its_steps_and_a_sandbox_sees_the_result() {
    let host = HostDir::new();
    let built = build(
        &format!(concat!(
            "COPY [\"__rayito_context/app\", \"/srv/app\"]\n",
            "COPY [\"__rayito_context/hello.txt\", \"/home/user/\"]\n",
            "ENV GREETING=\"hi \\\"there\\\" \\$HOME\"\n",
            "WORKDIR /srv/work\n",
            "RUN echo \"$GREETING\" > greeting && pwd > where && ls /srv/app > listing && echo step-output\n",
            "RUN mkdir /srv/shared && chmod 777 /srv/shared\n",
            "USER nobody\n",
            "RUN id -un > /srv/shared/who\n",
            "USER root\n",
            "RUN rm /srv/app/b.txt {}/gone\n",
            "COPY [\"__rayito_template.json\", \"/etc/rayito/template.json\"]\n",
        ), host.0.display()),
        &[
            ("__rayito_context/app/a.txt", "a\n"),
            ("__rayito_context/app/b.txt", "b\n"),
            ("__rayito_context/hello.txt", "hello\n"),
            // The ready command passes only where the layer is seen.
            ("__rayito_template.json", &format!("{:#}\n", serde_json::json!({
                "version": "rayito.template/1",
                "start_cmd": "sleep 600",
                "ready_cmd": "test -f /srv/app/a.txt && test ! -e /srv/app/b.txt",
                "user": "1000",
                "workdir": null,
                "envs": {},
                "ready_poll": {"interval_seconds": 0.1, "timeout_seconds": 5},
            }))),
        ],
        Duration::from_secs(120),
    )
    .await;
    if cannot_build(&built) {
        return;
    }
    let BuildResult::Succeeded { layer } = &built.result else {
        panic!("{:?}\n{}", built.result, built.lines.join("\n"));
    };
    assert!(!layer.parent().unwrap().join("work").exists());
    assert!(!layer.parent().unwrap().join("merged").exists());
    let lines: Vec<String> = built.lines.iter().map(|l| untimed(l)).collect();
    for want in [
        "#2 [1/10] FROM public.ecr.aws/amazonlinux/amazonlinux:2023",
        "#2 CACHED",
        "#3 [2/10] COPY rayd /usr/local/bin/rayd",
        "#4 [3/10] COPY [\"__rayito_context/app\", \"/srv/app\"]",
        "#6 [5/10] WORKDIR /srv/work",
        "#7 [6/10] RUN echo \"$GREETING\" > greeting && pwd > where && ls /srv/app > listing && echo step-output",
        "#7 T step-output",
        format!("#10 [9/10] RUN rm /srv/app/b.txt {}/gone", host.0.display()).as_str(),
        "#12 exporting to image",
    ] {
        assert!(
            lines.iter().any(|l| l == want),
            "{want}\n{}",
            lines.join("\n")
        );
    }
    let agent = Agent::start(AgentConfig {
        image_layer: Some(layer.clone()),
        ..AgentConfig::default()
    })
    .await
    .expect("an agent on the layer");
    assert_eq!(
        sh(
            &agent,
            "cd /srv/work && cat greeting where listing /srv/shared/who /home/user/hello.txt; \
             ls /srv/app"
        )
        .await,
        "hi \"there\" $HOME\n/srv/work\na.txt\nb.txt\nnobody\nhello\na.txt\n"
    );
    // Copied files are root's, with their mode; RUN's files get umask 022.
    use std::os::unix::fs::MetadataExt as _;
    let copied = std::fs::metadata(layer.join("srv/app/a.txt")).unwrap();
    assert_eq!(
        (copied.uid(), copied.gid(), copied.mode() & 0o777),
        (0, 0, 0o644)
    );
    let made = std::fs::metadata(layer.join("srv/work/greeting")).unwrap();
    assert_eq!(made.mode() & 0o777, 0o644);
    // A file the layer made and removed is simply absent; a host file
    // removed is a whiteout in the layer, and still on the host.
    assert!(std::fs::symlink_metadata(layer.join("srv/app/b.txt")).is_err());
    let hidden = host.0.strip_prefix("/").unwrap().join("gone");
    let whiteout = std::fs::symlink_metadata(layer.join(&hidden)).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_char_device(
        &whiteout.file_type()
    ));
    assert!(host.0.join("gone").exists());
    assert_eq!(
        sh(
            &agent,
            &format!(
                "test -e {0}/gone || echo absent; cat {0}/kept",
                host.0.display()
            )
        )
        .await,
        "absent\nkept\n"
    );
    // The host's root is untouched.
    assert!(!Path::new("/srv/work/greeting").exists());
    agent.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_run_names_its_step_command_and_exit_code() {
    let built = build(
        "RUN echo fine\nRUN echo before; exit 3\nRUN echo never\n",
        &[],
        Duration::from_secs(120),
    )
    .await;
    if cannot_build(&built) {
        return;
    }
    assert_eq!(
        built.result,
        BuildResult::Failed {
            state_reason: "Image build failed: the Dockerfile step [4/5] did not complete \
                           successfully; see the build log"
                .to_owned()
        }
    );
    let lines: Vec<String> = built.lines.iter().map(|l| untimed(l)).collect();
    let tail: Vec<&str> = lines
        .iter()
        .rev()
        .take(8)
        .rev()
        .map(String::as_str)
        .collect();
    assert_eq!(
        tail,
        [
            "#5 [4/5] RUN echo before; exit 3",
            "#5 T before",
            "#5 ERROR: process \"/bin/sh -c echo before; exit 3\" did not complete successfully: exit code: 3",
            "------",
            " > [4/5] RUN echo before; exit 3:",
            "T before",
            "------",
            "ERROR: failed to solve: process \"/bin/sh -c echo before; exit 3\" did not complete successfully: exit code: 3",
        ],
        "{}",
        lines.join("\n")
    );
    assert!(!lines.iter().any(|l| l.contains("never")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_command_that_fails_fails_the_build_with_the_ready_reason() {
    let template = serde_json::json!({
        "version": "rayito.template/1",
        "start_cmd": "sleep 600",
        "ready_cmd": "exit 1",
        "user": "1000",
        "workdir": null,
        "envs": {},
        "ready_poll": {"interval_seconds": 0.1, "timeout_seconds": 1},
    });
    let built = build(
        "COPY [\"__rayito_template.json\", \"/etc/rayito/template.json\"]\n",
        &[("__rayito_template.json", &format!("{template:#}\n"))],
        Duration::from_secs(120),
    )
    .await;
    if cannot_build(&built) {
        return;
    }
    assert_eq!(
        built.result,
        BuildResult::Failed {
            state_reason: "Ready hook check failed: the template's ready command did not exit 0 \
                           within 1 s; the start command is still running (HTTP 500) response"
                .to_owned()
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_past_the_deadline_is_killed_and_fails_the_build() {
    let started = std::time::Instant::now();
    let built = build("RUN sleep 600\n", &[], Duration::from_secs(1)).await;
    if cannot_build(&built) {
        return;
    }
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(
        built.result,
        BuildResult::Failed {
            state_reason: "Image build failed: the Dockerfile's steps did not finish within 1 \
                           seconds (step [3/3] was running)"
                .to_owned()
        }
    );
    assert!(built.lines.iter().any(|l| l
        == "#4 ERROR: process \"/bin/sh -c sleep 600\" did not complete before the build's deadline"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_check_still_waiting_at_the_hook_timeout_fails_the_build() {
    let template = serde_json::json!({
        "version": "rayito.template/1",
        "start_cmd": "sleep 600",
        "ready_cmd": "exit 1",
        "user": "1000",
        "workdir": null,
        "envs": {},
        "ready_poll": {"interval_seconds": 0.1, "timeout_seconds": 60},
    });
    let started = std::time::Instant::now();
    let built = build_with(
        "COPY [\"__rayito_template.json\", \"/etc/rayito/template.json\"]\n",
        &[("__rayito_template.json", &format!("{template:#}\n"))],
        Duration::from_secs(120),
        Duration::from_secs(1),
    )
    .await;
    if cannot_build(&built) {
        return;
    }
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(
        built.result,
        BuildResult::Failed {
            state_reason: "Ready hook check failed: waiting for the template's ready command \
                           (HTTP 503) response"
                .to_owned()
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_builds_at_once_keep_their_own_layers() {
    let (one, two) = tokio::join!(
        build(
            "RUN mkdir -p /srv/t && echo one > /srv/t/which && sleep 0.3\n",
            &[],
            Duration::from_secs(120)
        ),
        build(
            "RUN mkdir -p /srv/t && echo two > /srv/t/which && sleep 0.3\n",
            &[],
            Duration::from_secs(120)
        ),
    );
    if cannot_build(&one) || cannot_build(&two) {
        return;
    }
    for (built, want) in [(&one, "one\n"), (&two, "two\n")] {
        let BuildResult::Succeeded { layer } = &built.result else {
            panic!("{:?}", built.result);
        };
        assert_eq!(
            std::fs::read_to_string(layer.join("srv/t/which")).unwrap(),
            want
        );
    }
    assert!(!Path::new("/srv/t/which").exists());
}

#[test]
fn without_root_the_build_names_what_it_needs() {
    assert_eq!(preflight(true), Ok(()));
    assert_eq!(
        preflight(false),
        Err(
            "local image builds need root (overlayfs mounts in a mount namespace), and the \
             emulator does not run as root; run it as root to build templates"
                .to_owned()
        )
    );
}
