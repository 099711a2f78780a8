//! Where a pool keeps its slots, and the atomic operations every store
//! offers: a warming slot is recorded only if absent, marked ready only by
//! its owner, and claimed by removing it, so two takers (threads,
//! processes or hosts, as far as the store reaches) never get one slot.

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::file_store::FileStore;
use super::slot::{SlotRecord, SlotState, StoredSlot};
use crate::error::SandboxError;
#[cfg(feature = "dynamodb")]
use crate::sandbox::AwsOptions;

type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Where a pool keeps its slots.
///
/// - [`PoolStore::memory`] (the default): this process only; a slot is
///   lost with the process (its MicroVM ends by its idle policy and
///   timeout).
/// - [`PoolStore::file`]: the processes of one host share a pool file,
///   every change under an exclusive lock, written whole and synced.
/// - `PoolStore::dynamodb` (cargo feature `dynamodb`): the processes of
///   many hosts share a DynamoDB table, every change one conditional write.
#[derive(Clone)]
pub struct PoolStore {
    pub(crate) inner: Arc<dyn SlotStore>,
}

impl fmt::Debug for PoolStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PoolStore")
            .field(&self.inner.kind())
            .finish()
    }
}

impl Default for PoolStore {
    fn default() -> Self {
        Self::memory()
    }
}

impl PoolStore {
    /// Slots in this process's memory.
    pub fn memory() -> Self {
        Self {
            inner: Arc::new(MemoryStore::default()),
        }
    }

    /// Slots in the JSON file `path` (schema `rayito.pool/1`), shared by
    /// every process of this host that names it: each change takes an
    /// exclusive lock on `<path>.lock`, rewrites the file through a synced
    /// temporary file and a rename, and syncs the directory. The file is
    /// created with mode 0600 (it holds the slots' access tokens); a
    /// symbolic link at `path` is refused. Never share it with a process
    /// of the reference SDK 0.17.1, which writes without the lock.
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self {
            inner: Arc::new(FileStore::new(path.into())),
        }
    }

    /// Slots in the DynamoDB table `table`, shared by every process on
    /// every host that names the same table and `pool_name` (its
    /// partition: `pk = pool#<pool_name>`). AWS is configured from the
    /// environment and profiles, as [`AwsOptions::new`]; see
    /// [`PoolStore::dynamodb_with`]. Nothing is called before the pool
    /// starts; the table must exist ([`PoolStore::create_dynamodb_table`]).
    /// docs/pool.md has the table layout and the IAM policy.
    #[cfg(feature = "dynamodb")]
    pub fn dynamodb(table: impl Into<String>, pool_name: impl Into<String>) -> Self {
        Self::dynamodb_with(table, pool_name, AwsOptions::new())
    }

    /// [`PoolStore::dynamodb`] with the AWS configuration of `aws`
    /// (region, profile, credentials, timeouts; its
    /// [`AwsOptions::endpoint_url`] is DynamoDB's endpoint, e.g. a
    /// DynamoDB-compatible server). The table and pool names are checked
    /// when the pool starts (`InvalidArgument` `table` or `pool_name`,
    /// before any call).
    #[cfg(feature = "dynamodb")]
    pub fn dynamodb_with(
        table: impl Into<String>,
        pool_name: impl Into<String>,
        aws: AwsOptions,
    ) -> Self {
        Self {
            inner: Arc::new(super::dynamodb_store::PoolTable::new(
                table.into(),
                pool_name.into(),
                aws.settings().clone(),
            )),
        }
    }

    /// Creates the DynamoDB table `table` for pool stores: string keys
    /// `pk` (partition) and `sk` (sort), on-demand billing, and time to
    /// live on the attribute `ttl`. Waits until the table is active (up to
    /// 120 s) to turn the time to live on. Answers `false`, changing
    /// nothing, when a table of that name exists already. Needs
    /// `dynamodb:CreateTable`, `DescribeTable` and `UpdateTimeToLive`.
    ///
    /// # Errors
    /// `InvalidArgument` (`table`) for a name DynamoDB refuses, before any
    /// call, or a table that does not become active in time;
    /// `Authentication` when AWS has no credentials or region, or refuses
    /// them; the mapped AWS failures of the calls (their messages never
    /// repeat AWS's text).
    #[cfg(feature = "dynamodb")]
    pub async fn create_dynamodb_table(
        table: impl Into<String>,
        aws: AwsOptions,
    ) -> Result<bool, SandboxError> {
        let table = table.into();
        boxed!(Result<bool, SandboxError>, {
            super::dynamodb_store::create_table(&table, aws.settings()).await
        })
    }

    /// Whether the slots outlive this process.
    pub fn is_persistent(&self) -> bool {
        self.inner.persistent()
    }
}

/// Which slots a removal applies to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RemoveIf {
    /// A ready slot, whatever its expiry.
    Ready,
    /// A ready slot that expires before the time.
    ReadyExpiringBefore(SystemTime),
    /// A warming slot of this owner.
    WarmingOwnedBy(String),
    /// A warming slot whose lease ended before the time (its owner is
    /// presumed dead).
    WarmingLeaseEndedBefore(SystemTime),
}

/// One atomic operation on a store.
#[derive(Clone, Debug)]
pub(crate) enum Op {
    /// Adds a warming slot unless its id is there; answers whether it did.
    RecordWarming(StoredSlot),
    /// Turns the owner's warming slot into `record` (ready); answers
    /// whether it was still there (false: it was reaped).
    MarkReady { record: SlotRecord, owner: String },
    /// Removes and returns the ready slot of `image` that expires first
    /// among those expiring at or after `min_expiry` (ties: lowest id).
    Claim {
        image: String,
        min_expiry: SystemTime,
    },
    /// Removes slot `id` if it matches; returns it.
    RemoveIf { id: String, condition: RemoveIf },
    /// Every slot of `image`.
    List { image: String },
}

/// What an [`Op`] answers.
#[derive(Debug)]
pub(crate) enum OpResult {
    Done(bool),
    Slot(Option<Box<StoredSlot>>),
    Slots(Vec<StoredSlot>),
}

impl Op {
    /// Applies this operation to `slots`, the whole content of a store.
    /// Returns the answer and whether `slots` changed.
    pub(crate) fn apply(self, slots: &mut Vec<StoredSlot>) -> (OpResult, bool) {
        match self {
            Op::RecordWarming(slot) => {
                if slots
                    .iter()
                    .any(|s| s.record.sandbox_id == slot.record.sandbox_id)
                {
                    (OpResult::Done(false), false)
                } else {
                    slots.push(slot);
                    (OpResult::Done(true), true)
                }
            }
            Op::MarkReady { record, owner } => {
                let found = slots.iter_mut().find(|s| {
                    s.record.sandbox_id == record.sandbox_id
                        && s.record.state == SlotState::Warming
                        && s.owner.as_deref() == Some(owner.as_str())
                });
                match found {
                    Some(slot) => {
                        *slot = StoredSlot {
                            record,
                            owner: None,
                            lease_until: None,
                        };
                        (OpResult::Done(true), true)
                    }
                    None => (OpResult::Done(false), false),
                }
            }
            Op::Claim { image, min_expiry } => {
                let best = slots
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| {
                        s.record.state == SlotState::Ready
                            && s.record.template == image
                            && s.record.expires_at() >= min_expiry
                    })
                    .min_by(|(_, a), (_, b)| {
                        (a.record.expires_at(), &a.record.sandbox_id)
                            .cmp(&(b.record.expires_at(), &b.record.sandbox_id))
                    })
                    .map(|(i, _)| i);
                match best {
                    Some(i) => (OpResult::Slot(Some(Box::new(slots.remove(i)))), true),
                    None => (OpResult::Slot(None), false),
                }
            }
            Op::RemoveIf { id, condition } => {
                let found = slots.iter().position(|s| {
                    s.record.sandbox_id == id
                        && match &condition {
                            RemoveIf::Ready => s.record.state == SlotState::Ready,
                            RemoveIf::ReadyExpiringBefore(t) => {
                                s.record.state == SlotState::Ready && s.record.expires_at() < *t
                            }
                            RemoveIf::WarmingOwnedBy(owner) => {
                                s.record.state == SlotState::Warming
                                    && s.owner.as_deref() == Some(owner.as_str())
                            }
                            RemoveIf::WarmingLeaseEndedBefore(t) => {
                                s.record.state == SlotState::Warming
                                    && s.lease_until.is_none_or(|lease| lease < *t)
                            }
                        }
                });
                match found {
                    Some(i) => (OpResult::Slot(Some(Box::new(slots.remove(i)))), true),
                    None => (OpResult::Slot(None), false),
                }
            }
            Op::List { image } => (
                OpResult::Slots(
                    slots
                        .iter()
                        .filter(|s| s.record.template == image)
                        .cloned()
                        .collect(),
                ),
                false,
            ),
        }
    }
}

/// A store: applies one [`Op`] atomically.
pub(crate) trait SlotStore: Send + Sync {
    /// `memory`, `file`, ...: for Debug.
    fn kind(&self) -> &'static str;
    /// Whether the slots outlive this process (every store but the
    /// in-memory one).
    fn persistent(&self) -> bool {
        true
    }
    /// Applies `op` atomically.
    fn apply(&self, op: Op) -> BoxFuture<'_, Result<OpResult, SandboxError>>;
}

/// The typed calls over [`SlotStore::apply`].
impl dyn SlotStore + '_ {
    pub(crate) async fn record_warming(&self, slot: StoredSlot) -> Result<bool, SandboxError> {
        done(self.apply(Op::RecordWarming(slot)).await?)
    }

    pub(crate) async fn mark_ready(
        &self,
        record: SlotRecord,
        owner: &str,
    ) -> Result<bool, SandboxError> {
        done(
            self.apply(Op::MarkReady {
                record,
                owner: owner.to_owned(),
            })
            .await?,
        )
    }

    pub(crate) async fn claim(
        &self,
        image: &str,
        min_expiry: SystemTime,
    ) -> Result<Option<StoredSlot>, SandboxError> {
        slot(
            self.apply(Op::Claim {
                image: image.to_owned(),
                min_expiry,
            })
            .await?,
        )
    }

    pub(crate) async fn remove_if(
        &self,
        id: &str,
        condition: RemoveIf,
    ) -> Result<Option<StoredSlot>, SandboxError> {
        slot(
            self.apply(Op::RemoveIf {
                id: id.to_owned(),
                condition,
            })
            .await?,
        )
    }

    pub(crate) async fn list(&self, image: &str) -> Result<Vec<StoredSlot>, SandboxError> {
        match self
            .apply(Op::List {
                image: image.to_owned(),
            })
            .await?
        {
            OpResult::Slots(slots) => Ok(slots),
            _ => Err(mismatch()),
        }
    }
}

fn mismatch() -> SandboxError {
    SandboxError::internal("pool store", "an operation answered another kind of result")
}

fn done(result: OpResult) -> Result<bool, SandboxError> {
    match result {
        OpResult::Done(done) => Ok(done),
        _ => Err(mismatch()),
    }
}

fn slot(result: OpResult) -> Result<Option<StoredSlot>, SandboxError> {
    match result {
        OpResult::Slot(slot) => Ok(slot.map(|s| *s)),
        _ => Err(mismatch()),
    }
}

/// Slots in memory, under one lock.
#[derive(Default)]
pub(crate) struct MemoryStore {
    slots: Mutex<Vec<StoredSlot>>,
}

impl SlotStore for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn persistent(&self) -> bool {
        false
    }

    fn apply(&self, op: Op) -> BoxFuture<'_, Result<OpResult, SandboxError>> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let (result, _) = op.apply(&mut slots);
        Box::pin(std::future::ready(Ok(result)))
    }
}

#[cfg(test)]
pub(crate) mod contract {
    //! The contract every store keeps, run against each of them.

    use std::time::Duration;

    use super::*;
    use crate::pool::slot::tests::record;

    fn warming(id: &str, owner: &str, lease: SystemTime) -> StoredSlot {
        StoredSlot {
            record: record(id, "img", SlotState::Warming, Duration::from_secs(7_200)),
            owner: Some(owner.to_owned()),
            lease_until: Some(lease),
        }
    }

    fn ready(id: &str, image: &str, expires_in: u64) -> StoredSlot {
        StoredSlot {
            record: record(id, image, SlotState::Ready, Duration::from_secs(expires_in)),
            owner: None,
            lease_until: None,
        }
    }

    /// Runs every rule of the contract on an empty `store`.
    pub(crate) async fn check(store: &dyn SlotStore) {
        // Whole seconds: a file keeps times to the microsecond.
        let secs = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
        let later = now + Duration::from_secs(600);
        // Recording a warming slot is put-if-absent.
        assert!(
            store
                .record_warming(warming("a", "me", later))
                .await
                .unwrap()
        );
        assert!(
            !store
                .record_warming(warming("a", "other", later))
                .await
                .unwrap()
        );
        // Only the owner marks it ready.
        let mut parked = record("a", "img", SlotState::Ready, Duration::from_secs(7_200));
        parked.parked_at = Some(now);
        assert!(!store.mark_ready(parked.clone(), "other").await.unwrap());
        assert!(store.mark_ready(parked.clone(), "me").await.unwrap());
        let listed = store.list("img").await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].record, parked);
        assert_eq!(
            (listed[0].owner.as_ref(), listed[0].lease_until),
            (None, None)
        );
        // A ready slot is not marked ready again, nor removed as warming.
        assert!(!store.mark_ready(parked.clone(), "me").await.unwrap());
        assert_eq!(
            store
                .remove_if("a", RemoveIf::WarmingOwnedBy("me".into()))
                .await
                .unwrap(),
            None
        );

        // Claims: the slot expiring first among those with enough time
        // left, of this image only, each once.
        for slot in [
            ready("b", "img", 4_000),
            ready("c", "img", 5_000),
            ready("d", "img", 100),
            ready("e", "other-img", 3_000),
        ] {
            assert!(store.record_warming(slot).await.unwrap());
        }
        let min = now + Duration::from_secs(3_600);
        async fn claim(store: &dyn SlotStore, min: SystemTime) -> Option<String> {
            store
                .claim("img", min)
                .await
                .unwrap()
                .map(|s| s.record.sandbox_id)
        }
        assert_eq!(claim(store, min).await.as_deref(), Some("b"));
        assert_eq!(claim(store, min).await.as_deref(), Some("c"));
        assert_eq!(claim(store, min).await.as_deref(), Some("a"));
        assert_eq!(
            claim(store, min).await,
            None,
            "d expires too soon, e is another image's"
        );
        let ids = |v: Vec<StoredSlot>| {
            v.into_iter()
                .map(|s| s.record.sandbox_id)
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(store.list("img").await.unwrap()), vec!["d"]);
        assert_eq!(ids(store.list("other-img").await.unwrap()), vec!["e"]);

        // Recycling removes only a ready slot expiring before the time.
        assert_eq!(
            store
                .remove_if("d", RemoveIf::ReadyExpiringBefore(now))
                .await
                .unwrap(),
            None
        );
        let recycled = store
            .remove_if("d", RemoveIf::ReadyExpiringBefore(min))
            .await
            .unwrap();
        assert_eq!(recycled.map(|s| s.record.sandbox_id).as_deref(), Some("d"));

        // Reaping takes only warming slots whose lease ended.
        assert!(
            store
                .record_warming(warming("f", "dead", now))
                .await
                .unwrap()
        );
        assert!(
            store
                .record_warming(warming("g", "alive", later))
                .await
                .unwrap()
        );
        assert_eq!(
            store
                .remove_if(
                    "g",
                    RemoveIf::WarmingLeaseEndedBefore(now + Duration::from_secs(1))
                )
                .await
                .unwrap(),
            None
        );
        let reaped = store
            .remove_if(
                "f",
                RemoveIf::WarmingLeaseEndedBefore(now + Duration::from_secs(1)),
            )
            .await
            .unwrap();
        assert_eq!(reaped.map(|s| s.record.sandbox_id).as_deref(), Some("f"));
        // A reaped slot cannot be marked ready by its late owner.
        let mut late = record("f", "img", SlotState::Ready, Duration::from_secs(7_200));
        late.parked_at = Some(now);
        assert!(!store.mark_ready(late, "dead").await.unwrap());
        let g = store
            .remove_if("g", RemoveIf::WarmingOwnedBy("alive".into()))
            .await
            .unwrap();
        assert_eq!(g.map(|s| s.record.sandbox_id).as_deref(), Some("g"));
        assert_eq!(ids(store.list("img").await.unwrap()), Vec::<String>::new());
        // Removing a ready slot whatever its expiry (a drain).
        assert_eq!(
            store
                .remove_if("e", RemoveIf::Ready)
                .await
                .unwrap()
                .map(|s| s.record.sandbox_id)
                .as_deref(),
            Some("e")
        );
        assert!(store.list("other-img").await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn the_memory_store_keeps_the_contract() {
        let store = MemoryStore::default();
        check(&store).await;
    }
}
