//! `sandbox.commands()`: run a command to completion, or in the background
//! (`handle`).

mod handle;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::error::SandboxError;
use crate::error::map::agent::{CommandOutput, EndEventData, EndOutcome, from_end_event};
use crate::pb;
use crate::pb::process_event::Event;
use crate::sandbox::Sandbox;

pub use self::handle::{CommandEvent, CommandHandle, ProcessInfo, ProcessKind};

/// Default command timeout, when the caller sets none.
const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// The client stream deadline is the command timeout plus this, so that the
/// agent's own EndEvent wins the race.
const STREAM_SLACK: Duration = Duration::from_secs(5);
/// Largest piece of stdin sent in one SendInput.
const STDIN_CHUNK_BYTES: usize = 1024 * 1024;
/// Output kept per stream; the tail is kept beyond it.
const MAX_OUTPUT_BYTES: usize = 64 * 1024 * 1024;

/// A callback that sees output as it arrives (decoded as UTF-8, a character
/// split across chunks is rebuilt).
pub type OutputCallback = Box<dyn FnMut(&str) + Send>;

/// Options of [`Commands::run_with`].
#[non_exhaustive]
pub struct CommandOptions {
    envs: BTreeMap<String, String>,
    cwd: Option<String>,
    user: Option<String>,
    timeout: Option<Duration>,
    stdin: Option<Vec<u8>>,
    on_stdout: Option<OutputCallback>,
    on_stderr: Option<OutputCallback>,
    /// Keep stdin open as a pipe (`open_stdin`, for background commands).
    stdin_open: bool,
}

impl Default for CommandOptions {
    fn default() -> Self {
        Self {
            envs: BTreeMap::new(),
            cwd: None,
            user: None,
            timeout: Some(DEFAULT_COMMAND_TIMEOUT),
            stdin: None,
            on_stdout: None,
            on_stderr: None,
            stdin_open: false,
        }
    }
}

impl fmt::Debug for CommandOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Env values and stdin may be secret: names and sizes only.
        f.debug_struct("CommandOptions")
            .field("envs", &self.envs.keys().collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .field("user", &self.user)
            .field("timeout", &self.timeout)
            .field("stdin_bytes", &self.stdin.as_ref().map(Vec::len))
            .field("on_stdout", &self.on_stdout.is_some())
            .field("on_stderr", &self.on_stderr.is_some())
            .field("stdin_open", &self.stdin_open)
            .finish()
    }
}

impl CommandOptions {
    /// The defaults: 60 s timeout, the sandbox's user and working directory.
    pub fn new() -> Self {
        Self::default()
    }

    /// An environment variable for this command.
    #[must_use]
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.envs.insert(name.into(), value.into());
        self
    }

    /// The working directory: absolute, or relative to `/home/user` (like
    /// relative file paths).
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<String>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// The user to run as (default `user`).
    #[must_use]
    pub fn user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    /// The command's timeout (default 60 s); the agent ends it then.
    /// `Duration::ZERO` means no limit, like [`CommandOptions::no_timeout`];
    /// so does a timeout above 28,800 s (no sandbox lives that long).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = (!timeout.is_zero()).then_some(timeout);
        self
    }

    /// No timeout.
    #[must_use]
    pub fn no_timeout(mut self) -> Self {
        self.timeout = None;
        self
    }

    /// Bytes written to the command's stdin, which is then closed (without
    /// this, stdin is `/dev/null`).
    #[must_use]
    pub fn stdin(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(data.into());
        self
    }

    /// Called with stdout as it arrives.
    #[must_use]
    pub fn on_stdout(mut self, callback: impl FnMut(&str) + Send + 'static) -> Self {
        self.on_stdout = Some(Box::new(callback));
        self
    }

    /// Called with stderr as it arrives.
    #[must_use]
    pub fn on_stderr(mut self, callback: impl FnMut(&str) + Send + 'static) -> Self {
        self.on_stderr = Some(Box::new(callback));
        self
    }
}

/// The outcome of a command that exited with code 0.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommandResult {
    /// Everything it wrote to stdout (the tail, when above 64 MiB).
    pub stdout: String,
    /// Everything it wrote to stderr (the tail, when above 64 MiB).
    pub stderr: String,
    /// Its exit code (0).
    pub exit_code: i32,
    /// True when output was cut to its 64 MiB tail.
    pub truncated: bool,
}

/// Commands in a sandbox (a borrowed view: `sandbox.commands()`).
#[derive(Debug, Clone, Copy)]
pub struct Commands<'a> {
    sandbox: &'a Sandbox,
}

impl<'a> Commands<'a> {
    pub(crate) fn new(sandbox: &'a Sandbox) -> Self {
        Self { sandbox }
    }

    /// Runs `cmd` with `bash -l -c` and waits for it (60 s timeout).
    ///
    /// # Errors
    /// `CommandExit { exit_code, stdout, stderr, .. }` on a non-zero exit;
    /// `Timeout { scope: Command }` when the agent ended it at its timeout;
    /// `Timeout { scope: Sandbox }` past the sandbox's deadline;
    /// `InvalidArgument` before any I/O, naming the argument: `cmd` (a NUL,
    /// or longer than the kernel's 131,071-byte limit for one argument),
    /// `envs` (an empty name, `=` in a name, a NUL), `cwd` or `user` (a NUL);
    /// `InvalidArgument` from the agent (a cwd that does not exist);
    /// `Sandbox { code: PermissionDenied }` when the sandbox user may not use
    /// the cwd or run as that user; transport failures.
    pub async fn run(&self, cmd: &str) -> Result<CommandResult, SandboxError> {
        self.run_with(cmd, CommandOptions::default()).await
    }

    /// Runs `cmd` with options.
    ///
    /// # Errors
    /// As [`Commands::run`].
    pub async fn run_with(
        &self,
        cmd: &str,
        mut options: CommandOptions,
    ) -> Result<CommandResult, SandboxError> {
        crate::checks::command(cmd)?;
        crate::checks::envs(&options.envs)?;
        let cwd = crate::checks::cwd(options.cwd.as_deref())?;
        let user = crate::checks::user(options.user.as_deref())?;
        let (timeout_ms, total) = crate::checks::operation_timeout(options.timeout, STREAM_SLACK);
        let request = pb::StartRequest {
            process: Some(pb::ProcessConfig {
                cmd: "/bin/bash".to_owned(),
                args: vec!["-l".to_owned(), "-c".to_owned(), cmd.to_owned()],
                envs: options.envs.clone().into_iter().collect(),
                cwd,
            }),
            user: user.map(|username| pb::User { username }),
            timeout_ms,
            stdin: options.stdin.is_some(),
            tag: None,
            kill_tree: false,
        };
        let conn = self.sandbox.conn();
        let request_timeout = self.sandbox.request_timeout();
        let mut stream = conn.start_process(request, total).await?;

        let pid = match stream.message().await? {
            Some(pb::ProcessEvent {
                event: Some(Event::Start(start)),
            }) => start.pid,
            _ => {
                return Err(SandboxError::protocol_violation(
                    "commands.run",
                    "the process stream did not start with a start event",
                ));
            }
        };
        if let Some(data) = options.stdin.take() {
            // In pieces: one message of any size would hit the gRPC message
            // limit and come back as a misleading status.
            for piece in data.chunks(STDIN_CHUNK_BYTES) {
                let data = piece.to_vec();
                conn.send_input(pb::SendInputRequest { pid, data }, request_timeout)
                    .await?;
            }
            conn.close_stdin(pb::CloseStdinRequest { pid }, request_timeout)
                .await?;
        }

        let mut stdout = OutputBuffer::default();
        let mut stderr = OutputBuffer::default();
        loop {
            let Some(event) = stream.message().await? else {
                return Err(SandboxError::protocol_violation(
                    "commands.run",
                    "the process stream ended without an end event",
                ));
            };
            match event.event {
                Some(Event::Data(data)) => match data.output {
                    Some(pb::data_event::Output::Stdout(bytes)) => {
                        let text = stdout.push(&bytes);
                        if let Some(cb) = options.on_stdout.as_mut() {
                            cb(&text);
                        }
                    }
                    Some(pb::data_event::Output::Stderr(bytes)) => {
                        let text = stderr.push(&bytes);
                        if let Some(cb) = options.on_stderr.as_mut() {
                            cb(&text);
                        }
                    }
                    None => {}
                },
                Some(Event::End(end)) => {
                    let (stdout, stdout_cut) = stdout.finish();
                    let (stderr, stderr_cut) = stderr.finish();
                    let exit_code = end.exit_code;
                    let outcome = from_end_event(
                        EndEventData {
                            status: end.status,
                            exit_code,
                            signal: end.signal,
                            error: end.error.map(|e| (e.code, e.message)),
                        },
                        CommandOutput {
                            stdout,
                            stderr,
                            truncated: stdout_cut || stderr_cut,
                        },
                        cmd,
                    )?;
                    return match outcome {
                        EndOutcome::Exited { output } => Ok(CommandResult {
                            stdout: output.stdout,
                            stderr: output.stderr,
                            exit_code,
                            truncated: output.truncated,
                        }),
                        // The process lives on; re-attaching after a resume
                        // (the reconnect contract) is not implemented yet.
                        _ => Err(SandboxError::sandbox_state(
                            "suspending",
                            "resume the sandbox and run the command again",
                        )),
                    };
                }
                Some(Event::Keepalive(_)) | None => {}
                Some(Event::Start(_)) => {
                    return Err(SandboxError::protocol_violation(
                        "commands.run",
                        "the process stream sent a second start event",
                    ));
                }
            }
        }
    }
}

/// Decodes a byte stream as UTF-8 incrementally (a character split across
/// chunks is rebuilt; invalid bytes become U+FFFD) and keeps the last 64 MiB.
#[derive(Debug, Default)]
pub(crate) struct OutputBuffer {
    pending: Vec<u8>,
    text: String,
    truncated: bool,
}

impl OutputBuffer {
    /// Adds a chunk; returns the text it completed.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(valid) => {
                    out.push_str(valid);
                    self.pending.clear();
                    break;
                }
                Err(err) => {
                    let valid_up_to = err.valid_up_to();
                    out.push_str(
                        std::str::from_utf8(&self.pending[..valid_up_to]).unwrap_or_default(),
                    );
                    match err.error_len() {
                        // An incomplete character at the end: wait for more.
                        None => {
                            self.pending.drain(..valid_up_to);
                            break;
                        }
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid_up_to + bad);
                        }
                    }
                }
            }
        }
        self.text.push_str(&out);
        if self.text.len() > MAX_OUTPUT_BYTES {
            let mut cut = self.text.len() - MAX_OUTPUT_BYTES;
            while !self.text.is_char_boundary(cut) {
                cut += 1;
            }
            self.text.drain(..cut);
            self.truncated = true;
        }
        out
    }

    /// The text, with a dangling partial character as U+FFFD.
    pub(crate) fn finish(mut self) -> (String, bool) {
        if !self.pending.is_empty() {
            self.text.push(char::REPLACEMENT_CHARACTER);
        }
        (self.text, self.truncated)
    }
}

#[cfg(test)]
mod tests {
    use super::OutputBuffer;

    #[test]
    fn split_characters_are_rebuilt() {
        let mut buf = OutputBuffer::default();
        let bytes = "é€".as_bytes();
        assert_eq!(buf.push(&bytes[..1]), "");
        assert_eq!(buf.push(&bytes[1..3]), "é");
        assert_eq!(buf.push(&bytes[3..]), "€");
        assert_eq!(buf.finish(), ("é€".to_owned(), false));
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        let mut buf = OutputBuffer::default();
        assert_eq!(buf.push(b"a\xffb"), "a\u{fffd}b");
        assert_eq!(buf.push(b"\xe2\x82"), "");
        assert_eq!(buf.finish(), ("a\u{fffd}b\u{fffd}".to_owned(), false));
    }
}
