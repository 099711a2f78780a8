//! Template builds end to end on the embedded local backend: the artifact
//! through its S3 endpoint, a real build in an overlayfs sandbox, the
//! version's states, sandboxes started from the image, reuse, and each
//! failure a build maps (a failed step, a failed ready check).

use crate::skip_support;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rayito::error::BuildReason;
use rayito::template::{BuildEvent, BuildOptions, BuildStatus, ReadyCmd, StartCmd, Template};
use rayito::{Client, SandboxError};

/// A name no other test (or earlier run) uses.
fn unique(prefix: &str) -> String {
    format!("{prefix}-{:08x}", rand_u32())
}

fn rand_u32() -> u32 {
    use std::hash::{BuildHasher as _, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now()) as u32
}

/// A free loopback port (the start command's server binds it).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn context(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("context dir");
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

fn options(dir: &Path) -> BuildOptions {
    BuildOptions {
        context_dir: Some(dir.to_path_buf()),
        ..BuildOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_builds_and_its_sandboxes_see_its_files_env_and_server_then_a_rebuild_reuses() {
    if let Some(reason) = skip_support::local_builds_unavailable() {
        skip_support::skip(reason);
        return;
    }
    let port = free_port();
    let dir = context(&[("site/index.html", "hello from the template\n")]);
    let template = Template::new()
        .run_cmd("mkdir -p /srv/www && echo built > /srv/www/built.txt")
        .copy("site", "/srv/www/site")
        .set_envs([("GREETING", "hola")])
        .set_start_cmd(
            StartCmd::new(format!(
                "python3 -m http.server {port} --bind 127.0.0.1 --directory /srv/www"
            ))
            .ready(ReadyCmd::port(port)),
        );
    let client = Client::local().await.expect("local backend");
    let name = unique("web");
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let info = client
        .templates()
        .build(
            &template,
            &name,
            options(dir.path()).on_event(move |e| seen.lock().unwrap().push(e.clone())),
        )
        .await
        .expect("the build succeeds");
    assert!(!info.reused);
    assert!(info.artifact_uploaded);
    assert_eq!(info.alias, name);
    assert_eq!(info.build_id, format!("{}/{name}", info.version));
    assert!(
        info.template_id
            .ends_with(&format!(":microvm-image:{name}"))
    );
    let events = events.lock().unwrap().clone();
    assert!(events.contains(&BuildEvent::Uploaded(true)), "{events:?}");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, BuildEvent::Submitted { version } if *version == info.version)),
        "{events:?}"
    );

    let sandbox = client
        .sandbox()
        .template(&name)
        .create()
        .await
        .expect("a sandbox of the template");
    let out = sandbox
        .commands()
        .run("cat /srv/www/site/index.html /srv/www/built.txt; echo \"$GREETING\"")
        .await
        .expect("the image's files and environment");
    assert_eq!(out.stdout, "hello from the template\nbuilt\nhola\n");
    // The start command's server (started with the sandbox, as the
    // template's user), answering on its port.
    let fetch = format!(
        "for i in $(seq 100); do python3 -c \"import urllib.request as u; \
         print(u.urlopen('http://127.0.0.1:{port}/built.txt').read().decode(), end='')\" \
         2>/dev/null && exit 0; sleep 0.1; done; exit 1"
    );
    let out = sandbox
        .commands()
        .run(&fetch)
        .await
        .expect("the server answers");
    assert_eq!(out.stdout, "built\n");
    // The build wrote into its layer, never into the host's root.
    assert!(!Path::new("/srv/www/built.txt").exists());
    let out = sandbox
        .commands()
        .run("touch /srv/www/new 2>/dev/null && echo wrote || echo refused")
        .await
        .unwrap();
    assert_eq!(
        out.stdout, "refused\n",
        "the layer is read-only to the sandbox"
    );
    sandbox.kill().await.unwrap();

    // The same template again: the version is reused, nothing is uploaded
    // or built.
    let again = client
        .templates()
        .build(&template, &name, options(dir.path()))
        .await
        .expect("the rebuild");
    assert!(again.reused, "{again:?}");
    assert!(!again.artifact_uploaded);
    assert_eq!(again.version, info.version);
    assert!(
        again.duration < Duration::from_secs(1),
        "a reuse took {:?}",
        again.duration
    );
    let (latest, status) = client
        .templates()
        .version_status(&name, None)
        .await
        .unwrap();
    assert_eq!(latest, info.version, "no new version");
    assert_eq!(status, BuildStatus::Succeeded);

    // A changed file makes a new artifact and a new version.
    std::fs::write(dir.path().join("site/index.html"), "changed\n").unwrap();
    let changed = client
        .templates()
        .build(&template, &name, options(dir.path()))
        .await
        .expect("a build of the changed context");
    assert!(!changed.reused && changed.artifact_uploaded);
    assert_ne!(changed.version, info.version);
    let sandbox = client.sandbox().template(&name).create().await.unwrap();
    let out = sandbox
        .commands()
        .run("cat /srv/www/site/index.html")
        .await
        .unwrap();
    assert_eq!(out.stdout, "changed\n", "the newest version starts");
    sandbox.kill().await.unwrap();
    // The older version still starts when asked for.
    let old: u32 = info.version.parse().unwrap();
    let sandbox = client
        .sandbox()
        .template(&name)
        .template_version(old)
        .create()
        .await
        .unwrap();
    let out = sandbox
        .commands()
        .run("cat /srv/www/site/index.html")
        .await
        .unwrap();
    assert_eq!(out.stdout, "hello from the template\n");
    sandbox.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_step_names_the_step_its_command_exit_code_and_log_tail() {
    if let Some(reason) = skip_support::local_builds_unavailable() {
        skip_support::skip(reason);
        return;
    }
    let dir = context(&[]);
    let template = Template::new()
        .run_cmd("echo before-the-failure")
        .run_cmd("exit 3");
    let client = Client::local().await.unwrap();
    let name = unique("fails");
    let err = client
        .templates()
        .build(&template, &name, options(dir.path()))
        .await
        .expect_err("step 2 exits 3");
    let SandboxError::Build {
        reason,
        step,
        command,
        exit_code,
        log_tail,
        ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(*reason, None);
    assert_eq!(*exit_code, Some(3));
    let step = step.expect("the failed step");
    assert!(step >= 2, "{step}");
    assert!(
        command.as_ref().map(|c| c.as_str()) == Some("RUN exit 3"),
        "{command:?}"
    );
    assert!(log_tail.as_str().contains("exit code: 3"), "{log_tail:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "template build step {step} failed with exit code 3; fix that step (its command and the end of the build log are in the error)"
        )
    );
    // The status of the failed version, and its log.
    let (_, status) = client
        .templates()
        .version_status(&name, None)
        .await
        .unwrap();
    assert_eq!(status, BuildStatus::Failed);
    let lines = client.templates().logs(&name, 500).await.unwrap();
    assert!(
        lines.iter().any(|l| l.contains("before-the-failure")),
        "{lines:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_check_that_never_passes_fails_the_build_with_the_ready_reason() {
    if let Some(reason) = skip_support::local_builds_unavailable() {
        skip_support::skip(reason);
        return;
    }
    let dir = context(&[]);
    let template = Template::new().set_start_cmd(
        StartCmd::new("sleep 600")
            .ready(ReadyCmd::custom("exit 1").timeout(Duration::from_secs(2))),
    );
    let client = Client::local().await.unwrap();
    let err = client
        .templates()
        .build(&template, &unique("never-ready"), options(dir.path()))
        .await
        .expect_err("never ready");
    assert!(
        matches!(
            &err,
            SandboxError::Build {
                reason: Some(BuildReason::ReadyServerError),
                step: None,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the built image did not become ready: its ready hook answered HTTP 5xx; check the start command and its ready check, then build again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_templates_build_at_once() {
    if let Some(reason) = skip_support::local_builds_unavailable() {
        skip_support::skip(reason);
        return;
    }
    let dir = context(&[]);
    let client = Client::local().await.unwrap();
    let one = Template::new().run_cmd("echo one > /opt/which");
    let two = Template::new().run_cmd("echo two > /opt/which");
    let (a, b) = (unique("one"), unique("two"));
    let templates = client.templates();
    let (ra, rb) = tokio::join!(
        templates.build(&one, &a, options(dir.path())),
        templates.build(&two, &b, options(dir.path())),
    );
    ra.expect("the first build");
    rb.expect("the second build");
    for (name, want) in [(&a, "one\n"), (&b, "two\n")] {
        let sandbox = client.sandbox().template(name).create().await.unwrap();
        let out = sandbox.commands().run("cat /opt/which").await.unwrap();
        assert_eq!(out.stdout, want);
        sandbox.kill().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_build_has_a_handle_a_status_and_a_wait() {
    if let Some(reason) = skip_support::local_builds_unavailable() {
        skip_support::skip(reason);
        return;
    }
    let dir = context(&[]);
    let client = Client::local().await.unwrap();
    let name = unique("background");
    let template = Template::new().run_cmd("echo later > /opt/when");
    let handle = client
        .templates()
        .build_in_background(&template, &name, options(dir.path()))
        .await
        .expect("submitted");
    assert_eq!(handle.name, name);
    let status = client.templates().status(&handle).await.unwrap();
    assert!(
        matches!(status, BuildStatus::InProgress | BuildStatus::Succeeded),
        "{status:?}"
    );
    let info = client
        .templates()
        .wait(&handle, BuildOptions::default())
        .await
        .expect("built");
    assert_eq!(info.version, handle.version);
    assert_eq!(
        client.templates().status(&handle).await.unwrap(),
        BuildStatus::Succeeded
    );
    assert!(client.templates().exists(&name).await.unwrap());
    assert!(!client.templates().exists(&unique("absent")).await.unwrap());
    let listed = client.templates().list(Some(&name)).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        listed[0].latest_version.as_deref(),
        Some(handle.version.as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_build_is_given_is_checked_before_any_call() {
    let client = Client::local().await.unwrap();
    let template = Template::new().run_cmd("true");
    let cases: Vec<(&str, BuildOptions, &str)> = vec![
        (
            "ok-name",
            BuildOptions {
                memory_mib: 3000,
                ..BuildOptions::default()
            },
            "invalid memory_mib: an image's memory must be 512, 1024, 2048, 4096 or 8192 MiB; pass one of them",
        ),
        (
            "ok-name",
            BuildOptions {
                timeout: Duration::ZERO,
                ..BuildOptions::default()
            },
            "invalid timeout: must be positive; pass how long to wait for the build",
        ),
        (
            "ok-name",
            BuildOptions {
                bucket: Some("Not_A_Bucket".into()),
                ..BuildOptions::default()
            },
            "invalid bucket: an S3 bucket name is 3 to 63 of a-z, 0-9, '.' and '-'; pass the artifact bucket's name",
        ),
        (
            "name:tag",
            BuildOptions::default(),
            "invalid template name: it holds a :tag, and templates have no tags; use 1 to 64 of A-Z, a-z, 0-9, _ and - (no :tag), or an image ARN",
        ),
    ];
    for (name, options, message) in cases {
        let err = client
            .templates()
            .build(&template, name, options)
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), message);
    }
}
