//! `sandbox.commands()`: run a command to completion, or in the background
//! (`handle`).

mod by_pid;
mod handle;
mod output;
pub(crate) mod process;
pub(crate) mod spec;

use std::fmt;
use std::time::Duration;

use crate::error::map::agent::{CommandOutput, EndEventData, EndOutcome, from_end_event};
use crate::error::{GrpcCode, SandboxError};
use crate::pb;
use crate::sandbox::Sandbox;
use crate::transport::{AgentConn, Waiter};

pub(crate) use self::output::{MAX_OUTPUT_BYTES, OutputBuffer, Utf8Decoder};
pub(crate) use self::spec::{ProcessSpec, spec_setters};

pub use self::handle::{CommandEvent, CommandHandle, ProcessInfo, ProcessKind};

/// Default command timeout, when the caller sets none.
const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// The client stream deadline is the command timeout plus this, so that the
/// agent's own EndEvent wins the race: above its 5 s SIGTERM-to-SIGKILL grace
/// with room for a loaded machine (as for code cells).
const STREAM_SLACK: Duration = Duration::from_secs(15);
/// The status of an `EndEvent` sent when `/suspend` closed the stream (the
/// process lives on).
const SUSPENDING: &str = rayito_proto::tokens::end_status::SUSPENDING;
/// What the caller of `run` can do when the sandbox suspends under it.
const RUN_AGAIN_AFTER_RESUME: &str = "resume the sandbox and run the command again";

/// A callback that sees output as it arrives (decoded as UTF-8, a character
/// split across chunks is rebuilt).
pub type OutputCallback = Box<dyn FnMut(&str) + Send>;

/// Options of [`Commands::run_with`].
#[non_exhaustive]
pub struct CommandOptions {
    /// Env, cwd, user, timeout, request timeout, secrets.
    pub(crate) spec: ProcessSpec,
    stdin: Option<Vec<u8>>,
    on_stdout: Option<OutputCallback>,
    on_stderr: Option<OutputCallback>,
    /// Keep stdin open as a pipe (`open_stdin`, for background commands).
    stdin_open: bool,
    /// `bash -l -c` (the default) or `bash -c`.
    login_shell: bool,
    /// A label `commands().list()` returns with the process.
    tag: Option<String>,
    /// The most output kept per stream (default 64 MiB).
    max_output_bytes: Option<usize>,
    /// The timeout and `kill()` end every process the command started.
    kill_tree: bool,
}

impl Default for CommandOptions {
    fn default() -> Self {
        Self::with_spec(ProcessSpec::with_timeout(DEFAULT_COMMAND_TIMEOUT))
    }
}

impl fmt::Debug for CommandOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Env values and stdin may be secret: names and sizes only.
        self.spec
            .debug_fields(&mut f.debug_struct("CommandOptions"))
            .field("stdin_bytes", &self.stdin.as_ref().map(Vec::len))
            .field("on_stdout", &self.on_stdout.is_some())
            .field("on_stderr", &self.on_stderr.is_some())
            .field("stdin_open", &self.stdin_open)
            .field("login_shell", &self.login_shell)
            .field("tag", &self.tag)
            .field("max_output_bytes", &self.max_output_bytes)
            .field("kill_tree", &self.kill_tree)
            .finish_non_exhaustive()
    }
}

impl CommandOptions {
    /// The defaults: 60 s timeout, the sandbox's user and working directory.
    pub fn new() -> Self {
        Self::default()
    }

    /// Options with this process part and the rest at its defaults.
    pub(crate) fn with_spec(spec: ProcessSpec) -> Self {
        Self {
            spec,
            stdin: None,
            on_stdout: None,
            on_stderr: None,
            stdin_open: false,
            login_shell: true,
            tag: None,
            max_output_bytes: None,
            kill_tree: false,
        }
    }

    crate::setters::setters! {
        /// The most output the result keeps of each stream, in bytes (default
        /// 64 MiB): past it the oldest bytes are dropped and `truncated` is set;
        /// 0 keeps nothing. Callbacks still see everything.
        max_output_bytes: Some usize;
        /// Whether the command's timeout and `kill()` end its whole process
        /// tree (default `false`): with `true`, the timeout's SIGTERM reaches
        /// every process the command started, also those that left its
        /// process group (`setsid`, a double fork); 5 s later whatever is left
        /// is frozen and killed; and the command's end (what `run` and `wait`
        /// return) comes only once none of them is left. `kill()` freezes and
        /// kills them all the same way. Without it the timeout's SIGTERM
        /// reaches the process group only, and the end comes when the
        /// command's first process ends (the rest is SIGKILLed after the
        /// grace, or by `kill()`, as it dies). What a command leaves running
        /// when it exits by itself is never touched. Needs the command's own
        /// cgroup (Linux with a writable cgroup v2 and `cgroup.kill`); where
        /// the sandbox has none, the start is refused (see
        /// `docs/errors.md`).
        kill_tree: bool;
        /// A label for the process (1 to 256 characters, none a control
        /// character): [`Commands::list`] returns it in [`ProcessInfo::tag`],
        /// and [`Commands::list_tagged`] finds the processes that carry it.
        tag: Some impl String;
    }

    spec_setters! {
        /// Sets the environment variable `variable` of this command to the
        /// value of a secret in AWS Secrets Manager.
        secret;
        /// An environment variable for this command.
        env;
        /// The working directory: absolute, or relative to `/home/user` (like
        /// relative file paths).
        cwd;
        /// The user to run as (default `user`).
        user;
        /// The command's timeout (default 60 s); the agent ends it then.
        /// `Duration::ZERO` means no limit, like [`CommandOptions::no_timeout`];
        /// so does a timeout above 28,800 s (no sandbox lives that long).
        timeout;
        /// No timeout.
        no_timeout;
        /// This call's request timeout, instead of the sandbox's
        /// ([`crate::SandboxBuilder::request_timeout`]): how long the SDK
        /// waits for the agent to say the process started, and for each write
        /// of its stdin. It never bounds the command itself (that is
        /// [`CommandOptions::timeout`]), so a command without a timeout still
        /// fails fast when the sandbox does not answer. Zero is refused when
        /// the command starts (`InvalidArgument` naming `request_timeout`).
        request_timeout;
    }

    crate::setters::setters! {
        /// Bytes written to the command's stdin, which is then closed (without
        /// this, stdin is `/dev/null`). They are part of the command: streamed
        /// while its output is read (any size, in 1 MiB pieces), and a command
        /// that ends or closes its stdin before reading them all still ends
        /// with its own exit code, as with a shell pipe.
        stdin: Some impl Vec<u8>;
        /// Whether the command runs in a login shell: `bash -l -c <cmd>`, the
        /// default (as in E2B), reads `/etc/profile` and `~/.profile`, which set
        /// up `PATH` and the like; `false` runs `bash -c <cmd>`, which skips
        /// them. That starts faster (Debian's `/etc/profile` alone runs `id -u`,
        /// a process of its own; see `docs/performance.md`), for commands that
        /// need nothing the profile sets: the environment is then the sandbox's
        /// own (its default envs and this command's).
        login_shell: bool;
        /// Called with stdout as it arrives.
        on_stdout: callback(&str);
        /// Called with stderr as it arrives.
        on_stderr: callback(&str);
    }
}

/// The outcome of a command that exited with code 0.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommandResult {
    /// Everything it wrote to stdout, decoded as UTF-8 (invalid bytes as
    /// U+FFFD); the text of its last 64 MiB (of bytes written) when it
    /// wrote more.
    pub stdout: String,
    /// Everything it wrote to stderr, as `stdout`.
    pub stderr: String,
    /// Its exit code (0).
    pub exit_code: i32,
    /// True when output is missing: cut to its last 64 MiB, or lost
    /// across a reconnect (the agent keeps the last 1 MiB of a process's
    /// output; what it dropped while the connection was down is gone).
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
        options: CommandOptions,
    ) -> Result<CommandResult, SandboxError> {
        boxed!(Result<CommandResult, SandboxError>, {
            self.op(false).run(self.run_inner(cmd, options), |result| {
                vec![crate::otel::Attr::ExitCode(result.exit_code)]
            })
            .await
        })
    }

    /// The span of a `run` or a `spawn` (never the command's text).
    fn op(&self, background: bool) -> crate::otel::Op {
        crate::otel::Op::new(crate::otel::Name::CommandsRun)
            .on(self.sandbox)
            .with(crate::otel::Attr::Background(background))
    }

    /// [`Self::run_with`] inside its span.
    async fn run_inner(
        &self,
        cmd: &str,
        options: CommandOptions,
    ) -> Result<CommandResult, SandboxError> {
        {
            let (handle, feed) = self
                .start(
                    cmd,
                    options,
                    (Waiter::Foreground, "commands.run", RUN_AGAIN_AFTER_RESUME),
                )
                .await?;
            // Stdin is fed while the output is read: a command that reads its
            // stdin slowly, or writes a lot before reading, never deadlocks
            // against the SDK. The first of the two to decide ends the command.
            let waited = handle.wait();
            tokio::pin!(feed, waited);
            let mut fed = false;
            loop {
                tokio::select! {
                    outcome = &mut feed, if !fed => {
                        outcome?;
                        fed = true;
                    }
                    outcome = &mut waited => return outcome,
                }
            }
        }
    }
}

/// Checks `cmd` and its options (no I/O) and builds the Start request and
/// the client's deadline over the whole stream (the command's timeout plus
/// [`STREAM_SLACK`]; a timeout too large to add it to is no limit, never a
/// panic). `stdin` says whether the process gets a stdin pipe.
pub(crate) fn start_request(
    cmd: &str,
    options: &CommandOptions,
    stdin: bool,
) -> Result<(pb::StartRequest, Option<Duration>), SandboxError> {
    crate::checks::command(cmd)?;
    crate::checks::envs(&options.spec.envs)?;
    if let Some(request_timeout) = options.spec.request_timeout {
        crate::checks::positive_duration("request_timeout", request_timeout)?;
    }
    let cwd = crate::checks::cwd(options.spec.cwd.as_deref())?;
    let user = crate::checks::user(options.spec.user.as_deref())?;
    if let Some(tag) = &options.tag {
        check_tag(tag)?;
    }
    let (timeout_ms, total) = crate::checks::operation_timeout(options.spec.timeout, STREAM_SLACK);
    let request = pb::StartRequest {
        process: Some(pb::ProcessConfig {
            cmd: "/bin/bash".to_owned(),
            args: shell_args(cmd, options.login_shell),
            envs: options.spec.envs.clone().into_iter().collect(),
            cwd,
        }),
        user: user.map(|username| pb::User { username }),
        timeout_ms,
        stdin,
        tag: options.tag.clone(),
        kill_tree: options.kill_tree,
    };
    Ok((request, total))
}

/// The longest tag, in characters.
const MAX_TAG_CHARS: usize = 256;

/// A tag is 1 to 256 characters, none a control character (it comes back
/// in listings and may be printed).
fn check_tag(tag: &str) -> Result<(), SandboxError> {
    let chars = tag.chars().count();
    if chars == 0 || chars > MAX_TAG_CHARS || tag.chars().any(char::is_control) {
        return Err(SandboxError::invalid_argument(
            "tag",
            "a tag is 1 to 256 characters, none of them a control character",
        ));
    }
    Ok(())
}

/// The arguments of `/bin/bash` for `cmd`.
fn shell_args(cmd: &str, login: bool) -> Vec<String> {
    let shell = if login {
        &["-l", "-c"][..]
    } else {
        &["-c"][..]
    };
    shell
        .iter()
        .map(|a| (*a).to_owned())
        .chain(std::iter::once(cmd.to_owned()))
        .collect()
}

/// Stdin larger than this is sent in several `SendInput` calls, each well
/// under the gRPC message limit.
const STDIN_CHUNK_BYTES: usize = 1024 * 1024;

/// Writes `data` to the process's stdin in pieces, then closes it.
///
/// Stdin given with a command is part of the command: when the process has
/// ended (`NotFound`) or closed its stdin (`FAILED_PRECONDITION` "stdin is
/// not open") before reading it all, the rest is dropped, as a shell pipe
/// drops what its reader never reads, and the command's own end decides
/// the outcome. Any other failure is returned. Each piece may wait as long
/// as the command may run (`deadline`, or `request_timeout` at least): the
/// process reads it at its own pace.
pub(crate) async fn feed_stdin(
    conn: &AgentConn,
    pid: u32,
    data: Option<Vec<u8>>,
    deadline: Option<Duration>,
    request_timeout: Duration,
) -> Result<(), SandboxError> {
    let Some(data) = data else {
        return Ok(());
    };
    let per_call = deadline.map_or(NO_STDIN_DEADLINE, |d| d.max(request_timeout));
    let fed = async {
        for piece in data.chunks(STDIN_CHUNK_BYTES) {
            let request = pb::SendInputRequest {
                pid,
                data: piece.to_vec(),
            };
            conn.send_input(request, per_call).await?;
        }
        conn.close_stdin(pb::CloseStdinRequest { pid }, request_timeout)
            .await
    };
    match fed.await {
        Err(err) if stdin_gone(&err) => Ok(()),
        outcome => outcome,
    }
}

/// The per-piece bound of stdin for a command without a timeout.
const NO_STDIN_DEADLINE: Duration = Duration::from_secs(365 * 24 * 3600);

/// True for the agent's answers that mean the process no longer takes
/// stdin: it ended (NOT_FOUND) or its stdin pipe is closed
/// (FAILED_PRECONDITION).
fn stdin_gone(err: &SandboxError) -> bool {
    matches!(
        err.meta().grpc_code(),
        Some(GrpcCode::NotFound | GrpcCode::FailedPrecondition)
    ) && matches!(
        err,
        SandboxError::NotFound { .. } | SandboxError::InvalidArgument { .. }
    )
}

/// The result of a command from its `EndEvent`; a `suspending` end becomes
/// `SandboxState` with `suspending_hint` (what the caller can do next).
pub(crate) fn finish(
    end: pb::EndEvent,
    stdout: OutputBuffer,
    stderr: OutputBuffer,
    cmd: &str,
    output_lost: bool,
    suspending_hint: &'static str,
) -> Result<CommandResult, SandboxError> {
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
            truncated: stdout_cut || stderr_cut || output_lost,
        },
        cmd,
    )?;
    match outcome {
        EndOutcome::Exited { output } => Ok(CommandResult {
            stdout: output.stdout,
            stderr: output.stderr,
            exit_code,
            truncated: output.truncated,
        }),
        _ => Err(SandboxError::sandbox_state("suspending", suspending_hint)),
    }
}

/// The view's entry on the sandbox core (the core does not know the feature).
impl crate::sandbox::Sandbox {
    /// Commands (processes) in the sandbox.
    pub fn commands(&self) -> Commands<'_> {
        Commands::new(self)
    }
}

#[cfg(test)]
mod tests {
    use super::{OutputBuffer, SUSPENDING, finish};
    use crate::error::SandboxError;
    use crate::pb;

    /// A `suspending` end that reaches `finish` (no reconnect took it) is
    /// `SandboxState` with the caller's hint, never a result.
    #[test]
    fn a_suspending_end_is_sandbox_state_with_the_hint() {
        let end = pb::EndEvent {
            exit_code: 0,
            exited: false,
            status: SUSPENDING.to_owned(),
            error: Some(pb::StreamError {
                code: SUSPENDING.to_owned(),
                message: String::new(),
            }),
            signal: None,
        };
        let err = finish(
            end,
            OutputBuffer::default(),
            OutputBuffer::default(),
            "sleep 9",
            false,
            "the hint",
        )
        .unwrap_err();
        assert!(matches!(err, SandboxError::SandboxState { .. }), "{err:?}");
        assert_eq!(err.to_string(), "the sandbox is suspending; the hint");
    }
}
