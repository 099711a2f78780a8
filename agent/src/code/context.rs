//! Code contexts: each is one kernel plus what it was created with, and a
//! lock held for the whole of a cell so two cells never run (or mix output)
//! in the same context. The registry enforces the 8-context limit.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use tonic::Status;

use super::kernel::{Kernel, KernelSpec, signal_group};
use super::messages;
use super::validate::Language;
use crate::pb;
use crate::sandbox::{GUEST_HOME, SandboxEnv};

/// At most this many contexts live at once (the default one included).
pub const MAX_CONTEXTS: usize = 8;

/// One context.
#[derive(Debug)]
pub(crate) struct Context {
    pub(crate) id: String,
    pub(crate) spec: KernelSpec,
    /// The kernel; `None` until started or after it died. Held for a whole cell.
    pub(crate) kernel: tokio::sync::Mutex<Option<Kernel>>,
    /// The running kernel's process group, readable without the lock (0 = none).
    pgid: AtomicI32,
    /// A RestartContext is in progress.
    pub(crate) restarting: AtomicBool,
    /// DestroyContext (or shutdown) removed it.
    pub(crate) destroyed: AtomicBool,
    live: AtomicBool,
    /// A kernel is being started (an Execute sent now waits for it); a watch
    /// so Health can wait for the start to end instead of polling.
    starting: tokio::sync::watch::Sender<bool>,
}

impl Context {
    fn new(id: String, spec: KernelSpec) -> Arc<Self> {
        Arc::new(Self {
            id,
            spec,
            kernel: tokio::sync::Mutex::new(None),
            pgid: AtomicI32::new(0),
            restarting: AtomicBool::new(false),
            destroyed: AtomicBool::new(false),
            live: AtomicBool::new(false),
            starting: tokio::sync::watch::Sender::new(false),
        })
    }

    /// Starts a fresh kernel in `slot` (the caller holds the lock), replacing
    /// (and killing) any previous one.
    pub(crate) async fn start_kernel(
        &self,
        slot: &mut Option<Kernel>,
        env: &SandboxEnv,
    ) -> io::Result<()> {
        self.clear(slot);
        self.starting.send_replace(true);
        let started = Kernel::start(env, &self.spec).await;
        let kernel = match started {
            Ok(kernel) => kernel,
            Err(err) => {
                self.starting.send_replace(false);
                return Err(err);
            }
        };
        self.pgid.store(kernel.pgid(), Ordering::SeqCst);
        // Live before the start ends, so a waiter woken by the end sees it.
        self.live.store(true, Ordering::SeqCst);
        self.starting.send_replace(false);
        if self.destroyed.load(Ordering::SeqCst) {
            // Destroyed while starting: do not leave a kernel behind.
            drop(kernel);
            self.clear(slot);
            return Err(io::Error::other("context destroyed"));
        }
        *slot = Some(kernel);
        Ok(())
    }

    /// Drops the kernel in `slot` (killing its process group).
    pub(crate) fn clear(&self, slot: &mut Option<Kernel>) {
        *slot = None;
        self.live.store(false, Ordering::SeqCst);
        self.pgid.store(0, Ordering::SeqCst);
    }

    /// Kills the kernel's process group without taking the lock (a running
    /// cell then sees the kernel die and reports why).
    pub(crate) fn kill(&self) {
        self.live.store(false, Ordering::SeqCst);
        signal_group(
            self.pgid.load(Ordering::SeqCst),
            rustix::process::Signal::KILL,
        );
    }

    /// Whether a kernel is up and has answered (its driver said `ready`).
    pub(crate) fn is_live(&self) -> bool {
        self.live.load(Ordering::SeqCst)
    }

    /// Waits, at most `bound`, for a start under way to end; returns at once
    /// when none is.
    pub(crate) async fn start_settled(&self, bound: std::time::Duration) {
        let mut starting = self.starting.subscribe();
        let _ = tokio::time::timeout(bound, starting.wait_for(|s| !*s)).await;
    }

    /// Marks a start as under way before the task that performs it runs, so
    /// Health sees the kernel as coming up from the moment it was asked for.
    pub(crate) fn mark_starting(&self) {
        self.starting.send_replace(true);
    }

    /// Undoes [`Context::mark_starting`] when no start was needed after all.
    pub(crate) fn unmark_starting(&self) {
        self.starting.send_replace(false);
    }

    pub(crate) fn info(&self) -> pb::ContextInfo {
        pb::ContextInfo {
            context_id: self.id.clone(),
            language: self.spec.language.as_str().to_owned(),
            cwd: self.spec.cwd.clone(),
        }
    }
}

/// Every context of one agent.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    contexts: Mutex<BTreeMap<String, Arc<Context>>>,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<Context>>> {
        self.contexts
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    pub(crate) fn get(&self, id: &str) -> Option<Arc<Context>> {
        self.lock().get(id).cloned()
    }

    /// The default context of `language`, created (without a kernel yet) on
    /// first use. Python's `default` never counts against the limit.
    #[allow(clippy::result_large_err)]
    pub(crate) fn default_for(&self, language: Language) -> Result<Arc<Context>, Status> {
        let id = language.default_context_id();
        let mut map = self.lock();
        if let Some(ctx) = map.get(id) {
            return Ok(ctx.clone());
        }
        if language != Language::Python && map.len() >= MAX_CONTEXTS {
            return Err(Status::resource_exhausted(messages::TOO_MANY_CONTEXTS));
        }
        let spec = KernelSpec {
            language,
            cwd: GUEST_HOME.to_owned(),
            envs: BTreeMap::new(),
        };
        let ctx = Context::new(id.to_owned(), spec);
        map.insert(id.to_owned(), ctx.clone());
        Ok(ctx)
    }

    /// The default Python context, outside the registry: what a kernel
    /// started before `/run` lives in until [`Registry::adopt`].
    pub(crate) fn detached_default() -> Arc<Context> {
        let spec = KernelSpec {
            language: Language::Python,
            cwd: GUEST_HOME.to_owned(),
            envs: BTreeMap::new(),
        };
        Context::new(Language::Python.default_context_id().to_owned(), spec)
    }

    /// Makes a detached context the one of its id; `false` (and nothing
    /// changed) when that id is already taken.
    pub(crate) fn adopt(&self, ctx: Arc<Context>) -> bool {
        let mut map = self.lock();
        if map.contains_key(&ctx.id) {
            return false;
        }
        map.insert(ctx.id.clone(), ctx);
        true
    }

    /// A new context `ctx-<12 hex>` (without a kernel yet).
    #[allow(clippy::result_large_err)]
    pub(crate) fn create(&self, spec: KernelSpec) -> Result<Arc<Context>, Status> {
        let mut map = self.lock();
        if map.len() >= MAX_CONTEXTS {
            return Err(Status::resource_exhausted(messages::TOO_MANY_CONTEXTS));
        }
        let id = loop {
            let id = format!("ctx-{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff);
            if !map.contains_key(&id) {
                break id;
            }
        };
        let ctx = Context::new(id.clone(), spec);
        map.insert(id, ctx.clone());
        Ok(ctx)
    }

    /// Removes a context, marking it destroyed and killing its kernel.
    pub(crate) fn remove(&self, id: &str) -> Option<Arc<Context>> {
        let ctx = self.lock().remove(id)?;
        ctx.destroyed.store(true, Ordering::SeqCst);
        ctx.kill();
        Some(ctx)
    }

    pub(crate) fn list(&self) -> Vec<pb::ContextInfo> {
        self.lock().values().map(|ctx| ctx.info()).collect()
    }

    /// Removes and kills every context.
    pub(crate) fn destroy_all(&self) {
        let all = std::mem::take(&mut *self.lock());
        for ctx in all.values() {
            ctx.destroyed.store(true, Ordering::SeqCst);
            ctx.kill();
        }
    }
}
