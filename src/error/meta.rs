//! Metadata shared by every error variant.

use super::codes::GrpcCode;
use super::map::redact::{MAX_KEPT_CHARS, redact_aws_text, sanitize_remote_text};

/// Facts about a failure that every variant carries: our message, and what
/// the server said (its message, gRPC code, HTTP status, AWS error code,
/// request id), plus how many attempts the SDK made.
///
/// Server text is redacted and cut to 2,048 characters before it is kept.
///
/// `ErrorMeta` is also the `source()` of every [`SandboxError`]: its
/// `Display` is a sanitized one-line summary of what the server answered
/// (`aws code ThrottlingException, http 429, request id r-1, 5 attempts`),
/// never the raw response.
///
/// [`SandboxError`]: crate::SandboxError
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorMeta {
    pub(crate) message: String,
    pub(crate) server_message: Option<String>,
    pub(crate) grpc_code: Option<GrpcCode>,
    pub(crate) http_status: Option<u16>,
    pub(crate) aws_code: Option<String>,
    pub(crate) request_id: Option<String>,
    pub(crate) reason: Option<String>,
    pub(crate) attempts: u32,
    /// How long the SDK kept trying before it gave up (the reconnect
    /// contract's wait), when it says.
    pub(crate) elapsed: Option<std::time::Duration>,
    /// The redacted text of the failure behind this one (a transport
    /// error, a dispatch failure), when there was one.
    pub(crate) cause: Option<RedactedCause>,
    /// The sandbox a failed `create` left running (keep on failure), for
    /// the caller to connect to or kill.
    pub(crate) kept_sandbox_id: Option<String>,
}

impl ErrorMeta {
    /// Metadata with our message only (useful to build errors in tests).
    ///
    /// The message is kept as every message is: on one line (control
    /// characters become spaces), redacted, trimmed, at most 2,048
    /// characters. So `Display` is always one line, and the wire form,
    /// which cleans what it reads the same way, rebuilds the same error.
    pub fn new(message: impl AsRef<str>) -> Self {
        Self {
            message: clean_message(message.as_ref()),
            ..Self::default()
        }
    }

    /// Replaces our message, cleaned as [`ErrorMeta::new`] cleans it.
    pub(crate) fn set_message(&mut self, message: &str) {
        self.message = clean_message(message);
    }

    /// Our message: what failed, then what remains possible. This is the
    /// `Display` of the error.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The server's own message (AWS or agent), redacted.
    pub fn server_message(&self) -> Option<&str> {
        self.server_message.as_deref()
    }

    /// The gRPC status code, for failures from the agent.
    pub fn grpc_code(&self) -> Option<GrpcCode> {
        self.grpc_code
    }

    /// The HTTP status, when an HTTP answer was received.
    pub fn http_status(&self) -> Option<u16> {
        self.http_status
    }

    /// The AWS error code, e.g. `ThrottlingException`.
    pub fn aws_code(&self) -> Option<&str> {
        self.aws_code.as_deref()
    }

    /// The AWS request id (`x-amzn-requestid`).
    pub fn request_id(&self) -> Option<&str> {
        self.request_id.as_deref()
    }

    /// The agent's own code token, e.g. a `StreamError.code` or an
    /// `EndEvent.status` that decided the variant.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// How many attempts the SDK made (0 when it failed before any call).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// How long the SDK kept trying before it gave up, when it says: the
    /// reconnect contract's wait for a `Sandbox { connection_lost }` that
    /// ended it (with [`ErrorMeta::attempts`], its Health probes).
    pub fn elapsed(&self) -> Option<std::time::Duration> {
        self.elapsed
    }

    /// The id of the sandbox a failed `create` left running because the
    /// builder kept it on failure
    /// ([`crate::SandboxBuilder::keep_on_failure`]): connect to it
    /// (`Client::connect`) or kill it by id (`Client::kill_by_id`). `None`
    /// when nothing was kept.
    pub fn kept_sandbox_id(&self) -> Option<&str> {
        self.kept_sandbox_id.as_deref()
    }

    /// Sets the server message; AWS-style secrets are redacted and the text
    /// is cut to 2,048 characters.
    #[must_use]
    pub fn with_server_message(mut self, text: impl AsRef<str>) -> Self {
        self.server_message = non_empty(redact_aws_text(text.as_ref()));
        self
    }

    /// Sets the gRPC code.
    #[must_use]
    pub fn with_grpc_code(mut self, code: GrpcCode) -> Self {
        self.grpc_code = Some(code);
        self
    }

    /// Sets the HTTP status.
    #[must_use]
    pub fn with_http_status(mut self, status: u16) -> Self {
        self.http_status = Some(status);
        self
    }

    /// Sets the AWS error code.
    #[must_use]
    pub fn with_aws_code(mut self, code: impl AsRef<str>) -> Self {
        self.aws_code = non_empty(sanitize_remote_text(code.as_ref(), 256));
        self
    }

    /// Sets the AWS request id.
    #[must_use]
    pub fn with_request_id(mut self, id: impl AsRef<str>) -> Self {
        self.request_id = non_empty(sanitize_remote_text(id.as_ref(), 256));
        self
    }

    /// Sets the agent's code token.
    #[must_use]
    pub fn with_reason(mut self, token: impl AsRef<str>) -> Self {
        self.reason = non_empty(sanitize_remote_text(token.as_ref(), 256));
        self
    }

    /// Sets the number of attempts.
    #[must_use]
    pub fn with_attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts;
        self
    }

    /// Sets how long the SDK kept trying.
    #[must_use]
    pub fn with_elapsed(mut self, elapsed: std::time::Duration) -> Self {
        self.elapsed = Some(elapsed);
        self
    }
}

impl std::fmt::Display for ErrorMeta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if let Some(code) = &self.aws_code {
            parts.push(format!("aws code {code}"));
        }
        if let Some(code) = self.grpc_code {
            parts.push(format!("grpc {code}"));
        }
        if let Some(status) = self.http_status {
            parts.push(format!("http {status}"));
        }
        if let Some(id) = &self.request_id {
            parts.push(format!("request id {id}"));
        }
        if let Some(reason) = &self.reason {
            parts.push(format!("agent reason {reason}"));
        }
        if parts.is_empty() {
            parts.push("no server answer".to_owned());
        }
        let plural = if self.attempts == 1 { "" } else { "s" };
        parts.push(format!("{} attempt{plural}", self.attempts));
        if let Some(elapsed) = self.elapsed {
            parts.push(format!("{} ms", elapsed.as_millis()));
        }
        f.write_str(&parts.join(", "))
    }
}

impl std::error::Error for ErrorMeta {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause
            .as_ref()
            .map(|cause| cause as &(dyn std::error::Error + 'static))
    }
}

/// The failure that caused an error, as an opaque error whose `Display` is
/// its redacted text: the last "Caused by" line of an `anyhow`/`eyre`
/// report. It has no source of its own: the raw error stays inside the SDK.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RedactedCause(String);

impl RedactedCause {
    /// Redacts `text` (one line, at most 512 characters); `None` when
    /// nothing is left.
    pub(crate) fn new(text: &str) -> Option<Self> {
        let clean = sanitize_remote_text(text, 512);
        (!clean.is_empty()).then_some(Self(clean))
    }
}

impl RedactedCause {
    /// The redacted text.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for RedactedCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RedactedCause {}

/// A message as every error keeps it (see [`ErrorMeta::new`]).
fn clean_message(text: &str) -> String {
    sanitize_remote_text(text, MAX_KEPT_CHARS)
}

fn non_empty(text: String) -> Option<String> {
    if text.is_empty() { None } else { Some(text) }
}
