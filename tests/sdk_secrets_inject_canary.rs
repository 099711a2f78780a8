//! Canary: a secret injected into a local sandbox, its value and its name,
//! appear in no `tracing` line at TRACE (the SDK's, the AWS SDK's, the
//! embedded agent's and emulator's: the local backend runs them in this
//! process), no error, no `Debug` and no process's command line, across
//! create, commands (run and spawn), a terminal, Python code, a code
//! context and kill. The one-time warning about sandbox code reading
//! injected values is there, once.
//!
//! One test per binary: it installs the process-wide TRACE subscriber.

use crate::sdk_support;

use std::collections::BTreeMap;
use std::time::Duration;

use rayito::secrets::{SecretCache, SecretCacheOptions, SecretStore, SecretStoreOptions};
use rayito::{CodeContextOptions, CommandOptions, PtyOptions, PtySize, RunCodeOptions, Sandbox};
use sdk_support::captured::Captured;
use sdk_support::moto::MotoServer;

const NAME_CANARY: &str = "InjectCanaryNameHv4";
const VALUE_CANARY: &str = "InjectCanaryValueTj8";

fn sdk_config(endpoint: &str) -> aws_types::SdkConfig {
    sdk_support::moto_config::sdk_config(endpoint, "AKIDINJECTCANARY")
}

fn cmdlines() -> String {
    let mut out = String::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if let Ok(bytes) = std::fs::read(entry.path().join("cmdline")) {
            out.push_str(&String::from_utf8_lossy(&bytes));
            out.push('\n');
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_injected_secret_reaches_no_log_error_debug_or_command_line() {
    let captured = Captured::install_global_trace();

    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")
    else {
        return;
    };
    let config = sdk_config(&moto.endpoint_url());
    let store = SecretStore::new(SecretStoreOptions::new().sdk_config(config.clone())).unwrap();
    let name = format!("team/{NAME_CANARY}");
    store
        .create(&name, VALUE_CANARY, &BTreeMap::new())
        .await
        .unwrap();
    let cache = SecretCache::new(SecretCacheOptions::new().sdk_config(config)).unwrap();

    let mut shown = Vec::new();
    let builder = Sandbox::builder()
        .local()
        .secret("CANARY", name.as_str())
        .secret_cache(cache.clone());
    shown.push(format!("{builder:?}"));
    let sbx = builder.create().await.expect("create");
    shown.push(format!("{sbx:?}"));

    let options = CommandOptions::new().secret("CALL_CANARY", name.as_str());
    shown.push(format!("{options:?}"));
    let out = sbx
        .commands()
        .run_with("test \"$CANARY\" = \"$CALL_CANARY\" && echo same", options)
        .await
        .expect("run");
    assert_eq!(out.stdout, "same\n");
    let handle = sbx
        .commands()
        .spawn("sleep 3; test -n \"$CANARY\"", CommandOptions::new())
        .await
        .expect("spawn");
    // Sampled once the command's own shell is on a command line, so the
    // check looks at the running command, not at an empty table.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let lines = loop {
        let now = cmdlines();
        if now.contains("test -n \"$CANARY\"") {
            break now;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the spawned command never showed up in /proc"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(!lines.contains(VALUE_CANARY) && !lines.contains(NAME_CANARY));
    handle.wait().await.expect("the spawned command");
    // A failing command with the secret in its environment: the error
    // holds what it printed (not the secret).
    let err = sbx
        .commands()
        .run("echo \"${#CANARY}\"; exit 3")
        .await
        .unwrap_err();
    shown.push(format!("{err} {err:?}"));
    let processes = sbx.commands().list().await.expect("list");
    shown.push(format!("{processes:?}"));

    let execution = sbx
        .run_code_with(
            "import os\nlen(os.environ['CANARY'])",
            RunCodeOptions::new().secret("CELL_CANARY", name.as_str()),
        )
        .await
        .expect("run_code");
    shown.push(format!("{execution:?}"));
    let context = sbx
        .create_code_context(CodeContextOptions::new().secret("CTX_CANARY", name.as_str()))
        .await
        .expect("context");
    shown.push(format!("{context:?}"));
    let pty = sbx
        .pty()
        .create(
            PtySize::new(80, 24),
            PtyOptions::new().secret("PTY_CANARY", name.as_str()),
        )
        .await
        .expect("pty");
    pty.send_input("exit\n").await.expect("input");
    let _ = tokio::time::timeout(Duration::from_secs(30), pty.wait()).await;
    // A missing secret: an error naming the variable only.
    let err = sbx
        .commands()
        .run_with(
            "true",
            CommandOptions::new().secret("MISSING", format!("team/{NAME_CANARY}-gone")),
        )
        .await
        .unwrap_err();
    shown.push(format!("{err} {err:?}"));
    shown.push(format!("{cache:?}"));
    assert!(sbx.kill().await.expect("kill"));

    let log = captured.text();
    assert!(!log.is_empty(), "the subscriber saw nothing");
    for canary in [VALUE_CANARY, NAME_CANARY] {
        assert!(!log.contains(canary), "{canary} is in the TRACE log");
        for text in &shown {
            assert!(!text.contains(canary), "{canary} is in {text}");
        }
    }
    assert_eq!(
        log.matches("secrets injected into a sandbox are readable by the code that runs in it")
            .count(),
        1,
        "the warning, once"
    );
}
