//! The Code service (`run_code`): stateful kernels ("contexts") driven by a
//! small driver program the agent ships.
//!
//! - `python` contexts run `agent/python/driver.py` (one interpreter each);
//!   `bash` contexts run one persistent shell each; `javascript` and
//!   `typescript` contexts run `agent/js/driver.js` in one `node` each, when
//!   node is on the sandbox PATH. Kernels are started
//!   through [`SandboxEnv::launch`] (`kernel::launch`) so they see the same files and isolation
//!   as commands.
//! - One cell at a time per context: Execute holds the context's lock for the
//!   whole cell, so a second Execute waits and output never mixes.
//! - Live Execute and Reattach streams follow the agent's [`PhaseCell`]:
//!   suspending -> UNAVAILABLE `suspending`, terminating -> UNAVAILABLE
//!   `terminating`, expired -> FAILED_PRECONDITION `sandbox_timeout`, with
//!   no `end` event; the cell itself runs on. Gating NEW calls is the agent
//!   core's job.
//! - Every execution keeps its numbered events (from `started` to `end`) in
//!   a 4 MiB log, kept 30 s after the end (at most 32 executions), so that
//!   `Reattach{context_id, execution_id, from_seq}` replays `seq >=
//!   from_seq` and then follows live until the end (`from_seq = 0`: only
//!   what comes next). An unknown, foreign or expired execution is
//!   NOT_FOUND `execution not found`; a `from_seq` already dropped is
//!   OUT_OF_RANGE `execution output already discarded`; a ninth follower is
//!   RESOURCE_EXHAUSTED `too many subscribers`.
//! - A cut Execute stream does not end its cell: a cell nobody follows
//!   (no Execute, no Reattach stream) for [`DETACH_GRACE`] while the phase
//!   is open is interrupted and ends with `ExecutionAborted`.

mod bash;
mod context;
mod execution;
mod js;
mod kernel;
mod log;
pub mod messages;
mod python;
pub mod validate;

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::Stream;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::pb;
use crate::phase::PhaseCell;
use crate::sandbox::SandboxEnv;
use context::{Context, Registry};
use execution::Cell;
use validate::Language;

pub use context::MAX_CONTEXTS;
pub use execution::{DETACH_GRACE, INTERRUPT_GRACE, KEEPALIVE_INTERVAL, MAX_CHUNK_BYTES};
pub use log::{LOG_BYTES, MAX_RETAINED, MAX_SUBSCRIBERS, RETAINED_AFTER_END};

/// Events buffered per Execute stream before the kernel is slowed down.
const STREAM_BUFFER: usize = 32;

/// The Code service of one agent. Cheap to clone.
#[derive(Clone, Debug)]
pub struct CodeServiceImpl {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    env: SandboxEnv,
    phase: PhaseCell,
    contexts: Registry,
    /// Executions a client can Reattach to.
    executions: Arc<log::Executions>,
    closed: AtomicBool,
    /// Set by [`CodeServiceImpl::cut`]: live executions send nothing more.
    cut: Arc<AtomicBool>,
    /// Why the default kernel's warm-up failed (a fixed text), until a
    /// later warm-up succeeds.
    start_failure: std::sync::Mutex<Option<&'static str>>,
    /// The default kernel started before `/run` ([`CodeServiceImpl::prestart`]),
    /// until `/run` adopts or discards it.
    prestarted: std::sync::Mutex<Option<Arc<Context>>>,
}

impl CodeServiceImpl {
    /// A service whose kernels run in `env` and whose live streams follow
    /// `phase`; an ended execution can be reattached to for
    /// [`RETAINED_AFTER_END`].
    pub fn new(env: SandboxEnv, phase: PhaseCell) -> Self {
        Self::retaining(env, phase, RETAINED_AFTER_END)
    }

    /// [`CodeServiceImpl::new`], an ended execution kept for Reattach
    /// `retain_after_end` instead (`AgentConfig::retained_after_end`).
    pub fn retaining(env: SandboxEnv, phase: PhaseCell, retain_after_end: Duration) -> Self {
        Self {
            shared: Arc::new(Shared {
                env,
                phase,
                contexts: Registry::default(),
                executions: Arc::new(log::Executions::new(retain_after_end)),
                closed: AtomicBool::new(false),
                cut: Arc::default(),
                start_failure: std::sync::Mutex::new(None),
                prestarted: std::sync::Mutex::new(None),
            }),
        }
    }

    /// Starts the default Python kernel before `/run`, in a context of its
    /// own that `/run` then adopts when the run payload leaves the
    /// sandbox's environment as it was (no envs, the default working
    /// directory, no CPU limit), so that a new sandbox's first cell does not
    /// wait for an interpreter to start; otherwise `/run` discards it and
    /// starts the kernel afresh. Needs a tokio runtime; without one it does
    /// nothing.
    pub fn prestart(&self) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if !self.shared.env.finds_program(python::PYTHON) {
            return;
        }
        let ctx = context::Registry::detached_default();
        ctx.mark_starting();
        *self.shared.prestarted.lock().expect("prestarted lock") = Some(ctx.clone());
        let env = self.shared.env.clone();
        handle.spawn(async move {
            // A failure here is not reported: `/run` starts the kernel again.
            let _ = execution::ensure_kernel(&ctx, &env).await;
        });
    }

    /// Whether the kernel [`CodeServiceImpl::prestart`] began is up and
    /// answering, `/run` not having taken it yet.
    pub(crate) fn prestarted_live(&self) -> bool {
        self.shared
            .prestarted
            .lock()
            .expect("prestarted lock")
            .as_ref()
            .is_some_and(|ctx| ctx.is_live())
    }

    /// Starts the default Python context in the background (called at `/run`),
    /// or adopts the kernel [`CodeServiceImpl::prestart`] began.
    /// Needs a tokio runtime; without one it does nothing (the context then
    /// starts on first use).
    pub fn warm_up(&self) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let prestarted = self
            .shared
            .prestarted
            .lock()
            .expect("prestarted lock")
            .take();
        // An adopted kernel goes through the start below too: it waits for
        // the early start to end and, should that start have failed, starts
        // the kernel again and records why, as for any other.
        if let Some(ctx) = prestarted
            && (self.shared.env.has_run_settings() || !self.shared.contexts.adopt(ctx.clone()))
        {
            discard(&ctx);
        }
        let Ok(ctx) = self.shared.contexts.default_for(Language::Python) else {
            return;
        };
        let env = self.shared.env.clone();
        let shared = self.shared.clone();
        // An interpreter missing from the PATH (an envs PATH override that
        // hides it) is known now: Health says so from its first answer,
        // instead of "ready" until the background start fails.
        if !env.finds_program(python::PYTHON) {
            *shared.start_failure.lock().expect("start failure lock") =
                Some(messages::KERNEL_NOT_ON_PATH);
            tracing::warn!("default python kernel cannot start: python3 is not on the PATH");
            return;
        }
        ctx.mark_starting();
        handle.spawn(async move {
            let outcome = execution::ensure_kernel(&ctx, &env).await;
            let failure = outcome.as_ref().err().map(start_failure_reason);
            *shared.start_failure.lock().expect("start failure lock") = failure;
            if let Err(err) = outcome {
                tracing::warn!(error_kind = ?err.kind(), "default python kernel failed to start");
            }
        });
    }

    /// Whether the default kernel is ready (Health's `kernel_ready`): true
    /// once its interpreter has started and answered (the driver's `ready`
    /// frame), so a cell sent now runs without waiting for a start; false
    /// before warm-up, while it is starting, after a failed start and after
    /// shutdown.
    pub fn kernel_ready(&self) -> bool {
        self.shared
            .contexts
            .get(Language::Python.default_context_id())
            .is_some_and(|ctx| ctx.is_live())
    }

    /// [`CodeServiceImpl::kernel_ready`], after waiting at most `bound` for
    /// a start of the default kernel under way to end: Health answers when
    /// the kernel does, so a readiness wait sees it ready on its first probe
    /// instead of sleeping a poll interval past it.
    pub async fn kernel_ready_within(&self, bound: Duration) -> bool {
        if let Some(ctx) = self
            .shared
            .contexts
            .get(Language::Python.default_context_id())
        {
            ctx.start_settled(bound).await;
        }
        self.kernel_ready()
    }

    /// Why the default kernel could not start, while it is not ready: a
    /// fixed text from [`messages`] (Health sends it in its
    /// `rayito-kernel-failure` header so that a client stops waiting).
    pub fn kernel_failure(&self) -> Option<&'static str> {
        if self.kernel_ready() {
            return None;
        }
        *self
            .shared
            .start_failure
            .lock()
            .expect("start failure lock")
    }

    /// The agent is being killed (fault injection): live executions send
    /// and keep nothing more, so their clients see the connection go, as
    /// when the agent's process dies, instead of the events a shutdown
    /// sends. Call before [`CodeServiceImpl::shutdown`].
    pub fn cut(&self) {
        self.shared.cut.store(true, Ordering::SeqCst);
    }

    /// Stops every kernel (called at `/terminate` and on drop of the agent).
    pub fn shutdown(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        if let Some(ctx) = self
            .shared
            .prestarted
            .lock()
            .expect("prestarted lock")
            .take()
        {
            discard(&ctx);
        }
        self.shared.contexts.destroy_all();
    }

    #[allow(clippy::result_large_err)]
    fn check_open(&self) -> Result<(), Status> {
        if self.shared.closed.load(Ordering::SeqCst) {
            return Err(Status::unavailable(messages::SHUTTING_DOWN));
        }
        Ok(())
    }

    /// The context an Execute names: by id, by language, or `default`.
    #[allow(clippy::result_large_err)]
    fn context_for(
        &self,
        context_id: Option<&str>,
        language: Option<&str>,
    ) -> Result<Arc<Context>, Status> {
        let language = language.filter(|l| !l.is_empty());
        match (context_id, language) {
            (Some(_), Some(_)) => Err(Status::invalid_argument(messages::LANGUAGE_AND_CONTEXT)),
            (Some(id), None) => self.existing(id),
            (None, language) => {
                let language = validate::language(language.unwrap_or(""))?;
                self.shared.contexts.default_for(language)
            }
        }
    }

    /// A context that must already exist (the defaults are created on demand).
    #[allow(clippy::result_large_err)]
    fn existing(&self, id: &str) -> Result<Arc<Context>, Status> {
        validate::context_id(id)?;
        if let Some(ctx) = self.shared.contexts.get(id) {
            return Ok(ctx);
        }
        match id {
            "default" => self.shared.contexts.default_for(Language::Python),
            "default-bash" => self.shared.contexts.default_for(Language::Bash),
            "default-javascript" => self.shared.contexts.default_for(Language::JavaScript),
            "default-typescript" => self.shared.contexts.default_for(Language::TypeScript),
            _ => Err(Status::not_found(messages::CONTEXT_NOT_FOUND)),
        }
    }
}

type EventStream = Pin<Box<dyn Stream<Item = Result<pb::ExecuteEvent, Status>> + Send>>;

#[tonic::async_trait]
impl pb::code_service_server::CodeService for CodeServiceImpl {
    async fn create_context(
        &self,
        request: Request<pb::CreateContextRequest>,
    ) -> Result<Response<pb::CreateContextResponse>, Status> {
        self.check_open()?;
        let req = request.into_inner();
        let language = validate::language(&req.language)?;
        let cwd = match req.cwd.filter(|c| !c.is_empty()) {
            Some(cwd) => {
                validate::cwd(&cwd)?;
                // The file calls' rules, checked as the sandbox's user.
                crate::filesystem::check_working_dir(&self.shared.env, &cwd)
                    .map_err(|refusal| refusal.status(messages::CWD_NOT_DIRECTORY))?;
                cwd
            }
            None => crate::sandbox::GUEST_HOME.to_owned(),
        };
        validate::envs(&req.envs)?;
        let spec = kernel::KernelSpec {
            language,
            cwd,
            envs: req.envs.into_iter().collect(),
        };
        let ctx = self.shared.contexts.create(spec)?;
        // Until its kernel answers, the context goes away with the call: on
        // an error, and when the client cancels (hyper then drops this
        // future), since a context whose id nobody got holds a slot.
        let unfinished = RemoveOnDrop {
            contexts: &self.shared.contexts,
            id: Some(ctx.id.clone()),
        };
        if let Err(err) = execution::ensure_kernel(&ctx, &self.shared.env).await {
            return Err(messages::kernel_start_status(
                language,
                &err,
                Status::internal(messages::KERNEL_START_FAILED),
            ));
        }
        unfinished.keep();
        Ok(Response::new(pb::CreateContextResponse {
            context_id: ctx.id.clone(),
        }))
    }

    type ExecuteStream = EventStream;

    async fn execute(
        &self,
        request: Request<pb::ExecuteRequest>,
    ) -> Result<Response<Self::ExecuteStream>, Status> {
        self.check_open()?;
        let req = request.into_inner();
        validate::code(&req.code)?;
        let ctx = self.context_for(req.context_id.as_deref(), req.language.as_deref())?;
        if ctx.restarting.load(Ordering::SeqCst) {
            return Err(Status::aborted(messages::CONTEXT_RESTARTING));
        }
        if !req.envs.is_empty() && ctx.spec.language != Language::Python {
            return Err(Status::invalid_argument(messages::ENVS_NOT_PYTHON));
        }
        validate::envs(&req.envs)?;
        let cell = Cell {
            code: req.code,
            envs: req.envs.into_iter().collect::<BTreeMap<_, _>>(),
            timeout_ms: req.timeout_ms,
        };
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        tokio::spawn(execution::run(
            ctx,
            self.shared.env.clone(),
            cell,
            tx,
            self.shared.phase.subscribe(),
            self.shared.executions.clone(),
            self.shared.cut.clone(),
        ));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    type ReattachStream = EventStream;

    async fn reattach(
        &self,
        request: Request<pb::ReattachRequest>,
    ) -> Result<Response<Self::ReattachStream>, Status> {
        self.check_open()?;
        let req = request.into_inner();
        validate::context_id(&req.context_id)?;
        validate::execution_id(&req.execution_id)?;
        let log = self
            .shared
            .executions
            .get(&req.context_id, &req.execution_id)
            .ok_or_else(|| Status::not_found(messages::EXECUTION_NOT_FOUND))?;
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        log::follow(&log, req.from_seq, tx, self.shared.phase.subscribe())?;
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn list_contexts(
        &self,
        _request: Request<pb::ListContextsRequest>,
    ) -> Result<Response<pb::ListContextsResponse>, Status> {
        Ok(Response::new(pb::ListContextsResponse {
            contexts: self.shared.contexts.list(),
        }))
    }

    async fn destroy_context(
        &self,
        request: Request<pb::DestroyContextRequest>,
    ) -> Result<Response<pb::DestroyContextResponse>, Status> {
        let id = request.into_inner().context_id;
        validate::context_id(&id)?;
        if id == Language::Python.default_context_id() {
            return Err(Status::failed_precondition(messages::DEFAULT_PROTECTED));
        }
        match self.shared.contexts.remove(&id) {
            Some(_) => Ok(Response::new(pb::DestroyContextResponse {})),
            None => Err(Status::not_found(messages::CONTEXT_NOT_FOUND)),
        }
    }

    async fn restart_context(
        &self,
        request: Request<pb::RestartContextRequest>,
    ) -> Result<Response<pb::RestartContextResponse>, Status> {
        self.check_open()?;
        let id = request.into_inner().context_id;
        let ctx = self.existing(&id)?;
        if ctx.restarting.swap(true, Ordering::SeqCst) {
            return Err(Status::aborted(messages::CONTEXT_RESTARTING));
        }
        // The flag falls with this future, however it ends: a restart the
        // client cancels (hyper drops the handler) must not leave the
        // context refusing every later restart.
        let _restarting = ClearOnDrop(&ctx.restarting);
        // Kill first so a running cell ends (KernelRestarted) and frees the lock.
        ctx.kill();
        let started = {
            let mut slot = ctx.kernel.lock().await;
            ctx.start_kernel(&mut slot, &self.shared.env).await
        };
        match started {
            Ok(()) => Ok(Response::new(pb::RestartContextResponse {})),
            Err(_) if ctx.destroyed.load(Ordering::SeqCst) => {
                Err(Status::not_found(messages::CONTEXT_NOT_FOUND))
            }
            Err(err) => Err(messages::kernel_start_status(
                ctx.spec.language,
                &err,
                Status::internal(messages::KERNEL_START_FAILED),
            )),
        }
    }
}

/// The fixed text for a failed kernel start: never the error's own text,
/// which could carry paths or environment values.
fn start_failure_reason(err: &std::io::Error) -> &'static str {
    match err.kind() {
        std::io::ErrorKind::NotFound => messages::KERNEL_NOT_ON_PATH,
        std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::BrokenPipe => {
            messages::KERNEL_EXITED_AT_START
        }
        std::io::ErrorKind::TimedOut => messages::KERNEL_START_TIMED_OUT,
        _ => messages::KERNEL_START_OTHER,
    }
}

/// Removes (and kills) a context being created unless [`RemoveOnDrop::keep`]
/// is called.
struct RemoveOnDrop<'a> {
    contexts: &'a Registry,
    id: Option<String>,
}

impl RemoveOnDrop<'_> {
    /// The context is complete: it stays.
    fn keep(mut self) {
        self.id = None;
    }
}

impl Drop for RemoveOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.contexts.remove(&id);
        }
    }
}

/// Clears a flag when dropped.
struct ClearOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for ClearOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// Kills a kernel started before `/run` that the run's settings make
/// wrong. A start still under way sees `destroyed` when it ends and drops
/// its kernel itself (see `Context::start_kernel`).
fn discard(ctx: &Context) {
    ctx.destroyed.store(true, Ordering::SeqCst);
    ctx.kill();
}
