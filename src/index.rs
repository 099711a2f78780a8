//! The optional metadata index of sandboxes: one DynamoDB row per sandbox
//! (docs/sandbox-index.md). `create` writes the row after RunMicrovm, `kill`
//! deletes it, and a list with the index reads the rows of each
//! ListMicrovms page in one BatchGetItem instead of probing every sandbox
//! through its agent: so it filters suspended sandboxes by metadata too,
//! and a sandbox without a row (created without the index) is not listed.
//!
//! The row holds only what never changes after the create: the id (`pk`),
//! the image ARN and version, the start in epoch milliseconds, the
//! metadata, the SDK that wrote it and `expires_at` (epoch seconds, the
//! table's TTL attribute: start + maximum duration + one hour). Never the
//! access token, environment values or the run payload. The state always
//! comes from ListMicrovms.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::aws::dynamodb::{Attr, Conditional, Dynamo, Expression, Item, KeyRole};
use crate::control::MicrovmItem;
use crate::error::SandboxError;
use crate::error::map::index::{WriteOutcome, from_failure, write_failed};
use crate::sandbox::client::Client;
use crate::sandbox::list::ListIndex;
use crate::sandbox::steps::{Launch, NewVm, Stage, Step, StepFuture, Terminate};
use crate::sandbox::{AwsOptions, ListQuery, SandboxBuilder};

/// The margin a row outlives its sandbox's maximum duration by (TTL).
const TTL_MARGIN_SECS: u64 = 3_600;
/// Keys of one BatchGetItem (DynamoDB's limit).
const BATCH_GET_MAX_KEYS: usize = 100;
/// Retries of the keys BatchGetItem left unprocessed, before the list fails.
const UNPROCESSED_RETRIES: u32 = 5;
const UNPROCESSED_FIRST_DELAY: Duration = Duration::from_millis(50);
const UNPROCESSED_MAX_DELAY: Duration = Duration::from_secs(1);
/// How far a row's start may be from ListMicrovms' (clock rounding).
const STARTED_AT_TOLERANCE_MS: u64 = 1_000;
/// Attempts of each DynamoDB call (the AWS SDK's standard retry mode:
/// throttling and transient faults, with backoff).
const CALL_ATTEMPTS: u32 = 3;
/// How long `create_table` waits for the table to become ACTIVE.
const TABLE_ACTIVE_WITHIN: Duration = Duration::from_secs(120);
/// Bounds of what is read from a row (a table is shared, so rows are peer
/// data): metadata pairs, and the bytes of one key or value.
const MAX_ROW_PAIRS: usize = 256;
const MAX_ROW_TEXT: usize = 4_096;

/// The metadata index of sandboxes in a DynamoDB table of your account
/// (docs/sandbox-index.md).
///
/// Set it on a builder ([`crate::SandboxBuilder::index`]: `create` writes
/// the sandbox's row, `kill` deletes it) and on a list query
/// ([`crate::ListQuery::index`]: the list answers from the table, and only
/// sandboxes with a row are listed). Cheap to clone; clones share one
/// DynamoDB client, made on first use. Making one calls nothing.
///
/// Only with the `dynamodb` cargo feature.
#[derive(Clone)]
pub struct SandboxIndex {
    table: String,
    aws: Option<AwsOptions>,
    keep_on_failure: bool,
    client: Arc<tokio::sync::OnceCell<Dynamo>>,
}

crate::secret::redacted_debug! {
    non_exhaustive SandboxIndex |o| table, aws, keep_on_failure
}

/// Two indexes are equal when they name the same table with the same
/// settings.
impl PartialEq for SandboxIndex {
    fn eq(&self, other: &Self) -> bool {
        self.table == other.table
            && self.keep_on_failure == other.keep_on_failure
            && self.aws.as_ref().map(AwsOptions::settings_key)
                == other.aws.as_ref().map(AwsOptions::settings_key)
    }
}

impl Eq for SandboxIndex {}

impl SandboxIndex {
    /// The index in the DynamoDB table `table` (3 to 255 of `A-Z a-z 0-9
    /// _ . -`; checked before any call, `InvalidArgument` naming `index`).
    ///
    /// DynamoDB is reached with the sandbox client's own AWS configuration
    /// on AWS; with the local backend, or when [`SandboxIndex::aws`] is
    /// set, with those options (the environment's chain by default). The
    /// DynamoDB client is made once, on first use, and shared by clones:
    /// without `aws`, from the first sandbox client that uses the index.
    pub fn dynamodb(table: impl Into<String>) -> Self {
        Self {
            table: table.into(),
            aws: None,
            keep_on_failure: false,
            client: Arc::default(),
        }
    }

    /// How to reach DynamoDB (region, credentials, `endpoint_url` for a
    /// DynamoDB-compatible server), instead of the sandbox client's.
    #[must_use]
    pub fn aws(mut self, options: AwsOptions) -> Self {
        self.aws = Some(options);
        self.client = Arc::default();
        self
    }

    crate::setters::setters! {
        /// When `create` cannot write the row it fails with `IndexWrite`
        /// either way; by default it terminates the MicroVM it just created
        /// first, with `keep` it leaves it running (the message names it; an
        /// indexed list will not show it).
        keep_on_failure: bool;
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Creates the index table: key `pk` (a string), on-demand billing,
    /// TTL on `expires_at`; waits until it is ACTIVE. Needs
    /// `dynamodb:CreateTable`, `dynamodb:DescribeTable` and
    /// `dynamodb:UpdateTimeToLive` (docs/sandbox-index.md).
    ///
    /// # Errors
    /// `InvalidArgument` (`index`) for a bad table name, before any call;
    /// the AWS configuration's own failures (`Authentication` without
    /// credentials or region); `SandboxIndex { aws_code }` when DynamoDB
    /// refuses (e.g. `ResourceInUseException`: the table exists) or the
    /// table is not ACTIVE within 120 s (`aws_code` `None`).
    pub async fn create_table(&self) -> Result<(), SandboxError> {
        self.check()?;
        let ddb = self.ddb(None).await?;
        ddb.create_table(&self.table, &[("pk", KeyRole::Hash)])
            .await
            .map_err(|f| from_failure(&f))?;
        let by = tokio::time::Instant::now() + TABLE_ACTIVE_WITHIN;
        loop {
            let active = ddb
                .table_active(&self.table)
                .await
                .map_err(|f| from_failure(&f))?;
            if active {
                break;
            }
            if tokio::time::Instant::now() > by {
                return Err(SandboxError::sandbox_index("DescribeTable", None));
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        ddb.enable_ttl(&self.table, "expires_at")
            .await
            .map_err(|f| from_failure(&f))?;
        Ok(())
    }

    /// Checks what needs no I/O: the table's name.
    pub(crate) fn check(&self) -> Result<(), SandboxError> {
        let ok = (3..=255).contains(&self.table.len())
            && self
                .table
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if ok {
            Ok(())
        } else {
            Err(SandboxError::invalid_argument(
                "index",
                "a DynamoDB table name is 3 to 255 of A-Z, a-z, 0-9, _, . and -; pass the index table's name",
            ))
        }
    }

    /// The DynamoDB client, made on first use: from [`SandboxIndex::aws`],
    /// else from `client`'s AWS configuration when it is AWS, else from
    /// the environment.
    ///
    /// # Errors
    /// As the AWS configuration's loading (`Authentication`,
    /// `InvalidArgument`).
    pub(crate) async fn ddb(&self, client: Option<&Client>) -> Result<&Dynamo, SandboxError> {
        self.client
            .get_or_try_init(|| async {
                let sdk_config = match (&self.aws, client) {
                    (None, Some(client)) if !client.is_local() => {
                        client.backend().sdk_config.clone()
                    }
                    _ => None,
                };
                let sdk_config = match sdk_config {
                    Some(config) => config,
                    None => {
                        let options = self.aws.clone().unwrap_or_default();
                        crate::aws::config::load(options.settings()).await?.0
                    }
                };
                Ok(Dynamo::new(&sdk_config, CALL_ATTEMPTS))
            })
            .await
    }

    /// Writes the row of a sandbox RunMicrovm just started (never
    /// overwriting one). On failure the MicroVM is terminated unless kept
    /// (by the index's `keep_on_failure` or `keep`, the builder's), and
    /// the error says which.
    pub(crate) async fn write_row(
        &self,
        client: &Client,
        row: &Row,
        keep: bool,
        terminate: impl std::future::Future<Output = Result<(), SandboxError>>,
    ) -> Result<(), SandboxError> {
        let ddb = self.ddb(Some(client)).await?;
        let put = ddb
            .put_item(
                &self.table,
                row.item(),
                Expression {
                    condition: Some("attribute_not_exists(pk)".to_owned()),
                    ..Expression::default()
                },
            )
            .await;
        let failure = match put {
            Ok(Conditional::Done(())) => return Ok(()),
            Ok(Conditional::Failed(failure)) | Err(failure) => failure,
        };
        let outcome = if self.keep_on_failure || keep {
            WriteOutcome::Kept
        } else if terminate.await.is_ok() {
            WriteOutcome::Terminated
        } else {
            WriteOutcome::TerminateFailed
        };
        Err(write_failed(&failure, &row.sandbox_id, outcome))
    }

    /// Deletes the row of `sandbox_id` (no row is fine).
    pub(crate) async fn delete_row(
        &self,
        client: &Client,
        sandbox_id: &str,
    ) -> Result<(), SandboxError> {
        let ddb = self.ddb(Some(client)).await?;
        ddb.delete_key(&self.table, pk(sandbox_id))
            .await
            .map_err(|f| from_failure(&f))?;
        Ok(())
    }

    /// The live rows of `ids` (at most one BatchGetItem per 100 ids, keys
    /// left unprocessed retried with a bounded backoff). Expired rows and
    /// rows of another shape count as no row.
    ///
    /// # Errors
    /// `SandboxIndex` when a call fails, or keys stay unprocessed after
    /// the retries: never a silently incomplete answer.
    pub(crate) async fn rows(
        &self,
        client: &Client,
        ids: &[String],
    ) -> Result<HashMap<String, Row>, SandboxError> {
        let ddb = self.ddb(Some(client)).await?;
        let now = epoch_secs(SystemTime::now());
        let mut found = HashMap::new();
        for chunk in ids.chunks(BATCH_GET_MAX_KEYS) {
            let mut keys: Vec<Item> = chunk.iter().map(|id| pk(id)).collect();
            let mut delay = UNPROCESSED_FIRST_DELAY;
            let mut attempt = 0;
            loop {
                attempt += 1;
                let answer = ddb
                    .batch_get_item(&self.table, keys)
                    .await
                    .map_err(|f| from_failure(&f))?;
                for item in &answer.items {
                    if let Some(row) = Row::from_item(item)
                        && row.expires_at >= now
                        && chunk.contains(&row.sandbox_id)
                    {
                        found.insert(row.sandbox_id.clone(), row);
                    }
                }
                if answer.unprocessed.is_empty() {
                    break;
                }
                if attempt > UNPROCESSED_RETRIES {
                    return Err(SandboxError::index_unprocessed("BatchGetItem", attempt));
                }
                keys = answer.unprocessed;
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(UNPROCESSED_MAX_DELAY);
            }
        }
        Ok(found)
    }
}

/// The index setter of the sandbox builder.
impl crate::sandbox::SandboxBuilder {
    /// Keeps the sandbox in a metadata index (docs/sandbox-index.md): `create`
    /// writes its row right after RunMicrovm (with its metadata, image
    /// and start), and `kill` on the handle (or [`Self::kill_by_id`] on a
    /// builder with the index) deletes it. When the row cannot be written,
    /// `create` fails with `IndexWrite` and terminates the new MicroVM
    /// first, unless the index keeps it
    /// ([`crate::SandboxIndex::keep_on_failure`]).
    ///
    /// Only with the `dynamodb` cargo feature.
    pub fn index(mut self, index: SandboxIndex) -> Self {
        self.client_parts_mut().set(index);
        self
    }
}

/// The index setter of the client builder.
impl crate::sandbox::client::ClientBuilder {
    /// Keeps the sandboxes of this client in a metadata index
    /// (docs/sandbox-index.md): their creates write a row, and every kill through
    /// the client (a handle's, [`Client::kill_by_id`]) deletes it. A
    /// [`crate::SandboxBuilder::index`] overrides it for that builder.
    ///
    /// Only with the `dynamodb` cargo feature.
    pub fn index(mut self, index: SandboxIndex) -> Self {
        self.parts_mut().set(index);
        self
    }
}

/// The index setter of the list query.
impl ListQuery {
    /// Answers from a metadata index (docs/sandbox-index.md) instead of probing:
    /// for each ListMicrovms page, one BatchGetItem reads the rows of its
    /// sandboxes, and only a sandbox with a row of the same image and start
    /// whose metadata holds every pair of [`ListQuery::metadata`] is listed
    /// (with that metadata), in any state the query asks for (suspended
    /// ones too: nothing is probed). A sandbox created without the index
    /// has no row and is never listed. Keys DynamoDB leaves unprocessed
    /// are retried (5 times, 50 ms doubling to 1 s); after that the stream
    /// ends with `SandboxIndex { aws_code: "UnprocessedKeys" }`, never with
    /// a silently shorter list.
    ///
    /// Only with the `dynamodb` cargo feature.
    pub fn index(self, index: SandboxIndex) -> Self {
        self.indexed_by(index)
    }
}

impl ListIndex for SandboxIndex {
    fn check(&self) -> Result<(), SandboxError> {
        SandboxIndex::check(self)
    }

    fn select<'a>(
        &'a self,
        client: &'a Client,
        items: Vec<MicrovmItem>,
        metadata: &'a BTreeMap<String, String>,
    ) -> StepFuture<'a, Vec<(MicrovmItem, BTreeMap<String, String>)>> {
        Box::pin(async move {
            let ids: Vec<String> = items.iter().map(|item| item.id.clone()).collect();
            let mut rows = self.rows(client, &ids).await?;
            let mut selected = Vec::new();
            for item in items {
                if let Some(row) = rows.remove(&item.id)
                    && row.matches(&item, metadata)
                {
                    selected.push((item, row.metadata));
                }
            }
            Ok(selected)
        })
    }

    fn same(&self, other: &dyn std::any::Any) -> bool {
        other.downcast_ref::<Self>() == Some(self)
    }

    fn name(&self) -> String {
        self.table.clone()
    }
}

/// The index's part in `create` and `kill`: the table name's check, the
/// AWS configuration loaded before RunMicrovm (a missing region or
/// credentials never launch, and bill, a MicroVM), the row written right
/// after it, and deleted after a kill. The index rides on the client.
pub(crate) struct Steps;

impl Step for Steps {
    fn check_late(&self, builder: &SandboxBuilder) -> Result<(), SandboxError> {
        match builder.client_parts().get::<SandboxIndex>() {
            Some(index) => index.check(),
            None => Ok(()),
        }
    }

    fn before_launch<'a>(&'a self, at: Launch<'a>) -> StepFuture<'a, ()> {
        Box::pin(async move {
            if at.stage == Stage::Create
                && let Some(index) = at.builder.client_parts().get::<SandboxIndex>()
            {
                index.ddb(Some(at.client)).await?;
            }
            Ok(())
        })
    }

    fn after_launch<'a>(&'a self, vm: &'a NewVm<'a>, end: Terminate<'a>) -> StepFuture<'a, ()> {
        Box::pin(async move {
            let Some(index) = vm.builder.client_parts().get::<SandboxIndex>() else {
                return Ok(());
            };
            let row = Row::new(
                vm.id,
                vm.image_arn,
                vm.image_version,
                vm.started_at,
                vm.max_duration_secs,
                vm.builder.metadata_pairs(),
            );
            index
                .write_row(vm.client, &row, vm.builder.keeps_on_failure(), end)
                .await
        })
    }

    fn after_kill<'a>(
        &'a self,
        client: &'a Client,
        sandbox_id: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>> {
        Box::pin(async move {
            if let Some(index) = client.parts().get::<SandboxIndex>() {
                forget_row(index, client, sandbox_id).await;
            }
        })
    }
}

/// Deletes the index row of a killed sandbox; a failure is logged (the
/// MicroVM is gone, so the row can only be stale: indexed lists join rows
/// with ListMicrovms, and the TTL removes it).
async fn forget_row(index: &SandboxIndex, client: &Client, sandbox_id: &str) {
    // Boxed: DynamoDB's call future is large, and `kill` stays small.
    if let Err(err) = Box::pin(index.delete_row(client, sandbox_id)).await {
        tracing::warn!(
            target: "rayito::index",
            sandbox_id,
            kind = err.kind().as_str(),
            aws_code = err.meta().aws_code().unwrap_or(""),
            "the sandbox was killed but its index row was not deleted; it expires with its TTL"
        );
    }
}

/// The key of `sandbox_id`'s row.
fn pk(sandbox_id: &str) -> Item {
    HashMap::from([("pk".to_owned(), Attr::S(sandbox_id.to_owned()))])
}

/// The row of one sandbox.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Row {
    pub sandbox_id: String,
    pub image_arn: String,
    pub image_version: String,
    pub started_at_ms: u64,
    pub metadata: BTreeMap<String, String>,
    pub expires_at: u64,
}

// Metadata values are the user's: only keys are shown.
crate::secret::redacted_debug! {
    non_exhaustive Row |o| sandbox_id, metadata_keys = o.metadata.keys().collect::<Vec<_>>()
}

impl Row {
    /// The row of a sandbox RunMicrovm just started.
    pub(crate) fn new(
        sandbox_id: &str,
        image_arn: &str,
        image_version: &str,
        started_at: SystemTime,
        max_duration_secs: u64,
        metadata: &BTreeMap<String, String>,
    ) -> Self {
        let started_at_ms = started_at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Self {
            sandbox_id: sandbox_id.to_owned(),
            image_arn: image_arn.to_owned(),
            image_version: image_version.to_owned(),
            started_at_ms,
            metadata: metadata.clone(),
            expires_at: (started_at_ms / 1_000)
                .saturating_add(max_duration_secs)
                .saturating_add(TTL_MARGIN_SECS),
        }
    }

    fn item(&self) -> Item {
        let metadata = self
            .metadata
            .iter()
            .map(|(k, v)| (k.clone(), Attr::S(v.clone())))
            .collect();
        HashMap::from([
            ("pk".to_owned(), Attr::S(self.sandbox_id.clone())),
            ("image_arn".to_owned(), Attr::S(self.image_arn.clone())),
            (
                "image_version".to_owned(),
                Attr::S(self.image_version.clone()),
            ),
            (
                "started_at_ms".to_owned(),
                Attr::N(self.started_at_ms.to_string()),
            ),
            ("metadata".to_owned(), Attr::M(metadata)),
            (
                "sdk".to_owned(),
                Attr::S(concat!("rs/", env!("CARGO_PKG_VERSION")).to_owned()),
            ),
            (
                "expires_at".to_owned(),
                Attr::N(self.expires_at.to_string()),
            ),
        ])
    }

    /// A row read back, or `None` when it does not have the shape written
    /// here (treated as no row) or exceeds the bounds.
    fn from_item(item: &Item) -> Option<Self> {
        let text = |name: &str| {
            item.get(name)
                .and_then(Attr::as_s)
                .filter(|s| s.len() <= MAX_ROW_TEXT)
                .cloned()
        };
        let number = |name: &str| item.get(name)?.as_n()?.parse::<u64>().ok();
        let pairs = item.get("metadata")?.as_m()?;
        if pairs.len() > MAX_ROW_PAIRS {
            return None;
        }
        let mut metadata = BTreeMap::new();
        for (k, v) in pairs {
            let v = v.as_s()?;
            if k.len() > MAX_ROW_TEXT || v.len() > MAX_ROW_TEXT {
                return None;
            }
            metadata.insert(k.clone(), v.clone());
        }
        Some(Self {
            sandbox_id: text("pk")?,
            image_arn: text("image_arn")?,
            image_version: text("image_version")?,
            started_at_ms: number("started_at_ms")?,
            metadata,
            expires_at: number("expires_at")?,
        })
    }

    /// Whether this row is the one of `item` (same id and image, the same
    /// start within a second) and holds every pair of `wanted`.
    pub(crate) fn matches(&self, item: &MicrovmItem, wanted: &BTreeMap<String, String>) -> bool {
        let same_start = item.started_at.is_none_or(|started| {
            let ms = started
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
            ms.abs_diff(self.started_at_ms) <= STARTED_AT_TOLERANCE_MS
        });
        self.sandbox_id == item.id
            && self.image_arn == item.image_arn
            && same_start
            && wanted.iter().all(|(k, v)| self.metadata.get(k) == Some(v))
    }
}

fn epoch_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_reads_back_and_a_foreign_shape_is_no_row() {
        let metadata = BTreeMap::from([("user".to_owned(), "42".to_owned())]);
        let row = Row::new(
            "vm-1",
            "arn:img",
            "1",
            UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
            600,
            &metadata,
        );
        assert_eq!(row.expires_at, 1_700_000_000 + 600 + 3_600);
        assert_eq!(Row::from_item(&row.item()), Some(row.clone()));
        let mut odd = row.item();
        odd.insert("started_at_ms".into(), Attr::S("x".into()));
        assert_eq!(Row::from_item(&odd), None);
        assert!(!format!("{row:?}").contains("42"));
    }

    #[test]
    fn table_names_are_checked_before_any_call() {
        assert!(SandboxIndex::dynamodb("rayito-sandboxes").check().is_ok());
        for bad in ["ab", "with space", "a/b", &"x".repeat(256)] {
            let err = SandboxIndex::dynamodb(bad).check().unwrap_err();
            assert!(matches!(
                &err,
                SandboxError::InvalidArgument { argument: Some(a), .. } if a == "index"
            ));
        }
    }
}
