//! S3-staged transfers (StartImport, StartExport, GetTransfer,
//! WatchTransfer, CancelTransfer): the agent moves a file between the
//! sandbox and an S3 object through presigned URLs the SDK signed, holding
//! no credential itself ([`url`] checks every URL before any I/O).
//!
//! The table ([`Transfers`]) admits at most [`MAX_ACTIVE`] transfers
//! waiting or running, lets [`MAX_MOVING`] move bytes at once, and keeps a
//! finished one for [`KEEP_FINISHED`] (at most [`MAX_FINISHED`]). A
//! failure is a state (FAILED or CANCELLED with a [`failure::Reason`]),
//! never a status: statuses are for what is refused before the transfer
//! exists. No log line or message holds a URL, bucket, key or path.

mod export;
mod failure;
mod import;
mod sweep;
mod url;
mod web;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{Semaphore, mpsc, watch};
use tokio_util::sync::CancellationToken;
use tonic::Status;

pub(crate) use self::url::S3Endpoint;
use crate::pb;

/// Transfers waiting or running, at most.
pub(crate) const MAX_ACTIVE: usize = 16;
/// Transfers moving bytes at once.
pub(crate) const MAX_MOVING: usize = 2;
/// How long a finished transfer stays readable.
pub(crate) const KEEP_FINISHED: Duration = Duration::from_secs(1800);
/// Finished transfers kept, at most (the oldest go first).
pub(crate) const MAX_FINISHED: usize = 64;
/// A silent WatchTransfer stream sends a keepalive this often.
const KEEPALIVE_EVERY: Duration = Duration::from_secs(10);

/// One transfer: its state (watched), its cancellation, when it ended.
#[derive(Debug)]
pub(crate) struct Entry {
    state: watch::Sender<pb::TransferState>,
    cancel: CancellationToken,
    started: Instant,
    finished: Mutex<Option<Instant>>,
}

fn is_terminal(phase: i32) -> bool {
    phase == pb::TransferPhase::Done as i32
        || phase == pb::TransferPhase::Failed as i32
        || phase == pb::TransferPhase::Cancelled as i32
}

impl Entry {
    /// Changes a state that is not terminal yet; `false` once it is (a
    /// cancel came first).
    pub(crate) fn update(&self, f: impl FnOnce(&mut pb::TransferState)) -> bool {
        let mut changed = false;
        self.state.send_if_modified(|s| {
            if is_terminal(s.phase) {
                return false;
            }
            f(s);
            changed = true;
            true
        });
        if changed && is_terminal(self.state.borrow().phase) {
            self.mark_finished();
        }
        changed
    }

    fn mark_finished(&self) {
        let mut finished = self.finished.lock().unwrap_or_else(|p| p.into_inner());
        finished.get_or_insert_with(Instant::now);
    }

    fn elapsed_ms(&self) -> u32 {
        u32::try_from(self.started.elapsed().as_millis()).unwrap_or(u32::MAX)
    }

    /// Ends the transfer FAILED (or CANCELLED) for `reason`.
    pub(crate) fn fail(&self, reason: failure::Reason) {
        let ms = self.elapsed_ms();
        self.update(|s| {
            s.phase = if reason == failure::Reason::Cancelled {
                pb::TransferPhase::Cancelled as i32
            } else {
                pb::TransferPhase::Failed as i32
            };
            s.duration_ms = ms;
            s.error = Some(reason.stream_error());
        });
    }

    /// Ends the transfer DONE.
    pub(crate) fn done(&self, f: impl FnOnce(&mut pb::TransferState)) {
        let ms = self.elapsed_ms();
        self.update(|s| {
            f(s);
            s.phase = pb::TransferPhase::Done as i32;
            s.duration_ms = ms;
        });
    }

    /// Runs a transfer's `work` until it ends, its `deadline` passes
    /// (`Expired`) or a cancel comes (`Cancelled`), and fails the entry with
    /// the reason unless the work itself ended it. `what` names the kind
    /// ("an import", "an export") in the one log line a failure gets.
    pub(crate) async fn drive(
        &self,
        what: &'static str,
        deadline: Option<Instant>,
        work: impl std::future::Future<Output = Result<(), failure::Reason>>,
    ) {
        let cancel = self.cancel.clone();
        let expired = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        let outcome = tokio::select! {
            r = work => r,
            () = expired => Err(failure::Reason::Expired),
            () = cancel.cancelled() => Err(failure::Reason::Cancelled),
        };
        if let Err(reason) = outcome {
            if reason != failure::Reason::Cancelled && reason != failure::Reason::Expired {
                tracing::info!(reason = reason.as_str(), "transfer: {what} failed");
            }
            self.fail(reason);
        }
    }

    fn finished_at(&self) -> Option<Instant> {
        *self.finished.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What the transfer RPCs and their tasks use of the agent: the table, the
/// sandbox they read and write, and the disk reserve an import leaves.
#[derive(Clone, Debug)]
pub(crate) struct Context {
    pub transfers: Arc<Transfers>,
    pub env: crate::sandbox::SandboxEnv,
    pub disk_reserve: Arc<std::sync::atomic::AtomicU64>,
}

/// The agent's transfers.
#[derive(Debug)]
pub(crate) struct Transfers {
    entries: Mutex<HashMap<String, Arc<Entry>>>,
    moving: Arc<Semaphore>,
    endpoint: OnceLock<S3Endpoint>,
    client: OnceLock<Option<web::HttpClient>>,
    /// StartImport takes chunks (set once at start).
    chunked_import: std::sync::atomic::AtomicBool,
}

impl Default for Transfers {
    fn default() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            moving: Arc::new(Semaphore::new(MAX_MOVING)),
            endpoint: OnceLock::new(),
            client: OnceLock::new(),
            chunked_import: std::sync::atomic::AtomicBool::new(true),
        }
    }
}

impl Transfers {
    /// Where this agent's URLs must point: set once at start (the local
    /// backend names its S3 endpoint); AWS's endpoints otherwise.
    pub(crate) fn set_endpoint(&self, endpoint: S3Endpoint) {
        let _ = self.endpoint.set(endpoint);
    }

    /// Waits for one of the `MAX_MOVING` slots of transfers moving bytes
    /// (a closed semaphore, never expected, reads as S3 unavailable).
    pub(crate) async fn moving_slot(
        &self,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, failure::Reason> {
        self.moving
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| failure::Reason::S3Unavailable)
    }

    /// Whether StartImport takes chunks (`AgentConfig::chunked_import`):
    /// without, their fields are ignored, as by an agent built before them.
    pub(crate) fn set_chunked_import(&self, on: bool) {
        self.chunked_import
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn chunked_import(&self) -> bool {
        self.chunked_import
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn endpoint(&self) -> S3Endpoint {
        self.endpoint.get().copied().unwrap_or(S3Endpoint::Aws)
    }

    /// The HTTP client, built on first use; `None` when TLS could not be
    /// set up (every call then fails as S3 unavailable).
    fn client(&self) -> Option<web::HttpClient> {
        self.client
            .get_or_init(|| match web::HttpClient::new() {
                Ok(c) => Some(c),
                Err(_) => {
                    tracing::warn!("transfers: the HTTP client could not be set up");
                    None
                }
            })
            .clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Entry>>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets finished transfers past [`KEEP_FINISHED`], then the oldest
    /// beyond [`MAX_FINISHED`].
    fn prune(map: &mut HashMap<String, Arc<Entry>>) {
        map.retain(|_, e| e.finished_at().is_none_or(|t| t.elapsed() < KEEP_FINISHED));
        let mut finished: Vec<(Instant, String)> = map
            .iter()
            .filter_map(|(id, e)| e.finished_at().map(|t| (t, id.clone())))
            .collect();
        if finished.len() > MAX_FINISHED {
            finished.sort();
            let excess = finished.len() - MAX_FINISHED;
            for (_, id) in finished.into_iter().take(excess) {
                map.remove(&id);
            }
        }
    }

    /// A new transfer, WAITING, or RESOURCE_EXHAUSTED when
    /// [`MAX_ACTIVE`] are waiting or running.
    #[allow(clippy::result_large_err)]
    fn admit(
        &self,
        direction: pb::TransferDirection,
        bytes_total: u64,
    ) -> Result<(String, Arc<Entry>), Status> {
        let mut map = self.lock();
        Self::prune(&mut map);
        let active = map.values().filter(|e| e.finished_at().is_none()).count();
        if active >= MAX_ACTIVE {
            return Err(Status::resource_exhausted("too many transfers"));
        }
        let id = format!("{:032x}", rand::random::<u128>());
        let state = pb::TransferState {
            transfer_id: id.clone(),
            direction: direction as i32,
            phase: pb::TransferPhase::Waiting as i32,
            bytes_total,
            ..Default::default()
        };
        let entry = Arc::new(Entry {
            state: watch::channel(state).0,
            cancel: CancellationToken::new(),
            started: Instant::now(),
            finished: Mutex::new(None),
        });
        map.insert(id.clone(), entry.clone());
        Ok((id, entry))
    }

    /// A transfer by id; NOT_FOUND for an unknown (or forgotten) one,
    /// the empty id included (the SDK's capability probe).
    #[allow(clippy::result_large_err)]
    fn get(&self, id: &str) -> Result<Arc<Entry>, Status> {
        let mut map = self.lock();
        Self::prune(&mut map);
        map.get(id)
            .cloned()
            .ok_or_else(|| Status::not_found("unknown transfer"))
    }

    /// After a transfer ended: keeps the finished ones within bounds.
    fn tidy(&self) {
        Self::prune(&mut self.lock());
    }
}

/// Milliseconds since the epoch, now.
fn now_unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The instant `expires_at_unix_ms` names (`None` for 0: no deadline).
fn deadline(expires_at_unix_ms: i64) -> Option<Instant> {
    if expires_at_unix_ms <= 0 {
        return None;
    }
    let left = u64::try_from(expires_at_unix_ms.saturating_sub(now_unix_ms())).unwrap_or(0);
    Some(Instant::now() + Duration::from_millis(left))
}

/// StartImport: checks everything, then starts the import.
pub(crate) async fn start_import(
    ctx: &Context,
    req: pb::StartImportRequest,
) -> Result<String, Status> {
    // An upload URL handed out (the import waits for its object) can be
    // used again until it expires: its object is swept after that.
    let sweep = match (&req.delete, req.wait_for_object) {
        (Some(delete), true) => url::check_object(req.object.as_ref())
            .and_then(|object| url::check(Some(delete), object, ctx.transfers.endpoint()))
            .ok()
            .zip(deadline(req.expires_at_unix_ms)),
        _ => None,
    };
    let mut req = req;
    if !ctx.transfers.chunked_import() {
        req.chunk_gets.clear();
        req.chunk_deletes.clear();
    }
    let job = import::accept(ctx, req)?;
    let (id, entry) = ctx.transfers.admit(pb::TransferDirection::Import, 0)?;
    let Some(client) = ctx.transfers.client() else {
        entry.fail(failure::Reason::S3Unavailable);
        return Ok(id);
    };
    if let Some((delete, expiry)) = sweep {
        sweep::after_expiry(client.clone(), delete, expiry.into());
    }
    let ctx = ctx.clone();
    tokio::spawn(async move {
        import::run(&ctx, &client, &entry, job).await;
        ctx.transfers.tidy();
    });
    Ok(id)
}

/// StartExport: checks everything, measures the file, starts the export.
pub(crate) async fn start_export(
    ctx: &Context,
    req: pb::StartExportRequest,
) -> Result<String, Status> {
    let job = export::accept(ctx, req).await?;
    let (id, entry) = ctx
        .transfers
        .admit(pb::TransferDirection::Export, job.size())?;
    let Some(client) = ctx.transfers.client() else {
        entry.fail(failure::Reason::S3Unavailable);
        return Ok(id);
    };
    let ctx = ctx.clone();
    tokio::spawn(async move {
        export::run(&ctx, &client, &entry, job).await;
        ctx.transfers.tidy();
    });
    Ok(id)
}

/// GetTransfer.
#[allow(clippy::result_large_err)]
pub(crate) fn get(ctx: &Context, id: &str) -> Result<pb::TransferState, Status> {
    Ok(ctx.transfers.get(id)?.state.borrow().clone())
}

/// CancelTransfer: idempotent; a finished transfer stays as it ended.
#[allow(clippy::result_large_err)]
pub(crate) fn cancel(ctx: &Context, id: &str) -> Result<(), Status> {
    let entry = ctx.transfers.get(id)?;
    entry.fail(failure::Reason::Cancelled);
    entry.cancel.cancel();
    ctx.transfers.tidy();
    Ok(())
}

/// WatchTransfer: the current state first, then one per change (changes
/// in quick succession coalesce to the latest), ending after a terminal
/// phase; keepalives while nothing changes.
#[allow(clippy::result_large_err)]
pub(crate) fn watch(
    ctx: &Context,
    id: &str,
) -> Result<mpsc::Receiver<Result<pb::TransferEvent, Status>>, Status> {
    let entry = ctx.transfers.get(id)?;
    let mut rx = entry.state.subscribe();
    let (tx, out) = mpsc::channel(4);
    tokio::spawn(async move {
        loop {
            let state = rx.borrow_and_update().clone();
            let end = is_terminal(state.phase);
            let event = pb::TransferEvent {
                event: Some(pb::transfer_event::Event::State(state)),
            };
            if tx.send(Ok(event)).await.is_err() || end {
                return;
            }
            loop {
                tokio::select! {
                    changed = rx.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        break;
                    }
                    () = tokio::time::sleep(KEEPALIVE_EVERY) => {
                        let keepalive = pb::TransferEvent {
                            event: Some(pb::transfer_event::Event::Keepalive(pb::KeepAlive {})),
                        };
                        if tx.send(Ok(keepalive)).await.is_err() {
                            return;
                        }
                    }
                    () = tx.closed() => return,
                }
            }
        }
    });
    Ok(out)
}
