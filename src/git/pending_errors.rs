//! TEMPORARY stand-ins for the lead's `git_auth` / `git_upstream`
//! constructors (commit "error: the secret, secret_not_found, git_auth and
//! git_upstream kinds" on main). Deleted when main is merged.

use crate::error::SandboxError;

impl SandboxError {
    pub(crate) fn git_auth(action: &'static str, username_only: bool) -> Self {
        let what = if username_only { "a password or token" } else { "credentials" };
        Self::Authentication {
            proxy_rejected: false,
            meta: Box::new(crate::error::ErrorMeta::new(format!("git {action} needs {what}"))),
        }
    }
    pub(crate) fn git_auth_rewrite(action: &'static str) -> Self {
        Self::Authentication {
            proxy_rejected: false,
            meta: Box::new(crate::error::ErrorMeta::new(format!(
                "git {action}: credentials refused, the config rewrites URLs (insteadOf)"
            ))),
        }
    }
    pub(crate) fn git_upstream(action: &'static str) -> Self {
        Self::invalid_argument("upstream", format!("git {action} has no upstream"))
    }
}
