//! What a failed tool call tells the model: one sentence per kind of
//! failure, chosen from the SDK's error variant, never the error's own text
//! (which may quote AWS) and never a stack. docs/mcp.md transcribes these
//! sentences; the unit test `the_docs_transcribe_every_sentence` keeps
//! the two in step.

use rayito::SandboxError;
use rayito::error::{SandboxCode, TimeoutScope};

/// The template is missing, invalid or not found.
pub const TEMPLATE: &str = "no sandbox could be created: the template is not set, not valid or not found (RAYITO_TEMPLATE in the server's environment)";
/// Creating the sandbox failed for another reason (`{kind}`: the error kind).
pub const CREATE: &str =
    "no sandbox could be created ({kind}); the server's log says more; try again later";
/// A deadline passed.
pub const TIMEOUT: &str = "timed out: the operation did not finish within its timeout; raise the timeout or split the work";
/// The path does not exist (`{path}`: the path the model gave).
pub const FILE_NOT_FOUND: &str = "file not found: {path}";
/// A value was refused (`{argument}`: the argument's name).
pub const INVALID_ARGUMENT: &str = "invalid argument: {argument}";
/// A value was refused, the argument unknown.
pub const INVALID_ARGUMENT_UNNAMED: &str = "invalid argument";
/// The sandbox user may not use a path or directory.
pub const PERMISSION_DENIED: &str = "permission denied: the sandbox's user may not use this path";
/// The sandbox's disk is full.
pub const DISK_FULL: &str = "the sandbox's disk is full; remove files and try again";
/// Throttled.
pub const RATE_LIMIT: &str = "rate limited; retry shortly";
/// The sandbox or this server cannot do it.
pub const UNIMPLEMENTED: &str = "not supported by this sandbox";
/// The sandbox is starting, suspending or resuming.
pub const SANDBOX_STATE: &str = "the sandbox is busy changing state; retry shortly";
/// The sandbox ended; the lease is forgotten.
pub const SANDBOX_GONE: &str =
    "the sandbox is gone; a new sandbox will be created on the next call";
/// Upload and download without a staging bucket.
pub const NOT_CONFIGURED: &str = "upload and download need a staging bucket: set RAYITO_TRANSFER_BUCKET in the server's environment";
/// Anything else (`{kind}`: the error kind).
pub const INTERNAL: &str = "internal error ({kind}); the server's log says more";

/// A failed tool call: the sentence for the model and the kind for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// What the model reads.
    pub message: String,
    /// The stable kind string (the SDK's, or `tool_argument` /
    /// `not_configured` for the server's own refusals) for the log line.
    pub kind: &'static str,
    /// The sandbox is gone: the lease must be forgotten.
    pub sandbox_gone: bool,
    /// Codes for the log (never text): the gRPC status, the AWS error
    /// code and the AWS request id, when the failure has them.
    pub codes: Codes,
}

/// The codes of a failure, for the operator's log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Codes {
    /// The agent's gRPC status code.
    pub grpc_code: Option<&'static str>,
    /// AWS's error code (`AccessDeniedException`).
    pub aws_code: Option<String>,
    /// AWS's request id.
    pub request_id: Option<String>,
}

impl Codes {
    fn of(err: &SandboxError) -> Codes {
        let meta = err.meta();
        Codes {
            grpc_code: meta.grpc_code().map(|c| c.as_str()),
            aws_code: meta.aws_code().map(str::to_owned),
            request_id: meta.request_id().map(str::to_owned),
        }
    }
}

impl Failure {
    /// A tool argument refused by the server itself, before any I/O:
    /// `detail` is the server's own sentence (it never quotes the value).
    pub fn argument(argument: &str, detail: &str) -> Failure {
        Failure {
            message: format!(
                "{}: {detail}",
                INVALID_ARGUMENT.replace("{argument}", argument)
            ),
            kind: "tool_argument",
            sandbox_gone: false,
            codes: Codes::default(),
        }
    }

    /// Upload and download without a staging bucket.
    pub fn not_configured() -> Failure {
        Failure {
            message: NOT_CONFIGURED.to_owned(),
            kind: "not_configured",
            sandbox_gone: false,
            codes: Codes::default(),
        }
    }

    /// The failure of creating the lease's sandbox.
    pub fn of_create(err: &SandboxError) -> Failure {
        let kind = err.classify().kind;
        let template = match err {
            SandboxError::InvalidArgument { argument, .. } => {
                matches!(
                    argument.as_deref(),
                    Some("template" | "template_version" | "size")
                )
            }
            // RunMicrovm's not-found: the image is probably missing.
            SandboxError::SandboxNotFound { .. } => true,
            _ => false,
        };
        if template {
            return Failure {
                message: TEMPLATE.to_owned(),
                kind,
                sandbox_gone: false,
                codes: Codes::of(err),
            };
        }
        match Self::of(err, None) {
            // A failure the model can act on keeps its sentence.
            f if !f.sandbox_gone && f.message != INTERNAL.replace("{kind}", kind) => f,
            _ => Failure {
                message: CREATE.replace("{kind}", kind),
                kind,
                sandbox_gone: false,
                codes: Codes::of(err),
            },
        }
    }

    /// The failure of a call on the lease's sandbox; `path` is the path the
    /// model gave, quoted back when it is not found.
    pub fn of(err: &SandboxError, path: Option<&str>) -> Failure {
        let kind = err.classify().kind;
        let (message, sandbox_gone) = match err {
            // A lifetime error on a call is the sandbox's end (a refused
            // lifetime at create cannot happen: the setting is bounded).
            SandboxError::SandboxNotFound { .. }
            | SandboxError::SandboxLifetime { .. }
            | SandboxError::Timeout {
                scope: TimeoutScope::Sandbox,
                ..
            }
            | SandboxError::Sandbox {
                code: Some(SandboxCode::AgentVmLost | SandboxCode::Closed),
                ..
            } => (SANDBOX_GONE.to_owned(), true),
            SandboxError::Timeout {
                scope: TimeoutScope::StateWait,
                ..
            }
            | SandboxError::SandboxState { .. }
            | SandboxError::SandboxNotReady { .. }
            | SandboxError::Sandbox {
                code: Some(SandboxCode::KernelNotReady),
                ..
            } => (SANDBOX_STATE.to_owned(), false),
            SandboxError::Timeout { .. } => (TIMEOUT.to_owned(), false),
            SandboxError::FileNotFound { .. } => (
                FILE_NOT_FOUND.replace("{path}", path.unwrap_or("(unknown path)")),
                false,
            ),
            SandboxError::InvalidArgument {
                argument: Some(argument),
                ..
            } => (
                INVALID_ARGUMENT.replace("{argument}", argument.as_ref()),
                false,
            ),
            SandboxError::InvalidArgument { argument: None, .. } => {
                (INVALID_ARGUMENT_UNNAMED.to_owned(), false)
            }
            SandboxError::Sandbox {
                code: Some(SandboxCode::PermissionDenied),
                ..
            } => (PERMISSION_DENIED.to_owned(), false),
            SandboxError::DiskFull { .. } => (DISK_FULL.to_owned(), false),
            SandboxError::RateLimit { .. } => (RATE_LIMIT.to_owned(), false),
            e if e.is(rayito::ErrorKind::Unimplemented) => (UNIMPLEMENTED.to_owned(), false),
            e if e.is(rayito::ErrorKind::DiskFull) => (DISK_FULL.to_owned(), false),
            _ => (INTERNAL.replace("{kind}", kind), false),
        };
        Failure {
            message,
            kind,
            sandbox_gone,
            codes: Codes::of(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayito::error::GrpcCode;
    use rayito::test_util::{AwsError, Call, agent_status};

    /// What AWS would say, with text that must never reach the model.
    fn aws(code: &str, status: u16) -> SandboxError {
        AwsError::new("RunMicrovm")
            .code(code)
            .http_status(status)
            .message("AWS SAID THIS")
            .build()
    }

    fn agent(code: GrpcCode, message: &str, call: Call) -> SandboxError {
        agent_status(code, message, call)
    }

    #[test]
    fn each_kind_has_its_sentence_and_never_the_errors_text() {
        let files = Call::filesystem("files.read");
        let commands = Call::new("commands.run");
        let cases: Vec<(SandboxError, &str, bool)> = vec![
            (
                SandboxError::timeout(TimeoutScope::Command, "commands.run", None),
                TIMEOUT,
                false,
            ),
            (
                SandboxError::timeout(TimeoutScope::Request, "files.read", None),
                TIMEOUT,
                false,
            ),
            (SandboxError::lifetime_reached("sbx-1"), SANDBOX_GONE, true),
            (SandboxError::sandbox_not_found("sbx-1"), SANDBOX_GONE, true),
            (SandboxError::agent_vm_lost("code.run"), SANDBOX_GONE, true),
            (SandboxError::closed(), SANDBOX_GONE, true),
            (
                agent(GrpcCode::NotFound, "AGENT SAID THIS", files),
                "file not found: /home/user/x",
                false,
            ),
            (
                SandboxError::invalid_argument("cwd", "AGENT SAID THIS"),
                "invalid argument: cwd",
                false,
            ),
            (
                agent(GrpcCode::InvalidArgument, "AGENT SAID THIS", commands),
                INVALID_ARGUMENT_UNNAMED,
                false,
            ),
            (
                agent(GrpcCode::ResourceExhausted, "disk_full", files),
                DISK_FULL,
                false,
            ),
            (aws("ThrottlingException", 429), RATE_LIMIT, false),
            (aws("ConflictException", 409), SANDBOX_STATE, false),
            (
                agent(GrpcCode::Unimplemented, "AGENT SAID THIS", commands),
                UNIMPLEMENTED,
                false,
            ),
            (
                aws("InternalServerException", 500),
                "internal error (service_error); the server's log says more",
                false,
            ),
            (
                aws("AccessDeniedException", 403),
                "internal error (authentication); the server's log says more",
                false,
            ),
        ];
        for (err, message, gone) in cases {
            let f = Failure::of(&err, Some("/home/user/x"));
            assert_eq!(f.message, message, "{err:?}");
            assert_eq!(f.sandbox_gone, gone, "{err:?}");
            assert_eq!(f.kind, err.classify().kind);
            assert!(!f.message.contains("SAID THIS"), "{}", f.message);
        }
    }

    #[test]
    fn a_create_failure_names_the_template_or_the_kind() {
        let no_template = SandboxError::invalid_argument("template", "no template was given");
        assert_eq!(Failure::of_create(&no_template).message, TEMPLATE);
        // RunMicrovm's not-found: the image is missing, not the sandbox.
        let missing_image = aws("ResourceNotFoundException", 404);
        let f = Failure::of_create(&missing_image);
        assert_eq!(f.message, TEMPLATE);
        assert!(!f.sandbox_gone);
        assert_eq!(
            Failure::of_create(&aws("AccessDeniedException", 403)).message,
            "no sandbox could be created (authentication); the server's log says more; try again later"
        );
        assert_eq!(
            Failure::of_create(&aws("ThrottlingException", 429)).message,
            RATE_LIMIT
        );
    }

    /// docs/mcp.md transcribes every sentence exactly, in backquotes.
    #[test]
    fn the_docs_transcribe_every_sentence() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/mcp.md"))
            .expect("docs/mcp.md");
        for sentence in [
            TEMPLATE,
            CREATE,
            TIMEOUT,
            FILE_NOT_FOUND,
            INVALID_ARGUMENT,
            INVALID_ARGUMENT_UNNAMED,
            PERMISSION_DENIED,
            DISK_FULL,
            RATE_LIMIT,
            UNIMPLEMENTED,
            SANDBOX_STATE,
            SANDBOX_GONE,
            NOT_CONFIGURED,
            INTERNAL,
        ] {
            assert!(
                doc.contains(&format!("`{sentence}`")),
                "docs/mcp.md does not transcribe: {sentence}"
            );
        }
        // The suffixes of cut texts, as the docs write them.
        for suffix in [crate::truncate::SUFFIX, crate::tools::MORE_BYTES_SUFFIX] {
            let written = suffix.replace('\n', "\\n").replace("{n}", "N");
            assert!(
                doc.contains(&format!("`{written}`")),
                "docs/mcp.md does not transcribe: {written}"
            );
        }
    }

    #[test]
    fn the_servers_own_refusals() {
        let f = Failure::argument("timeout", "must be from 1 to 3600 seconds");
        assert_eq!(
            f.message,
            "invalid argument: timeout: must be from 1 to 3600 seconds"
        );
        assert_eq!(f.kind, "tool_argument");
        assert_eq!(Failure::not_configured().message, NOT_CONFIGURED);
    }
}
