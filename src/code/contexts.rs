//! Code contexts: create (with an options struct), list, restart, remove.

use std::fmt;

use super::{CONTEXT_TIMEOUT, CodeContext, normalise_language};
use crate::commands::{ProcessSpec, spec_setters};
use crate::error::SandboxError;
use crate::pb;
use crate::sandbox::Sandbox;

/// Options of [`Sandbox::create_code_context`].
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CodeContextOptions {
    language: Option<String>,
    /// Cwd, env, secrets.
    spec: ProcessSpec,
}

// Env values may be secret: names only.
impl fmt::Debug for CodeContextOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("CodeContextOptions");
        f.field("language", &self.language);
        self.spec.debug_fields(&mut f).finish_non_exhaustive()
    }
}

impl CodeContextOptions {
    /// The defaults: a Python context in the sandbox's home.
    pub fn new() -> Self {
        Self::default()
    }

    spec_setters! {
        /// Sets the environment variable `variable` of the context's kernel to
        /// the value of a secret in AWS Secrets Manager (any language).
        secret;
        /// The kernel's working directory: absolute, or relative to
        /// `/home/user` like relative file paths.
        cwd;
        /// An environment variable the kernel starts with.
        env;
    }

    crate::setters::setters! {
        /// The context's language: `python` (the default), `bash`,
        /// `javascript`/`js`, `typescript`/`ts`.
        language: Some impl String;
    }
}

fn context_from(info: pb::ContextInfo) -> CodeContext {
    CodeContext {
        id: info.context_id,
        language: info.language,
        cwd: Some(info.cwd).filter(|cwd| !cwd.is_empty()),
    }
}

impl Sandbox {
    /// Creates a code context: a kernel of its own, with its own state
    /// (pass its id to [`crate::RunCodeOptions::context`]).
    ///
    /// # Errors
    /// `RateLimit` above 8 contexts; `Unimplemented` for a language the
    /// image lacks; `InvalidArgument` naming the argument before any I/O
    /// (`cwd` empty or with a NUL, `envs` by the builder's rules,
    /// `language` empty or with a NUL), or from the agent (a missing cwd);
    /// `Sandbox { code: PermissionDenied }` for a cwd the sandbox user may
    /// not use; transport failures.
    pub async fn create_code_context(
        &self,
        options: CodeContextOptions,
    ) -> Result<CodeContext, SandboxError> {
        if let Some(language) = &options.language {
            crate::checks::language(language)?;
        }
        crate::checks::envs(&options.spec.envs)?;
        let cwd = crate::checks::context_cwd(options.spec.cwd.as_deref())?;
        let language = options
            .language
            .as_deref()
            .map_or_else(|| "python".to_owned(), normalise_language);
        #[cfg_attr(not(feature = "secrets"), allow(unused_mut))]
        let mut envs = options.spec.envs.into_iter().collect();
        #[cfg(feature = "secrets")]
        self.inject_secrets(&options.spec.secrets, true, &mut envs)
            .await?;
        let response = self
            .conn()
            .create_context(
                pb::CreateContextRequest {
                    language: language.clone(),
                    cwd: cwd.clone(),
                    envs,
                },
                CONTEXT_TIMEOUT,
            )
            .await?;
        // The agent's view (its language name, its cwd) when it lists the
        // context; ours otherwise.
        let listed = self.list_code_contexts().await.ok().and_then(|contexts| {
            contexts
                .into_iter()
                .find(|context| context.id == response.context_id)
        });
        Ok(listed.unwrap_or(CodeContext {
            id: response.context_id,
            language,
            cwd,
        }))
    }

    /// The code contexts that exist (the default ones once used, and
    /// those created).
    ///
    /// # Errors
    /// Transport failures.
    pub async fn list_code_contexts(&self) -> Result<Vec<CodeContext>, SandboxError> {
        let response = self.conn().list_contexts(self.request_timeout()).await?;
        Ok(response.contexts.into_iter().map(context_from).collect())
    }

    /// Restarts a context's kernel: its state is lost; a cell running in it
    /// ends with the `KernelRestarted` error.
    ///
    /// # Errors
    /// `NotFound` for an unknown context; `Sandbox` (`ABORTED`: a restart
    /// is already under way); `InvalidArgument` for a malformed id;
    /// transport failures.
    pub async fn restart_code_context(&self, context_id: &str) -> Result<(), SandboxError> {
        crate::checks::context_id(context_id)?;
        self.conn()
            .restart_context(
                pb::RestartContextRequest {
                    context_id: context_id.to_owned(),
                },
                CONTEXT_TIMEOUT,
            )
            .await
    }

    /// Removes a code context and stops its kernel.
    ///
    /// # Errors
    /// `NotFound` for an unknown context; `InvalidArgument` for `default`
    /// (it is protected) or a malformed id; transport failures.
    pub async fn remove_code_context(&self, context_id: &str) -> Result<(), SandboxError> {
        crate::checks::context_id(context_id)?;
        self.conn()
            .destroy_context(
                pb::DestroyContextRequest {
                    context_id: context_id.to_owned(),
                },
                self.request_timeout(),
            )
            .await
    }
}
