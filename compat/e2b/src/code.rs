//! `run_code` and code contexts: E2B's code interpreter over the SDK's.

use std::time::Duration;

use rayito::{
    CodeContext, CodeContextOptions, Execution, ExecutionError, ExecutionResult, OutputMessage,
    RunCodeOptions, SandboxError,
};

use crate::options::{ApiParams, DEFAULT_RUN_CODE_TIMEOUT};
use crate::sandbox::Sandbox;
use crate::unimplemented::Missing;

/// The languages with a kernel (the SDK's agent serves these).
const KERNELS: &[&str] = &["python", "bash", "javascript", "js", "typescript", "ts"];

impl Sandbox {
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

    /// `create_code_context(cwd=, language=, request_timeout=)`: `cwd` is
    /// set on `options`; `request_timeout` (in `params`) warns.
    ///
    /// # Errors
    /// `Unimplemented` (`language`) for R, Java or any language with no
    /// kernel here, before any call; otherwise what the SDK returns.
    pub async fn create_code_context(
        &self,
        options: CodeContextOptions,
        language: Option<&str>,
        params: ApiParams,
    ) -> Result<CodeContext, SandboxError> {
        let options = match language {
            Some(language) if !KERNELS.contains(&language) => {
                return Err(Missing::Language.error());
            }
            Some(language) => options.language(language),
            None => options,
        };
        self.warn_api_params(&params);
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
}

/// `run_code` keyword arguments: `language`, `context`, `envs`, `timeout`
/// (default 300 s; `no_timeout()` for none), `request_timeout` and the
/// streaming callbacks.
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
