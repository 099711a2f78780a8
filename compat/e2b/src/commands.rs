//! `sbx.commands`: E2B's view over the SDK's, with E2B's 60 s default
//! command timeout and its by-pid stdin calls.

use std::time::Duration;

use rayito::{CommandHandle, CommandOptions, CommandResult, ProcessInfo, SandboxError};

use crate::options::{ApiParams, DEFAULT_COMMAND_TIMEOUT};
use crate::sandbox::Sandbox;
use crate::warnings::reason;

impl Sandbox {
    /// `commands`: E2B's view, with its 60 s default command timeout.
    pub fn commands(&self) -> Commands<'_> {
        Commands { sandbox: self }
    }
}

/// `sbx.commands`: E2B's view over the SDK's, with E2B's 60 s default timeout.
#[derive(Debug, Clone, Copy)]
pub struct Commands<'a> {
    sandbox: &'a Sandbox,
}

impl Commands<'_> {
    /// `commands.run(cmd)` in the foreground, with a 60 s timeout.
    ///
    /// # Errors
    /// `CommandExit` on a non-zero exit (E2B's `CommandExitException`);
    /// `Timeout { command }` after 60 s; otherwise what the SDK returns.
    pub async fn run(&self, cmd: &str) -> Result<CommandResult, SandboxError> {
        self.run_with(cmd, CommandOpts::new()).await
    }

    /// `commands.run(cmd, envs=.., cwd=.., user=.., timeout=.., ...)`, with
    /// E2B's 60 s timeout unless `opts` sets one.
    ///
    /// # Errors
    /// As [`Commands::run`].
    pub async fn run_with(
        &self,
        cmd: &str,
        opts: CommandOpts,
    ) -> Result<CommandResult, SandboxError> {
        let sdk = opts.into_sdk(self.sandbox);
        self.sandbox.inner.commands().run_with(cmd, sdk).await
    }

    /// `commands.run(cmd, background=True)`: a handle to a running command
    /// (`pid`, `wait`, `kill`, `send_stdin`, `close_stdin`, `disconnect`,
    /// its output as a stream), with E2B's 60 s timeout unless `opts` sets
    /// one.
    ///
    /// # Errors
    /// What `rayito::Commands::spawn` returns.
    pub async fn run_background(
        &self,
        cmd: &str,
        opts: CommandOpts,
    ) -> Result<CommandHandle, SandboxError> {
        let sdk = opts.into_sdk(self.sandbox);
        self.sandbox.inner.commands().spawn(cmd, sdk).await
    }

    /// `commands.list()`.
    ///
    /// # Errors
    /// What the SDK returns.
    pub async fn list(&self) -> Result<Vec<ProcessInfo>, SandboxError> {
        self.sandbox.inner.commands().list().await
    }

    /// `commands.kill(pid)`: false when the process was already gone.
    ///
    /// # Errors
    /// What the SDK returns.
    pub async fn kill(&self, pid: u32) -> Result<bool, SandboxError> {
        self.sandbox.inner.commands().kill(pid).await
    }

    /// `commands.connect(pid)`: a handle to a running command (new output).
    ///
    /// # Errors
    /// What the SDK returns.
    pub async fn connect(&self, pid: u32) -> Result<CommandHandle, SandboxError> {
        self.sandbox.inner.commands().connect(pid).await
    }

    /// `commands.connect(pid, timeout=, request_timeout=, retain_output=)`:
    /// as [`Commands::connect`]; each of those options set is ignored with
    /// a warning (the process keeps its own timeout).
    ///
    /// # Errors
    /// What the SDK returns.
    pub async fn connect_with(
        &self,
        pid: u32,
        opts: CommandOpts,
    ) -> Result<CommandHandle, SandboxError> {
        if opts.timeout_set {
            self.sandbox
                .warnings
                .warn("timeout", reason::CONNECT_TIMEOUT);
        }
        if opts.request_timeout_set {
            self.sandbox
                .warnings
                .warn("request_timeout", reason::ON_HANDLE);
        }
        drop(opts.into_sdk(self.sandbox));
        self.connect(pid).await
    }

    /// `commands.send_stdin(pid, data)`: writes to the stdin of a command
    /// started with `stdin=True` ([`CommandOpts::stdin`]).
    ///
    /// # Errors
    /// `NotFound` when no such process exists; `InvalidArgument` when its
    /// stdin is not open; transport failures.
    pub async fn send_stdin(&self, pid: u32, data: impl Into<Vec<u8>>) -> Result<(), SandboxError> {
        let data = data.into();
        self.connect(pid).await?.send_stdin(data).await
    }

    /// `commands.close_stdin(pid)`: the command then reads end-of-file.
    ///
    /// # Errors
    /// As [`Commands::send_stdin`].
    pub async fn close_stdin(&self, pid: u32) -> Result<(), SandboxError> {
        self.connect(pid).await?.close_stdin().await
    }

    /// `commands.stream_input(pid, chunks)`: each chunk in order, as
    /// [`Commands::send_stdin`] does one.
    ///
    /// # Errors
    /// As [`Commands::send_stdin`]; the chunks after a failed one are not sent.
    pub async fn stream_input<I, D>(&self, pid: u32, chunks: I) -> Result<(), SandboxError>
    where
        I: IntoIterator<Item = D>,
        D: Into<Vec<u8>>,
    {
        let chunks: Vec<Vec<u8>> = chunks.into_iter().map(Into::into).collect();
        let handle = self.connect(pid).await?;
        for chunk in chunks {
            handle.send_stdin(chunk).await?;
        }
        Ok(())
    }
}

/// `commands.run` keyword arguments: `envs`, `cwd`, `user`, `stdin`,
/// `timeout` (default 60 s; `no_timeout()` for none), `on_stdout`,
/// `on_stderr`, `request_timeout`, `retain_output`.
#[derive(Debug, Default)]
pub struct CommandOpts {
    sdk: CommandOptions,
    timeout_set: bool,
    /// `request_timeout=` was set: it works for `run`, and is ignored with
    /// a warning by `connect`.
    request_timeout_set: bool,
    /// `retain_output=False` (a default of `false` keeps E2B's `True`).
    discard_output: bool,
    api: ApiParams,
}

impl CommandOpts {
    /// The defaults: a 60 s timeout, stdin closed.
    pub fn new() -> Self {
        Self::default()
    }

    /// One of `envs=`.
    #[must_use]
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.sdk = self.sdk.env(name, value);
        self
    }

    /// `cwd=`.
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<String>) -> Self {
        self.sdk = self.sdk.cwd(cwd);
        self
    }

    /// `user=`.
    #[must_use]
    pub fn user(mut self, user: impl Into<String>) -> Self {
        self.sdk = self.sdk.user(user);
        self
    }

    /// `stdin=True`: keeps the command's stdin open for
    /// [`Commands::send_stdin`] / `CommandHandle::send_stdin` until
    /// `close_stdin`. `false` is E2B's default (stdin closed).
    #[must_use]
    pub fn stdin(mut self, open: bool) -> Self {
        if open {
            self.sdk = self.sdk.open_stdin();
        }
        self
    }

    /// rayito only: these bytes as the command's whole stdin.
    #[must_use]
    pub fn stdin_data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.sdk = self.sdk.stdin(data);
        self
    }

    /// `timeout=`.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.sdk = self.sdk.timeout(timeout);
        self.timeout_set = true;
        self
    }

    /// `timeout=0`: no limit.
    #[must_use]
    pub fn no_timeout(mut self) -> Self {
        self.sdk = self.sdk.no_timeout();
        self.timeout_set = true;
        self
    }

    /// `request_timeout=`: for `run` (foreground or background), how long
    /// the SDK waits for the sandbox to start the command and take its
    /// stdin (rayito's `CommandOptions::request_timeout`; it never bounds
    /// the command). `connect` ignores it with a warning (attaching uses
    /// the handle's request timeout; set it at create or connect).
    #[must_use]
    pub fn request_timeout(mut self, request_timeout: Duration) -> Self {
        self.sdk = self.sdk.request_timeout(request_timeout);
        self.request_timeout_set = true;
        self
    }

    /// `retain_output=`: `false` is ignored with a warning (a handle keeps
    /// what it received until `wait` returns).
    #[must_use]
    pub fn retain_output(mut self, retain: bool) -> Self {
        self.discard_output = !retain;
        self
    }

    /// `on_stdout=`.
    #[must_use]
    pub fn on_stdout(mut self, callback: impl FnMut(&str) + Send + 'static) -> Self {
        self.sdk = self.sdk.on_stdout(callback);
        self
    }

    /// `on_stderr=`.
    #[must_use]
    pub fn on_stderr(mut self, callback: impl FnMut(&str) + Send + 'static) -> Self {
        self.sdk = self.sdk.on_stderr(callback);
        self
    }

    /// One warning on `sandbox` for each ignored option set here.
    fn warn_ignored(&self, sandbox: &Sandbox) {
        sandbox.warn_api_params(&self.api);
        if self.discard_output {
            sandbox
                .warnings
                .warn("retain_output", reason::RETAIN_OUTPUT);
        }
    }

    /// The SDK's options, with E2B's 60 s default, after warning about the
    /// ignored ones on `sandbox`.
    fn into_sdk(self, sandbox: &Sandbox) -> CommandOptions {
        self.warn_ignored(sandbox);
        if self.timeout_set {
            self.sdk
        } else {
            self.sdk.timeout(DEFAULT_COMMAND_TIMEOUT)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `request_timeout=` reaches the SDK's options for `run` and is no
    /// ignored per-call parameter any more.
    #[test]
    fn request_timeout_is_the_sdks_per_call_request_timeout() {
        let opts = CommandOpts::new().request_timeout(Duration::from_secs(5));
        assert!(opts.api.request_timeout.is_none());
        assert!(opts.request_timeout_set);
        let sdk = format!("{:?}", opts.sdk);
        assert!(sdk.contains("request_timeout: Some(5s)"), "{sdk}");
    }
}
