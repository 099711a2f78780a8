//! Background commands: `commands().spawn()` and `commands().connect()`
//! return a [`CommandHandle`], a stream of the process's output with its
//! sequence numbers that ends when the process does; `wait()` then gives
//! the same outcome as `run`. `list()` and `kill(pid)` act on any process.

use std::collections::BTreeMap;
use std::fmt;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll};

use futures_util::Stream;
use tokio::time::Instant;

use super::process::{Decoded, ProcessCore, Protocol, drain};
use super::{
    CommandOptions, CommandResult, Commands, OutputBuffer, OutputCallback, SUSPENDING, Utf8Decoder,
    feed_stdin, start_request,
};
use crate::error::SandboxError;
use crate::pb;
use crate::pb::process_event::Event;
use crate::sandbox::Sandbox;
use crate::transport::{AgentStream, Mark, Start, Waiter};

/// SIGKILL: what `kill` sends.
const SIGKILL: i32 = 9;

/// One chunk of a background command's output, as the agent numbered it.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommandEvent {
    /// Bytes the process wrote to stdout.
    Stdout {
        /// The bytes (a chunk is not a line).
        data: Vec<u8>,
        /// The agent's sequence number of this chunk (per process,
        /// increasing); reconnect with [`Commands::connect_from`] at
        /// `seq + 1` to read on after it.
        seq: u64,
    },
    /// Bytes the process wrote to stderr.
    Stderr {
        /// The bytes (a chunk is not a line).
        data: Vec<u8>,
        /// The agent's sequence number of this chunk.
        seq: u64,
    },
    /// Output was lost: the connection was cut, and by the time the
    /// sandbox was back the agent no longer kept the output from `from_seq`
    /// on (it keeps the last 1 MiB of each process). The stream reads on
    /// with new output; the chunks from `from_seq` up to the next chunk's
    /// sequence number are gone, and [`CommandHandle::wait`] reports
    /// `truncated`.
    OutputLost {
        /// The first sequence number that was lost.
        from_seq: u64,
    },
}

impl CommandEvent {
    /// The chunk's sequence number (for [`CommandEvent::OutputLost`], the
    /// first one lost).
    pub fn seq(&self) -> u64 {
        match self {
            Self::Stdout { seq, .. } | Self::Stderr { seq, .. } => *seq,
            Self::OutputLost { from_seq } => *from_seq,
        }
    }

    /// The chunk's bytes (none for [`CommandEvent::OutputLost`]).
    pub fn data(&self) -> &[u8] {
        match self {
            Self::Stdout { data, .. } | Self::Stderr { data, .. } => data,
            Self::OutputLost { .. } => &[],
        }
    }
}

// Output may hold anything the command printed: sizes only.
impl fmt::Debug for CommandEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, data, seq) = match self {
            Self::Stdout { data, seq } => ("Stdout", data, seq),
            Self::Stderr { data, seq } => ("Stderr", data, seq),
            Self::OutputLost { from_seq } => {
                return f
                    .debug_struct("OutputLost")
                    .field("from_seq", from_seq)
                    .finish();
            }
        };
        f.debug_struct(name)
            .field("bytes", &data.len())
            .field("seq", seq)
            .finish()
    }
}

/// What kind of process [`Commands::list`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProcessKind {
    /// A command (started by `run` or `spawn`).
    Command,
    /// A terminal session.
    Pty,
    /// A kind this SDK does not know yet.
    Other,
}

/// A live process in the sandbox (from [`Commands::list`]).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessInfo {
    /// Its process id.
    pub pid: u32,
    /// The program the agent started (`/bin/bash` for commands).
    pub cmd: String,
    /// Its arguments (`["-l", "-c", <command>]` for commands, `["-c",
    /// <command>]` without a login shell).
    pub args: Vec<String>,
    /// The names of its extra environment variables, each with an empty
    /// value: a listing never carries a value (one may be an injected
    /// secret, whose value travels only in the request that started the
    /// process), whatever the agent answered.
    pub envs: BTreeMap<String, String>,
    /// Its working directory, when one was given.
    pub cwd: Option<String>,
    /// Its tag, when one was given.
    pub tag: Option<String>,
    /// Command or terminal.
    pub kind: ProcessKind,
}

// Arguments and env values may hold secrets: names and counts only.
crate::secret::redacted_debug! {
    ProcessInfo |o| pid, cmd, args = o.args.len(), envs = o.envs.keys().collect::<Vec<_>>(), cwd,
    tag, kind
}

impl ProcessInfo {
    /// The process the agent listed (a private conversion: no generated
    /// type in the public API).
    fn from_pb(p: pb::ProcessInfo) -> Self {
        let config = p.config.unwrap_or_default();
        let kind = match pb::ProcessKind::try_from(p.kind) {
            Ok(pb::ProcessKind::Process) => ProcessKind::Command,
            Ok(pb::ProcessKind::Pty) => ProcessKind::Pty,
            _ => ProcessKind::Other,
        };
        Self {
            pid: p.pid,
            cmd: config.cmd,
            args: config.args,
            // An older agent lists the values: they are dropped here.
            envs: config
                .envs
                .into_keys()
                .map(|name| (name, String::new()))
                .collect(),
            cwd: config.cwd,
            tag: p.tag,
            kind,
        }
    }
}

impl CommandOptions {
    /// Keeps the command's stdin open as a pipe, for
    /// [`CommandHandle::send_stdin`] until [`CommandHandle::close_stdin`]
    /// (without this, stdin is `/dev/null`, or the bytes of
    /// [`CommandOptions::stdin`]).
    #[must_use]
    pub fn open_stdin(mut self) -> Self {
        self.stdin_open = true;
        self
    }
}

/// What the caller can do when the sandbox suspends under a background
/// command.
pub(crate) const CONNECT_AFTER_RESUME: &str =
    "the process keeps running; connect to it again after the resume";

/// A background command (from [`Commands::spawn`] or
/// [`Commands::connect`]).
///
/// It is a [`Stream`] of the output it receives ([`CommandEvent`]s, in
/// order) that ends when the process ends; [`CommandHandle::wait`] reads
/// what is left and gives the outcome, with all the output this handle saw.
/// [`CommandHandle::disconnect`] lets the process run on without this
/// handle: [`Commands::connect_from`] reads it again from a sequence number.
/// Dropping the handle disconnects too.
///
/// The stream survives the network and the lifecycle (wire contract 2.7):
/// after a cut (a reset, a proxy 429/502/503/504, a suspension) it waits
/// until the sandbox is back and reads on from the last sequence number
/// received plus one, so every chunk arrives exactly once, in order. While
/// the sandbox is suspended (by [`Sandbox::pause`], or idle with
/// auto-resume) it sleeps, asking the control plane every 5 s, and never
/// wakes it; a resume through this handle wakes it at once. If the agent
/// dropped the output in between (it keeps the last 1 MiB), the stream
/// yields [`CommandEvent::OutputLost`] and reads on with new output. A
/// sandbox that ended makes the stream's last item `SandboxNotFound` (or
/// `SandboxLifetime`), one paused by someone else without auto-resume
/// `SandboxState`, one not back within the reconnect budget
/// `Sandbox { connection_lost }`.
pub struct CommandHandle {
    core: ProcessCore<pb::ProcessEvent, pb::EndEvent>,
    /// For messages: the command, when this handle started it.
    command: String,
    stdout: OutputBuffer,
    stderr: OutputBuffer,
    /// The callbacks' decoders (used only with a callback: the kept output
    /// is decoded once, at the end).
    stdout_text: Utf8Decoder,
    stderr_text: Utf8Decoder,
    /// The callbacks are in mutexes only to make the handle `Sync` (so that
    /// the futures of its `&self` methods are `Send`); polling takes them
    /// with `get_mut`, without locking.
    on_stdout: Mutex<Option<OutputCallback>>,
    on_stderr: Mutex<Option<OutputCallback>>,
    /// What the caller can do when the sandbox suspends.
    suspending_hint: &'static str,
}

impl fmt::Debug for CommandHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.core.fmt_handle(f, "CommandHandle", "ended")
    }
}

/// A process's stream: its start event and its protocol violations.
static PROCESS: Protocol<pb::ProcessEvent> = Protocol {
    started: started_pid,
    mark: |event| match &event.event {
        Some(Event::Data(data)) => Mark::Numbered(data.seq),
        Some(Event::End(end)) if end.status == SUSPENDING => Mark::Suspending,
        Some(Event::End(_)) => Mark::End,
        _ => Mark::Other,
    },
    connect: |conn, request, total, feature| {
        Box::pin(conn.connect_process(request, total, feature))
    },
    bad_restart: |feature| {
        SandboxError::protocol_violation(
            feature,
            "the process stream did not start with a start event",
        )
    },
    no_end: "the process stream ended without an end event",
    second_start: "the process stream sent a second start event",
};

impl CommandHandle {
    /// Reads the stream's first event, which must be the start of `expected`
    /// (any pid when `None`); then reads the process's output from
    /// `start.next_seq` on (0: only new output) across cuts.
    pub(crate) async fn open(
        sandbox: &Sandbox,
        stream: AgentStream<pb::ProcessEvent>,
        (start, opened_at): (Start, Instant),
        expected: Option<u32>,
        (command, suspending_hint): (String, &'static str),
        options: Option<CommandOptions>,
    ) -> Result<Self, SandboxError> {
        let limit = options
            .as_ref()
            .and_then(|o| o.max_output_bytes)
            .unwrap_or(super::output::MAX_OUTPUT_BYTES);
        let (on_stdout, on_stderr) = options.map_or((None, None), |o| (o.on_stdout, o.on_stderr));
        let feature = match start.waiter {
            Waiter::Foreground => start.feature,
            Waiter::Background => "commands.wait",
        };
        let (start_feature, waiter) = (start.feature, start.waiter);
        let bad_start = move || {
            SandboxError::protocol_violation(
                start_feature,
                if waiter == Waiter::Foreground {
                    "the process stream did not start with a start event"
                } else {
                    "the process stream did not start with the start event of the process"
                },
            )
        };
        let core = ProcessCore::open(
            sandbox,
            stream,
            (start, opened_at),
            expected,
            bad_start,
            &PROCESS,
            (feature, suspending_hint),
        )
        .await?;
        Ok(Self {
            core,
            command,
            stdout: OutputBuffer::with_limit(limit),
            stderr: OutputBuffer::with_limit(limit),
            stdout_text: Utf8Decoder::default(),
            stderr_text: Utf8Decoder::default(),
            on_stdout: Mutex::new(on_stdout),
            on_stderr: Mutex::new(on_stderr),
            suspending_hint,
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.core.pid()
    }

    /// The sequence number of the last chunk this handle received, if any.
    pub fn last_seq(&self) -> Option<u64> {
        self.core.last_seq()
    }

    /// True once output was lost across a reconnect (the stream yielded a
    /// [`CommandEvent::OutputLost`]).
    pub fn output_lost(&self) -> bool {
        self.core.output_lost()
    }

    /// Reads the rest of the output and waits for the process to end.
    ///
    /// # Errors
    /// As [`Commands::run`]: `CommandExit` on a non-zero exit (with the
    /// output this handle saw), `Timeout { scope: Command }` when the
    /// command's timeout stopped it, `Timeout { scope: Sandbox }`, transport
    /// failures; `SandboxState` when the sandbox is suspending (the process
    /// lives on: connect to it again after the resume).
    pub async fn wait(mut self) -> Result<CommandResult, SandboxError> {
        drain(&mut self).await?;
        let end = self.core.take_end()?;
        super::finish(
            end,
            self.stdout,
            self.stderr,
            &self.command,
            self.core.output_lost(),
            self.suspending_hint,
        )
    }

    /// Kills the process (SIGKILL to its process group and, where the
    /// sandbox's agent has cgroup v2, to every process it started, whatever
    /// left the group). `false` when it had already ended.
    ///
    /// # Errors
    /// Transport failures.
    pub async fn kill(&self) -> Result<bool, SandboxError> {
        kill_pid(self.core.sandbox(), self.core.pid()).await
    }

    /// Writes bytes to the process's stdin (spawned with
    /// [`CommandOptions::open_stdin`]).
    ///
    /// # Errors
    /// `InvalidArgument` when stdin is not open; `NotFound` when the
    /// process has ended; transport failures.
    pub async fn send_stdin(&self, data: impl Into<Vec<u8>>) -> Result<(), SandboxError> {
        Commands::new(self.core.sandbox())
            .send_stdin(self.core.pid(), data)
            .await
    }

    /// Closes the process's stdin (it then reads end-of-file).
    ///
    /// # Errors
    /// As [`CommandHandle::send_stdin`].
    pub async fn close_stdin(&self) -> Result<(), SandboxError> {
        Commands::new(self.core.sandbox())
            .close_stdin(self.core.pid())
            .await
    }

    /// Stops reading the output; the process keeps running. Returns the
    /// last sequence number received (read on with
    /// [`Commands::connect_from`] at that plus one).
    pub fn disconnect(self) -> Option<u64> {
        self.core.last_seq()
    }
}

/// The pid of a process stream's start event.
fn started_pid(event: &pb::ProcessEvent) -> Option<u32> {
    match &event.event {
        Some(Event::Start(start)) => Some(start.pid),
        _ => None,
    }
}

/// Feeds a chunk to its buffer and, decoded, to its callback.
fn seen(
    (buffer, decoder): (&mut OutputBuffer, &mut Utf8Decoder),
    callback: &mut Mutex<Option<OutputCallback>>,
    bytes: &[u8],
) {
    buffer.push(bytes);
    let callback = callback.get_mut().unwrap_or_else(PoisonError::into_inner);
    if let Some(cb) = callback {
        cb(&decoder.decode(bytes));
    }
}

impl Stream for CommandHandle {
    type Item = Result<CommandEvent, SandboxError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let decode = |event: pb::ProcessEvent| match event.event {
            Some(Event::Data(data)) => {
                let seq = data.seq;
                let item = match data.output {
                    Some(pb::data_event::Output::Stdout(bytes)) => {
                        let out = (&mut this.stdout, &mut this.stdout_text);
                        seen(out, &mut this.on_stdout, &bytes);
                        Some(CommandEvent::Stdout { data: bytes, seq })
                    }
                    Some(pb::data_event::Output::Stderr(bytes)) => {
                        let err = (&mut this.stderr, &mut this.stderr_text);
                        seen(err, &mut this.on_stderr, &bytes);
                        Some(CommandEvent::Stderr { data: bytes, seq })
                    }
                    None => None,
                };
                Decoded::Chunk(seq, item)
            }
            Some(Event::End(end)) => Decoded::End(end),
            Some(Event::Keepalive(_)) | None => Decoded::Skip,
            Some(Event::Start(_)) => Decoded::Restart,
        };
        this.core.poll_next(cx, decode, |from_seq| {
            Some(CommandEvent::OutputLost { from_seq })
        })
    }
}

async fn kill_pid(sandbox: &Sandbox, pid: u32) -> Result<bool, SandboxError> {
    Commands::new(sandbox).signal(pid, SIGKILL).await
}

impl<'a> Commands<'a> {
    /// Starts `cmd` with `bash -l -c` in the background and returns its
    /// handle once the agent has started it. The options' timeout (60 s by
    /// default; [`CommandOptions::no_timeout`] for a server) bounds the
    /// process, which the agent stops then: [`CommandHandle::wait`] reports
    /// `Timeout { scope: Command }`.
    ///
    /// # Errors
    /// `InvalidArgument` naming the argument before any I/O (as for
    /// [`Commands::run_with`]), or from the agent (bad cwd or user);
    /// `RateLimit` at the agent's process limit; transport failures.
    pub async fn spawn(
        &self,
        cmd: &str,
        options: CommandOptions,
    ) -> Result<CommandHandle, SandboxError> {
        boxed!(Result<CommandHandle, SandboxError>, {
            self.op(true)
                .run(self.spawn_inner(cmd, options), crate::otel::nothing)
                .await
        })
    }

    /// [`Self::spawn`] inside its span (never the command's text): the
    /// span ends when the process started.
    async fn spawn_inner(
        &self,
        cmd: &str,
        options: CommandOptions,
    ) -> Result<CommandHandle, SandboxError> {
        let (handle, feed) = self
            .start(
                cmd,
                options,
                (Waiter::Background, "commands.spawn", CONNECT_AFTER_RESUME),
            )
            .await?;
        // Stdin given with the command is part of it, as for `run`: sent in
        // pieces, and a process that ended or closed its stdin first is not
        // an error (its end decides the outcome).
        feed.await?;
        Ok(handle)
    }

    /// Starts `cmd` (the same checks and request for `run` and `spawn`,
    /// before any I/O) and returns its handle, reading with `waiter`, and
    /// the feeding of the options' stdin bytes (if any) to it, bounded by
    /// the command's whole time.
    pub(crate) async fn start(
        &self,
        cmd: &str,
        mut options: CommandOptions,
        (waiter, feature, suspending_hint): (Waiter, &'static str, &'static str),
    ) -> Result<
        (
            CommandHandle,
            impl Future<Output = Result<(), SandboxError>> + Send + 'a,
        ),
        SandboxError,
    > {
        let stdin = options.stdin.take();
        let request_timeout = options
            .spec
            .request_timeout
            .unwrap_or_else(|| self.sandbox.request_timeout());
        #[cfg_attr(not(feature = "secrets"), allow(unused_mut))]
        let (mut request, total) =
            start_request(cmd, &options, options.stdin_open || stdin.is_some())?;
        #[cfg(feature = "secrets")]
        if let Some(process) = request.process.as_mut() {
            self.sandbox
                .inject_secrets(&options.spec.secrets, true, &mut process.envs)
                .await?;
        }
        let conn = self.sandbox.conn();
        let opened_at = Instant::now();
        let epoch = conn.reconnect_epoch();
        let stream = conn
            .start_process(request, (total, options.spec.request_timeout))
            .await?;
        let start = Start {
            epoch,
            next_seq: 1,
            waiter,
            // A background handle outlives the call: only the agent's own
            // timeout ends its process.
            total: total.filter(|_| waiter == Waiter::Foreground),
            feature,
        };
        let handle = CommandHandle::open(
            self.sandbox,
            stream,
            (start, opened_at),
            None,
            (cmd.to_owned(), suspending_hint),
            Some(options),
        )
        .await?;
        let feed = feed_stdin(conn, handle.pid(), stdin, total, request_timeout);
        Ok((handle, feed))
    }

    /// Attaches to a running (or just ended) process and reads its output
    /// from now on (the agent's `from_seq = 0`).
    ///
    /// A connection cut before the first chunk arrives attaches again from
    /// new output: the agent numbers nothing before the first chunk, so
    /// chunks written during the cut are neither seen nor marked as lost.
    /// Use [`Commands::connect_from`] to read every chunk kept.
    ///
    /// # Errors
    /// `NotFound` when no such process exists (or it ended more than 30 s
    /// ago); transport failures.
    pub async fn connect(&self, pid: u32) -> Result<CommandHandle, SandboxError> {
        self.connect_at(pid, 0).await
    }

    /// Attaches to a process and reads its output from sequence number
    /// `from_seq` on (1 is the first chunk): pass the last sequence number
    /// received plus one to read on after a disconnect with every chunk
    /// exactly once. A process that ended less than 30 s ago replays its
    /// kept output and its end.
    ///
    /// # Errors
    /// `NotFound` when no such process exists, or when the agent no longer
    /// keeps that output (it keeps the last 1 MiB); transport failures.
    pub async fn connect_from(
        &self,
        pid: u32,
        from_seq: u64,
    ) -> Result<CommandHandle, SandboxError> {
        self.connect_at(pid, from_seq.max(1)).await
    }

    async fn connect_at(&self, pid: u32, from_seq: u64) -> Result<CommandHandle, SandboxError> {
        let opened_at = Instant::now();
        let epoch = self.sandbox.conn().reconnect_epoch();
        let stream = self
            .sandbox
            .conn()
            .connect_process(
                pb::ConnectRequest { pid, from_seq },
                None,
                "commands.connect",
            )
            .await?;
        let start = Start::background(epoch, from_seq, "commands.connect");
        CommandHandle::open(
            self.sandbox,
            stream,
            (start, opened_at),
            Some(pid),
            (String::new(), CONNECT_AFTER_RESUME),
            None,
        )
        .await
    }

    /// The live processes (commands and terminals), by pid.
    ///
    /// # Errors
    /// Transport failures.
    pub async fn list(&self) -> Result<Vec<ProcessInfo>, SandboxError> {
        let response = self
            .sandbox
            .conn()
            .list_processes(self.sandbox.request_timeout())
            .await?;
        Ok(response
            .processes
            .into_iter()
            .map(ProcessInfo::from_pb)
            .collect())
    }

    /// The live processes started with [`crate::CommandOptions::tag`]
    /// `tag`.
    ///
    /// # Errors
    /// Transport failures.
    pub async fn list_tagged(&self, tag: &str) -> Result<Vec<ProcessInfo>, SandboxError> {
        let mut processes = self.list().await?;
        processes.retain(|p| p.tag.as_deref() == Some(tag));
        Ok(processes)
    }

    /// Kills a process (SIGKILL to its process group and, where the
    /// sandbox's agent has cgroup v2, to every process it started, whatever
    /// left the group); `false` when no such live process exists.
    ///
    /// # Errors
    /// Transport failures.
    pub async fn kill(&self, pid: u32) -> Result<bool, SandboxError> {
        kill_pid(self.sandbox, pid).await
    }
}
