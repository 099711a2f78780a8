//! `sandbox.git()` on the local backend against real git servers: `git
//! http-backend` behind Basic auth and `git daemon` (tests/sdk_support/
//! git_server.rs). Credentials must reach git through stdin and the
//! credential helper only: never a command line (`/proc/*/cmdline`),
//! `.git/config`, an error or a log line.
//!
//! Needs git with `http-backend` and `daemon` (Debian's `git`, installed by
//! .ci/install-test-deps); elsewhere each test prints `SKIPPED: ...`.

#[path = "sdk_git_attacks.rs"]
mod attacks;
use crate::sdk_support;

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use rayito::git::{
    AddOptions, CloneOptions, CommitOptions, ConfigScope, GitFileState, GitOptions, InitOptions,
    PullOptions, PushOptions, RemoteAddOptions, ResetOptions, RestoreOptions,
};
use rayito::{Sandbox, SandboxError, Secret};
use sdk_support::captured::Captured;
use sdk_support::git_server::{GitDaemon, GitHttp, git, git_program, seed_repo};
use sdk_support::skip::skip;

const USER: &str = "bob";
/// The password of every test: recognisable, with characters that a URL
/// would percent-encode.
const PASSWORD: &str = "Canary-GitPass#42@x";
/// The slow clone's own password: that test reads every command line on
/// the host, where concurrent tests may name [`PASSWORD`] in a grep.
const SLOW_PASSWORD: &str = "SlowClone-Pw#17@q";
const SLOW_PASSWORD_ENCODED: &str = "SlowClone-Pw%2317%40q";

/// Everything every test logs at TRACE (one subscriber per test binary).
fn log() -> &'static Captured {
    static LOG: OnceLock<Captured> = OnceLock::new();
    LOG.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let _ = tracing::subscriber::set_global_default(subscriber);
        captured
    })
}

/// A local sandbox, or `None` (skipped) without git's servers.
async fn sandbox(test: &str) -> Option<Sandbox> {
    log();
    if git_program().is_none() {
        skip(format!("{test}: needs git with http-backend and daemon"));
        return None;
    }
    Some(
        Sandbox::builder()
            .local()
            .create()
            .await
            .expect("create on the local backend"),
    )
}

/// Someone else's push: a clone of `bare` beside it that commits `file`
/// with `content` as `message` and pushes to main.
fn push_from_elsewhere(root: &Path, bare: &Path, file: &str, content: &str, message: &str) {
    let other = root.join("other");
    git(
        root,
        &[
            "clone",
            "-q",
            &bare.display().to_string(),
            &other.display().to_string(),
        ],
    );
    std::fs::write(other.join(file), content).unwrap();
    git(&other, &["add", file]);
    git(
        &other,
        &[
            "-c",
            "user.name=o",
            "-c",
            "user.email=o@x",
            "commit",
            "-qm",
            message,
        ],
    );
    git(&other, &["push", "-q", "origin", "main"]);
}

/// The page that transcribes the messages.
const GIT_DOC: &str = include_str!("../docs/git.md");

const AUTH_CLONE: &str = "git clone needs credentials: the remote asked for them or refused them; pass a username and a password or token";

fn secret() -> Option<Secret> {
    Some(Secret::new(PASSWORD))
}

fn creds() -> CloneOptions {
    CloneOptions {
        path: Some("/home/user/r".into()),
        username: Some(USER.into()),
        password: secret(),
        ..CloneOptions::default()
    }
}

/// Runs a shell command in the sandbox, its stdout.
async fn sh(sbx: &Sandbox, cmd: &str) -> String {
    match sbx.commands().run(cmd).await {
        Ok(out) => out.stdout,
        Err(SandboxError::CommandExit { stderr, .. }) => panic!("{cmd}: {}", stderr.as_str()),
        Err(err) => panic!("{cmd}: {err:?}"),
    }
}

/// The error's text in every form a caller can see.
fn all_text(err: &SandboxError) -> String {
    let mut text = format!("{err} {err:?} {:?}", err.meta());
    if let SandboxError::CommandExit { stdout, stderr, .. } = err {
        text.push_str(stdout);
        text.push_str(stderr);
    }
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn assert_no_password(text: &str, what: &str) {
    assert!(
        !text.contains(PASSWORD),
        "the password is in {what}: {text}"
    );
    assert!(
        !text.contains("Canary-GitPass%2342%40x"),
        "the encoded password is in {what}"
    );
}

fn root() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clone_commit_push_pull_round_trip_with_credentials() {
    let Some(sbx) = sandbox("clone_commit_push_pull_round_trip_with_credentials").await else {
        return;
    };
    let root = root();
    let bare = seed_repo(root.path(), "r.git");
    let server = GitHttp::start(root.path(), USER, PASSWORD, Duration::ZERO).await;
    let g = sbx.git();

    g.clone(&server.url("r.git"), creds()).await.expect("clone");
    assert_eq!(sh(&sbx, "cat /home/user/r/README").await, "hello\n");
    // The remote is the plain URL, and the password is nowhere in the repo.
    assert_eq!(
        g.remote_get("/home/user/r", "origin")
            .await
            .expect("remote_get"),
        Some(server.url("r.git"))
    );
    let config = sh(&sbx, "cat /home/user/r/.git/config").await;
    assert_no_password(&config, ".git/config");
    assert!(!config.contains(USER), "{config}");
    assert_eq!(
        sh(&sbx, "grep -rl 'Canary-GitPass' /home/user/r/.git || true").await,
        ""
    );

    g.configure_user(
        "Ann",
        "ann@example.com",
        ConfigScope::Local,
        Some("/home/user/r"),
    )
    .await
    .expect("configure_user");
    assert_eq!(
        g.get_config("user.email", ConfigScope::Local, Some("/home/user/r"))
            .await
            .expect("get_config"),
        Some("ann@example.com".into())
    );
    sh(&sbx, "echo two > /home/user/r/b.txt").await;
    g.add("/home/user/r", AddOptions::default())
        .await
        .expect("add");
    g.commit("/home/user/r", "second", CommitOptions::default())
        .await
        .expect("commit");
    let status = g.status("/home/user/r").await.expect("status");
    assert_eq!(status.current_branch.as_deref(), Some("main"));
    assert_eq!(status.upstream.as_deref(), Some("origin/main"));
    assert_eq!((status.ahead, status.behind), (1, 0));
    assert!(status.is_clean());

    let push = PushOptions {
        remote: Some("origin".into()),
        branch: Some("main".into()),
        username: Some(USER.into()),
        password: secret(),
        ..PushOptions::default()
    };
    g.push("/home/user/r", push).await.expect("push");
    assert_eq!(
        git(&bare, &["log", "-1", "--format=%s %an"]),
        "second Ann\n"
    );

    // Someone else pushes; pull (through the upstream push set) brings it.
    push_from_elsewhere(root.path(), &bare, "c.txt", "three\n", "third");
    let pull = PullOptions {
        username: Some(USER.into()),
        password: secret(),
        ..PullOptions::default()
    };
    g.pull("/home/user/r", pull).await.expect("pull");
    assert_eq!(sh(&sbx, "cat /home/user/r/c.txt").await, "three\n");

    // Every request the server answered with content carried the
    // credentials; git tried without them first (a 401), as usual.
    let seen = server.seen();
    assert!(seen.iter().any(|s| s.authorization.is_some()));
    assert_no_password(&log().text(), "the tracing output");
    assert!(sbx.kill().await.expect("kill"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_and_missing_credentials_are_git_auth() {
    let Some(sbx) = sandbox("wrong_and_missing_credentials_are_git_auth").await else {
        return;
    };
    let root = root();
    seed_repo(root.path(), "r.git");
    let server = GitHttp::start(root.path(), USER, "the-right-one", Duration::ZERO).await;
    let g = sbx.git();
    let url = server.url("r.git");

    let wrong = g.clone(&url, creds()).await.expect_err("a wrong password");
    assert_eq!(wrong.kind().as_str(), "git_auth", "{wrong:?}");
    assert!(wrong.is(rayito::ErrorKind::Authentication));
    assert!(!wrong.is_sandbox_error());
    assert_eq!(wrong.to_string(), AUTH_CLONE);
    assert_no_password(&all_text(&wrong), "the error");

    let missing = g
        .clone(&url, CloneOptions::default())
        .await
        .expect_err("no credentials");
    assert_eq!(missing.kind().as_str(), "git_auth", "{missing:?}");
    assert_eq!(missing.to_string(), AUTH_CLONE);

    let user_only = CloneOptions {
        username: Some(USER.into()),
        ..CloneOptions::default()
    };
    let err = g.clone(&url, user_only).await.expect_err("no password");
    assert_eq!(err.kind().as_str(), "git_auth", "{err:?}");
    assert_eq!(
        err.to_string(),
        "git clone needs a password or token: the username alone was refused; pass the password or token too"
    );
    assert!(!err.to_string().contains(&url));
    assert!(sbx.kill().await.expect("kill"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_insteadof_sends_nothing_anywhere() {
    let Some(sbx) = sandbox("a_planted_insteadof_sends_nothing_anywhere").await else {
        return;
    };
    let root = root();
    seed_repo(root.path(), "r.git");
    let server = GitHttp::start(root.path(), USER, PASSWORD, Duration::ZERO).await;
    let trap = GitHttp::start(root.path(), "evil", "evil", Duration::ZERO).await;
    let g = sbx.git();
    // Sandbox code rewrites the server's URL to its own.
    g.set_config(
        &format!("url.{}.insteadOf", trap.url("")),
        &server.url(""),
        ConfigScope::Global,
        None,
    )
    .await
    .expect("plant");
    let err = g
        .clone(&server.url("r.git"), creds())
        .await
        .expect_err("refused");
    assert_eq!(err.kind().as_str(), "git_auth", "{err:?}");
    assert_eq!(
        err.to_string(),
        "git clone did not send the credentials: the sandbox's git configuration rewrites URLs (url.*.insteadOf or pushInsteadOf), so they could reach another server; remove the rewriting, then retry"
    );
    assert!(server.seen().is_empty(), "{:?}", server.seen());
    assert!(trap.seen().is_empty(), "{:?}", trap.seen());
    assert_no_password(&all_text(&err), "the error");

    // The same for a push from a repository whose own config rewrites.
    let r = "/home/user/p";
    // (the global rewrite removed first)
    sh(&sbx, "rm ~/.gitconfig").await;
    g.init(r, InitOptions::default()).await.expect("init");
    g.remote_add(
        r,
        "origin",
        &server.url("r.git"),
        RemoteAddOptions::default(),
    )
    .await
    .expect("remote add");
    g.set_config(
        &format!("url.{}.pushInsteadOf", trap.url("")),
        &server.url(""),
        ConfigScope::Local,
        Some(r),
    )
    .await
    .expect("plant locally");
    let push = PushOptions {
        remote: Some("origin".into()),
        branch: Some("main".into()),
        username: Some(USER.into()),
        password: secret(),
        ..PushOptions::default()
    };
    let err = g.push(r, push).await.expect_err("refused");
    assert_eq!(err.kind().as_str(), "git_auth", "{err:?}");
    assert!(
        err.to_string()
            .starts_with("git push did not send the credentials"),
        "{err}"
    );
    assert!(server.seen().is_empty(), "{:?}", server.seen());
    assert!(trap.seen().is_empty(), "{:?}", trap.seen());
    assert!(sbx.kill().await.expect("kill"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_and_pull_without_upstream_are_git_upstream() {
    let Some(sbx) = sandbox("push_and_pull_without_upstream_are_git_upstream").await else {
        return;
    };
    let root = root();
    seed_repo(root.path(), "r.git");
    let daemon = GitDaemon::start(root.path()).await;
    let g = sbx.git();
    g.clone(
        &daemon.url("r.git"),
        CloneOptions {
            path: Some("/home/user/r".into()),
            ..CloneOptions::default()
        },
    )
    .await
    .expect("anonymous clone");
    g.create_branch("/home/user/r", "topic")
        .await
        .expect("branch");
    let push = g
        .push("/home/user/r", PushOptions::default())
        .await
        .expect_err("no upstream");
    assert_eq!(push.kind().as_str(), "git_upstream", "{push:?}");
    assert_eq!(
        push.to_string(),
        "git push found no upstream branch; pass a remote and a branch, or set the upstream (push with set_upstream, or git branch --set-upstream-to)"
    );
    let pull = g
        .pull("/home/user/r", PullOptions::default())
        .await
        .expect_err("no upstream");
    assert_eq!(pull.kind().as_str(), "git_upstream", "{pull:?}");
    assert_eq!(
        pull.to_string(),
        "git pull found no upstream branch; pass a remote and a branch, or set the upstream (push with set_upstream, or git branch --set-upstream-to)"
    );
    // Credentials go to an http(s) remote only.
    let to_daemon = PushOptions {
        remote: Some("origin".into()),
        branch: Some("topic".into()),
        username: Some(USER.into()),
        password: secret(),
        ..PushOptions::default()
    };
    let err = g.push("/home/user/r", to_daemon).await.expect_err("git://");
    assert_eq!(
        err.to_string(),
        "invalid username: credentials are sent only to a remote with an http:// or https:// URL without user info"
    );
    // With a target named, push sets the upstream, and pull works.
    let push = PushOptions {
        remote: Some("origin".into()),
        branch: Some("topic".into()),
        ..PushOptions::default()
    };
    g.push("/home/user/r", push).await.expect("anonymous push");
    g.pull("/home/user/r", PullOptions::default())
        .await
        .expect("pull with an upstream");
    assert!(sbx.kill().await.expect("kill"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_branches_of_a_real_repository() {
    let Some(sbx) = sandbox("status_and_branches_of_a_real_repository").await else {
        return;
    };
    let root = root();
    let bare = seed_repo(root.path(), "r.git");
    let daemon = GitDaemon::start(root.path()).await;
    let g = sbx.git();
    let r = "/home/user/r";
    g.clone(
        &daemon.url("r.git"),
        CloneOptions {
            path: Some(r.into()),
            ..CloneOptions::default()
        },
    )
    .await
    .expect("clone");
    g.configure_user("Ann", "ann@example.com", ConfigScope::Global, None)
        .await
        .expect("identity");
    // Behind by one (pushed elsewhere, fetched), ahead by two.
    push_from_elsewhere(root.path(), &bare, "README", "theirs\n", "theirs");
    sh(&sbx, "git -C /home/user/r fetch -q").await;
    for n in ["1", "2"] {
        g.commit(
            r,
            n,
            CommitOptions {
                allow_empty: true,
                ..CommitOptions::default()
            },
        )
        .await
        .expect("commit");
    }
    sh(&sbx, "cd /home/user/r && echo mine > README && echo new > n.txt && echo s > s.txt && git add s.txt && git mv s.txt t.txt").await;
    let s = g.status(r).await.expect("status");
    assert_eq!(s.current_branch.as_deref(), Some("main"));
    assert_eq!(s.upstream.as_deref(), Some("origin/main"));
    assert_eq!((s.ahead, s.behind, s.detached), (2, 1, false));
    let by_name = |n: &str| {
        s.files
            .iter()
            .find(|f| f.name == n)
            .unwrap_or_else(|| panic!("{n}: {s:?}"))
            .clone()
    };
    assert_eq!(by_name("README").status, GitFileState::Modified);
    assert!(!by_name("README").staged);
    assert_eq!(by_name("n.txt").status, GitFileState::Untracked);
    assert_eq!(by_name("t.txt").status, GitFileState::Added);
    assert!(by_name("t.txt").staged);
    assert!(s.has_untracked() && s.has_staged() && !s.has_conflicts());

    // Restore and reset undo them.
    g.restore(r, &["README".into()], RestoreOptions::default())
        .await
        .expect("restore");
    g.reset(
        r,
        ResetOptions {
            paths: Some(vec!["t.txt".into()]),
            ..ResetOptions::default()
        },
    )
    .await
    .expect("reset");
    let s = g.status(r).await.expect("status");
    assert!(
        s.files.iter().all(|f| f.status == GitFileState::Untracked),
        "{s:?}"
    );

    // A conflict: both sides changed README.
    sh(
        &sbx,
        "cd /home/user/r && rm -f n.txt t.txt && echo ours > README && git commit -qam ours",
    )
    .await;
    let merged = sbx
        .commands()
        .run("git -C /home/user/r merge origin/main")
        .await;
    assert!(merged.is_err(), "the merge conflicts");
    let s = g.status(r).await.expect("status");
    assert!(s.has_conflicts(), "{s:?}");
    let readme = s.files.iter().find(|f| f.name == "README").expect("README");
    assert_eq!(
        (readme.index_status, readme.working_tree_status),
        ('U', 'U')
    );
    assert_eq!(readme.status, GitFileState::Conflict);
    g.reset(
        r,
        ResetOptions {
            mode: Some("hard".into()),
            ..ResetOptions::default()
        },
    )
    .await
    .expect("reset --hard");

    // Branches: create, list, check out, delete.
    g.create_branch(r, "feature").await.expect("create");
    let b = g.branches(r).await.expect("branches");
    assert_eq!(b.branches, ["feature", "main"]);
    assert_eq!(b.current.as_deref(), Some("feature"));
    g.checkout_branch(r, "main").await.expect("checkout");
    g.delete_branch(r, "feature", false).await.expect("delete");
    assert_eq!(g.branches(r).await.expect("branches").branches, ["main"]);
    sh(&sbx, "git -C /home/user/r checkout -q --detach").await;
    let s = g.status(r).await.expect("status");
    assert!(s.detached && s.current_branch.is_none(), "{s:?}");

    // Init and remotes.
    g.init(
        "/home/user/fresh",
        InitOptions {
            initial_branch: Some("trunk".into()),
            ..InitOptions::default()
        },
    )
    .await
    .expect("init");
    assert_eq!(
        g.status("/home/user/fresh")
            .await
            .expect("status")
            .current_branch
            .as_deref(),
        Some("trunk")
    );
    assert_eq!(
        g.remote_get("/home/user/fresh", "origin")
            .await
            .expect("get"),
        None
    );
    g.remote_add(
        "/home/user/fresh",
        "origin",
        &daemon.url("r.git"),
        RemoteAddOptions {
            fetch: true,
            ..RemoteAddOptions::default()
        },
    )
    .await
    .expect("remote add + fetch");
    g.remote_add(
        "/home/user/fresh",
        "origin",
        "https://example.com/x.git",
        RemoteAddOptions {
            overwrite: true,
            ..RemoteAddOptions::default()
        },
    )
    .await
    .expect("overwrite");
    assert_eq!(
        g.remote_get("/home/user/fresh", "origin")
            .await
            .expect("get")
            .as_deref(),
        Some("https://example.com/x.git")
    );
    let dup = g
        .remote_add(
            "/home/user/fresh",
            "origin",
            "https://example.com/y.git",
            RemoteAddOptions::default(),
        )
        .await
        .expect_err("exists");
    assert_eq!(dup.kind().as_str(), "command_exit");
    assert_eq!(
        dup.to_string(),
        "command git exited with code 3; its stdout and stderr are in the error"
    );
    assert!(sbx.kill().await.expect("kill"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_argument_is_refused_by_name_before_any_io() {
    let Some(sbx) = sandbox("every_argument_is_refused_by_name_before_any_io").await else {
        return;
    };
    let g = sbx.git();
    let p = "/home/user/r";
    let pw = Secret::new("pw");
    let cases: Vec<(&str, Result<_, SandboxError>)> = vec![
        ("url", g.clone("", CloneOptions::default()).await.map(drop)),
        (
            "url",
            g.clone("https://u:p@h/r", CloneOptions::default())
                .await
                .map(drop),
        ),
        ("url", g.clone("git://h/r", creds()).await.map(drop)),
        (
            "depth",
            g.clone(
                "https://h/r",
                CloneOptions {
                    depth: Some(0),
                    ..CloneOptions::default()
                },
            )
            .await
            .map(drop),
        ),
        (
            "password",
            g.clone(
                "https://h/r",
                CloneOptions {
                    password: Some(pw.clone()),
                    ..CloneOptions::default()
                },
            )
            .await
            .map(drop),
        ),
        (
            "dangerously_store_credentials",
            g.clone(
                "https://h/r",
                CloneOptions {
                    dangerously_store_credentials: true,
                    ..CloneOptions::default()
                },
            )
            .await
            .map(drop),
        ),
        (
            "branch",
            g.clone(
                "https://h/r",
                CloneOptions {
                    branch: Some("-x".into()),
                    ..CloneOptions::default()
                },
            )
            .await
            .map(drop),
        ),
        ("path", g.init("", InitOptions::default()).await.map(drop)),
        ("path", g.status("-rf").await.map(drop)),
        (
            "name",
            g.remote_add(p, "", "https://h/r", RemoteAddOptions::default())
                .await
                .map(drop),
        ),
        (
            "url",
            g.remote_add(p, "o", "https://t@h/r", RemoteAddOptions::default())
                .await
                .map(drop),
        ),
        (
            "files",
            g.add(
                p,
                AddOptions {
                    files: Some(vec![]),
                    all: true,
                },
            )
            .await
            .map(drop),
        ),
        (
            "message",
            g.commit(p, "a\0b", CommitOptions::default())
                .await
                .map(drop),
        ),
        (
            "mode",
            g.reset(
                p,
                ResetOptions {
                    mode: Some("wipe".into()),
                    ..ResetOptions::default()
                },
            )
            .await
            .map(drop),
        ),
        (
            "paths",
            g.reset(
                p,
                ResetOptions {
                    paths: Some(vec![]),
                    ..ResetOptions::default()
                },
            )
            .await
            .map(drop),
        ),
        (
            "paths",
            g.restore(p, &[], RestoreOptions::default()).await.map(drop),
        ),
        (
            "worktree",
            g.restore(
                p,
                &["a".into()],
                RestoreOptions {
                    staged: Some(false),
                    worktree: Some(false),
                    ..RestoreOptions::default()
                },
            )
            .await
            .map(drop),
        ),
        (
            "branch",
            g.push(
                p,
                PushOptions {
                    branch: Some("main".into()),
                    ..PushOptions::default()
                },
            )
            .await
            .map(drop),
        ),
        (
            "password",
            g.push(
                p,
                PushOptions {
                    password: Some(pw.clone()),
                    ..PushOptions::default()
                },
            )
            .await
            .map(drop),
        ),
        (
            "password",
            g.pull(
                p,
                PullOptions {
                    password: Some(pw.clone()),
                    ..PullOptions::default()
                },
            )
            .await
            .map(drop),
        ),
        (
            "path",
            g.set_config("a.b", "c", ConfigScope::Local, None)
                .await
                .map(drop),
        ),
        (
            "path",
            g.get_config("a.b", ConfigScope::Local, None)
                .await
                .map(drop),
        ),
        (
            "key",
            g.get_config("", ConfigScope::Global, None).await.map(drop),
        ),
        (
            "email",
            g.configure_user("a", "", ConfigScope::Global, None)
                .await
                .map(drop),
        ),
        (
            "password",
            g.dangerously_authenticate("u", &Secret::new(""), Default::default())
                .await
                .map(drop),
        ),
        (
            "protocol",
            g.dangerously_authenticate(
                "u",
                &pw,
                rayito::git::AuthenticateOptions {
                    protocol: "ftp".into(),
                    ..Default::default()
                },
            )
            .await
            .map(drop),
        ),
    ];
    for (argument, outcome) in cases {
        let err = outcome.expect_err(argument);
        match &err {
            SandboxError::InvalidArgument { argument: got, .. } => {
                assert_eq!(got.as_deref(), Some(argument), "{err}");
            }
            other => panic!("{argument}: {other:?}"),
        }
        assert_eq!(err.meta().attempts(), 0, "{err:?}");
        // docs/git.md transcribes every refusal.
        let message = err.to_string();
        let generic = message.replacen(&format!("invalid {argument}:"), "invalid <argument>:", 1);
        assert!(
            GIT_DOC.contains(&format!("`{message}`")) || GIT_DOC.contains(&format!("`{generic}`")),
            "docs/git.md lacks `{message}`"
        );
    }
    // Nothing ran: no repository, no config.
    assert_eq!(
        sh(
            &sbx,
            "ls -a /home/user | grep -c -e '^r$' -e gitconfig || true"
        )
        .await,
        "0\n"
    );
    assert!(sbx.kill().await.expect("kill"));
}

/// Every process's command line, read now.
fn cmdlines() -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if let Ok(raw) = std::fs::read(entry.path().join("cmdline")) {
            out.push(String::from_utf8_lossy(&raw).replace('\0', " "));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_password_is_in_no_command_line_during_a_slow_clone_and_push() {
    let Some(sbx) =
        sandbox("the_password_is_in_no_command_line_during_a_slow_clone_and_push").await
    else {
        return;
    };
    let root = root();
    seed_repo(root.path(), "r.git");
    // Each answer waits 400 ms: a clone takes a couple of seconds.
    let server = GitHttp::start(root.path(), USER, SLOW_PASSWORD, Duration::from_millis(400)).await;
    let g = sbx
        .git()
        .with_options(GitOptions::new().env("GIT_TRACE", "0"));
    let url = server.url("r.git");

    let watch = |stop: tokio::sync::watch::Receiver<bool>| {
        tokio::task::spawn_blocking(move || {
            let (mut samples, mut during) = (0u32, 0u32);
            while !*stop.borrow() {
                for line in cmdlines() {
                    // The whole host is read: other tests' commands may
                    // name the shared canary, never this test's own.
                    assert!(
                        !line.contains(SLOW_PASSWORD) && !line.contains(SLOW_PASSWORD_ENCODED),
                        "a command line holds the password: {line}"
                    );
                    if line.contains("remote-http") || line.contains("git -c core.hooksPath") {
                        during += 1;
                    }
                }
                samples += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            (samples, during)
        })
    };

    let (tx, rx) = tokio::sync::watch::channel(false);
    let watcher = watch(rx);
    let slow_creds = CloneOptions {
        password: Some(Secret::new(SLOW_PASSWORD)),
        ..creds()
    };
    let cloned = g.clone(&url, slow_creds.clone()).await;
    tx.send(true).unwrap();
    let (samples, during) = watcher.await.expect("watcher");
    cloned.expect("clone");
    assert!(
        during > 0,
        "sampled {samples} times, never during the clone"
    );

    sh(&sbx, "cd /home/user/r && echo x > x && git add x && git -c user.name=a -c user.email=a@b commit -qm x").await;
    let (tx, rx) = tokio::sync::watch::channel(false);
    let watcher = watch(rx);
    let pushed = g
        .push(
            "/home/user/r",
            PushOptions {
                remote: Some("origin".into()),
                branch: Some("main".into()),
                username: Some(USER.into()),
                password: Some(Secret::new(SLOW_PASSWORD)),
                ..PushOptions::default()
            },
        )
        .await;
    tx.send(true).unwrap();
    let (samples, during) = watcher.await.expect("watcher");
    pushed.expect("push");
    assert!(during > 0, "sampled {samples} times, never during the push");

    let config = sh(
        &sbx,
        "cat /home/user/r/.git/config; cat ~/.gitconfig 2>/dev/null; ls -a ~",
    )
    .await;
    assert_no_password(&config, ".git/config and the home");
    assert!(!config.contains(SLOW_PASSWORD) && !config.contains(SLOW_PASSWORD_ENCODED));
    assert!(!config.contains(".git-credentials"), "{config}");
    assert_no_password(&log().text(), "the tracing output");
    assert!(!log().text().contains(SLOW_PASSWORD), "the tracing output");

    // Any other failure of a credentialed call is the command's own exit,
    // without the password in any text.
    let again = g
        .clone(&url, slow_creds)
        .await
        .expect_err("the path exists");
    assert_eq!(again.kind().as_str(), "command_exit", "{again:?}");
    assert_no_password(&all_text(&again), "the error");
    assert!(!all_text(&again).contains(SLOW_PASSWORD));
    assert!(all_text(&again).contains("already exists"), "{again:?}");
    assert!(sbx.kill().await.expect("kill"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dangerously_stored_credentials_serve_later_commands() {
    let Some(sbx) = sandbox("dangerously_stored_credentials_serve_later_commands").await else {
        return;
    };
    let root = root();
    seed_repo(root.path(), "r.git");
    let server = GitHttp::start(root.path(), USER, PASSWORD, Duration::ZERO).await;
    let g = sbx.git();
    let options = CloneOptions {
        dangerously_store_credentials: true,
        ..creds()
    };
    g.clone(&server.url("r.git"), options).await.expect("clone");
    // Stored where documented, and a plain fetch now authenticates.
    let stored = sh(&sbx, "cat ~/.git-credentials").await;
    assert!(
        stored.contains(&format!("@{}", server.addr).replace(':', "%3a")),
        "stored for the server: {}",
        stored.replace(PASSWORD, "***")
    );
    sh(&sbx, "git -C /home/user/r fetch -q origin").await;
    assert!(sbx.kill().await.expect("kill"));
}
