//! In-stream agent failures: `StreamError` codes and process `EndEvent`
//! statuses (docs/errors.md, "In-stream `StreamError.code`"; docs/errors.md,
//! "Process `EndEvent.status`"; same targets as the gRPC table).
//!
//! Codes and statuses are exact tokens. The message of a `StreamError` is
//! kept (redacted) in the metadata and shown after our text, but only the
//! exact `disk_reserve` / `disk_full` markers read it.

use crate::error::codes::{CapturedText, CommandExitStatus, SandboxCode, TimeoutScope};
use crate::error::constructors::meta;
use crate::error::messages::{self as m, Template};
use crate::error::{ErrorMeta, SandboxError};

use rayito_proto::tokens::{detail, end_status, stream_code};

use super::grpc::CallContext;
use super::redact::sanitize_remote_text;

/// Linux's SIGXCPU: a process past its RLIMIT_CPU soft limit.
const SIGXCPU: i32 = 24;

/// The fields of a process `EndEvent` the mapping reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndEventData {
    /// `EndEvent.status` (`exited`, `signaled`, `timeout`, `suspending`,
    /// `output_truncated`, `sandbox_timeout`, or newer).
    pub status: String,
    /// `EndEvent.exit_code` (128 + signal when killed).
    pub exit_code: i32,
    /// `EndEvent.signal`, when set.
    pub signal: Option<i32>,
    /// `EndEvent.error` as `(code, message)`, when set.
    pub error: Option<(String, String)>,
}

/// The output a command produced, as the SDK kept it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct CommandOutput {
    /// Decoded stdout (the kept tail).
    pub stdout: String,
    /// Decoded stderr (the kept tail).
    pub stderr: String,
    /// Output was cut to `max_output_bytes`.
    pub truncated: bool,
}

// Output may hold anything the command printed: lengths only.
crate::secret::redacted_debug! {
    CommandOutput |o| stdout_len = o.stdout.len(), stderr_len = o.stderr.len(), truncated
}

/// A process stream that ended without a failure.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndOutcome {
    /// The command exited with code 0; here is its output.
    Exited {
        /// The output, handed back.
        output: CommandOutput,
    },
    /// The sandbox is suspending: the process is still alive, the stream is
    /// not final. Reconnect after resume with `Connect(pid, last_seq + 1)`.
    Suspended {
        /// The output so far, handed back.
        output: CommandOutput,
    },
}

/// The name a message may show for a command: its first word that is not an
/// environment assignment, if it is made only of path-like characters and
/// is at most 64 long, and holds nothing redaction would remove. Anything
/// else could quote a secret: `(shell)`.
pub(crate) fn program_name(command: &str) -> &str {
    let word = command
        .split_whitespace()
        .find(|w| !w.contains('='))
        .unwrap_or("");
    let safe = !word.is_empty()
        && word.len() <= 64
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'/' | b'+' | b'-'));
    // A path can still hold a key id or a hex secret: those are not shown.
    // Nor is a word that is the tail of a secret assignment before it
    // (`HTTP_AUTHORIZATION=Bearer <secret> cmd` runs `<secret>`): the text
    // up to the word, redacted, must still end with the word.
    // `word` is empty or a subslice of `command`.
    let upto = || {
        let end = (word.as_ptr() as usize).saturating_sub(command.as_ptr() as usize) + word.len();
        command.get(..end).unwrap_or("")
    };
    if safe
        && super::redact::redact_aws_text(word) == word
        && super::redact::redact_aws_text(upto()).ends_with(word)
    {
        word
    } else {
        "(shell)"
    }
}

/// A token from the agent, safe to show: `[A-Za-z0-9_]` (anything else as
/// `?`), at most 64 long, and `(redacted)` when it holds anything the
/// redaction would remove (a key id, a hex signature).
pub(crate) fn token_for_message(token: &str) -> String {
    let Some(window) = super::redact::secret_free_prefix(token) else {
        return "(redacted)".to_owned();
    };
    let clean: String = window
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '?'
            }
        })
        .collect();
    if clean.is_empty() {
        "(empty)".to_owned()
    } else {
        clean
    }
}

fn kept(meta: ErrorMeta, reason: &str, message: &str) -> Box<ErrorMeta> {
    let mut out = meta.with_attempts(1).with_reason(reason);
    if !message.is_empty() {
        out = out.with_server_message(message);
    }
    Box::new(out)
}

/// Maps an in-stream `StreamError{code, message}` of `call`.
pub fn from_stream_error(code: &str, message: &str, call: CallContext) -> SandboxError {
    let feature = call.feature;
    let server = sanitize_remote_text(message, 512);
    let detail = m::detail(Some(&server));
    let with = |t: Template, extra: &[(&str, &str)]| -> Box<ErrorMeta> {
        let mut args: Vec<(&str, &str)> = vec![("feature", feature), ("detail", &detail)];
        args.extend_from_slice(extra);
        kept(*meta(t, &args), code, message)
    };
    match code {
        stream_code::NOT_FOUND if call.filesystem => SandboxError::FileNotFound {
            meta: with(m::GRPC_FILE_NOT_FOUND, &[]),
        },
        stream_code::NOT_FOUND => SandboxError::NotFound {
            meta: with(m::GRPC_NOT_FOUND, &[]),
        },
        stream_code::PERMISSION_DENIED if call.filesystem => SandboxError::sandbox_with(
            SandboxCode::PermissionDenied,
            with(m::GRPC_PATH_DENIED, &[("role", "path")]),
        ),
        stream_code::PERMISSION_DENIED => SandboxError::Authentication {
            proxy_rejected: false,
            meta: with(m::GRPC_PERMISSION_DENIED, &[]),
        },
        stream_code::DEADLINE_EXCEEDED => SandboxError::Timeout {
            scope: TimeoutScope::Request,
            meta: with(m::TIMEOUT_REQUEST, &[("within", "")]),
        },
        stream_code::SANDBOX_TIMEOUT => SandboxError::Timeout {
            scope: TimeoutScope::Sandbox,
            meta: with(m::GRPC_SANDBOX_TIMEOUT, &[]),
        },
        stream_code::INVALID_ARGUMENT | stream_code::FAILED_PRECONDITION => {
            SandboxError::InvalidArgument {
                argument: None,
                meta: with(m::GRPC_INVALID_ARGUMENT, &[]),
            }
        }
        stream_code::UNIMPLEMENTED => {
            let reason =
                super::grpc::language_reason(message).unwrap_or(m::GRPC_UNIMPLEMENTED_REASON.text);
            SandboxError::Unimplemented {
                feature: crate::error::wire::clean_feature(feature),
                reason: crate::error::wire::clean_reason(reason),
                doc: None,
                meta: with(m::SDK_UNIMPLEMENTED, &[("reason", reason), ("see", "")]),
            }
        }
        stream_code::RESOURCE_EXHAUSTED if message == detail::DISK_RESERVE => {
            SandboxError::DiskFull {
                meta: with(m::GRPC_DISK_RESERVE, &[]),
            }
        }
        stream_code::RESOURCE_EXHAUSTED if message == detail::DISK_FULL => SandboxError::DiskFull {
            meta: with(m::GRPC_DISK_FULL, &[]),
        },
        stream_code::RESOURCE_EXHAUSTED => SandboxError::RateLimit {
            retry_after: None,
            meta: with(m::GRPC_RATE_LIMIT, &[]),
        },
        stream_code::SUSPENDING => SandboxError::SandboxState {
            meta: with(m::GRPC_SUSPENDING, &[]),
        },
        stream_code::OUTPUT_TRUNCATED => SandboxError::sandbox_with(
            SandboxCode::OutputTruncated,
            with(m::END_OUTPUT_TRUNCATED, &[("program", feature)]),
        ),
        stream_code::CANCELLED if call.caller_cancelled => {
            SandboxError::sandbox_with(SandboxCode::Cancelled, with(m::SDK_CANCELLED, &[]))
        }
        other => SandboxError::Sandbox {
            code: None,
            meta: with(m::STREAM_OTHER, &[("code", &token_for_message(other))]),
        },
    }
}

/// Maps the `EndEvent` of a command.
///
/// `Ok(Exited)` for exit code 0, `Ok(Suspended)` for the `suspending` end
/// (not final). Otherwise the error: `CommandExit` for a non-zero exit or a
/// signal, `Timeout{command}` for `timeout`, `Timeout{sandbox}` for
/// `sandbox_timeout`, `Sandbox{output_truncated}` for `output_truncated`, and
/// the `StreamError` table for any other status that carries an error.
///
/// `command` only lends its program name to the message (see the docs):
/// arguments can hold secrets and are never shown.
///
/// # Errors
///
/// Every end that is not a success or a suspension, as above.
pub fn from_end_event(
    end: EndEventData,
    output: CommandOutput,
    command: &str,
) -> Result<EndOutcome, SandboxError> {
    let program = program_name(command);
    let exit_text = m::group_i64(i64::from(end.exit_code));
    let status = end.status.as_str();
    let feature_name = format!("command {program}");
    let plain = |t: Template, args: &[(&str, &str)]| kept(*meta(t, args), status, "");

    let command_exit = |status: CommandExitStatus, meta: Box<ErrorMeta>, output: CommandOutput| {
        SandboxError::CommandExit {
            exit_code: end.exit_code,
            stdout: CapturedText::new(output.stdout),
            stderr: CapturedText::new(output.stderr),
            status,
            truncated: output.truncated,
            meta,
        }
    };

    match status {
        end_status::SUSPENDING => Ok(EndOutcome::Suspended { output }),
        end_status::TIMEOUT => Err(SandboxError::Timeout {
            scope: TimeoutScope::Command,
            meta: plain(m::END_TIMEOUT, &[("program", program)]),
        }),
        end_status::SANDBOX_TIMEOUT => Err(SandboxError::Timeout {
            scope: TimeoutScope::Sandbox,
            meta: plain(m::GRPC_SANDBOX_TIMEOUT, &[("feature", &feature_name)]),
        }),
        end_status::OUTPUT_TRUNCATED => Err(SandboxError::sandbox_with(
            SandboxCode::OutputTruncated,
            plain(m::END_OUTPUT_TRUNCATED, &[("program", program)]),
        )),
        end_status::EXITED if end.exit_code == 0 => Ok(EndOutcome::Exited { output }),
        end_status::EXITED => Err(command_exit(
            CommandExitStatus::Exited,
            plain(
                m::END_EXITED,
                &[("program", program), ("exit_code", &exit_text)],
            ),
            output,
        )),
        end_status::SIGNALED => {
            let number = end
                .signal
                .or_else(|| (end.exit_code > 128).then(|| end.exit_code - 128));
            let signal = number.map_or_else(|| "unknown".to_owned(), |s| s.to_string());
            // The agent says why when the sandbox's memory limit ended it
            // (a stream error `resource_exhausted` on the end event).
            // SIGXCPU: RLIMIT_CPU, which only the sandbox's
            // `cpu_time_limit` sets (its SIGKILL 5 s later reads as any
            // other kill).
            let template = match &end.error {
                Some((code, _)) if code == stream_code::RESOURCE_EXHAUSTED => m::END_MEMORY_LIMIT,
                _ if number == Some(SIGXCPU) => m::END_CPU_LIMIT,
                _ => m::END_SIGNALED,
            };
            Err(command_exit(
                CommandExitStatus::Signaled,
                plain(
                    template,
                    &[
                        ("program", program),
                        ("signal", &signal),
                        ("exit_code", &exit_text),
                    ],
                ),
                output,
            ))
        }
        other => {
            if let Some((code, message)) = &end.error {
                // The feature name must be 'static; commands share one.
                return Err(from_stream_error(
                    code,
                    message,
                    CallContext::new("commands.run"),
                ));
            }
            if end.exit_code == 0 {
                return Ok(EndOutcome::Exited { output });
            }
            Err(command_exit(
                CommandExitStatus::from(other),
                plain(
                    m::END_UNKNOWN_STATUS,
                    &[
                        ("program", program),
                        ("status", &token_for_message(other)),
                        ("exit_code", &exit_text),
                    ],
                ),
                output,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::program_name;

    /// The adversarial pass (issue 41): an unquoted secret assignment makes
    /// the secret's tail the program the shell runs; it is never shown.
    #[test]
    fn the_program_after_a_secret_assignment_is_not_shown() {
        assert_eq!(
            program_name("HTTP_AUTHORIZATION=Bearer q7w8e9shortsecret"),
            "(shell)"
        );
        assert_eq!(
            program_name("x-access-token: a X-Amz-Security-Token:\nq7w8e9shortsecret : "),
            "(shell)"
        );
        assert_eq!(
            program_name("SIG=0123456789abcdef0123 python x.py"),
            "python"
        );
        assert_eq!(program_name("LANG=C ls -l"), "ls");
        assert_eq!(program_name(""), "(shell)");
    }
}
