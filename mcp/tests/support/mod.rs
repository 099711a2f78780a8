//! Starting the built `rayito-mcp` as an MCP client would (a child process
//! speaking MCP on its stdin and stdout), and reading its answers.

#![allow(dead_code)]

use std::process::Stdio;

use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt as _};
use serde_json::Value;
use tokio::io::AsyncReadExt as _;

/// The built server.
pub const BINARY: &str = env!("CARGO_BIN_EXE_rayito-mcp");

/// A running server, its stderr collected on the side.
pub struct Server {
    pub client: RunningService<RoleClient, ()>,
    /// The server's process id.
    pub pid: u32,
    stderr: tokio::task::JoinHandle<String>,
    /// The sandboxes of the local backend live under this TMPDIR.
    _tmp: tempfile::TempDir,
}

/// A command for the server with none of this process's AWS or rayito
/// settings (each test says what it wants), sandboxes under `tmp`.
pub fn command(tmp: &std::path::Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(BINARY);
    for (name, _) in std::env::vars() {
        if name.starts_with("AWS_") || name.starts_with("RAYITO_") {
            cmd.env_remove(name);
        }
    }
    cmd.env("TMPDIR", tmp);
    cmd
}

impl Server {
    /// The server on the local backend with `envs` added.
    pub async fn local(envs: &[(&str, &str)]) -> Server {
        let mut all = vec![("RAYITO_BACKEND", "local")];
        all.extend_from_slice(envs);
        Server::with_env(&all, &[]).await
    }

    /// The server with exactly `envs` (and `args`).
    pub async fn with_env(envs: &[(&str, &str)], args: &[&str]) -> Server {
        let tmp = tempfile::tempdir().expect("a temp dir");
        let mut cmd = command(tmp.path());
        cmd.args(args);
        for (name, value) in envs {
            cmd.env(name, value);
        }
        Server::spawn(cmd, tmp).await
    }

    /// Speaks MCP to `cmd`.
    pub async fn spawn(cmd: tokio::process::Command, tmp: tempfile::TempDir) -> Server {
        let (transport, stderr) = TokioChildProcess::builder(cmd)
            .stderr(Stdio::piped())
            .spawn()
            .expect("the server starts");
        let pid = transport.id().expect("a running child");
        let mut stderr = stderr.expect("stderr is piped");
        let stderr = tokio::spawn(async move {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text).await;
            text
        });
        let client = ().serve(transport).await.expect("the MCP handshake");
        Server {
            client,
            pid,
            stderr,
            _tmp: tmp,
        }
    }

    /// Calls `tool` with `arguments` (a JSON object).
    pub async fn call(&self, tool: &'static str, arguments: Value) -> CallToolResult {
        let Value::Object(arguments) = arguments else {
            panic!("arguments must be an object");
        };
        self.client
            .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
            .await
            .unwrap_or_else(|e| panic!("{tool}: {e}"))
    }

    /// Calls `tool` and returns its JSON block, asserting success.
    pub async fn json(&self, tool: &'static str, arguments: Value) -> Value {
        let result = self.call(tool, arguments).await;
        assert_ne!(result.is_error, Some(true), "{tool}: {result:?}");
        json_of(&result)
    }

    /// Calls `tool` and returns its error sentence, asserting failure.
    pub async fn error(&self, tool: &'static str, arguments: Value) -> String {
        let result = self.call(tool, arguments).await;
        error_of(&result)
    }

    /// Sends SIGTERM and returns everything the server wrote to stderr
    /// once it has exited.
    pub async fn terminate(self) -> String {
        self.stop_with(rustix::process::Signal::TERM).await
    }

    /// Sends SIGINT (Ctrl-C in the terminal that started it) and returns
    /// everything the server wrote to stderr once it has exited.
    pub async fn interrupt(self) -> String {
        self.stop_with(rustix::process::Signal::INT).await
    }

    async fn stop_with(self, signal: rustix::process::Signal) -> String {
        send(self.pid, signal);
        let log = tokio::time::timeout(std::time::Duration::from_secs(30), self.stderr)
            .await
            .expect("the server exits")
            .expect("stderr is read");
        drop(self.client);
        log
    }

    /// Closes stdin (as a client does when it is done) and returns
    /// everything the server wrote to stderr once it has exited.
    pub async fn close(self) -> String {
        self.client.cancel().await.expect("the client stops");
        tokio::time::timeout(std::time::Duration::from_secs(30), self.stderr)
            .await
            .expect("the server exits")
            .expect("stderr is read")
    }
}

/// The JSON of a result's first block.
pub fn json_of(result: &CallToolResult) -> Value {
    let text = text_of(&result.content[0]);
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// A failed result's sentence.
pub fn error_of(result: &CallToolResult) -> String {
    assert_eq!(
        result.is_error,
        Some(true),
        "expected a tool error: {result:?}"
    );
    assert_eq!(result.content.len(), 1, "{result:?}");
    text_of(&result.content[0]).to_owned()
}

/// A text block's text.
pub fn text_of(block: &ContentBlock) -> &str {
    &block.as_text().expect("a text block").text
}

/// Sends SIGTERM to the process `pid`.
pub fn sigterm(pid: u32) {
    send(pid, rustix::process::Signal::TERM);
}

/// Sends `signal` to the process `pid`.
fn send(pid: u32, signal: rustix::process::Signal) {
    let pid =
        rustix::process::Pid::from_raw(i32::try_from(pid).expect("a pid")).expect("a non-zero pid");
    rustix::process::kill_process(pid, signal).expect("the signal is sent");
}
