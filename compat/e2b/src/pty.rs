//! `sbx.pty`: E2B's terminal view over the SDK's, with E2B's names
//! (`send_stdin`) and its 60 s default timeout.

use std::time::Duration;

use rayito::{PtyHandle, PtyOptions, PtySize, SandboxError};

use crate::options::{ApiParams, DEFAULT_COMMAND_TIMEOUT};
use crate::sandbox::Sandbox;

impl Sandbox {
    /// `pty`: terminals (`create`, `connect`, `send_stdin`, `resize`,
    /// `kill`, `stream_input`).
    pub fn pty(&self) -> Pty<'_> {
        Pty { sandbox: self }
    }
}

/// `sbx.pty`.
#[derive(Debug, Clone, Copy)]
pub struct Pty<'a> {
    sandbox: &'a Sandbox,
}

impl Pty<'_> {
    /// `pty.create(size, user=, cwd=, envs=, timeout=, request_timeout=)`:
    /// a shell on a new terminal, with E2B's 60 s timeout unless `opts`
    /// sets one.
    ///
    /// # Errors
    /// What `rayito::Pty::create` returns.
    pub async fn create(&self, size: PtySize, opts: PtyOpts) -> Result<PtyHandle, SandboxError> {
        self.sandbox.warn_api_params(&opts.api);
        let sdk = if opts.timeout_set {
            opts.sdk
        } else {
            opts.sdk.timeout(DEFAULT_COMMAND_TIMEOUT)
        };
        self.sandbox.inner.pty().create(size, sdk).await
    }

    /// `pty.connect(pid)`: a handle to a live terminal (new output).
    ///
    /// # Errors
    /// What `rayito::Pty::connect` returns.
    pub async fn connect(&self, pid: u32) -> Result<PtyHandle, SandboxError> {
        self.sandbox.inner.pty().connect(pid).await
    }

    /// `pty.send_stdin(pid, data)`: types `data` into terminal `pid`.
    ///
    /// # Errors
    /// `NotFound` when the terminal has ended; transport failures.
    pub async fn send_stdin(&self, pid: u32, data: impl Into<Vec<u8>>) -> Result<(), SandboxError> {
        let data = data.into();
        self.sandbox.inner.pty().send_input(pid, data).await
    }

    /// `pty.stream_input(pid, chunks)`: each chunk in order.
    ///
    /// # Errors
    /// As [`Pty::send_stdin`]; the chunks after a failed one are not sent.
    pub async fn stream_input<I, D>(&self, pid: u32, chunks: I) -> Result<(), SandboxError>
    where
        I: IntoIterator<Item = D>,
        D: Into<Vec<u8>>,
    {
        let chunks: Vec<Vec<u8>> = chunks.into_iter().map(Into::into).collect();
        for chunk in chunks {
            self.sandbox.inner.pty().send_input(pid, chunk).await?;
        }
        Ok(())
    }

    /// `pty.resize(pid, size)`.
    ///
    /// # Errors
    /// What `rayito::Pty::resize` returns.
    pub async fn resize(&self, pid: u32, size: PtySize) -> Result<(), SandboxError> {
        self.sandbox.inner.pty().resize(pid, size).await
    }

    /// `pty.kill(pid)`: false when it had already ended.
    ///
    /// # Errors
    /// What `rayito::Pty::kill` returns.
    pub async fn kill(&self, pid: u32) -> Result<bool, SandboxError> {
        self.sandbox.inner.pty().kill(pid).await
    }
}

/// `pty.create` keyword arguments: `user`, `cwd`, `envs`, `timeout`
/// (default 60 s, as E2B), `request_timeout` (ignored with a warning).
#[derive(Debug, Default)]
pub struct PtyOpts {
    sdk: PtyOptions,
    timeout_set: bool,
    api: ApiParams,
}

impl PtyOpts {
    /// The defaults: the SDK's shell, a 60 s timeout.
    pub fn new() -> Self {
        Self::default()
    }

    /// `user=`.
    #[must_use]
    pub fn user(mut self, user: impl Into<String>) -> Self {
        self.sdk = self.sdk.user(user);
        self
    }

    /// `cwd=`.
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<String>) -> Self {
        self.sdk = self.sdk.cwd(cwd);
        self
    }

    /// One of `envs=`.
    #[must_use]
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.sdk = self.sdk.env(name, value);
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
        self.sdk = self.sdk.timeout(Duration::ZERO);
        self.timeout_set = true;
        self
    }

    /// `request_timeout=`: ignored with a warning.
    #[must_use]
    pub fn request_timeout(mut self, request_timeout: Duration) -> Self {
        self.api.request_timeout = Some(request_timeout);
        self
    }
}
