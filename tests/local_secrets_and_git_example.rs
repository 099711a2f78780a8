//! `examples/secrets_and_git.rs` run as a new user would, on the local
//! backend against the in-test equivalents of what docs/secrets.md and
//! docs/git.md describe: a moto server as Secrets Manager (through
//! `AWS_ENDPOINT_URL_SECRETS_MANAGER`, the documented variable) and
//! `git http-backend` behind Basic auth as the remote. The example must
//! clone, commit and push with the token it kept in Secrets Manager, print
//! no secret, leave no secret in Secrets Manager, and land its commit on
//! the server.
//!
//! Needs moto and git (`.ci/install-test-deps`); prints `SKIPPED: ...`
//! without them.

use crate::example_support;

use crate::sdk_support;

use std::time::Duration;

use sdk_support::git_server::{GitHttp, git, git_program, seed_repo};
use sdk_support::moto::MotoServer;
use sdk_support::skip::skip;

const USER: &str = "example-user";
const PASSWORD: &str = "example-canary-token-6d1f0b";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secrets_and_git_example_clones_commits_and_pushes() {
    if git_program().is_none() {
        skip("needs git with http-backend (Debian's git; .ci/install-test-deps)");
        return;
    }
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")
    else {
        return;
    };
    let root = tempfile::tempdir().expect("tempdir");
    let bare = seed_repo(root.path(), "project.git");
    let server = GitHttp::start(root.path(), USER, PASSWORD, Duration::ZERO).await;
    let mut env = example_support::secrets_manager_env(moto.endpoint_url());
    env.extend([
        ("RAYITO_EXAMPLE_GIT_URL", server.url("project.git")),
        ("RAYITO_EXAMPLE_GIT_USERNAME", USER.to_owned()),
        ("RAYITO_EXAMPLE_GIT_PASSWORD", PASSWORD.to_owned()),
    ]);
    let (stdout, stderr) = example_support::run_example("secrets_and_git", env).await;
    for text in [&stdout, &stderr] {
        assert!(!text.contains(PASSWORD), "the token was printed");
        assert!(!text.contains("example-key-"), "the API key was printed");
    }
    assert!(
        stdout.contains("the sandbox sees API_KEY (")
            && stdout.contains("a Python cell sees it too ("),
        "{stdout}"
    );
    assert!(stdout.contains("cloned the remote repository"), "{stdout}");
    assert!(stdout.contains("pushed a commit"), "{stdout}");
    assert!(
        stdout.contains("branch main, clean: true, ahead 0"),
        "{stdout}"
    );
    // The commit is on the server.
    let log = git(&bare, &["log", "--format=%s", "main"]);
    assert_eq!(log, "Add a file from the sandbox\nfirst\n");
    // Every request with credentials carried the right ones; the first
    // (without) was refused.
    assert!(server.seen().iter().any(|s| s.authorization.is_some()));
    // The example destroyed its secrets.
    let raw = aws_sdk_secretsmanager::Client::new(&sdk_support::moto_config::sdk_config(
        &moto.endpoint_url(),
        "AKID",
    ));
    let listed = raw.list_secrets().send().await.expect("list");
    assert!(listed.secret_list().is_empty(), "secrets were left behind");
}
