//! `run_code`: a cell in a long-lived kernel, its output and results;
//! context management in `contexts`.

pub mod chart;
mod contexts;
mod view;

use std::collections::BTreeMap;
use std::fmt;
use std::pin::Pin;
use std::time::Duration;

use futures_util::Stream;
use tokio::time::Instant;

use crate::commands::{OutputBuffer, ProcessSpec, spec_setters};
use crate::error::SandboxError;
use crate::pb;
use crate::pb::execute_event::Event;
use crate::sandbox::Sandbox;
use crate::transport::{
    Mark, Reopen, Reopened, Reopening, ResumableStream, Resume, Start, Step, Waiter,
};

pub use self::contexts::CodeContextOptions;
pub use self::view::Code;

/// Default cell timeout, when the caller sets none.
const DEFAULT_CODE_TIMEOUT: Duration = Duration::from_secs(300);
/// The client stream deadline is the cell timeout plus this, so that the
/// agent's own timeout handling (interrupt, then restart) is seen.
const STREAM_SLACK: Duration = Duration::from_secs(15);
/// Creating a context starts a kernel: it gets this long.
const CONTEXT_TIMEOUT: Duration = Duration::from_secs(90);

/// One chunk of output of a cell (a chunk is not a line).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutputMessage {
    /// The text.
    pub line: String,
    /// When the kernel produced it (Unix ns).
    pub timestamp_ns: i64,
    /// True for stderr.
    pub error: bool,
}

/// A kernel exception (data, not a `SandboxError`), or one of the agent's
/// synthetic errors: `ExecutionTimeout`, `KernelDied`, `KernelRestarted`,
/// `ContextDestroyed`, `ExecutionAborted`, `OutputTruncated`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExecutionError {
    /// The exception's name (`ZeroDivisionError`).
    pub name: String,
    /// Its value (`division by zero`).
    pub value: String,
    /// The traceback, lines joined with `\n`.
    pub traceback: String,
}

/// A result of a cell: a Jupyter mime bundle. Each present field is one
/// representation; `is_main_result` marks the value of the last expression.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ExecutionResult {
    /// The value of the cell's last expression (`execute_result`), not a
    /// `display()` call.
    pub is_main_result: bool,
    /// `text/plain`.
    pub text: Option<String>,
    /// `text/html`.
    pub html: Option<String>,
    /// `text/markdown`.
    pub markdown: Option<String>,
    /// `text/latex`.
    pub latex: Option<String>,
    /// `application/json` (raw JSON text).
    pub json: Option<String>,
    /// `application/javascript`.
    pub javascript: Option<String>,
    /// `image/png`, base64.
    pub png: Option<String>,
    /// `image/jpeg`, base64.
    pub jpeg: Option<String>,
    /// `image/svg+xml`.
    pub svg: Option<String>,
    /// `application/pdf`, base64.
    pub pdf: Option<String>,
    /// `e2b/chart` (JSON text), as sent; [`Self::parsed_chart`] gives it
    /// typed.
    pub chart: Option<String>,
    /// `e2b/data` (JSON text).
    pub data: Option<String>,
    /// Any other mime type.
    pub extra: BTreeMap<String, String>,
}

impl ExecutionResult {
    /// The `e2b/chart` representation as a typed chart
    /// ([`Chart::parse`](chart::Chart::parse): never fails, `Unknown` on
    /// anything it cannot read); `None` without one. The raw JSON stays in
    /// [`Self::chart`].
    pub fn parsed_chart(&self) -> Option<chart::Chart> {
        self.chart.as_deref().map(chart::Chart::parse)
    }

    /// The representations present, in the contract's order.
    pub fn formats(&self) -> Vec<&str> {
        let known = [
            ("text", &self.text),
            ("html", &self.html),
            ("markdown", &self.markdown),
            ("svg", &self.svg),
            ("png", &self.png),
            ("jpeg", &self.jpeg),
            ("pdf", &self.pdf),
            ("latex", &self.latex),
            ("javascript", &self.javascript),
            ("json", &self.json),
            ("data", &self.data),
            ("chart", &self.chart),
        ];
        known
            .into_iter()
            .filter(|(_, value)| value.is_some())
            .map(|(name, _)| name)
            .chain(self.extra.keys().map(String::as_str))
            .collect()
    }
}

impl ExecutionResult {
    /// Bytes of its representations.
    fn size(&self) -> usize {
        [
            &self.text,
            &self.html,
            &self.markdown,
            &self.latex,
            &self.json,
            &self.javascript,
            &self.png,
            &self.jpeg,
            &self.svg,
            &self.pdf,
            &self.chart,
            &self.data,
        ]
        .into_iter()
        .flatten()
        .map(String::len)
        .chain(self.extra.iter().map(|(k, v)| k.len() + v.len()))
        .fold(0usize, usize::saturating_add)
    }

    /// The result the agent sent (a private conversion: no generated type
    /// in the public API).
    fn from_pb(r: pb::ExecutionResult) -> Self {
        Self {
            is_main_result: r.is_main_result,
            text: r.text,
            html: r.html,
            markdown: r.markdown,
            latex: r.latex,
            json: r.json,
            javascript: r.javascript,
            png: r.png,
            jpeg: r.jpeg,
            svg: r.svg,
            pdf: r.pdf,
            chart: r.chart,
            data: r.data,
            extra: r.extra.into_iter().collect(),
        }
    }
}

/// Output of a cell, one entry per chunk.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Logs {
    /// stdout chunks.
    pub stdout: Vec<String>,
    /// stderr chunks.
    pub stderr: Vec<String>,
}

/// Everything a cell produced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Execution {
    /// Results (display calls and the main result).
    pub results: Vec<ExecutionResult>,
    /// Output.
    pub logs: Logs,
    /// The kernel exception, if the cell raised one.
    pub error: Option<ExecutionError>,
    /// The kernel's execution counter after this cell.
    pub execution_count: Option<u64>,
    /// True when output was dropped to stay within the SDK's budget: the
    /// oldest log bytes beyond [`RunCodeOptions::max_output_bytes`]
    /// (default 64 MiB) per stream, and display results beyond 64 MiB in
    /// all (the main result is always kept). The callbacks, and a streamed
    /// cell ([`crate::Code::stream`]), see everything.
    pub truncated: bool,
}

impl Execution {
    /// The `text/plain` of the main result (the value of the last expression).
    pub fn text(&self) -> Option<&str> {
        self.results
            .iter()
            .find(|r| r.is_main_result)
            .and_then(|r| r.text.as_deref())
    }
}

type Callback<T> = Box<dyn FnMut(&T) + Send>;

/// Options of [`Sandbox::run_code_with`].
#[non_exhaustive]
pub struct RunCodeOptions {
    language: Option<String>,
    context: Option<String>,
    /// Env, timeout, secrets.
    spec: ProcessSpec,
    on_stdout: Option<Callback<OutputMessage>>,
    on_stderr: Option<Callback<OutputMessage>>,
    on_result: Option<Callback<ExecutionResult>>,
    on_error: Option<Callback<ExecutionError>>,
    /// The most log bytes kept per stream (default 64 MiB).
    max_output_bytes: Option<usize>,
}

impl Default for RunCodeOptions {
    fn default() -> Self {
        Self {
            language: None,
            context: None,
            spec: ProcessSpec::with_timeout(DEFAULT_CODE_TIMEOUT),
            on_stdout: None,
            on_stderr: None,
            on_result: None,
            on_error: None,
            max_output_bytes: None,
        }
    }
}

impl fmt::Debug for RunCodeOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("RunCodeOptions");
        f.field("language", &self.language)
            .field("context", &self.context)
            .field("max_output_bytes", &self.max_output_bytes);
        self.spec.debug_fields(&mut f).finish_non_exhaustive()
    }
}

impl RunCodeOptions {
    /// The defaults: the default Python context, 300 s timeout.
    pub fn new() -> Self {
        Self::default()
    }

    spec_setters! {
        /// Sets the environment variable `variable` of this cell to the value
        /// of a secret in AWS Secrets Manager. Python cells only: a cell of
        /// another language with secrets is refused (give the secrets to its
        /// code context instead, [`crate::CodeContextOptions::secret`]); the
        /// secrets the builder bound reach Python cells of the default
        /// context, not cells of a context (which has its own environment).
        secret;
        /// An environment variable for this cell (Python contexts only).
        env;
        /// The cell's timeout (default 300 s); the agent interrupts the cell then
        /// and reports `ExecutionTimeout` in [`Execution::error`].
        /// `Duration::ZERO` means no limit, like [`RunCodeOptions::no_timeout`];
        /// so does a timeout above 28,800 s (no sandbox lives that long).
        timeout;
        /// No timeout.
        no_timeout;
    }

    crate::setters::setters! {
        /// The language's default context (`python`, `bash`, `javascript`/`js`,
        /// `typescript`/`ts`); exclusive with [`RunCodeOptions::context`].
        language: Some impl String;
        /// The most output [`Execution::logs`] keeps of each stream, in bytes
        /// (default 64 MiB), as [`crate::CommandOptions::max_output_bytes`]:
        /// past it the oldest bytes are dropped (the chunk the limit falls in
        /// is cut at a character boundary, older ones go whole) and
        /// [`Execution::truncated`] is set; 0 keeps nothing. The callbacks
        /// still see everything.
        max_output_bytes: Some usize;
        /// A context id; exclusive with [`RunCodeOptions::language`].
        context: Some impl String;
    }

    crate::setters::setters! {
        /// Called with each stdout chunk.
        on_stdout: callback(&OutputMessage);
        /// Called with each stderr chunk.
        on_stderr: callback(&OutputMessage);
        /// Called with each result.
        on_result: callback(&ExecutionResult);
        /// Called with the kernel exception.
        on_error: callback(&ExecutionError);
    }
}

fn normalise_language(language: &str) -> String {
    match language.to_ascii_lowercase().as_str() {
        "js" => "javascript".to_owned(),
        "ts" => "typescript".to_owned(),
        other => other.to_owned(),
    }
}

/// A code context: a kernel of its own, with its own state.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CodeContext {
    /// Its id (pass it to [`RunCodeOptions::context`]).
    pub id: String,
    /// Its language.
    pub language: String,
    /// Its working directory, when one was given (a relative one is made
    /// absolute under `/home/user`).
    pub cwd: Option<String>,
}

/// One event of a running cell, in the order the kernel produced them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExecutionEvent {
    /// A stdout chunk.
    Stdout(OutputMessage),
    /// A stderr chunk.
    Stderr(OutputMessage),
    /// A result (a display call or the main result); boxed, it is large.
    Result(Box<ExecutionResult>),
    /// The kernel exception (data; the cell may still produce output).
    Error(ExecutionError),
    /// The cell finished; always the last event.
    End {
        /// The kernel's execution counter after this cell.
        execution_count: Option<u64>,
    },
}

/// The events of a running cell (from [`Sandbox::run_code_stream`]). Dropping
/// it cancels the call: the agent interrupts a cell that nobody has followed
/// for 10 s (the time a cut client gets to re-attach).
pub struct ExecutionEvents {
    inner: Pin<Box<dyn Stream<Item = Result<ExecutionEvent, SandboxError>> + Send>>,
}

crate::secret::redacted_debug!(non_exhaustive ExecutionEvents);

inner_stream!(ExecutionEvents => Result<ExecutionEvent, SandboxError>);

/// Reads a cell's events off the agent stream, checking their order. After
/// a cut (once `started` was seen) it waits for the sandbox's reconnect
/// poller and re-attaches with `Reattach(last_seq + 1)`, skipping anything
/// it already has: every event reaches the caller once, in order. The
/// cell itself is never sent again.
struct CellReader {
    stream: ResumableStream<CellResume>,
    started_count: u64,
    ended: bool,
}

/// A cell's events as a resumable stream: numbered events (keepalives
/// carry 0), `End` last, `Reattach(context, execution, next_seq)` after a
/// cut. The cell itself is never sent again.
struct CellResume {
    /// The context the cell runs in and its execution id (from `started`).
    context_id: String,
    execution_id: String,
}

impl Resume for CellResume {
    type Message = pb::ExecuteEvent;

    fn mark(&self, event: &pb::ExecuteEvent) -> Mark {
        match event.event {
            Some(Event::End(_)) => Mark::End,
            // Keepalives carry seq 0.
            _ if event.seq != 0 => Mark::Numbered(event.seq),
            _ => Mark::Other,
        }
    }

    fn bare_end(&self) -> Option<SandboxError> {
        Some(SandboxError::protocol_violation(
            "run_code",
            "the execution stream ended without an end event",
        ))
    }

    fn suspending(&self) -> SandboxError {
        SandboxError::sandbox_state("suspending", "run the cell again after the resume")
    }

    /// `Reattach` from `from_seq`; the agent answers NOT_FOUND when it no
    /// longer has that output (`reattach_failed`).
    fn reopen<'a>(&'a mut self, at: Reopen<'a>) -> Reopening<'a, pb::ExecuteEvent> {
        Box::pin(async move {
            let request = pb::ReattachRequest {
                context_id: self.context_id.clone(),
                execution_id: self.execution_id.clone(),
                from_seq: at.from_seq,
            };
            let stream = at
                .conn
                .reattach(request, at.total)
                .await
                .map_err(SandboxError::reattach_failed)?;
            Ok(Reopened { stream, gap: false })
        })
    }
}

/// The context a cell runs in, as the agent names it: the one given, else
/// the language's default (`default` for Python).
fn context_of(request: &pb::ExecuteRequest) -> String {
    if let Some(id) = &request.context_id {
        return id.clone();
    }
    match request.language.as_deref().unwrap_or("") {
        "" | "python" | "python3" => "default".to_owned(),
        "node" => "default-javascript".to_owned(),
        other => format!("default-{other}"),
    }
}

impl CellReader {
    /// Checks the cell and its options (no I/O) and builds its request and
    /// the client's deadline over the whole stream. Nothing borrowed from the
    /// options is held across an await, so the futures stay `Send` (the
    /// callbacks are `Send` but not `Sync`).
    fn request(
        code: &str,
        options: &RunCodeOptions,
    ) -> Result<(pb::ExecuteRequest, Option<Duration>), SandboxError> {
        if options.language.is_some() && options.context.is_some() {
            return Err(SandboxError::invalid_argument(
                "language",
                "language and context cannot both be given; pass one of them",
            ));
        }
        crate::checks::code(code)?;
        crate::checks::envs(&options.spec.envs)?;
        if let Some(context) = &options.context {
            crate::checks::context_id(context)?;
        }
        if let Some(language) = &options.language {
            crate::checks::language(language)?;
        }
        let (timeout_ms, total) =
            crate::checks::operation_timeout(options.spec.timeout, STREAM_SLACK);
        let request = pb::ExecuteRequest {
            context_id: options.context.clone(),
            code: code.to_owned(),
            timeout_ms,
            envs: options.spec.envs.clone().into_iter().collect(),
            language: options.language.as_deref().map(normalise_language),
        };
        Ok((request, total))
    }

    /// Sends the request and reads the `started` event. It takes the
    /// request by value: nothing borrowed from the options (whose callbacks
    /// are `Send` but not `Sync`) lives across an await.
    async fn open(
        sandbox: &Sandbox,
        request: pb::ExecuteRequest,
        total: Option<Duration>,
    ) -> Result<Self, SandboxError> {
        let conn = sandbox.conn();
        let opened_at = Instant::now();
        let epoch = conn.reconnect_epoch();
        let context_id = context_of(&request);
        // A cut before `started` ends the call (the transport never sends
        // an Execute again once it may have reached the agent).
        let mut stream = conn.execute(request, total).await?;
        // A cell waiting for its context (another cell runs there) gets
        // keepalives before its `started`.
        let first = loop {
            match stream.message().await? {
                Some(pb::ExecuteEvent {
                    event: Some(Event::Keepalive(_)),
                    ..
                }) => {}
                other => break other,
            }
        };
        let Some(pb::ExecuteEvent {
            event: Some(Event::Started(started)),
            seq,
        }) = first
        else {
            return Err(SandboxError::protocol_violation(
                "run_code",
                "the execution stream did not start with a started event",
            ));
        };
        let start = Start {
            epoch,
            next_seq: seq.saturating_add(1),
            waiter: Waiter::Foreground,
            total,
            feature: "run_code",
        };
        let resume = CellResume {
            context_id,
            execution_id: started.execution_id,
        };
        Ok(Self {
            stream: ResumableStream::new(conn.clone(), resume, stream, start, opened_at),
            started_count: started.execution_count,
            ended: false,
        })
    }

    /// The next event; `None` after `End`.
    async fn next(&mut self) -> Result<Option<ExecutionEvent>, SandboxError> {
        if self.ended {
            return Ok(None);
        }
        loop {
            let event = match self.stream.next().await {
                Some(Ok(Step::Message(event))) => event,
                Some(Ok(Step::Resumed { .. })) => continue,
                Some(Err(err)) => return Err(err),
                None => {
                    return Err(SandboxError::protocol_violation(
                        "run_code",
                        "the execution stream ended without an end event",
                    ));
                }
            };
            let event = match event.event {
                Some(Event::Stdout(chunk)) => ExecutionEvent::Stdout(OutputMessage {
                    line: chunk.text,
                    timestamp_ns: chunk.timestamp_unix_ns,
                    error: false,
                }),
                Some(Event::Stderr(chunk)) => ExecutionEvent::Stderr(OutputMessage {
                    line: chunk.text,
                    timestamp_ns: chunk.timestamp_unix_ns,
                    error: true,
                }),
                Some(Event::Result(result)) => {
                    ExecutionEvent::Result(Box::new(ExecutionResult::from_pb(result)))
                }
                Some(Event::Error(error)) => ExecutionEvent::Error(ExecutionError {
                    name: error.name,
                    value: error.value,
                    traceback: error.traceback.join("\n"),
                }),
                Some(Event::End(end)) => {
                    self.ended = true;
                    let count = if end.execution_count > 0 {
                        end.execution_count
                    } else {
                        self.started_count
                    };
                    ExecutionEvent::End {
                        execution_count: Some(count),
                    }
                }
                Some(Event::Keepalive(_)) => continue,
                Some(Event::Started(_)) | None => {
                    return Err(SandboxError::protocol_violation(
                        "run_code",
                        "the execution stream sent an unexpected event",
                    ));
                }
            };
            return Ok(Some(event));
        }
    }
}

/// What a collected cell may keep of its display results (docs:
/// [`Execution::truncated`]); its logs keep `max_output_bytes` per stream.
const MAX_KEPT_BYTES: usize = 64 * 1024 * 1024;

/// Injects a cell's secrets (and, for a Python cell of the default
/// context, the handle's bound ones) into its request. A cell of another
/// language with secrets is refused before any I/O: only the Python
/// kernel applies a cell's environment. A cell of a context gets the
/// call's secrets only (the context has its own environment).
#[cfg(feature = "secrets")]
async fn inject_cell_secrets(
    sandbox: &Sandbox,
    secrets: crate::secret::SecretEnv,
    request: &mut pb::ExecuteRequest,
) -> Result<(), SandboxError> {
    let in_context = request.context_id.is_some();
    let python = request.language.as_deref().is_none_or(|l| l == "python");
    if !in_context && !python && !secrets.is_empty() {
        return Err(SandboxError::invalid_argument(
            "secrets",
            "secrets reach Python cells only; give them to a code context of that language (CodeContextOptions::secret)",
        ));
    }
    sandbox
        .inject_secrets(&secrets, python && !in_context, &mut request.envs)
        .await
}

/// Runs one cell and collects everything it produced.
pub(crate) async fn run_code(
    sandbox: &Sandbox,
    code: &str,
    options: RunCodeOptions,
) -> Result<Execution, SandboxError> {
    code_op(sandbox, &options)
        .run(run_code_inner(sandbox, code, options), crate::otel::nothing)
        .await
}

/// The span of a cell: `rayito.code.run` with its language (the default
/// context's `python` when neither a language nor a context is given);
/// never the code.
fn code_op(sandbox: &Sandbox, options: &RunCodeOptions) -> crate::otel::Op {
    let op = crate::otel::Op::new(crate::otel::Name::CodeRun).on(sandbox);
    let language = match (&options.language, &options.context) {
        (Some(language), _) => Some(language.as_str()),
        (None, None) => Some("python"),
        (None, Some(_)) => None,
    };
    match language {
        Some(language) => op.with(crate::otel::Attr::Language(crate::otel::Attr::name_text(
            language,
        ))),
        None => op,
    }
}

/// [`run_code`] inside its span.
async fn run_code_inner(
    sandbox: &Sandbox,
    code: &str,
    mut options: RunCodeOptions,
) -> Result<Execution, SandboxError> {
    #[cfg_attr(not(feature = "secrets"), allow(unused_mut))]
    let (mut request, total) = CellReader::request(code, &options)?;
    #[cfg(feature = "secrets")]
    inject_cell_secrets(sandbox, options.spec.secrets.clone(), &mut request).await?;
    let mut reader = CellReader::open(sandbox, request, total).await?;
    let mut execution = Execution {
        execution_count: Some(reader.started_count),
        ..Execution::default()
    };
    let limit = options
        .max_output_bytes
        .unwrap_or(crate::commands::MAX_OUTPUT_BYTES);
    let mut stdout = OutputBuffer::<String>::with_limit(limit);
    let mut stderr = OutputBuffer::<String>::with_limit(limit);
    let (mut result_bytes, mut results_dropped) = (0usize, false);
    while let Some(event) = reader.next().await? {
        match event {
            ExecutionEvent::Stdout(message) => {
                if let Some(cb) = options.on_stdout.as_mut() {
                    cb(&message);
                }
                stdout.push_chunk(message.line);
            }
            ExecutionEvent::Stderr(message) => {
                if let Some(cb) = options.on_stderr.as_mut() {
                    cb(&message);
                }
                stderr.push_chunk(message.line);
            }
            ExecutionEvent::Result(result) => {
                if let Some(cb) = options.on_result.as_mut() {
                    cb(&result);
                }
                let size = result.size();
                if result.is_main_result || result_bytes.saturating_add(size) <= MAX_KEPT_BYTES {
                    result_bytes = result_bytes.saturating_add(size);
                    execution.results.push(*result);
                } else {
                    results_dropped = true;
                }
            }
            ExecutionEvent::Error(error) => {
                if let Some(cb) = options.on_error.as_mut() {
                    cb(&error);
                }
                execution.error = Some(error);
            }
            ExecutionEvent::End { execution_count } => execution.execution_count = execution_count,
        }
    }
    let (stdout, stdout_cut) = stdout.into_chunks();
    let (stderr, stderr_cut) = stderr.into_chunks();
    execution.truncated = results_dropped || stdout_cut || stderr_cut;
    execution.logs.stdout = stdout.into();
    execution.logs.stderr = stderr.into();
    Ok(execution)
}

/// Runs one cell and hands its events over as they come (callbacks in the
/// options are not called: the stream is the callback).
pub(crate) async fn run_code_stream(
    sandbox: &Sandbox,
    code: &str,
    options: RunCodeOptions,
) -> Result<ExecutionEvents, SandboxError> {
    // The span covers starting the cell; the events come after it.
    code_op(sandbox, &options)
        .run(
            run_code_stream_inner(sandbox, code, options),
            crate::otel::nothing,
        )
        .await
}

/// [`run_code_stream`] inside its span.
async fn run_code_stream_inner(
    sandbox: &Sandbox,
    code: &str,
    options: RunCodeOptions,
) -> Result<ExecutionEvents, SandboxError> {
    #[cfg_attr(not(feature = "secrets"), allow(unused_mut))]
    let (mut request, total) = CellReader::request(code, &options)?;
    #[cfg(feature = "secrets")]
    let secrets = options.spec.secrets.clone();
    drop(options);
    #[cfg(feature = "secrets")]
    inject_cell_secrets(sandbox, secrets, &mut request).await?;
    let reader = CellReader::open(sandbox, request, total).await?;
    let stream = futures_util::stream::unfold(Some(reader), |state| async move {
        let mut reader = state?;
        match reader.next().await {
            Ok(Some(event)) => Some((Ok(event), Some(reader))),
            Ok(None) => None,
            // An error ends the stream.
            Err(err) => Some((Err(err), None)),
        }
    });
    Ok(ExecutionEvents {
        inner: Box::pin(stream),
    })
}

/// The view's entry on the sandbox core (the core does not know the feature).
impl crate::sandbox::Sandbox {
    /// Code cells and their contexts (`run_code` is a shortcut of
    /// `code().run`).
    pub fn code(&self) -> Code<'_> {
        Code::new(self)
    }

    /// Runs a code cell in the default Python context.
    ///
    /// A kernel exception is data in [`Execution::error`], not an `Err`.
    ///
    /// # Errors
    /// `InvalidArgument` before any I/O, naming the argument: `code` above
    /// the agent's 1 MiB cell limit, `envs` (an empty name, `=` in a name, a
    /// NUL), `language`/`context_id` (empty or a NUL, or both given).
    /// Transport and agent failures: `Timeout` (request), `Sandbox`
    /// (`kernel_not_ready`, `connection_lost`, `closed`, ...), `InvalidArgument`
    /// when the agent refuses the request, `Authentication`.
    pub async fn run_code(&self, code: &str) -> Result<Execution, SandboxError> {
        boxed!(Result<Execution, SandboxError>, {
            run_code(self, code, RunCodeOptions::default()).await
        })
    }

    /// Runs a code cell with options (language or context, envs, timeout,
    /// streaming callbacks).
    ///
    /// # Errors
    /// As [`Sandbox::run_code`].
    pub async fn run_code_with(
        &self,
        code: &str,
        options: RunCodeOptions,
    ) -> Result<Execution, SandboxError> {
        boxed!(Result<Execution, SandboxError>, {
            run_code(self, code, options).await
        })
    }

    /// Runs a code cell and streams its events as they come (the last one
    /// is [`crate::ExecutionEvent::End`]); dropping the stream interrupts the cell.
    ///
    /// # Errors
    /// As [`Sandbox::run_code`], when the cell cannot start; later failures
    /// are the stream's last item.
    pub async fn run_code_stream(
        &self,
        code: &str,
        options: RunCodeOptions,
    ) -> Result<ExecutionEvents, SandboxError> {
        boxed!(Result<ExecutionEvents, SandboxError>, {
            run_code_stream(self, code, options).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_the_main_result() {
        let execution = Execution {
            results: vec![
                ExecutionResult {
                    text: Some("display".into()),
                    ..Default::default()
                },
                ExecutionResult {
                    is_main_result: true,
                    text: Some("2".into()),
                    html: Some("<b>2</b>".into()),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        assert_eq!(execution.text(), Some("2"));
        assert_eq!(execution.results[1].formats(), vec!["text", "html"]);
    }

    #[test]
    fn language_aliases() {
        assert_eq!(normalise_language("JS"), "javascript");
        assert_eq!(normalise_language("ts"), "typescript");
        assert_eq!(normalise_language("python"), "python");
    }
}
