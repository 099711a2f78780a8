//! Secrets from AWS Secrets Manager injected into a sandbox, and git with
//! credentials that never reach a command line, on the embedded local
//! backend.
//!
//! ```text
//! cargo run --example secrets_and_git --features secrets
//! ```
//!
//! What it needs (docs/secrets.md, docs/git.md):
//! - a Secrets Manager: your AWS account through the usual configuration
//!   (`AWS_PROFILE`, `AWS_REGION`, ...), or a local one such as a moto
//!   server (`AWS_ENDPOINT_URL_SECRETS_MANAGER=http://127.0.0.1:5000`,
//!   `AWS_REGION=us-east-1` and any dummy `AWS_ACCESS_KEY_ID` /
//!   `AWS_SECRET_ACCESS_KEY`). The example creates `rayito/example/...`
//!   secrets and destroys them at the end.
//! - optionally a git remote over HTTP(S) with a username and a password or
//!   token: `RAYITO_EXAMPLE_GIT_URL`, `RAYITO_EXAMPLE_GIT_USERNAME`,
//!   `RAYITO_EXAMPLE_GIT_PASSWORD` (the password goes into Secrets Manager
//!   first, as a real service would keep it). Without them the git part
//!   works on a repository inside the sandbox only.
//!
//! It never prints a secret's value, only what the sandbox saw of it (its
//! length).

use std::collections::BTreeMap;

use rayito::git::{CloneOptions, CommitOptions, ConfigScope, PushOptions};
use rayito::secrets::{
    SecretCache, SecretCacheOptions, SecretRef, SecretStore, SecretStoreOptions,
};
use rayito::{Sandbox, SandboxError};

const API_KEY_SECRET: &str = "example/api-key";
const GIT_TOKEN_SECRET: &str = "example/git-token";

#[tokio::main]
async fn main() -> Result<(), SandboxError> {
    let store = SecretStore::new(SecretStoreOptions::new())?;
    let cache = SecretCache::new(SecretCacheOptions::new())?;

    // A value only this run knows, kept in Secrets Manager.
    let api_key = format!("example-key-{}", std::process::id());
    recreate(&store, API_KEY_SECRET, &api_key).await?;
    let remote = git_remote_from_env();
    if let Some(remote) = &remote {
        recreate(&store, GIT_TOKEN_SECRET, remote.password.expose()).await?;
    }

    let outcome = run(&cache, remote.as_ref()).await;
    store.destroy(API_KEY_SECRET).await?;
    if remote.is_some() {
        store.destroy(GIT_TOKEN_SECRET).await?;
    }
    outcome
}

async fn run(cache: &SecretCache, remote: Option<&GitRemote>) -> Result<(), SandboxError> {
    // The handle keeps the reference; the value is read when each process
    // starts and travels only in that process's environment.
    let sbx = Sandbox::builder()
        .local()
        .secret("API_KEY", API_KEY_SECRET)
        .secret_cache(cache.clone())
        .create()
        .await?;
    let result = inside(&sbx, cache, remote).await;
    sbx.kill().await?;
    result
}

async fn inside(
    sbx: &Sandbox,
    cache: &SecretCache,
    remote: Option<&GitRemote>,
) -> Result<(), SandboxError> {
    let seen = sbx.commands().run("printf '%s' \"${#API_KEY}\"").await?;
    println!("the sandbox sees API_KEY ({} characters)", seen.stdout);
    let cell = sbx
        .run_code("import os\nlen(os.environ['API_KEY'])")
        .await?;
    println!(
        "a Python cell sees it too ({} characters)",
        cell.text().unwrap_or_default()
    );

    let git = sbx.git();
    git.configure_user("Example", "example@example.com", ConfigScope::Global, None)
        .await?;
    let repo = "/home/user/repo";
    match remote {
        Some(remote) => {
            // The token comes from Secrets Manager and goes to git through
            // the command's stdin, answered only for the remote's host.
            let token = cache.get(&SecretRef::new(GIT_TOKEN_SECRET)).await?;
            git.clone(
                &remote.url,
                CloneOptions {
                    path: Some(repo.to_owned()),
                    username: Some(remote.username.clone()),
                    password: Some(token.clone()),
                    ..CloneOptions::default()
                },
            )
            .await?;
            println!("cloned the remote repository");
            sbx.files()
                .write(
                    &format!("{repo}/from-the-example.txt"),
                    "hello from a sandbox\n",
                )
                .await?;
            git.add(repo, Default::default()).await?;
            git.commit(
                repo,
                "Add a file from the sandbox",
                CommitOptions::default(),
            )
            .await?;
            git.push(
                repo,
                PushOptions {
                    username: Some(remote.username.clone()),
                    password: Some(token),
                    ..PushOptions::default()
                },
            )
            .await?;
            println!("pushed a commit; .git/config holds no credentials");
        }
        None => {
            git.init(repo, Default::default()).await?;
            sbx.files()
                .write(&format!("{repo}/README.md"), "# example\n")
                .await?;
            git.add(repo, Default::default()).await?;
            git.commit(repo, "First commit", CommitOptions::default())
                .await?;
            println!(
                "made a repository in the sandbox (set RAYITO_EXAMPLE_GIT_URL to clone and push)"
            );
        }
    }
    let status = git.status(repo).await?;
    println!(
        "branch {}, clean: {}, ahead {}",
        status.current_branch.as_deref().unwrap_or("(detached)"),
        status.is_clean(),
        status.ahead
    );
    Ok(())
}

/// Creates the secret, or replaces one a previous run left.
async fn recreate(store: &SecretStore, name: &str, value: &str) -> Result<(), SandboxError> {
    store.destroy(name).await?;
    store.create(name, value, &BTreeMap::new()).await?;
    Ok(())
}

struct GitRemote {
    url: String,
    username: String,
    password: rayito::Secret,
}

fn git_remote_from_env() -> Option<GitRemote> {
    let url = std::env::var("RAYITO_EXAMPLE_GIT_URL").ok()?;
    Some(GitRemote {
        url,
        username: std::env::var("RAYITO_EXAMPLE_GIT_USERNAME").unwrap_or_default(),
        password: rayito::Secret::new(
            std::env::var("RAYITO_EXAMPLE_GIT_PASSWORD").unwrap_or_default(),
        ),
    })
}
