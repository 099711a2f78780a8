//! A pool of suspended sandboxes: [`Pool`], made with
//! [`SandboxBuilder::pool`] or [`Client::pool`].
//!
//! A filler task keeps `size` sandboxes made like the builder's, warmed
//! (kernel settled, warm-up steps run) and suspended; [`Pool::take`]
//! claims the parked one that expires first, resumes it and connects,
//! which is much faster than a create. With no parked slot, `take` creates
//! a sandbox the normal way: the pool is a speed-up, never a limit.
//!
//! Claims are atomic in the pool's [`PoolStore`]: a slot is removed from
//! the store before anything else is done with it, so two takers (tasks,
//! processes sharing a pool file, hosts sharing a DynamoDB table) never
//! get the same sandbox. Warming slots carry their owner and a lease;
//! another pool process reaps them only after the lease, when their owner
//! must have died.

mod config;
#[cfg(feature = "dynamodb")]
mod dynamodb_store;
mod file_store;
mod fill;
pub(crate) mod slot;
pub(crate) mod store;
mod sweep;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;

pub use config::{POOL_DEFAULT_TIMEOUT, PoolConfig, WarmupStep};
pub use slot::SlotState;
pub use store::PoolStore;

use crate::error::{ErrorKind, SandboxError};
use crate::sandbox::client::Client;
use crate::sandbox::{Sandbox, SandboxBuilder};
use slot::StoredSlot;
use store::{RemoveIf, SlotStore};

/// How often a waiting `take` looks at a shared store again (another
/// process may park a slot without this process being told).
const SHARED_POLL: Duration = Duration::from_millis(200);
/// How long after a take its refill starts: the taker's first calls then
/// do not share the machine with the refill's create and warm-up (on the
/// local backend, an agent and an interpreter starting), at the cost of a
/// refill that much later (a create takes seconds on AWS).
const REFILL_DELAY: Duration = Duration::from_millis(50);
/// How long `close` waits for warm-ups in flight to end.
const CLOSE_WAIT: Duration = Duration::from_secs(30);

/// Where a pool is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    New,
    Open,
    Closed,
}

/// The pool's counters, as [`PoolStats`] reports them.
#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    launched: AtomicU64,
    recycled: AtomicU64,
    lost: AtomicU64,
    failed: AtomicU64,
}

/// What the pool knows once started.
#[derive(Debug)]
struct Started {
    client: Client,
    image_arn: String,
}

struct PoolInner {
    builder: SandboxBuilder,
    config: PoolConfig,
    store: Arc<dyn SlotStore>,
    /// Who this pool is in a shared store: host, pid and a random part.
    owner: String,
    phase: Mutex<Phase>,
    started: tokio::sync::OnceCell<Started>,
    counters: Counters,
    /// Warm-ups at once.
    fill_permits: Arc<Semaphore>,
    /// Wakes the filler (a slot was taken, a warm-up ended, close).
    wake_filler: Arc<Notify>,
    /// Wakes waiting takers (a slot was parked, close).
    slot_parked: Notify,
    /// The filler task, stopped by close or drop.
    filler: Mutex<Option<JoinHandle<()>>>,
    /// Warm-ups in flight, so that close can wait for them.
    warmups: Mutex<tokio::task::JoinSet<()>>,
    /// The pause after failed warm-ups, and until when it lasts.
    backoff: Mutex<fill::FillBackoff>,
    closing: AtomicBool,
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        if let Some(filler) = self.filler.lock().unwrap_or_else(|p| p.into_inner()).take() {
            filler.abort();
        }
    }
}

/// A pool of suspended sandboxes. A cheap handle: clones share the pool;
/// when the last one is dropped the filler stops (parked sandboxes stay,
/// and end by their idle policy and timeout; [`Pool::close`] terminates
/// them).
#[derive(Clone)]
pub struct Pool {
    inner: Arc<PoolInner>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("size", &self.inner.config.size)
            .field("store", &self.inner.config.store)
            .field(
                "phase",
                &*self.inner.phase.lock().unwrap_or_else(|p| p.into_inner()),
            )
            .finish_non_exhaustive()
    }
}

/// One slot as [`PoolStats`] shows it (never its token).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SlotStats {
    /// The sandbox's id.
    pub sandbox_id: String,
    /// Warming or ready.
    pub state: SlotState,
    /// When its MicroVM started.
    pub started_at: SystemTime,
    /// When its MicroVM reaches its maximum duration.
    pub expires_at: SystemTime,
    /// When it was parked (ready slots).
    pub parked_at: Option<SystemTime>,
}

/// What a pool did and holds.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolStats {
    /// The size it keeps.
    pub size: u32,
    /// Slots parked, in the store (every process sharing it).
    pub ready: u32,
    /// Slots warming, in the store (every process sharing it).
    pub warming: u32,
    /// Takes by this process: hits + misses.
    pub takes: u64,
    /// Takes served by a parked slot.
    pub hits: u64,
    /// Takes served by a normal create.
    pub misses: u64,
    /// Sandboxes this process's filler launched.
    pub launched: u64,
    /// Slots terminated because too little of their lifetime was left.
    pub recycled: u64,
    /// Slots found gone (terminated, or not resumable).
    pub lost: u64,
    /// Warm-ups and resumes that failed.
    pub failed: u64,
    /// The slots of the store, sorted by id.
    pub slots: Vec<SlotStats>,
}

impl SandboxBuilder {
    /// A pool of sandboxes made like this builder's ones (template,
    /// envs, metadata, ports, role, access token), with `config`'s
    /// lifetimes; [`Pool::start`] starts filling it.
    ///
    /// # Errors
    /// `InvalidArgument` naming the argument (a rule of [`PoolConfig`], a
    /// builder with `max_lifetime`, `on_timeout`, `keep_on_failure` or
    /// `no_idle_policy`) and
    /// every check of [`SandboxBuilder::create`], before any I/O.
    pub fn pool(self, config: PoolConfig) -> Result<Pool, SandboxError> {
        config.check()?;
        let builder = self.pooled(crate::sandbox::Pooled {
            timeout: config.timeout,
            max_idle: config.max_idle,
            ready_timeout: config.ready_timeout,
        })?;
        let owner = format!(
            "{}:{}:{:08x}",
            hostname(),
            std::process::id(),
            rand::random::<u32>()
        );
        Ok(Pool {
            inner: Arc::new(PoolInner {
                builder,
                store: config.store.inner.clone(),
                fill_permits: Arc::new(Semaphore::new(config.fill_concurrency as usize)),
                backoff: Mutex::new(fill::FillBackoff::new(config.retry_base)),
                config,
                owner,
                phase: Mutex::new(Phase::New),
                started: tokio::sync::OnceCell::new(),
                counters: Counters::default(),
                wake_filler: Arc::new(Notify::new()),
                slot_parked: Notify::new(),
                filler: Mutex::new(None),
                warmups: Mutex::new(tokio::task::JoinSet::new()),
                closing: AtomicBool::new(false),
            }),
        })
    }
}

impl Client {
    /// A pool of this client's default sandboxes (see
    /// [`SandboxBuilder::pool`]; `client.sandbox().template(..).pool(..)`
    /// for others).
    ///
    /// # Errors
    /// As [`SandboxBuilder::pool`].
    pub fn pool(&self, config: PoolConfig) -> Result<Pool, SandboxError> {
        self.sandbox().pool(config)
    }
}

/// This host's name, for the owner of warming slots.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned())
}

impl Pool {
    fn phase(&self) -> Phase {
        *self.inner.phase.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the pool: resolves its image, reaps what a crashed process
    /// left warming (after its lease), sweeps the parked slots, and starts
    /// the filler. Idempotent.
    ///
    /// # Errors
    /// `PoolClosed` after [`Pool::close`]; the client's and the image's
    /// resolution failures (`Authentication`, `SandboxNotFound`, ...);
    /// the store's (`InvalidArgument` `store` for an unusable pool file).
    pub async fn start(&self) -> Result<(), SandboxError> {
        boxed!(Result<(), SandboxError>, {
            if self.phase() == Phase::Closed {
                return Err(SandboxError::pool_closed());
            }
            let inner = &self.inner;
            inner
                .started
                .get_or_try_init(|| async {
                    let client = inner.builder.resolved_client().await?;
                    let image_arn = client.image_arn(inner.builder.template_name()).await?;
                    Ok::<_, SandboxError>(Started { client, image_arn })
                })
                .await?;
            // Read the store once before the filler: an unusable file fails here.
            inner.store.list(&inner.started()?.image_arn).await?;
            let mut phase = inner.phase.lock().unwrap_or_else(|p| p.into_inner());
            match *phase {
                Phase::Closed => return Err(SandboxError::pool_closed()),
                Phase::Open => return Ok(()),
                Phase::New => *phase = Phase::Open,
            }
            drop(phase);
            if inner.config.filler {
                let filler = tokio::spawn(fill::run_filler(Arc::downgrade(&self.inner)));
                *inner.filler.lock().unwrap_or_else(|p| p.into_inner()) = Some(filler);
            }
            Ok(())
        })
    }

    /// A sandbox: a parked one resumed and connected, or, when none is
    /// parked (or the one claimed cannot be resumed), a new one made the
    /// normal way.
    ///
    /// # Errors
    /// `PoolClosed` before [`Pool::start`] or after [`Pool::close`]; the
    /// errors of [`SandboxBuilder::create`] when no parked sandbox served
    /// the take (a fill's `Capacity` or `RateLimit` never reaches a
    /// taker); the store's.
    pub async fn take(&self) -> Result<Sandbox, SandboxError> {
        self.take_within(Duration::ZERO).await
    }

    /// [`Pool::take`], waiting up to `wait` for a slot to be parked when
    /// none is, before creating one.
    ///
    /// # Errors
    /// As [`Pool::take`].
    pub async fn take_within(&self, wait: Duration) -> Result<Sandbox, SandboxError> {
        boxed!(Result<Sandbox, SandboxError>, {
            match self.phase() {
                Phase::New => return Err(SandboxError::pool_not_started()),
                Phase::Closed => return Err(SandboxError::pool_closed()),
                Phase::Open => {}
            }
            let inner = &self.inner;
            let started = inner.started()?;
            // The builder's secrets are read before a slot is claimed: a
            // missing one must not use up (and terminate) parked sandboxes.
            inner.builder.preflight().await?;
            let deadline = tokio::time::Instant::now() + wait;
            loop {
                let parked = inner.slot_parked.notified();
                let min_expiry = SystemTime::now() + inner.config.min_remaining;
                if let Some(slot) = inner.store.claim(&started.image_arn, min_expiry).await? {
                    // The refill starts a little after the take is served (or
                    // given up): REFILL_DELAY.
                    let refill = WakeOnDrop(&inner.wake_filler);
                    let taken = inner.resume_slot(started, slot).await;
                    drop(refill);
                    if let Some(sandbox) = taken {
                        inner.counters.hits.fetch_add(1, Ordering::Relaxed);
                        return Ok(sandbox);
                    }
                    break;
                }
                if self.phase() != Phase::Open {
                    return Err(SandboxError::pool_closed());
                }
                let now = tokio::time::Instant::now();
                if now >= deadline {
                    break;
                }
                let pause = if inner.store.kind() == "memory" {
                    deadline - now
                } else {
                    SHARED_POLL.min(deadline - now)
                };
                let _ = tokio::time::timeout(pause, parked).await;
            }
            inner.counters.misses.fetch_add(1, Ordering::Relaxed);
            inner.builder.clone().create().await
        })
    }

    /// Stops the pool: the filler stops, warm-ups in flight terminate their
    /// sandbox instead of parking it (waited for up to 30 s); with `drain`,
    /// every parked sandbox of the store is terminated too. Idempotent;
    /// later takes get `PoolClosed`.
    ///
    /// # Errors
    /// `InvalidArgument` (`drain`) for `drain = false` on a store that
    /// does not outlive the process (its slots would be lost); the
    /// store's failures.
    pub async fn close(&self, drain: bool) -> Result<(), SandboxError> {
        boxed!(Result<(), SandboxError>, {
            if !drain && !self.inner.store.persistent() {
                return Err(SandboxError::invalid_argument(
                    "drain",
                    "a pool whose slots live in memory must drain when it closes, or its parked sandboxes are lost; close with drain, or use a file store",
                ));
            }
            let inner = &self.inner;
            *inner.phase.lock().unwrap_or_else(|p| p.into_inner()) = Phase::Closed;
            inner.closing.store(true, Ordering::SeqCst);
            inner.slot_parked.notify_waiters();
            inner.wake_filler.notify_one();
            let filler = inner.filler.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(filler) = filler {
                filler.abort();
                let _ = filler.await;
            }
            let mut warmups =
                std::mem::take(&mut *inner.warmups.lock().unwrap_or_else(|p| p.into_inner()));
            let waited = tokio::time::timeout(CLOSE_WAIT, async {
                while warmups.join_next().await.is_some() {}
            })
            .await;
            if waited.is_err() {
                // Cancelled mid-way: what they recorded is terminated below.
                warmups.shutdown().await;
            }
            let Some(started) = inner.started.get() else {
                return Ok(());
            };
            for slot in inner.store.list(&started.image_arn).await? {
                let id = &slot.record.sandbox_id;
                let mine = RemoveIf::WarmingOwnedBy(inner.owner.clone());
                let removed = if drain && slot.record.state == SlotState::Ready {
                    inner.store.remove_if(id, RemoveIf::Ready).await?
                } else if slot.owner.as_deref() == Some(inner.owner.as_str()) {
                    inner.store.remove_if(id, mine).await?
                } else {
                    None
                };
                if removed.is_some() {
                    inner.terminate(started, id).await;
                }
            }
            Ok(())
        })
    }

    /// The pool's counters and the slots of its store (never a token).
    ///
    /// # Errors
    /// The store's failures.
    pub async fn stats(&self) -> Result<PoolStats, SandboxError> {
        boxed!(Result<PoolStats, SandboxError>, {
            let inner = &self.inner;
            let slots = match inner.started.get() {
                Some(started) => inner.store.list(&started.image_arn).await?,
                None => Vec::new(),
            };
            let c = &inner.counters;
            let hits = c.hits.load(Ordering::Relaxed);
            let misses = c.misses.load(Ordering::Relaxed);
            let count = |state| {
                u32::try_from(slots.iter().filter(|s| s.record.state == state).count())
                    .unwrap_or(u32::MAX)
            };
            let mut shown: Vec<SlotStats> = slots
                .iter()
                .map(|s| SlotStats {
                    sandbox_id: s.record.sandbox_id.clone(),
                    state: s.record.state,
                    started_at: s.record.started_at,
                    expires_at: s.record.expires_at(),
                    parked_at: s.record.parked_at,
                })
                .collect();
            shown.sort_by(|a, b| a.sandbox_id.cmp(&b.sandbox_id));
            Ok(PoolStats {
                size: inner.config.size,
                ready: count(SlotState::Ready),
                warming: count(SlotState::Warming),
                takes: hits + misses,
                hits,
                misses,
                launched: c.launched.load(Ordering::Relaxed),
                recycled: c.recycled.load(Ordering::Relaxed),
                lost: c.lost.load(Ordering::Relaxed),
                failed: c.failed.load(Ordering::Relaxed),
                slots: shown,
            })
        })
    }
}

impl PoolInner {
    fn started(&self) -> Result<&Started, SandboxError> {
        self.started
            .get()
            .ok_or_else(SandboxError::pool_not_started)
    }

    fn is_closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }

    /// Terminates `id`, whatever state it is in (a failure is left to the
    /// MicroVM's idle policy and timeout).
    async fn terminate(&self, started: &Started, id: &str) {
        let control = started.client.backend().control.clone();
        let _ = crate::sandbox::terminate_by_id(control.as_ref(), id).await;
    }

    /// A claimed slot resumed and connected; `None` (terminated, counted
    /// lost or failed) when it cannot be. Its ResumeMicrovm runs beside
    /// the proxy token's minting and the GetMicrovm that finds its endpoint
    /// (docs/performance.md, "Pool").
    async fn resume_slot(&self, started: &Started, slot: StoredSlot) -> Option<Sandbox> {
        let record = slot.record;
        let id = record.sandbox_id.as_str();
        let control = started.client.backend().control.clone();
        let resume = crate::sandbox::request_resume(control.as_ref(), id);
        let builder = self.builder.clone();
        let token = record.access_token.clone();
        let mut resume_failed = false;
        let taken = builder
            .connect_parked(id, token, resume, &mut resume_failed)
            .await;
        let err = match taken {
            Ok(sandbox) => return Some(sandbox),
            Err(err) => err,
        };
        let lost = resume_failed
            && matches!(
                err.kind(),
                ErrorKind::SandboxNotFound | ErrorKind::SandboxState
            );
        let counter = if lost {
            &self.counters.lost
        } else {
            &self.counters.failed
        };
        if resume_failed {
            tracing::debug!(target: "rayito::pool", sandbox_id = %id, kind = %err.kind(), "a parked sandbox could not be resumed");
        } else {
            tracing::debug!(target: "rayito::pool", sandbox_id = %id, kind = %err.kind(), "a resumed sandbox could not be connected");
        }
        // Counted after the terminate, as the sweep does.
        self.terminate(started, id).await;
        counter.fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// Wakes the filler [`REFILL_DELAY`] after it is dropped: a take's refill,
/// even when the take is cancelled after its claim.
struct WakeOnDrop<'a>(&'a Arc<Notify>);

impl Drop for WakeOnDrop<'_> {
    fn drop(&mut self) {
        let wake = self.0.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    tokio::time::sleep(REFILL_DELAY).await;
                    wake.notify_one();
                });
            }
            // No runtime to wait on (dropped while it shuts down): at once.
            Err(_) => wake.notify_one(),
        }
    }
}

/// What a feature's take (the gateways') reads of the pool.
impl Pool {
    /// The builder the pool's sandboxes are made with.
    #[cfg_attr(not(feature = "secrets"), allow(dead_code))]
    pub(crate) fn builder(&self) -> &SandboxBuilder {
        &self.inner.builder
    }
}

/// A weak handle for the filler: the pool ends when its last [`Pool`]
/// goes, not when its filler does.
type WeakInner = Weak<PoolInner>;
