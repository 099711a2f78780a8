//! Failures of Secrets Manager calls (the secret store, the secret cache
//! and `secrets` injection): by AWS error code only. AWS's message can
//! name the secret (names are confidential selectors), so it is dropped
//! before anything is built; the message names the API call and, for an
//! injection, the environment variable, never the secret or its value.

use std::time::Duration;

use crate::error::constructors::meta;
use crate::error::messages::{self as m, Template};
use crate::error::{ErrorMeta, SandboxError};

use super::agent::token_for_message;
use super::aws::{AUTH_CODES, AwsFailure, SERVICE_FAULT_CODES, THROTTLING_CODES, from_aws};
use super::index::plain_code;

/// `{subject}`: the call, and the environment variable it was reading for.
fn subject(operation: &str, variable: Option<&str>) -> String {
    match variable {
        Some(v) => format!(
            "the Secrets Manager call {operation} for environment variable {}",
            token_for_message(v)
        ),
        None => format!("the Secrets Manager call {operation}"),
    }
}

fn secret_meta(
    t: Template,
    operation: &str,
    variable: Option<&str>,
    aws_code: Option<&str>,
) -> Box<ErrorMeta> {
    let subject = subject(operation, variable);
    let mut out = meta(
        t,
        &[
            ("subject", &subject),
            ("operation", operation),
            ("aws_code", aws_code.unwrap_or("no code")),
        ],
    );
    out.aws_code = aws_code.map(str::to_owned);
    out
}

fn secret(
    t: Template,
    operation: &str,
    variable: Option<&str>,
    aws_code: Option<&str>,
) -> SandboxError {
    SandboxError::Secret {
        aws_code: aws_code.map(str::to_owned),
        meta: secret_meta(t, operation, variable, aws_code),
    }
}

/// Maps a failed Secrets Manager call. `failure.operation` is the AWS API
/// name (`GetSecretValue`, `CreateSecret`, ...); `variable` is the
/// environment variable an injection was resolving, if any.
///
/// Connection failures, throttling, refused credentials and service
/// faults keep the control plane's mapping (retryable where it is); the
/// codes of the secret store become `SecretNotFound` or `Secret`.
#[cfg_attr(
    not(test),
    allow(
        dead_code,
        reason = "the secret store calls it (issue 27, in progress)"
    )
)]
pub(crate) fn from_secrets_manager(
    mut failure: AwsFailure,
    variable: Option<&str>,
) -> SandboxError {
    // AWS's text can name the secret: never kept, not even in metadata.
    failure.message = None;
    let operation = failure.operation;
    let code = plain_code(failure.code.as_deref()).map(str::to_owned);
    let Some(code) = code.filter(|_| failure.no_response.is_none()) else {
        return from_aws(failure);
    };
    let base = code.strip_suffix("Exception").unwrap_or(&code);
    let code = Some(code.as_str());
    match base {
        "ResourceNotFound" => SandboxError::SecretNotFound {
            meta: secret_meta(m::SECRET_NOT_FOUND, operation, variable, code),
        },
        "AccessDenied" => secret(m::SECRET_ACCESS_DENIED, operation, variable, code),
        "ResourceExists" if operation == "CreateSecret" => {
            secret(m::SECRET_EXISTS, operation, variable, code)
        }
        "ResourceExists" => secret(m::SECRET_VERSION_CONFLICT, operation, variable, code),
        // Secrets Manager's LimitExceededException is a quota (a secret
        // written too often, too many versions), not throttling, although
        // the AWS SDK's retry classifier lists the code.
        "LimitExceeded" => secret(m::SECRET_LIMIT, operation, variable, code),
        _ if code.is_some_and(|c| THROTTLING_CODES.contains(&c))
            || AUTH_CODES.contains(&base)
            || SERVICE_FAULT_CODES.contains(&base)
            || failure.http_status.is_some_and(|s| s >= 500) =>
        {
            from_aws(failure)
        }
        _ => secret(m::SECRET_OTHER, operation, variable, code),
    }
}

impl SandboxError {
    /// `Secret`: a create kept finding the name still being deleted after
    /// the SDK's retries (`waited` in all).
    pub fn secret_deletion_pending(waited: Duration) -> Self {
        Self::Secret {
            aws_code: None,
            meta: meta(
                m::SECRET_DELETION_PENDING,
                &[("waited", &m::duration(waited))],
            ),
        }
    }

    /// `Secret`: `GetSecretValue` returned a binary secret (no
    /// `SecretString`); `variable` is the environment variable of an
    /// injection, if any.
    pub fn secret_not_string(variable: Option<&str>) -> Self {
        secret(m::SECRET_NOT_STRING, "GetSecretValue", variable, None)
    }

    /// `SecretNotFound`: no such secret (or it is scheduled for deletion)
    /// for the call `operation` (e.g. `DescribeSecret`).
    pub fn secret_not_found(operation: &str, variable: Option<&str>) -> Self {
        Self::SecretNotFound {
            meta: secret_meta(m::SECRET_NOT_FOUND, operation, variable, None),
        }
    }

    /// `GitAuth`: git `action` (`clone`, `push`, `pull`, `fetch`) needs
    /// credentials or the remote refused them; `username_only` when a
    /// username was given without a password or token.
    pub fn git_auth(action: &'static str, username_only: bool) -> Self {
        let t = if username_only {
            m::GIT_AUTH_PASSWORD
        } else {
            m::GIT_AUTH
        };
        Self::GitAuth {
            meta: meta(t, &[("action", action)]),
        }
    }

    /// `GitAuth`: git `action` was not run with the credentials because the
    /// sandbox's git configuration rewrites URLs (`url.*.insteadOf`).
    pub fn git_auth_rewrite(action: &'static str) -> Self {
        Self::GitAuth {
            meta: meta(m::GIT_AUTH_REWRITE, &[("action", action)]),
        }
    }

    /// `GitAuth`: git `action` was not run with the credentials because the
    /// sandbox's git configuration sets a key that redirects or downgrades
    /// the transport (a proxy, a TLS setting, a resolve override, an extra
    /// header, a remote helper).
    pub fn git_auth_transport(action: &'static str) -> Self {
        Self::GitAuth {
            meta: meta(m::GIT_AUTH_TRANSPORT, &[("action", action)]),
        }
    }

    /// `GitAuth`: git `action` was not run with the credentials because the
    /// remote's URL (or push URL) in the sandbox is not the one the caller
    /// pinned them to.
    pub fn git_auth_moved(action: &'static str) -> Self {
        Self::GitAuth {
            meta: meta(m::GIT_AUTH_MOVED, &[("action", action)]),
        }
    }

    /// `GitUpstream`: git `action` (`push`, `pull`) found no upstream
    /// branch.
    pub fn git_upstream(action: &'static str) -> Self {
        Self::GitUpstream {
            meta: meta(m::GIT_UPSTREAM, &[("action", action)]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::error::map::aws::NoResponse;

    fn failure(operation: &'static str, code: &str, status: u16) -> AwsFailure {
        let mut f = AwsFailure::new(operation);
        f.code = Some(code.to_owned());
        f.http_status = Some(status);
        f.message =
            Some("Secrets Manager can't find the specified secret rayito/db-password".into());
        f
    }

    /// (operation, AWS code, HTTP status, variable, kind, message)
    type Row = (
        &'static str,
        &'static str,
        u16,
        Option<&'static str>,
        ErrorKind,
        &'static str,
    );

    #[test]
    fn codes_map_to_their_rows() {
        let rows: &[Row] = &[
            (
                "GetSecretValue",
                "ResourceNotFoundException",
                400,
                None,
                ErrorKind::SecretNotFound,
                "the Secrets Manager call GetSecretValue found no such secret, or it is scheduled for deletion; check the name and the store's prefix, or create the secret",
            ),
            (
                "GetSecretValue",
                "ResourceNotFoundException",
                400,
                Some("OPENAI_API_KEY"),
                ErrorKind::SecretNotFound,
                "the Secrets Manager call GetSecretValue for environment variable OPENAI_API_KEY found no such secret, or it is scheduled for deletion; check the name and the store's prefix, or create the secret",
            ),
            (
                "GetSecretValue",
                "AccessDeniedException",
                400,
                Some("TOKEN"),
                ErrorKind::Secret,
                "the Secrets Manager call GetSecretValue for environment variable TOKEN was refused (AccessDeniedException); allow the IAM action secretsmanager:GetSecretValue to the caller, and kms:Decrypt on the key of a secret encrypted with a customer managed key",
            ),
            (
                "CreateSecret",
                "ResourceExistsException",
                400,
                None,
                ErrorKind::Secret,
                "the Secrets Manager call CreateSecret found a secret of that name already; update it, or destroy it first",
            ),
            (
                "PutSecretValue",
                "ResourceExistsException",
                400,
                None,
                ErrorKind::Secret,
                "the Secrets Manager call PutSecretValue found the new version already written by another writer; read the secret's info and update again",
            ),
            (
                "PutSecretValue",
                "LimitExceededException",
                400,
                None,
                ErrorKind::Secret,
                "the Secrets Manager call PutSecretValue hit a Secrets Manager limit (LimitExceededException); write a secret at most once every 10 minutes, or delete secrets you no longer use",
            ),
            (
                "CreateSecret",
                "InvalidRequestException",
                400,
                None,
                ErrorKind::Secret,
                "the Secrets Manager call CreateSecret failed (InvalidRequestException); check the request, and report it if it persists",
            ),
        ];
        for (op, code, status, variable, kind, message) in rows {
            let e = from_secrets_manager(failure(op, code, *status), *variable);
            assert_eq!(e.kind(), *kind, "{code}");
            assert_eq!(e.to_string(), *message, "{code}");
            assert!(!format!("{e:?}").contains("db-password"), "{e:?}");
            if let SandboxError::Secret { aws_code, .. } = &e {
                assert_eq!(aws_code.as_deref(), Some(*code));
            }
        }
    }

    #[test]
    fn throttling_credentials_and_faults_keep_the_control_plane_rows() {
        let e = from_secrets_manager(failure("GetSecretValue", "ThrottlingException", 400), None);
        assert_eq!(e.kind(), ErrorKind::RateLimit);
        let e = from_secrets_manager(
            failure("GetSecretValue", "UnrecognizedClientException", 400),
            None,
        );
        assert_eq!(e.kind(), ErrorKind::Authentication);
        let e = from_secrets_manager(failure("GetSecretValue", "InternalServiceError", 500), None);
        assert!(e.is_retryable(), "{e:?}");
        let mut f = AwsFailure::new("GetSecretValue");
        f.no_response = Some(NoResponse::Connect);
        assert!(from_secrets_manager(f, None).is_retryable());
        for e in [
            from_secrets_manager(failure("GetSecretValue", "ThrottlingException", 400), None),
            from_secrets_manager(failure("GetSecretValue", "InternalServiceError", 500), None),
        ] {
            assert!(!e.to_string().contains("db-password"), "{e}");
        }
    }

    #[test]
    fn kinds_and_sdk_side_messages() {
        let e = SandboxError::secret_not_found("DescribeSecret", None);
        assert!(e.is(ErrorKind::Secret) && e.is_not_found() && e.is_sandbox_error());
        let e = SandboxError::secret_deletion_pending(Duration::from_secs(60));
        assert_eq!(
            e.to_string(),
            "a secret of that name was still being deleted after 60 s of retries; wait a minute and create it again, or choose another name"
        );
        assert_eq!(
            SandboxError::secret_not_string(Some("K")).to_string(),
            "the Secrets Manager call GetSecretValue for environment variable K returned a binary secret, not a string; store the value as a string (SecretString) to read or inject it"
        );
        let e = SandboxError::git_auth("push", false);
        assert!(e.is(ErrorKind::Authentication) && !e.is_sandbox_error() && !e.is_retryable());
        assert_eq!(
            e.to_string(),
            "git push needs credentials: the remote asked for them or refused them; pass a username and a password or token"
        );
        assert_eq!(
            SandboxError::git_auth("clone", true).to_string(),
            "git clone needs a password or token: the username alone was refused; pass the password or token too"
        );
        assert_eq!(
            SandboxError::git_auth_rewrite("pull").to_string(),
            "git pull did not send the credentials: the sandbox's git configuration rewrites URLs (url.*.insteadOf or pushInsteadOf), so they could reach another server; remove the rewriting, then retry"
        );
        let e = SandboxError::git_auth_transport("push");
        assert!(e.is(ErrorKind::Authentication) && !e.is_sandbox_error() && !e.is_retryable());
        assert_eq!(
            e.to_string(),
            "git push did not send the credentials: the sandbox's git configuration sets a proxy, TLS, header or transport setting (http.*proxy*, http.*ssl*, http.*curloptResolve, http.*extraHeader, remote.*.proxy* or remote.*.vcs), so they could reach another server or travel unchecked; remove the setting, then retry"
        );
        let e = SandboxError::git_auth_moved("pull");
        assert!(e.is(ErrorKind::Authentication) && !e.is_sandbox_error() && !e.is_retryable());
        assert_eq!(
            e.to_string(),
            "git pull did not send the credentials: the remote's URL in the sandbox (url or pushurl) is not the URL they are for; set it back, or pass the URL the credentials are for"
        );
        let e = SandboxError::git_upstream("pull");
        assert!(e.is_sandbox_error() && !e.is(ErrorKind::Authentication));
        assert_eq!(
            e.to_string(),
            "git pull found no upstream branch; pass a remote and a branch, or set the upstream (push with set_upstream, or git branch --set-upstream-to)"
        );
        let e = SandboxError::secret_not_found("GetSecretValue", Some("A=B\n"));
        assert!(e.to_string().contains("environment variable A?B? "), "{e}");
    }
}
