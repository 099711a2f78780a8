//! `sandbox.code()`: the code view, as `commands()` and `files()` are
//! views: cells (run, run with options, streamed) and the contexts they
//! run in. `Sandbox::run_code` and the `*_code_context` methods stay as
//! shortcuts (and E2B's names).

use super::{CodeContext, CodeContextOptions, Execution, ExecutionEvents, RunCodeOptions};
use crate::error::SandboxError;
use crate::sandbox::Sandbox;

/// Code cells and contexts in a sandbox (a borrowed view: `sandbox.code()`).
#[derive(Debug, Clone, Copy)]
pub struct Code<'a> {
    sandbox: &'a Sandbox,
}

impl<'a> Code<'a> {
    pub(crate) fn new(sandbox: &'a Sandbox) -> Self {
        Self { sandbox }
    }

    /// Runs a cell in the default Python context (see
    /// [`Sandbox::run_code`]); a kernel exception is data in
    /// [`Execution::error`], not an `Err`.
    ///
    /// # Errors
    /// As [`Sandbox::run_code`].
    pub async fn run(&self, code: &str) -> Result<Execution, SandboxError> {
        boxed!(Result<Execution, SandboxError>, {
            super::run_code(self.sandbox, code, RunCodeOptions::default()).await
        })
    }

    /// Runs a cell with options (language or context, envs, timeout,
    /// callbacks).
    ///
    /// # Errors
    /// As [`Sandbox::run_code`].
    pub async fn run_with(
        &self,
        code: &str,
        options: RunCodeOptions,
    ) -> Result<Execution, SandboxError> {
        boxed!(Result<Execution, SandboxError>, {
            super::run_code(self.sandbox, code, options).await
        })
    }

    /// Runs a cell and streams its events as they come (the last one is
    /// [`crate::ExecutionEvent::End`]); dropping the stream interrupts the
    /// cell.
    ///
    /// # Errors
    /// As [`Sandbox::run_code`] when the cell cannot start; later failures
    /// are the stream's last item.
    pub async fn stream(
        &self,
        code: &str,
        options: RunCodeOptions,
    ) -> Result<ExecutionEvents, SandboxError> {
        boxed!(Result<ExecutionEvents, SandboxError>, {
            super::run_code_stream(self.sandbox, code, options).await
        })
    }

    /// Creates a context: a kernel of its own (see
    /// [`Sandbox::create_code_context`]).
    ///
    /// # Errors
    /// As [`Sandbox::create_code_context`].
    pub async fn create_context(
        &self,
        options: CodeContextOptions,
    ) -> Result<CodeContext, SandboxError> {
        self.sandbox.create_code_context(options).await
    }

    /// The live contexts.
    ///
    /// # Errors
    /// As [`Sandbox::list_code_contexts`].
    pub async fn contexts(&self) -> Result<Vec<CodeContext>, SandboxError> {
        self.sandbox.list_code_contexts().await
    }

    /// Restarts a context's kernel (its state is lost).
    ///
    /// # Errors
    /// As [`Sandbox::restart_code_context`].
    pub async fn restart_context(&self, context_id: &str) -> Result<(), SandboxError> {
        self.sandbox.restart_code_context(context_id).await
    }

    /// Removes a context and its kernel.
    ///
    /// # Errors
    /// As [`Sandbox::remove_code_context`].
    pub async fn remove_context(&self, context_id: &str) -> Result<(), SandboxError> {
        self.sandbox.remove_code_context(context_id).await
    }
}
