//! `Sandbox`: E2B's handle over the SDK's, with E2B's names and defaults.

use std::time::Duration;

use rayito::{
    CodeContext, CodeContextOptions, CommandHandle, CommandOptions, CommandResult, Execution,
    ExecutionError, ExecutionResult, Files, OutputMessage, ProcessInfo, Pty, RunCodeOptions,
    SandboxError, SandboxHost, SandboxInfo,
};

use crate::options::{
    ApiParams, Backend, DEFAULT_COMMAND_TIMEOUT, DEFAULT_RUN_CODE_TIMEOUT, DEFAULT_SANDBOX_TIMEOUT,
    OnTimeout, SandboxOpts,
};
use crate::unimplemented::Missing;
use crate::warnings::{CompatWarning, Warnings, reason};

/// A sandbox, as E2B's code-interpreter `Sandbox` is used. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Sandbox {
    inner: rayito::Sandbox,
    warnings: Warnings,
}

impl Sandbox {
    /// `Sandbox.create(**opts)`: checks every option first (an unavailable
    /// feature is `Unimplemented` before any call to AWS; an ignored option
    /// is one warning), then creates the sandbox with E2B's default timeout
    /// of 300 s, killed at its end unless `lifecycle` says pause.
    ///
    /// # Errors
    /// `Unimplemented` for a feature Lambda MicroVMs cannot provide (see
    /// [`Missing`]); otherwise what `rayito::SandboxBuilder::create` returns.
    pub async fn create(opts: SandboxOpts) -> Result<Sandbox, SandboxError> {
        refuse_missing(&opts)?;
        let warnings = Warnings::default();
        warn_ignored(&opts, &warnings);
        let mut builder = builder_for(&opts.backend)
            .timeout(opts.timeout.unwrap_or(DEFAULT_SANDBOX_TIMEOUT))
            .envs(opts.envs.clone())
            .metadata(opts.metadata.clone());
        if let Some(template) = &opts.template {
            builder = builder.template(template.clone());
        }
        if let Some(request_timeout) = opts.request_timeout {
            builder = builder.request_timeout(request_timeout);
        }
        let network = opts.network.clone().unwrap_or_default();
        if !network.allow_out.is_empty() || !network.deny_out.is_empty() {
            builder = builder.network(
                rayito::NetworkPolicy::new()
                    .allow_out(network.allow_out)
                    .deny_out(network.deny_out),
            );
        }
        if let Some(allow) = opts.allow_internet_access {
            builder = builder.allow_internet_access(allow);
        }
        let lifecycle = opts.lifecycle.unwrap_or_default();
        builder = builder.on_timeout(match lifecycle.on_timeout {
            OnTimeout::Kill => rayito::OnTimeout::Kill,
            OnTimeout::Pause => rayito::OnTimeout::Pause,
        });
        if !lifecycle.auto_resume && lifecycle.on_timeout == OnTimeout::Pause {
            builder = builder
                .idle_policy(rayito::IdlePolicy::new(DEFAULT_SANDBOX_TIMEOUT).auto_resume(false));
        }
        let inner = builder.create().await?;
        Ok(Sandbox { inner, warnings })
    }

    /// `Sandbox.connect(sandbox_id)`: reattaches to a sandbox, resuming it
    /// when it is paused. Lambda MicroVMs needs the sandbox's access token
    /// (from [`Sandbox::access_token`]) where E2B used its API key.
    ///
    /// # Errors
    /// `Unimplemented` (`connect(on_resume=reboot)`) before any call;
    /// otherwise what `rayito::SandboxBuilder::connect` returns.
    pub async fn connect(
        sandbox_id: &str,
        access_token: impl Into<rayito::Secret>,
        opts: ConnectOpts,
    ) -> Result<Sandbox, SandboxError> {
        if opts.on_resume == OnResume::Reboot {
            return Err(Missing::ConnectReboot.error());
        }
        let inner = builder_for(&opts.backend)
            .connect(sandbox_id, access_token)
            .await?;
        Ok(Sandbox {
            inner,
            warnings: Warnings::default(),
        })
    }

    /// `Sandbox.kill(sandbox_id)`: false when it was already gone.
    ///
    /// # Errors
    /// What `rayito::SandboxBuilder::kill_by_id` returns.
    pub async fn kill_by_id(sandbox_id: &str, opts: ConnectOpts) -> Result<bool, SandboxError> {
        builder_for(&opts.backend).kill_by_id(sandbox_id).await
    }

    /// `Sandbox.get_info(sandbox_id)`.
    ///
    /// # Errors
    /// What `rayito::SandboxBuilder::get_info_by_id` returns.
    pub async fn get_info_by_id(
        sandbox_id: &str,
        opts: ConnectOpts,
    ) -> Result<SandboxInfo, SandboxError> {
        builder_for(&opts.backend).get_info_by_id(sandbox_id).await
    }

    /// `Sandbox.set_timeout(sandbox_id, timeout)`: reattaches with the
    /// sandbox's access token (Lambda MicroVMs has no account-wide key) and
    /// moves its timeout.
    ///
    /// # Errors
    /// What [`Sandbox::connect`] and `rayito::Sandbox::set_timeout` return.
    pub async fn set_timeout_by_id(
        sandbox_id: &str,
        access_token: impl Into<rayito::Secret>,
        timeout: Duration,
        opts: ConnectOpts,
    ) -> Result<(), SandboxError> {
        let sandbox = Sandbox::connect(sandbox_id, access_token, opts).await?;
        sandbox.inner.set_timeout(timeout).await
    }

    /// `Sandbox.list(query)`: a paginated stream of sandbox summaries.
    pub fn list(query: rayito::ListQuery, opts: ConnectOpts) -> rayito::SandboxList {
        builder_for(&opts.backend).list(query)
    }

    /// `sandbox_id`.
    pub fn sandbox_id(&self) -> &str {
        self.inner.id()
    }

    /// The access token [`Sandbox::connect`] needs to reattach later.
    pub fn access_token(&self) -> &rayito::Secret {
        self.inner.access_token()
    }

    /// The SDK's own handle, for everything beyond E2B's surface.
    pub fn inner(&self) -> &rayito::Sandbox {
        &self.inner
    }

    /// Every option this handle ignored, in the order they were seen.
    pub fn compat_warnings(&self) -> Vec<CompatWarning> {
        self.warnings.all()
    }

    /// `run_code(code, ...)`: E2B's `Execution`; a guest exception is data
    /// in `Execution.error`, never an `Err`. The timeout defaults to 300 s.
    ///
    /// # Errors
    /// `Unimplemented` (`language`) for R, Java or any language with no
    /// kernel here, before any call; otherwise what `run_code_with` returns.
    pub async fn run_code(&self, code: &str, opts: RunCodeOpts) -> Result<Execution, SandboxError> {
        if let Some(language) = &opts.language
            && !KERNELS.contains(&language.as_str())
        {
            return Err(Missing::Language.error());
        }
        self.warn_api_params(&opts.api);
        self.inner.run_code_with(code, opts.into_sdk()).await
    }

    /// `commands`: E2B's view, with its 60 s default command timeout.
    pub fn commands(&self) -> Commands<'_> {
        Commands { sandbox: self }
    }

    /// `files`: the SDK's own view.
    pub fn files(&self) -> Files<'_> {
        self.inner.files()
    }

    /// `pty`: the SDK's terminals (`create`, `send_input`, `resize`, `kill`).
    pub fn pty(&self) -> Pty<'_> {
        self.inner.pty()
    }

    /// `get_host(port)`: the address of a port the sandbox exposes, with the
    /// headers (a proxy token for that port) a client must send.
    ///
    /// # Errors
    /// What `rayito::Sandbox::get_host` returns.
    pub async fn get_host(&self, port: u16) -> Result<SandboxHost, SandboxError> {
        self.inner.get_host(port).await
    }

    /// `create_code_context(cwd=, language=)`.
    ///
    /// # Errors
    /// `Unimplemented` (`language`) for R, Java or any language with no
    /// kernel here, before any call; otherwise what the SDK returns.
    pub async fn create_code_context(
        &self,
        options: CodeContextOptions,
        language: Option<&str>,
    ) -> Result<CodeContext, SandboxError> {
        let options = match language {
            Some(language) if !KERNELS.contains(&language) => {
                return Err(Missing::Language.error());
            }
            Some(language) => options.language(language),
            None => options,
        };
        self.inner.create_code_context(options).await
    }

    /// `list_code_contexts()`.
    ///
    /// # Errors
    /// What the SDK returns.
    pub async fn list_code_contexts(&self) -> Result<Vec<CodeContext>, SandboxError> {
        self.inner.list_code_contexts().await
    }

    /// `restart_code_context(context)`.
    ///
    /// # Errors
    /// What the SDK returns.
    pub async fn restart_code_context(&self, context_id: &str) -> Result<(), SandboxError> {
        self.inner.restart_code_context(context_id).await
    }

    /// `remove_code_context(context)`.
    ///
    /// # Errors
    /// What the SDK returns.
    pub async fn remove_code_context(&self, context_id: &str) -> Result<(), SandboxError> {
        self.inner.remove_code_context(context_id).await
    }

    /// `kill()`: false when the sandbox was already gone.
    ///
    /// # Errors
    /// What `rayito::Sandbox::kill` returns.
    pub async fn kill(&self, params: ApiParams) -> Result<bool, SandboxError> {
        self.warn_api_params(&params);
        self.inner.kill().await
    }

    /// `set_timeout(timeout)`: moves the end of the sandbox's life.
    ///
    /// # Errors
    /// What `rayito::Sandbox::set_timeout` returns.
    pub async fn set_timeout(
        &self,
        timeout: Duration,
        params: ApiParams,
    ) -> Result<(), SandboxError> {
        self.warn_api_params(&params);
        self.inner.set_timeout(timeout).await
    }

    /// `is_running()`.
    pub async fn is_running(&self) -> bool {
        self.inner.is_running().await
    }

    /// `get_info()`.
    ///
    /// # Errors
    /// What `rayito::Sandbox::get_info` returns.
    pub async fn get_info(&self, params: ApiParams) -> Result<SandboxInfo, SandboxError> {
        self.warn_api_params(&params);
        self.inner.get_info().await
    }

    /// `fork()`: not available.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "fork" }`, with no call made.
    pub async fn fork(&self) -> Result<Sandbox, SandboxError> {
        Err(Missing::Fork.error())
    }

    /// `create_snapshot()`: not available.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "create_snapshot" }`, with no call made.
    pub async fn create_snapshot(&self) -> Result<(), SandboxError> {
        Err(Missing::CreateSnapshot.error())
    }

    /// `pause(keep_memory=..)`: suspends the sandbox (memory and disk are
    /// always kept); [`Sandbox::connect`] resumes it.
    ///
    /// # Errors
    /// `Unimplemented { feature: "pause(keep_memory=false)" }` for
    /// `Some(false)`, before any call; otherwise what
    /// `rayito::Sandbox::pause` returns.
    pub async fn pause(&self, keep_memory: Option<bool>) -> Result<bool, SandboxError> {
        if keep_memory == Some(false) {
            return Err(Missing::PauseWithoutMemory.error());
        }
        self.inner.pause().await
    }

    /// `get_mcp_url()`: not available.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "get_mcp_url" }`.
    pub fn get_mcp_url(&self) -> Result<String, SandboxError> {
        Err(Missing::GetMcpUrl.error())
    }

    /// `get_signature()`: not available.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "get_signature" }`.
    pub fn get_signature(&self, _path: &str) -> Result<String, SandboxError> {
        Err(Missing::GetSignature.error())
    }

    /// One warning for each `ApiParams` field set on a call of this handle,
    /// in alphabetical order as the reference does.
    fn warn_api_params(&self, params: &ApiParams) {
        if !params.headers.is_empty() {
            self.warnings.warn("headers", reason::ON_HANDLE);
        }
        if params.request_timeout.is_some() {
            self.warnings.warn("request_timeout", reason::ON_HANDLE);
        }
        if params.retries.is_some() {
            self.warnings.warn("retries", reason::ON_HANDLE);
        }
    }
}

/// The SDK builder for a backend choice.
fn builder_for(backend: &Backend) -> rayito::SandboxBuilder {
    let builder = rayito::Sandbox::builder();
    match backend {
        Backend::FromEnv => builder,
        #[cfg(feature = "local")]
        Backend::Local => builder.local(),
        Backend::Aws(aws) => builder.aws(aws.clone()),
    }
}

/// `Sandbox.connect(..)` and the by-id class methods' options.
#[derive(Debug, Clone, Default)]
pub struct ConnectOpts {
    /// `on_resume`: `Reboot` is `Unimplemented`.
    pub on_resume: OnResume,
    /// rayito only: where the sandbox runs.
    pub backend: Backend,
}

/// `on_resume=`: what a resumed sandbox gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnResume {
    /// Its memory and disk as they were (the only choice on Lambda MicroVMs).
    #[default]
    Restore,
    /// A fresh boot: not available.
    Reboot,
}

/// The languages with a kernel (the SDK's agent serves these).
const KERNELS: &[&str] = &["python", "bash", "javascript", "js", "typescript", "ts"];

/// `run_code` keyword arguments: `language`, `context`, `envs`, `timeout`
/// (default 300 s; `no_timeout()` for none) and the streaming callbacks.
#[derive(Debug, Default)]
pub struct RunCodeOpts {
    language: Option<String>,
    sdk: RunCodeOptions,
    timeout_set: bool,
    api: ApiParams,
}

impl RunCodeOpts {
    /// The defaults: python, the default context, 300 s.
    pub fn new() -> Self {
        Self::default()
    }

    /// `language=`.
    #[must_use]
    pub fn language(mut self, language: impl Into<String>) -> Self {
        let language = language.into();
        self.sdk = self.sdk.language(language.clone());
        self.language = Some(language);
        self
    }

    /// `context=` (a context id).
    #[must_use]
    pub fn context(mut self, context_id: impl Into<String>) -> Self {
        self.sdk = self.sdk.context(context_id);
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
        self.sdk = self.sdk.no_timeout();
        self.timeout_set = true;
        self
    }

    /// `request_timeout=` on a call: ignored with a warning (the handle's
    /// deadline applies; set it at create).
    #[must_use]
    pub fn request_timeout(mut self, request_timeout: Duration) -> Self {
        self.api.request_timeout = Some(request_timeout);
        self
    }

    /// `on_stdout=`.
    #[must_use]
    pub fn on_stdout(mut self, callback: impl FnMut(&OutputMessage) + Send + 'static) -> Self {
        self.sdk = self.sdk.on_stdout(callback);
        self
    }

    /// `on_stderr=`.
    #[must_use]
    pub fn on_stderr(mut self, callback: impl FnMut(&OutputMessage) + Send + 'static) -> Self {
        self.sdk = self.sdk.on_stderr(callback);
        self
    }

    /// `on_result=`.
    #[must_use]
    pub fn on_result(mut self, callback: impl FnMut(&ExecutionResult) + Send + 'static) -> Self {
        self.sdk = self.sdk.on_result(callback);
        self
    }

    /// `on_error=`.
    #[must_use]
    pub fn on_error(mut self, callback: impl FnMut(&ExecutionError) + Send + 'static) -> Self {
        self.sdk = self.sdk.on_error(callback);
        self
    }

    fn into_sdk(self) -> RunCodeOptions {
        if self.timeout_set {
            self.sdk
        } else {
            self.sdk.timeout(DEFAULT_RUN_CODE_TIMEOUT)
        }
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

    /// `commands.run(cmd, envs=.., cwd=.., user=.., timeout=.., stdin=..)`,
    /// with E2B's 60 s timeout unless `opts` sets one.
    ///
    /// # Errors
    /// As [`Commands::run`].
    pub async fn run_with(
        &self,
        cmd: &str,
        opts: CommandOpts,
    ) -> Result<CommandResult, SandboxError> {
        self.sandbox.warn_api_params(&opts.api);
        let sdk = if opts.timeout_set {
            opts.sdk
        } else {
            opts.sdk.timeout(DEFAULT_COMMAND_TIMEOUT)
        };
        self.sandbox.inner.commands().run_with(cmd, sdk).await
    }
}

impl Commands<'_> {
    /// `commands.run(cmd, background=True)`: a handle to a running command
    /// (`pid`, `wait`, `kill`, `send_stdin`, `disconnect`, its output as a
    /// stream), with E2B's 60 s timeout unless `opts` sets one.
    ///
    /// # Errors
    /// What `rayito::Commands::spawn` returns.
    pub async fn run_background(
        &self,
        cmd: &str,
        opts: CommandOpts,
    ) -> Result<CommandHandle, SandboxError> {
        self.sandbox.warn_api_params(&opts.api);
        let sdk = if opts.timeout_set {
            opts.sdk
        } else {
            opts.sdk.timeout(DEFAULT_COMMAND_TIMEOUT)
        };
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
}

/// `commands.run` keyword arguments: `envs`, `cwd`, `user`, `stdin`,
/// `timeout` (default 60 s; `no_timeout()` for none), `on_stdout`,
/// `on_stderr`.
#[derive(Debug, Default)]
pub struct CommandOpts {
    sdk: CommandOptions,
    timeout_set: bool,
    api: ApiParams,
}

impl CommandOpts {
    /// The defaults: a 60 s timeout.
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

    /// `stdin=`.
    #[must_use]
    pub fn stdin(mut self, data: impl Into<Vec<u8>>) -> Self {
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

    /// `request_timeout=` on a call: ignored with a warning.
    #[must_use]
    pub fn request_timeout(mut self, request_timeout: Duration) -> Self {
        self.api.request_timeout = Some(request_timeout);
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
}

/// Every feature set in `opts` that Lambda MicroVMs cannot provide, as the
/// first `Unimplemented` (checked before any I/O).
fn refuse_missing(opts: &SandboxOpts) -> Result<(), SandboxError> {
    let lifecycle = opts.lifecycle.unwrap_or_default();
    let network = opts.network.clone().unwrap_or_default();
    let checks = [
        (
            lifecycle.keep_memory == Some(false),
            Missing::PauseWithoutMemory,
        ),
        (!network.rules.is_empty(), Missing::NetworkRules),
        (
            network.mask_request_host.is_some(),
            Missing::NetworkMaskRequestHost,
        ),
        (
            network.allow_public_traffic,
            Missing::NetworkAllowPublicTraffic,
        ),
        (!network.https_ports.is_empty(), Missing::NetworkHttpsPorts),
        (opts.iam.is_some(), Missing::Iam),
        (opts.mcp.is_some(), Missing::Mcp),
        (!opts.volume_mounts.is_empty(), Missing::VolumeMounts),
    ];
    match checks.into_iter().find(|(set, _)| *set) {
        Some((_, missing)) => Err(missing.error()),
        None => Ok(()),
    }
}

/// One warning for each ignored option the caller set.
#[allow(deprecated)]
fn warn_ignored(opts: &SandboxOpts, warnings: &Warnings) {
    let ignored = [
        (opts.api_key.is_some(), "api_key", reason::API_KEY),
        (
            !opts.api_headers.is_empty(),
            "api_headers",
            reason::API_HEADERS,
        ),
        (opts.api_url.is_some(), "api_url", reason::API_URL),
        (opts.debug, "debug", reason::DEBUG),
        (opts.domain.is_some(), "domain", reason::DOMAIN),
        (opts.proxy.is_some(), "proxy", reason::PROXY),
        (
            opts.sandbox_url.is_some(),
            "sandbox_url",
            reason::SANDBOX_URL,
        ),
        (opts.secure == Some(false), "secure", reason::SECURE),
        (
            opts.validate_api_key,
            "validate_api_key",
            reason::VALIDATE_API_KEY,
        ),
    ];
    for (set, option, why) in ignored {
        if set {
            warnings.warn(option, why);
        }
    }
}
