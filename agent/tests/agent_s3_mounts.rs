//! The S3 mounts section through real gRPC: every refusal of a section
//! checked whole (INVALID, with its class, nothing touched), the image's
//! bucket allowlist, the classes of a mount that cannot be made
//! (`iam_denied` without an execution role or with a key S3 refuses,
//! `not_found` for a missing bucket, `helper_missing` without
//! `mount-s3`), and an agent without the feature (UNSUPPORTED, Health's
//! flag false). Then real mounts over a real S3 on loopback
//! (`support::s3`), read and written by sandbox commands: the objects are
//! the bucket's at once, EROFS on a read-only mount, EPERM on unlink
//! without `allow_delete`, two sandboxes on one prefix, a replaced section
//! unmounting what it dropped, `/resume` remaking a dead server.

use crate::support;

use std::time::Duration;

use rayito_agent::persist::PersistenceAccess;
use rayito_agent::{AgentConfig, pb};
use support::TestAgent;
use support::s3::TestS3;

fn client(t: &TestAgent) -> pb::configure_service_client::ConfigureServiceClient<support::Authed> {
    pb::configure_service_client::ConfigureServiceClient::with_interceptor(
        t.channel.clone(),
        t.interceptor(),
    )
}

/// A template directory whose image environment allows `buckets`.
fn allowing(buckets: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("template-env.json"),
        serde_json::json!({
            "version": "rayito.template-env/1",
            "envs": { rayito_agent::s3_mounts::ALLOWED_BUCKETS_VAR: buckets },
        })
        .to_string(),
    )
    .expect("template env");
    dir
}

/// An agent (after `/run`) on the image `template`, with `access`.
async fn agent(
    template: &tempfile::TempDir,
    access: PersistenceAccess,
    s3_mounts: bool,
) -> TestAgent {
    let t = TestAgent::start_config(AgentConfig {
        template_dir: Some(template.path().to_path_buf()),
        persistence: access,
        s3_mounts,
        ..AgentConfig::default()
    })
    .await;
    let (status, body) = t.run(&support::payload(serde_json::json!({}))).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    t
}

fn mount(path: &str, bucket: &str) -> pb::S3Mount {
    pb::S3Mount {
        mount_path: path.into(),
        bucket: bucket.into(),
        read_only: true,
        ..Default::default()
    }
}

/// Applies `mounts`: the section's code and class.
async fn apply(t: &TestAgent, mounts: Vec<pb::S3Mount>) -> (pb::SectionCode, String) {
    let response = client(t)
        .configure(pb::ConfigureRequest {
            request_id: "r".into(),
            s3_mounts: Some(pb::S3MountsConfig { mounts }),
            ..Default::default()
        })
        .await
        .expect("configure")
        .into_inner();
    assert_eq!(response.results.len(), 1);
    let result = &response.results[0];
    assert_eq!(result.section(), pb::ConfigSection::S3Mounts);
    (result.code(), result.error_class.clone())
}

async fn status(t: &TestAgent) -> Option<pb::S3MountsStatus> {
    client(t)
        .configure_status(pb::ConfigureStatusRequest {})
        .await
        .expect("status")
        .into_inner()
        .s3_mounts
}

/// Polls until no mount is PENDING (the agent bounds each to 10 s): each
/// mount's (path, phase, class).
async fn settled(t: &TestAgent) -> Vec<(String, pb::S3MountPhase, String)> {
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let got: Vec<_> = status(t)
            .await
            .expect("a section was applied")
            .mounts
            .into_iter()
            .map(|m| (m.mount_path.clone(), m.phase(), m.error_class))
            .collect();
        if got.iter().all(|(_, p, _)| *p != pb::S3MountPhase::Pending) {
            return got;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "never settled: {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn s3_mounts_flag(t: &TestAgent) -> bool {
    t.health()
        .health(pb::HealthRequest {})
        .await
        .expect("health")
        .into_inner()
        .features
        .expect("features")
        .s3_mounts
}

#[tokio::test]
async fn a_section_is_checked_whole_and_an_invalid_one_touches_nothing() {
    let image = allowing(" data-bucket , other-bucket ");
    let t = agent(&image, PersistenceAccess::Local(None), true).await;
    let invalid = |class: &str| (pb::SectionCode::Invalid, class.to_owned());
    let cases: Vec<(Vec<pb::S3Mount>, &str)> = vec![
        (vec![mount("/tmp/data", "data-bucket")], "invalid_path"),
        (vec![mount("/mnt", "data-bucket")], "invalid_path"),
        (vec![mount("/mnt/a/../b", "data-bucket")], "invalid_path"),
        (vec![mount("mnt/data", "data-bucket")], "invalid_path"),
        (vec![mount("/home/user/", "data-bucket")], "invalid_path"),
        (
            vec![
                mount("/mnt/a", "data-bucket"),
                mount("/mnt/a/b", "other-bucket"),
            ],
            "invalid_path",
        ),
        (
            (0..5)
                .map(|i| mount(&format!("/mnt/m{i}"), "data-bucket"))
                .collect(),
            "invalid_path",
        ),
        (vec![mount("/mnt/data", "not-listed")], "not_allowed"),
        (
            vec![
                mount("/mnt/a", "data-bucket"),
                mount("/mnt/a", "other-bucket"),
            ],
            "not_allowed",
        ),
        (
            vec![pb::S3Mount {
                allow_delete: true,
                ..mount("/mnt/data", "data-bucket")
            }],
            "not_allowed",
        ),
        (
            vec![pb::S3Mount {
                prefix: "/abs".into(),
                ..mount("/mnt/data", "data-bucket")
            }],
            "invalid_path",
        ),
        // One bad mount refuses the good one beside it.
        (
            vec![mount("/mnt/good", "data-bucket"), mount("/mnt/bad", "x")],
            "not_allowed",
        ),
    ];
    for (mounts, class) in cases {
        assert_eq!(
            apply(&t, mounts.clone()).await,
            invalid(class),
            "{mounts:?}"
        );
    }
    assert_eq!(status(&t).await, None, "nothing was applied");
}

#[tokio::test]
async fn an_image_without_an_allowlist_allows_no_bucket() {
    let image = tempfile::tempdir().expect("tempdir");
    let t = agent(&image, PersistenceAccess::Local(None), true).await;
    assert_eq!(
        apply(&t, vec![mount("/mnt/data", "data-bucket")]).await,
        (pb::SectionCode::Invalid, "not_allowed".to_owned())
    );
    let empty = allowing(" , ");
    let t = agent(&empty, PersistenceAccess::Local(None), true).await;
    assert_eq!(
        apply(&t, vec![mount("/mnt/data", "data-bucket")]).await,
        (pb::SectionCode::Invalid, "not_allowed".to_owned())
    );
}

#[tokio::test]
async fn a_local_sandbox_without_an_execution_role_fails_iam_denied() {
    let image = allowing("data-bucket");
    let t = agent(&image, PersistenceAccess::Local(None), true).await;
    assert_eq!(
        apply(&t, vec![mount("/mnt/data", "data-bucket")]).await,
        (pb::SectionCode::Pending, String::new())
    );
    assert_eq!(
        settled(&t).await,
        [(
            "/mnt/data".to_owned(),
            pb::S3MountPhase::Failed,
            "iam_denied".to_owned()
        )]
    );
    // The empty section clears it.
    assert_eq!(
        apply(&t, Vec::new()).await,
        (pb::SectionCode::Applied, String::new())
    );
    assert_eq!(status(&t).await, Some(pb::S3MountsStatus::default()));
}

#[tokio::test]
async fn a_microvm_image_without_mount_s3_fails_helper_missing() {
    if std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("mount-s3").is_file()))
    {
        println!(
            "SKIPPED: a_microvm_image_without_mount_s3_fails_helper_missing: mount-s3 is installed"
        );
        return;
    }
    let image = allowing("data-bucket");
    let t = agent(&image, PersistenceAccess::Aws, true).await;
    assert!(!s3_mounts_flag(&t).await, "no helper: the flag is false");
    assert_eq!(
        apply(&t, vec![mount("/home/user/data", "data-bucket")]).await,
        (pb::SectionCode::Pending, String::new())
    );
    assert_eq!(
        settled(&t).await,
        [(
            "/home/user/data".to_owned(),
            pb::S3MountPhase::Failed,
            "helper_missing".to_owned()
        )]
    );
}

#[tokio::test]
async fn an_agent_without_the_feature_answers_unsupported() {
    let image = allowing("data-bucket");
    let t = agent(&image, PersistenceAccess::Local(None), false).await;
    assert!(!s3_mounts_flag(&t).await);
    assert_eq!(
        apply(&t, vec![mount("/mnt/data", "data-bucket")]).await,
        (pb::SectionCode::Unsupported, String::new())
    );
    assert_eq!(status(&t).await, None);
}

#[tokio::test]
async fn the_local_backend_reports_the_feature_where_the_host_can_mount() {
    let image = allowing("data-bucket");
    let t = agent(&image, PersistenceAccess::Local(None), true).await;
    let can = rustix::process::geteuid().is_root()
        && std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .is_ok();
    if !can {
        println!("SKIPPED: the_local_backend_reports_the_feature: needs root and /dev/fuse");
        return;
    }
    assert!(s3_mounts_flag(&t).await);
}

/// Whether this host lets the agent make FUSE mounts in a sandbox's
/// namespace (root, `/dev/fuse`); prints the skip line otherwise.
fn can_mount(test: &str) -> bool {
    let can = rustix::process::geteuid().is_root()
        && std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .is_ok();
    if !can {
        println!("SKIPPED: {test}: needs root and /dev/fuse");
    }
    can
}

/// A real S3 with bucket `data` holding `team7/hello.txt` (`hi`).
async fn s3_with_data() -> TestS3 {
    let s3 = TestS3::start().await;
    s3.create_bucket("data").await;
    s3.put("data", "team7/hello.txt", b"hi".to_vec()).await;
    s3
}

fn writable(path: &str, prefix: &str, allow_delete: bool) -> pb::S3Mount {
    pb::S3Mount {
        mount_path: path.into(),
        bucket: "data".into(),
        prefix: prefix.into(),
        read_only: false,
        allow_overwrite: true,
        allow_delete,
    }
}

/// `script`'s stdout and stderr together, and its exit code.
async fn sh(t: &TestAgent, script: &str) -> (String, i32) {
    let o = support::run_bash(t, script).await;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (text, o.end.map(|e| e.exit_code).unwrap_or(-1))
}

fn mounted(paths: &[&str]) -> Vec<(String, pb::S3MountPhase, String)> {
    paths
        .iter()
        .map(|p| ((*p).to_owned(), pb::S3MountPhase::Mounted, String::new()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_commands_read_and_write_the_bucket_through_mounts() {
    if !can_mount("sandbox_commands_read_and_write_the_bucket_through_mounts") {
        return;
    }
    let s3 = s3_with_data().await;
    let image = allowing("data");
    let t = agent(&image, PersistenceAccess::Local(Some(s3.local_s3())), true).await;
    assert!(s3_mounts_flag(&t).await);
    let read_only = pb::S3Mount {
        prefix: "team7".into(),
        ..mount("/mnt/data", "data")
    };
    assert_eq!(
        apply(
            &t,
            vec![read_only.clone(), writable("/home/user/out", "out/", false)]
        )
        .await,
        (pb::SectionCode::Pending, String::new())
    );
    assert_eq!(settled(&t).await, mounted(&["/home/user/out", "/mnt/data"]));

    assert_eq!(
        sh(&t, "cat /mnt/data/hello.txt").await,
        ("hi".to_owned(), 0)
    );
    let (text, code) = sh(&t, "echo x > /mnt/data/new").await;
    assert_ne!(code, 0);
    assert!(text.contains("Read-only file system"), "{text}");
    // The host's /mnt got nothing: the mount is the sandbox's alone.
    assert!(!std::path::Path::new("/mnt/data/hello.txt").exists());

    assert_eq!(
        sh(&t, "echo written > /home/user/out/result.txt").await.1,
        0
    );
    assert_eq!(
        s3.get("data", "out/result.txt").await.as_deref(),
        Some(&b"written\n"[..]),
        "a closed file is an object at once"
    );
    let (text, code) = sh(&t, "rm /home/user/out/result.txt").await;
    assert_ne!(code, 0);
    assert!(text.contains("Operation not permitted"), "{text}");
    assert!(s3.get("data", "out/result.txt").await.is_some());

    // Replaced: the dropped mount is unmounted, the kept one untouched.
    assert_eq!(
        apply(&t, vec![read_only]).await,
        (pb::SectionCode::Applied, String::new())
    );
    assert_eq!(settled(&t).await, mounted(&["/mnt/data"]));
    let (text, _) = sh(
        &t,
        "grep -c ' /home/user/out ' /proc/self/mountinfo; ls -A /home/user/out",
    )
    .await;
    assert_eq!(
        text, "0\n",
        "unmounted, and nothing of the bucket left behind"
    );
    assert_eq!(
        sh(&t, "cat /mnt/data/hello.txt").await,
        ("hi".to_owned(), 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sandboxes_on_one_prefix_see_the_same_objects() {
    if !can_mount("two_sandboxes_on_one_prefix_see_the_same_objects") {
        return;
    }
    let s3 = s3_with_data().await;
    let image = allowing("data");
    let a = agent(&image, PersistenceAccess::Local(Some(s3.local_s3())), true).await;
    let b = agent(&image, PersistenceAccess::Local(Some(s3.local_s3())), true).await;
    for t in [&a, &b] {
        apply(t, vec![writable("/mnt/shared", "shared/", true)]).await;
        assert_eq!(settled(t).await, mounted(&["/mnt/shared"]));
    }
    assert_eq!(sh(&a, "echo from-a > /mnt/shared/note").await.1, 0);
    assert_eq!(
        sh(&b, "cat /mnt/shared/note").await,
        ("from-a\n".to_owned(), 0)
    );
    assert_eq!(sh(&b, "rm /mnt/shared/note").await.1, 0);
    assert_eq!(s3.get("data", "shared/note").await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_bucket_or_a_refused_key_fails_with_its_class() {
    if !can_mount("a_missing_bucket_or_a_refused_key_fails_with_its_class") {
        return;
    }
    let s3 = s3_with_data().await;
    let image = allowing("data,missing");
    let t = agent(&image, PersistenceAccess::Local(Some(s3.local_s3())), true).await;
    apply(&t, vec![mount("/mnt/m", "missing")]).await;
    assert_eq!(
        settled(&t).await,
        [(
            "/mnt/m".to_owned(),
            pb::S3MountPhase::Failed,
            "not_found".to_owned()
        )]
    );
    let t = agent(
        &image,
        PersistenceAccess::Local(Some(s3.local_s3_unknown_key())),
        true,
    )
    .await;
    apply(&t, vec![mount("/mnt/m", "data")]).await;
    assert_eq!(
        settled(&t).await,
        [(
            "/mnt/m".to_owned(),
            pb::S3MountPhase::Failed,
            "iam_denied".to_owned()
        )]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_remakes_a_mount_whose_server_died() {
    if !can_mount("resume_remakes_a_mount_whose_server_died") {
        return;
    }
    let s3 = s3_with_data().await;
    let image = allowing("data");
    let t = agent(&image, PersistenceAccess::Local(Some(s3.local_s3())), true).await;
    let data = pb::S3Mount {
        prefix: "team7/".into(),
        ..mount("/mnt/data", "data")
    };
    apply(&t, vec![data]).await;
    assert_eq!(settled(&t).await, mounted(&["/mnt/data"]));
    t.agent.stop_s3_mount_helpers();
    assert_ne!(
        sh(&t, "cat /mnt/data/hello.txt").await.1,
        0,
        "the server is gone"
    );

    assert_eq!(t.hook("suspend", None).await, (200, "ok".to_owned()));
    assert_eq!(t.hook("resume", None).await, (200, "ok".to_owned()));
    // The re-check runs in the background: wait until the mount is remade.
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (text, code) = sh(&t, "cat /mnt/data/hello.txt").await;
        if code == 0 {
            assert_eq!(text, "hi");
            break;
        }
        assert!(tokio::time::Instant::now() < until, "never remade: {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(settled(&t).await, mounted(&["/mnt/data"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_unmounts_every_mount() {
    if !can_mount("terminate_unmounts_every_mount") {
        return;
    }
    let s3 = s3_with_data().await;
    let image = allowing("data");
    // Without a cgroup of its own, whose kill would also end the probe
    // started after /terminate below.
    let t = TestAgent::start_config(AgentConfig {
        template_dir: Some(image.path().to_path_buf()),
        persistence: PersistenceAccess::Local(Some(s3.local_s3())),
        cgroup: false,
        ..AgentConfig::default()
    })
    .await;
    let (status, body) = t.run(&support::payload(serde_json::json!({}))).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    apply(
        &t,
        vec![
            mount("/mnt/data", "data"),
            writable("/home/user/w", "w/", true),
        ],
    )
    .await;
    assert_eq!(settled(&t).await, mounted(&["/home/user/w", "/mnt/data"]));
    assert_eq!(t.hook("terminate", None).await, (200, "ok".to_owned()));
    // The sandbox's namespace outlives its processes: a process started
    // in it afterwards (through the library) finds no FUSE mount left.
    let spec = rayito_agent::sandbox::SpawnSpec {
        program: "/bin/cat".into(),
        args: vec!["/proc/self/mountinfo".into()],
        ..Default::default()
    };
    use rayito_agent::for_emulator::Stdio;
    let mut child = t
        .agent
        .env()
        .launch(&spec, Stdio::Null, Stdio::Piped, Stdio::Null)
        .expect("launch");
    let mut out = String::new();
    tokio::io::AsyncReadExt::read_to_string(child.stdout.as_mut().expect("stdout"), &mut out)
        .await
        .expect("read");
    let status = child.wait().await.expect("wait");
    assert!(status.success(), "{status:?}");
    assert!(
        out.contains(" /home/user "),
        "the sandbox's namespace: {out}"
    );
    assert!(!out.contains(" fuse"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_fails_timeout() {
    if !can_mount("a_server_that_never_answers_fails_timeout") {
        return;
    }
    // An S3 endpoint that accepts connections and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = silent.local_addr().expect("addr");
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            open.push(stream);
        }
    });
    let s3 = s3_with_data().await;
    let mut key = s3.local_s3();
    key.endpoint_url = format!("http://{addr}");
    let image = allowing("data");
    let t = agent(&image, PersistenceAccess::Local(Some(key)), true).await;
    apply(&t, vec![mount("/mnt/data", "data")]).await;
    assert_eq!(
        settled(&t).await,
        [(
            "/mnt/data".to_owned(),
            pb::S3MountPhase::Failed,
            "timeout".to_owned()
        )]
    );
    held.abort();
}
