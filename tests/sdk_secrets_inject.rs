//! `secrets` injection into a local sandbox, with the values in a real
//! Secrets Manager API (a moto server on 127.0.0.1): bound on the builder
//! and per call, into commands, terminals, Python cells and code contexts;
//! a missing secret launches nothing; a variable also in `envs` is refused
//! before any I/O; no value or name in an error, `Debug` or any process's
//! command line.
//!
//! Needs moto (`.ci/install-test-deps`); prints `SKIPPED: ...` without it.

use crate::sdk_support;

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt as _;

use rayito::secrets::{
    SecretCache, SecretCacheOptions, SecretRef, SecretStore, SecretStoreOptions,
};
use rayito::{
    CodeContextOptions, CommandOptions, ErrorKind, ListQuery, PtyOptions, PtySize, RunCodeOptions,
    Sandbox, SandboxError,
};
use sdk_support::moto::MotoServer;

/// Values and names no error, Debug or command line may show.
const VALUE: &str = "inject-canary-value-7f3e2a";
const OTHER_VALUE: &str = "inject-canary-other-91bd0c";
const NAME: &str = "inject/canary-name-5521";
const OTHER_NAME: &str = "inject/canary-other-8812";

fn sdk_config(endpoint: &str) -> aws_types::SdkConfig {
    sdk_support::moto_config::sdk_config(endpoint, "AKIDINJECTTEST")
}

fn cache(endpoint: &str) -> SecretCache {
    SecretCache::new(SecretCacheOptions::new().sdk_config(sdk_config(endpoint))).expect("cache")
}

async fn moto_with_secrets() -> Option<MotoServer> {
    let moto = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")?;
    let store =
        SecretStore::new(SecretStoreOptions::new().sdk_config(sdk_config(&moto.endpoint_url())))
            .expect("store");
    store
        .create(NAME, VALUE, &BTreeMap::new())
        .await
        .expect("create the secret");
    store
        .create(OTHER_NAME, OTHER_VALUE, &BTreeMap::new())
        .await
        .expect("create the other secret");
    Some(moto)
}

fn no_leak(err: &SandboxError) {
    for text in [err.to_string(), format!("{err:?}")] {
        for canary in [VALUE, OTHER_VALUE, NAME, OTHER_NAME] {
            assert!(!text.contains(canary), "{canary} leaked: {text}");
        }
    }
}

/// Every process's command line on this host (the sandbox's included: the
/// local backend runs it here).
fn all_cmdlines() -> String {
    let mut out = String::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            if let Ok(bytes) = std::fs::read(entry.path().join("cmdline")) {
                out.push_str(&String::from_utf8_lossy(&bytes));
                out.push('\n');
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_and_call_secrets_reach_every_process_kind() {
    let Some(moto) = moto_with_secrets().await else {
        return;
    };
    let sbx = Sandbox::builder()
        .local()
        .secret("API_KEY", NAME)
        .secret_cache(cache(&moto.endpoint_url()))
        .create()
        .await
        .expect("create with a bound secret");
    assert!(!format!("{sbx:?}").contains(NAME));

    // A command sees the bound secret; its command line does not hold it.
    let out = sbx
        .commands()
        .run("printf %s \"$API_KEY\"")
        .await
        .expect("run");
    assert_eq!(out.stdout, VALUE);

    // A call's secret overrides the bound one on the same variable, and
    // adds its own.
    let out = sbx
        .commands()
        .run_with(
            "printf '%s %s' \"$API_KEY\" \"$OTHER\"",
            CommandOptions::new()
                .secret("API_KEY", SecretRef::new(OTHER_NAME))
                .secret("OTHER", NAME),
        )
        .await
        .expect("run with call secrets");
    assert_eq!(out.stdout, format!("{OTHER_VALUE} {VALUE}"));

    // While a command with the secret runs, no command line on the host
    // holds it (the value is in its environment only).
    let handle = sbx
        .commands()
        .spawn("sleep 3; printf %s \"$API_KEY\"", CommandOptions::new())
        .await
        .expect("spawn");
    // Sampled once the command's own shell is on a command line, so the
    // check below looks at the running command, not at an empty table.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let cmdlines = loop {
        let now = all_cmdlines();
        if now.contains("printf %s \"$API_KEY\"") {
            break now;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the spawned command never showed up in /proc"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    for canary in [VALUE, OTHER_VALUE, NAME, OTHER_NAME] {
        assert!(!cmdlines.contains(canary), "{canary} is on a command line");
    }
    assert_eq!(handle.wait().await.expect("wait").stdout, VALUE);

    // A Python cell of the default context sees it; so does a new context.
    let execution = sbx
        .run_code("import os; print(os.environ['API_KEY'])")
        .await
        .expect("run_code");
    assert_eq!(execution.logs.stdout, vec![format!("{VALUE}\n")]);
    let execution = sbx
        .run_code_with(
            "import os; print(os.environ['CELL'])",
            RunCodeOptions::new().secret("CELL", OTHER_NAME),
        )
        .await
        .expect("run_code with a cell secret");
    assert_eq!(execution.logs.stdout, vec![format!("{OTHER_VALUE}\n")]);
    let context = sbx
        .create_code_context(CodeContextOptions::new().secret("CTX", NAME))
        .await
        .expect("context");
    let execution = sbx
        .run_code_with(
            "import os; print(os.environ['CTX'], os.environ['API_KEY'])",
            RunCodeOptions::new().context(&context.id),
        )
        .await
        .expect("run in the context");
    assert_eq!(execution.logs.stdout, vec![format!("{VALUE} {VALUE}\n")]);

    // A terminal's shell has it.
    let mut pty = sbx
        .pty()
        .create(
            PtySize::new(80, 24),
            PtyOptions::new().secret("TERM_SECRET", OTHER_NAME),
        )
        .await
        .expect("pty");
    pty.send_input("printf '<%s>' \"$TERM_SECRET\"; exit\n")
        .await
        .expect("input");
    let mut screen = Vec::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(30), pty.next())
        .await
        .expect("the shell ends in time")
    {
        screen.extend_from_slice(&chunk.expect("output").data);
    }
    assert!(
        String::from_utf8_lossy(&screen).contains(&format!("<{OTHER_VALUE}>")),
        "the terminal printed the secret"
    );

    // Refusals before any I/O, naming the variable, never the secret.
    let err = sbx
        .commands()
        .run_with(
            "true",
            CommandOptions::new()
                .env("API_KEY", "plain")
                .secret("X", NAME),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SandboxError::InvalidArgument { argument: Some(a), .. } if a == "secrets"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "invalid secrets: environment variable API_KEY is given both in envs and in secrets; pass it in one of them"
    );
    no_leak(&err);
    let err = sbx
        .run_code_with(
            "1",
            RunCodeOptions::new()
                .language("javascript")
                .secret("K", NAME),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid secrets: secrets reach Python cells only; give them to a code context of that language (CodeContextOptions::secret)"
    );

    // A call secret that does not exist starts nothing and names the variable.
    let err = sbx
        .commands()
        .run_with(
            "touch /tmp/should-not-exist",
            CommandOptions::new().secret("MISSING_KEY", "inject/no-such-secret"),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SecretNotFound, "{err:?}");
    assert!(
        err.to_string().contains("environment variable MISSING_KEY"),
        "{err}"
    );
    assert!(!err.to_string().contains("no-such-secret"), "{err}");
    no_leak(&err);
    assert!(
        sbx.commands()
            .run("test ! -e /tmp/should-not-exist")
            .await
            .is_ok(),
        "the command ran although its secret was missing"
    );

    assert!(sbx.kill().await.expect("kill"));
}

/// `commands().list()` names the injected variables of a running command
/// and terminal but holds no value anywhere (fields and `Debug`): a value
/// travels only in the request that starts its process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_holds_no_injected_value() {
    let Some(moto) = moto_with_secrets().await else {
        return;
    };
    let sbx = Sandbox::builder()
        .local()
        .secret("API_KEY", NAME)
        .secret_cache(cache(&moto.endpoint_url()))
        .create()
        .await
        .expect("create with a bound secret");
    let handle = sbx
        .commands()
        .spawn(
            "sleep 600",
            CommandOptions::new()
                .no_timeout()
                .secret("CALL_KEY", OTHER_NAME),
        )
        .await
        .expect("spawn");
    let pty = sbx
        .pty()
        .create(
            PtySize::new(80, 24),
            PtyOptions::new().secret("TERM_SECRET", OTHER_NAME),
        )
        .await
        .expect("pty");
    let listed = sbx.commands().list().await.expect("list");
    let command = listed
        .iter()
        .find(|p| p.pid == handle.pid())
        .expect("the command is listed");
    assert!(command.envs.contains_key("API_KEY"), "{command:?}");
    assert!(command.envs.contains_key("CALL_KEY"), "{command:?}");
    let terminal = listed
        .iter()
        .find(|p| p.pid == pty.pid())
        .expect("the terminal is listed");
    assert!(terminal.envs.contains_key("TERM_SECRET"), "{terminal:?}");
    for info in &listed {
        assert!(info.envs.values().all(String::is_empty), "{info:?}");
        let shown = format!("{info:?} {:?} {:?} {:?}", info.args, info.cmd, info.cwd);
        for canary in [VALUE, OTHER_VALUE, NAME, OTHER_NAME] {
            assert!(!shown.contains(canary), "{canary} is in a listing");
        }
    }
    assert!(handle.kill().await.expect("kill"));
    assert!(sbx.kill().await.expect("kill"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_bound_secret_launches_nothing() {
    let Some(moto) = moto_with_secrets().await else {
        return;
    };
    let client = rayito::Client::builder()
        .local()
        .build()
        .await
        .expect("local client");
    // Other tests of this binary share the local backend: count only the
    // sandboxes with this test's own metadata.
    let count = || async {
        client
            .list(ListQuery::new().metadata([("test", "missing-bound-secret")]))
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .expect("list")
            .len()
    };
    let err = client
        .sandbox()
        .metadata([("test", "missing-bound-secret")])
        .secret("DB_PASSWORD", "inject/never-created")
        .secret_cache(cache(&moto.endpoint_url()))
        .create()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SecretNotFound, "{err:?}");
    assert!(
        err.to_string().contains("environment variable DB_PASSWORD"),
        "{err}"
    );
    assert!(!err.to_string().contains("never-created"), "{err}");
    assert_eq!(count().await, 0, "a sandbox was launched");

    // A variable both bound and in the builder's envs: refused before any call.
    let err = Sandbox::builder()
        .local()
        .env("API_KEY", "plain")
        .secret("API_KEY", NAME)
        .secret_cache(cache(&moto.endpoint_url()))
        .create()
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid secrets: environment variable API_KEY is given both in envs and in secrets; pass it in one of them"
    );
    no_leak(&err);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_binds_its_builders_secrets_when_a_sandbox_is_taken() {
    let Some(moto) = moto_with_secrets().await else {
        return;
    };
    let pool = Sandbox::builder()
        .local()
        .secret("POOLED_KEY", NAME)
        .secret_cache(cache(&moto.endpoint_url()))
        .pool(rayito::PoolConfig::new(1))
        .expect("pool");
    pool.start().await.expect("start");
    // A parked sandbox is taken (waited for), then gets the secret.
    let sbx = pool
        .take_within(Duration::from_secs(60))
        .await
        .expect("take");
    let out = sbx
        .commands()
        .run("printf %s \"$POOLED_KEY\"")
        .await
        .expect("run");
    assert_eq!(out.stdout, VALUE);
    let _ = sbx.kill().await;

    // A pool whose secret is missing hands out nothing and keeps its
    // parked sandboxes.
    let broken = Sandbox::builder()
        .local()
        .secret("POOLED_KEY", "inject/never-created")
        .secret_cache(cache(&moto.endpoint_url()))
        .pool(rayito::PoolConfig::new(1))
        .expect("pool");
    broken.start().await.expect("start");
    let err = broken
        .take_within(Duration::from_secs(5))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SecretNotFound, "{err:?}");
    no_leak(&err);
    let _ = broken.close(true).await;
    let _ = pool.close(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_binds_the_builders_secrets_and_reads_them_first() {
    let Some(moto) = moto_with_secrets().await else {
        return;
    };
    let sbx = Sandbox::builder().local().create().await.expect("create");
    // The creating handle has no secret; a connected one binds its builder's.
    let out = sbx
        .commands()
        .run("printf '[%s]' \"${LATE_KEY:-}\"")
        .await
        .expect("run");
    assert_eq!(out.stdout, "[]");
    let connected = Sandbox::builder()
        .local()
        .secret("LATE_KEY", OTHER_NAME)
        .secret_cache(cache(&moto.endpoint_url()))
        .connect(sbx.id(), sbx.access_token().clone())
        .await
        .expect("connect");
    let out = connected
        .commands()
        .run("printf '[%s]' \"$LATE_KEY\"")
        .await
        .expect("run");
    assert_eq!(out.stdout, format!("[{OTHER_VALUE}]"));
    // A missing secret fails connect itself (before the control plane is
    // asked): the sandbox is untouched.
    let err = Sandbox::builder()
        .local()
        .secret("LATE_KEY", "inject/never-created")
        .secret_cache(cache(&moto.endpoint_url()))
        .connect(sbx.id(), sbx.access_token().clone())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SecretNotFound, "{err:?}");
    no_leak(&err);
    assert!(sbx.is_running().await);
    assert!(sbx.kill().await.expect("kill"));
}
