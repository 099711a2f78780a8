//! `sandbox.pty()`: interactive terminals. A [`PtyHandle`] is a stream of
//! the terminal's output (numbered like command output) with calls to type
//! into it, resize it and kill it; `wait()` gives how the shell ended.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::Stream;
use tokio::time::Instant;

use crate::commands::process::{Decoded, ProcessCore, Protocol, drain, killed};
use crate::commands::{ProcessSpec, spec_setters};
use crate::error::SandboxError;
use crate::error::map::agent::{CommandOutput, EndEventData, EndOutcome, from_end_event};
use crate::pb;
use crate::pb::pty_server_message::Message;
use crate::sandbox::Sandbox;
use crate::transport::{AgentStream, Mark, Start};
use rayito_proto::tokens::end_status;

/// A terminal's size in character cells (each side 1 to 1,000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct PtySize {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
}

impl PtySize {
    /// `cols` columns by `rows` rows.
    pub fn new(cols: u16, rows: u16) -> Self {
        Self { cols, rows }
    }

    fn to_pb(self) -> pb::PtySize {
        pb::PtySize {
            cols: u32::from(self.cols),
            rows: u32::from(self.rows),
        }
    }
}

/// Options of [`Pty::create`].
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PtyOptions {
    /// Env, cwd, user, timeout, secrets.
    spec: ProcessSpec,
    shell: Option<String>,
}

// Env values may be secret: names only.
impl fmt::Debug for PtyOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.spec
            .debug_fields(&mut f.debug_struct("PtyOptions"))
            .field("shell", &self.shell)
            .finish_non_exhaustive()
    }
}

impl PtyOptions {
    /// The defaults: `/bin/bash` as the sandbox's user in its home,
    /// `TERM=xterm-256color`, no time limit.
    pub fn new() -> Self {
        Self::default()
    }

    spec_setters! {
        /// Sets the environment variable `variable` of the shell to the value
        /// of a secret in AWS Secrets Manager.
        secret;
        /// An environment variable for the shell.
        env;
        /// The shell's working directory (absolute).
        cwd;
        /// The user to run as (default `user`).
        user;
        /// Ends the session after `timeout` (the agent hangs it up, then kills
        /// it); `Duration::ZERO` means no limit, the default.
        timeout;
    }

    crate::setters::setters! {
        /// The shell to start, started with `-i -l` (default `/bin/bash`).
        shell: Some impl String;
    }
}

/// Output of a terminal: bytes as the terminal wrote them (echo, prompts,
/// escape sequences included).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PtyOutput {
    /// The bytes.
    pub data: Vec<u8>,
    /// The agent's sequence number of this chunk (reconnect with
    /// [`Pty::connect_from`] at `seq + 1` to read on after it).
    pub seq: u64,
}

// What a terminal shows may be anything typed into it: sizes only.
crate::secret::redacted_debug! {
    PtyOutput |o| bytes = o.data.len(), seq
}

/// How a terminal's shell ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PtyExit {
    /// The shell's exit code (128 + the signal when killed).
    pub exit_code: i32,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
}

/// Terminals in a sandbox (a borrowed view: `sandbox.pty()`).
#[derive(Debug, Clone, Copy)]
pub struct Pty<'a> {
    sandbox: &'a Sandbox,
}

impl Sandbox {
    /// Interactive terminals in the sandbox.
    pub fn pty(&self) -> Pty<'_> {
        Pty { sandbox: self }
    }
}

impl Pty<'_> {
    /// Starts a shell on a new terminal of `size`; returns its handle once
    /// the agent has started it.
    ///
    /// # Errors
    /// `InvalidArgument` (a side of 0 or above 1,000, a bad cwd, an unknown
    /// user or shell); `Sandbox { code: PermissionDenied }` for root; `RateLimit` at the
    /// agent's 64 live terminals; `Unimplemented` for an agent without
    /// terminals; transport failures.
    pub async fn create(
        &self,
        size: PtySize,
        options: PtyOptions,
    ) -> Result<PtyHandle, SandboxError> {
        boxed!(Result<PtyHandle, SandboxError>, {
            // The same checks as commands, before any I/O.
            crate::checks::envs(&options.spec.envs)?;
            let cwd = crate::checks::cwd(options.spec.cwd.as_deref())?;
            let user = crate::checks::user(options.spec.user.as_deref())?;
            let timeout_ms = options.spec.timeout.map_or(0, |t| {
                u64::try_from(t.as_millis()).unwrap_or(u64::MAX).max(1)
            });
            #[cfg(feature = "secrets")]
            let secrets = options.spec.secrets.clone();
            #[cfg_attr(not(feature = "secrets"), allow(unused_mut))]
            let mut request = pb::PtyStart {
                size: Some(size.to_pb()),
                envs: options.spec.envs.into_iter().collect(),
                cwd,
                user: user.map(|username| pb::User { username }),
                shell: options.shell.filter(|s| !s.is_empty()),
                timeout_ms,
            };
            #[cfg(feature = "secrets")]
            self.sandbox
                .inject_secrets(&secrets, true, &mut request.envs)
                .await?;
            let opened_at = Instant::now();
            let epoch = self.sandbox.conn().reconnect_epoch();
            let stream = self.sandbox.conn().pty_create(request).await?;
            let start = Start::background(epoch, 1, "pty.create");
            PtyHandle::open(self.sandbox, stream, (start, opened_at), None).await
        })
    }

    /// Attaches to a live (or just ended) terminal, reading its output from
    /// now on.
    ///
    /// # Errors
    /// `NotFound` when no such terminal exists; transport failures.
    pub async fn connect(&self, pid: u32) -> Result<PtyHandle, SandboxError> {
        self.connect_at(pid, 0).await
    }

    /// Attaches to a terminal and reads its output from sequence number
    /// `from_seq` on (1 is the first chunk; the agent keeps the last MiB).
    ///
    /// # Errors
    /// `NotFound` when no such terminal exists or that output is gone;
    /// transport failures.
    pub async fn connect_from(&self, pid: u32, from_seq: u64) -> Result<PtyHandle, SandboxError> {
        self.connect_at(pid, from_seq.max(1)).await
    }

    async fn connect_at(&self, pid: u32, from_seq: u64) -> Result<PtyHandle, SandboxError> {
        let opened_at = Instant::now();
        let epoch = self.sandbox.conn().reconnect_epoch();
        let stream = self
            .sandbox
            .conn()
            .pty_connect(pb::ConnectRequest { pid, from_seq })
            .await?;
        let start = Start::background(epoch, from_seq, "pty.connect");
        PtyHandle::open(self.sandbox, stream, (start, opened_at), Some(pid)).await
    }

    /// Types `data` into terminal `pid`.
    ///
    /// # Errors
    /// `NotFound` when the terminal has ended; transport failures.
    pub async fn send_input(&self, pid: u32, data: impl Into<Vec<u8>>) -> Result<(), SandboxError> {
        send_input(self.sandbox, pid, data.into()).await
    }

    /// Resizes terminal `pid` (its programs get SIGWINCH).
    ///
    /// # Errors
    /// `InvalidArgument` for a side of 0 or above 1,000; `NotFound` when the
    /// terminal has ended; transport failures.
    pub async fn resize(&self, pid: u32, size: PtySize) -> Result<(), SandboxError> {
        resize(self.sandbox, pid, size).await
    }

    /// Kills terminal `pid`'s shell and its process group; `false` when it
    /// had already ended.
    ///
    /// # Errors
    /// Transport failures.
    pub async fn kill(&self, pid: u32) -> Result<bool, SandboxError> {
        kill(self.sandbox, pid).await
    }
}

async fn send_input(sandbox: &Sandbox, pid: u32, data: Vec<u8>) -> Result<(), SandboxError> {
    sandbox
        .conn()
        .pty_send_input(
            pb::SendInputRequest { pid, data },
            sandbox.request_timeout(),
        )
        .await
}

async fn resize(sandbox: &Sandbox, pid: u32, size: PtySize) -> Result<(), SandboxError> {
    sandbox
        .conn()
        .pty_resize(
            pb::ResizeRequest {
                pid,
                size: Some(size.to_pb()),
            },
            sandbox.request_timeout(),
        )
        .await
}

async fn kill(sandbox: &Sandbox, pid: u32) -> Result<bool, SandboxError> {
    killed(
        sandbox
            .conn()
            .pty_kill(pb::KillPtyRequest { pid }, sandbox.request_timeout())
            .await,
    )
}

/// The status of an `exited` message sent when `/suspend` closed the
/// stream (the terminal lives on).
const SUSPENDING: &str = end_status::SUSPENDING;
/// What the caller can do when the sandbox suspends under a terminal.
const CONNECT_AFTER_RESUME: &str =
    "the terminal keeps running; connect to it again after the resume";

/// A terminal (from [`Pty::create`] or [`Pty::connect`]): a [`Stream`] of
/// its output that ends when the shell ends; [`PtyHandle::wait`] then says
/// how. Dropping it (or [`PtyHandle::disconnect`]) leaves the terminal
/// running.
///
/// Like a background command's handle, it survives cuts and suspensions
/// (wire contract 2.7): it waits until the sandbox is back, asleep while it
/// is suspended (never waking it), and reads on with `Pty.Connect` from the
/// last sequence number received plus one, so every chunk arrives once, in
/// order. If the agent dropped that output meanwhile (it keeps the last
/// MiB), it reads on with new output and [`PtyHandle::output_lost`] says
/// so. A sandbox that ended makes its last item `SandboxNotFound`.
pub struct PtyHandle {
    core: ProcessCore<pb::PtyServerMessage, pb::PtyExited>,
}

impl fmt::Debug for PtyHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.core.fmt_handle(f, "PtyHandle", "exited")
    }
}

/// A terminal's stream: its started message and its protocol violations
/// (all named `pty.wait`).
static PTY: Protocol<pb::PtyServerMessage> = Protocol {
    started: started_pid,
    mark: |message| match &message.message {
        Some(Message::Data(_)) => Mark::Numbered(message.seq),
        Some(Message::Exited(end)) if end.status == SUSPENDING => Mark::Suspending,
        Some(Message::Exited(_)) => Mark::End,
        _ => Mark::Other,
    },
    connect: |conn, request, _total, _feature| Box::pin(conn.pty_connect(request)),
    bad_restart: |_feature| {
        SandboxError::protocol_violation(
            "pty.connect",
            "the terminal stream did not start with the started message of the terminal",
        )
    },
    no_end: "the terminal stream ended without an exited message",
    second_start: "the terminal stream sent a second started message",
};

/// The pid of a terminal stream's started message.
fn started_pid(message: &pb::PtyServerMessage) -> Option<u32> {
    match &message.message {
        Some(Message::Started(started)) => Some(started.pid),
        _ => None,
    }
}

impl PtyHandle {
    /// Reads the stream's first message, which must be the start of
    /// `expected` (any pid when `None`); then reads the output from
    /// `start.next_seq` on (0: only new output) across cuts.
    async fn open(
        sandbox: &Sandbox,
        stream: AgentStream<pb::PtyServerMessage>,
        (start, opened_at): (Start, Instant),
        expected: Option<u32>,
    ) -> Result<Self, SandboxError> {
        let feature = start.feature;
        let core = ProcessCore::open(
            sandbox,
            stream,
            (start, opened_at),
            expected,
            || {
                SandboxError::protocol_violation(
                    feature,
                    "the terminal stream did not start with the started message of the terminal",
                )
            },
            &PTY,
            ("pty.wait", CONNECT_AFTER_RESUME),
        )
        .await?;
        Ok(Self { core })
    }

    /// The shell's process id.
    pub fn pid(&self) -> u32 {
        self.core.pid()
    }

    /// True once output was lost across a reconnect: the agent no longer
    /// kept what the terminal wrote while the connection was down, and the
    /// stream read on with new output.
    pub fn output_lost(&self) -> bool {
        self.core.output_lost()
    }

    /// Types `data` into the terminal (`b"ls\n"`; `b"\x03"` is Ctrl-C).
    ///
    /// # Errors
    /// As [`Pty::send_input`].
    pub async fn send_input(&self, data: impl Into<Vec<u8>>) -> Result<(), SandboxError> {
        send_input(self.core.sandbox(), self.core.pid(), data.into()).await
    }

    /// Resizes the terminal.
    ///
    /// # Errors
    /// As [`Pty::resize`].
    pub async fn resize(&self, size: PtySize) -> Result<(), SandboxError> {
        resize(self.core.sandbox(), self.core.pid(), size).await
    }

    /// Kills the shell; `false` when it had already ended.
    ///
    /// # Errors
    /// Transport failures.
    pub async fn kill(&self) -> Result<bool, SandboxError> {
        kill(self.core.sandbox(), self.core.pid()).await
    }

    /// Stops reading; the terminal keeps running. Returns the last sequence
    /// number received.
    pub fn disconnect(self) -> Option<u64> {
        self.core.last_seq()
    }

    /// Reads (and drops) the rest of the output and waits for the shell to
    /// end; any exit code is an `Ok`.
    ///
    /// # Errors
    /// `Timeout { scope: Command }` when the session's timeout ended it;
    /// `Timeout { scope: Sandbox }`; `SandboxState` when the sandbox is
    /// suspending (the terminal lives on); transport failures.
    pub async fn wait(mut self) -> Result<PtyExit, SandboxError> {
        drain(&mut self).await?;
        let end = self.core.take_end()?;
        if matches!(
            end.status.as_str(),
            end_status::EXITED | end_status::SIGNALED
        ) {
            return Ok(PtyExit {
                exit_code: end.exit_code,
                signal: end.signal,
            });
        }
        let outcome = from_end_event(
            EndEventData {
                status: end.status,
                exit_code: end.exit_code,
                signal: end.signal,
                error: end.error.map(|e| (e.code, e.message)),
            },
            CommandOutput::default(),
            "",
        )?;
        match outcome {
            EndOutcome::Exited { .. } => Ok(PtyExit {
                exit_code: end.exit_code,
                signal: end.signal,
            }),
            _ => Err(SandboxError::sandbox_state(
                "suspending",
                CONNECT_AFTER_RESUME,
            )),
        }
    }
}

impl Stream for PtyHandle {
    type Item = Result<PtyOutput, SandboxError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let decode = |message: pb::PtyServerMessage| match message.message {
            Some(Message::Data(data)) => Decoded::Chunk(
                message.seq,
                Some(PtyOutput {
                    data,
                    seq: message.seq,
                }),
            ),
            Some(Message::Exited(end)) => Decoded::End(end),
            Some(Message::Keepalive(_)) | None => Decoded::Skip,
            Some(Message::Started(_)) => Decoded::Restart,
        };
        // A gap only sets `output_lost`: a terminal's stream has no item
        // for it.
        self.core.poll_next(cx, decode, |_| None)
    }
}
