//! The pool store shared by many hosts: one DynamoDB table, one partition
//! per pool (`pk = pool#<name>`), one item per slot (`sk =
//! slot#<sandbox_id>`). Every change is one conditional write, so two
//! hosts never record one slot twice, never both mark it ready, and never
//! both claim it: a claim is a conditional delete that returns the item.
//!
//! A failed condition is the "no" of an operation, never an error. Other
//! AWS failures map as the control plane's do (docs/errors.md), without
//! AWS's own text; a missing table is `InvalidArgument` `store`, as an
//! unusable pool file is.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::aws::config::AwsSettings;
use crate::aws::dynamodb::{Attr, Conditional, Dynamo, Expression, Item, KeyRole};
use crate::error::SandboxError;
use crate::error::map::aws::{AwsFailure, from_aws};
use crate::pool::slot::{SlotRecord, SlotState, StoredSlot, record_from_json, record_to_json};
use crate::pool::store::{Op, OpResult, RemoveIf, SlotStore};

type Client = Dynamo;

type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Query pages one operation reads at most (each up to 1 MB): a pool
/// partition never holds that much unless something else writes to it.
const MAX_PAGES: usize = 16;
/// Attempts of one call (the SDK's standard retry: throttling, 5xx,
/// connection failures; a failed condition is never retried).
const ATTEMPTS: u32 = 3;
/// What the table's TTL adds to a slot's expiry before DynamoDB may
/// delete it (the conditions check `expires_at` themselves).
const TTL_AFTER_EXPIRY: u64 = 3_600;
/// How long [`create_table`] waits for a new table to become active.
const ACTIVE_WITHIN: Duration = Duration::from_secs(120);

/// The attribute names (all through `#names`: `state`, `owner`, `record`
/// and `ttl` are DynamoDB reserved words).
const PK: &str = "pk";
const SK: &str = "sk";
const STATE: &str = "state";
const OWNER: &str = "owner";
const LEASE_UNTIL: &str = "lease_until";
const IMAGE_ARN: &str = "image_arn";
const EXPIRES_AT: &str = "expires_at";
const PARKED_AT: &str = "parked_at";
const RECORD: &str = "record";
const TTL: &str = "ttl";

/// A pool's partition of a DynamoDB table.
pub(crate) struct PoolTable {
    table: String,
    pool_name: String,
    settings: AwsSettings,
    /// Loaded at the first operation (the pool's start).
    client: tokio::sync::OnceCell<Client>,
}

impl PoolTable {
    pub(crate) fn new(table: String, pool_name: String, settings: AwsSettings) -> Self {
        Self {
            table,
            pool_name,
            settings,
            client: tokio::sync::OnceCell::new(),
        }
    }

    fn partition(&self) -> String {
        format!("pool#{}", self.pool_name)
    }

    /// The client, loaded once: the table and pool names are checked
    /// first, then the AWS configuration (credentials and region) as the
    /// control plane's.
    async fn client(&self) -> Result<&Client, SandboxError> {
        check_table_name(&self.table)?;
        check_pool_name(&self.pool_name)?;
        self.client
            .get_or_try_init(|| connect(&self.settings))
            .await
    }

    async fn run(&self, op: Op) -> Result<OpResult, SandboxError> {
        let client = self.client().await?;
        match op {
            Op::RecordWarming(slot) => self.record_warming(client, slot).await,
            Op::MarkReady { record, owner } => self.mark_ready(client, record, owner).await,
            Op::Claim { image, min_expiry } => self.claim(client, &image, min_expiry).await,
            Op::RemoveIf { id, condition } => self.remove_if(client, &id, condition).await,
            Op::List { image } => Ok(OpResult::Slots(
                self.query(client, &image, None)
                    .await?
                    .into_iter()
                    .map(|item| decode(&item))
                    .collect::<Result<_, _>>()?,
            )),
        }
    }

    fn key(&self, id: &str) -> Item {
        HashMap::from([
            (PK.to_owned(), s(self.partition())),
            (SK.to_owned(), s(format!("slot#{id}"))),
        ])
    }

    async fn record_warming(
        &self,
        client: &Client,
        slot: StoredSlot,
    ) -> Result<OpResult, SandboxError> {
        let mut item = self.key(&slot.record.sandbox_id);
        item.extend(
            record_attributes(&slot.record)
                .into_iter()
                .map(|(name, value)| (name.to_owned(), value)),
        );
        if let Some(owner) = &slot.owner {
            item.insert(OWNER.to_owned(), s(owner.clone()));
        }
        if let Some(lease) = slot.lease_until {
            item.insert(LEASE_UNTIL.to_owned(), n(secs_ceil(lease)));
        }
        let put = client
            .put_item(
                &self.table,
                item,
                Expression {
                    condition: Some("attribute_not_exists(#sk)".to_owned()),
                    names: vec![("#sk".to_owned(), SK.to_owned())],
                    values: Vec::new(),
                },
            )
            .await;
        match put {
            Ok(Conditional::Done(())) => Ok(OpResult::Done(true)),
            Ok(Conditional::Failed(_)) => Ok(OpResult::Done(false)),
            Err(failure) => Err(store_error(failure)),
        }
    }

    async fn mark_ready(
        &self,
        client: &Client,
        record: SlotRecord,
        owner: String,
    ) -> Result<OpResult, SandboxError> {
        let mut set = vec![
            "#state = :state",
            "#record = :record",
            "#image_arn = :image_arn",
            "#expires_at = :expires_at",
            "#ttl = :ttl",
        ];
        let mut remove = vec!["#owner", "#lease_until"];
        let mut update = Expression {
            condition: Some("#state = :warming AND #owner = :me".to_owned()),
            names: Vec::new(),
            values: vec![
                (
                    ":warming".to_owned(),
                    s(SlotState::Warming.as_str().to_owned()),
                ),
                (":me".to_owned(), s(owner)),
            ],
        };
        for (name, value) in record_attributes(&record) {
            if name == PARKED_AT {
                set.push("#parked_at = :parked_at");
            }
            update.values.push((format!(":{name}"), value));
        }
        if record.parked_at.is_none() {
            remove.push("#parked_at");
        }
        for name in [
            STATE,
            RECORD,
            IMAGE_ARN,
            EXPIRES_AT,
            TTL,
            OWNER,
            LEASE_UNTIL,
            PARKED_AT,
        ] {
            update.names.push((format!("#{name}"), name.to_owned()));
        }
        let expression = format!("SET {} REMOVE {}", set.join(", "), remove.join(", "));
        match client
            .update_item(
                &self.table,
                self.key(&record.sandbox_id),
                expression,
                update,
            )
            .await
        {
            Ok(Conditional::Done(())) => Ok(OpResult::Done(true)),
            Ok(Conditional::Failed(_)) => Ok(OpResult::Done(false)),
            Err(failure) => Err(store_error(failure)),
        }
    }

    /// The ready slots of `image` expiring at or after `min_expiry`, the
    /// one expiring first (ties: lowest id) deleted if it still is such a
    /// slot; when another host took it first, the next one.
    async fn claim(
        &self,
        client: &Client,
        image: &str,
        min_expiry: SystemTime,
    ) -> Result<OpResult, SandboxError> {
        let min = secs_ceil(min_expiry);
        let mut candidates: Vec<(u64, String)> = self
            .query(client, image, Some(min))
            .await?
            .iter()
            .filter_map(|item| Some((number(item, EXPIRES_AT)?, slot_id(item)?.to_owned())))
            .collect();
        candidates.sort();
        for (_, id) in candidates {
            let condition = "#state = :ready AND #expires_at >= :min";
            let values = [
                (":ready", s(SlotState::Ready.as_str().to_owned())),
                (":min", n(min)),
            ];
            if let Some(slot) = self
                .delete_if(client, &id, condition, &[STATE, EXPIRES_AT], values)
                .await?
            {
                return Ok(OpResult::Slot(Some(Box::new(slot))));
            }
        }
        Ok(OpResult::Slot(None))
    }

    async fn remove_if(
        &self,
        client: &Client,
        id: &str,
        condition: RemoveIf,
    ) -> Result<OpResult, SandboxError> {
        let ready = || (":ready", s(SlotState::Ready.as_str().to_owned()));
        let warming = || (":warming", s(SlotState::Warming.as_str().to_owned()));
        let removed = match condition {
            RemoveIf::Ready => {
                self.delete_if(client, id, "#state = :ready", &[STATE], [ready()])
                    .await?
            }
            RemoveIf::ReadyExpiringBefore(t) => {
                self.delete_if(
                    client,
                    id,
                    "#state = :ready AND #expires_at < :t",
                    &[STATE, EXPIRES_AT],
                    [ready(), (":t", n(secs_ceil(t)))],
                )
                .await?
            }
            RemoveIf::WarmingOwnedBy(owner) => {
                self.delete_if(
                    client,
                    id,
                    "#state = :warming AND #owner = :me",
                    &[STATE, OWNER],
                    [warming(), (":me", s(owner))],
                )
                .await?
            }
            RemoveIf::WarmingLeaseEndedBefore(t) => {
                self.delete_if(
                    client,
                    id,
                    "#state = :warming AND (attribute_not_exists(#lease_until) OR #lease_until < :t)",
                    &[STATE, LEASE_UNTIL],
                    [warming(), (":t", n(secs_floor(t)))],
                )
                .await?
            }
        };
        Ok(OpResult::Slot(removed.map(Box::new)))
    }

    /// Deletes slot `id` when `condition` holds, returning what it was.
    async fn delete_if<const N: usize>(
        &self,
        client: &Client,
        id: &str,
        condition: &str,
        names: &[&str],
        values: [(&str, Attr); N],
    ) -> Result<Option<StoredSlot>, SandboxError> {
        let expression = Expression {
            condition: Some(condition.to_owned()),
            names: names
                .iter()
                .map(|name| (format!("#{name}"), (*name).to_owned()))
                .collect(),
            values: values
                .into_iter()
                .map(|(name, value)| (name.to_owned(), value))
                .collect(),
        };
        match client
            .delete_item(&self.table, self.key(id), expression)
            .await
        {
            Ok(Conditional::Done(Some(item))) => decode(&item).map(Some),
            // Deleted, yet nothing returned: not DynamoDB's behaviour.
            Ok(Conditional::Done(None)) => Err(bad_item()),
            Ok(Conditional::Failed(_)) => Ok(None),
            Err(failure) => Err(store_error(failure)),
        }
    }

    /// The items of `image` in this pool's partition (with `ready_from`:
    /// only ready slots expiring at or after it), read consistently, page
    /// by page up to [`MAX_PAGES`].
    async fn query(
        &self,
        client: &Client,
        image: &str,
        ready_from: Option<u64>,
    ) -> Result<Vec<Item>, SandboxError> {
        let mut items = Vec::new();
        let mut start: Option<Item> = None;
        for _ in 0..MAX_PAGES {
            let mut filter = Expression {
                condition: Some("#image_arn = :image".to_owned()),
                names: vec![
                    ("#pk".to_owned(), PK.to_owned()),
                    ("#image_arn".to_owned(), IMAGE_ARN.to_owned()),
                ],
                values: vec![
                    (":pk".to_owned(), s(self.partition())),
                    (":image".to_owned(), s(image.to_owned())),
                ],
            };
            if let Some(min) = ready_from {
                filter.condition = Some(
                    "#image_arn = :image AND #state = :ready AND #expires_at >= :min".to_owned(),
                );
                filter.names.extend([
                    ("#state".to_owned(), STATE.to_owned()),
                    ("#expires_at".to_owned(), EXPIRES_AT.to_owned()),
                ]);
                filter.values.extend([
                    (":ready".to_owned(), s(SlotState::Ready.as_str().to_owned())),
                    (":min".to_owned(), n(min)),
                ]);
            }
            let page = client
                .query(&self.table, "#pk = :pk", filter, start.take())
                .await
                .map_err(store_error)?;
            items.extend(page.items);
            match page.last_key {
                Some(key) => start = Some(key),
                None => return Ok(items),
            }
        }
        Err(SandboxError::invalid_argument(
            "store",
            format!(
                "the pool's partition of the DynamoDB table holds more than {MAX_PAGES} pages of items; give this pool a name or a table of its own"
            ),
        ))
    }
}

impl SlotStore for PoolTable {
    fn kind(&self) -> &'static str {
        "dynamodb"
    }

    fn apply(&self, op: Op) -> BoxFuture<'_, Result<OpResult, SandboxError>> {
        Box::pin(self.run(op))
    }
}

/// A DynamoDB client for `settings`: credentials and region checked as
/// the control plane's, the SDK's standard retries on.
async fn connect(settings: &AwsSettings) -> Result<Client, SandboxError> {
    let (config, _) = crate::aws::config::load(settings).await?;
    Ok(Dynamo::new(&config, ATTEMPTS))
}

/// Creates `table` for pool stores: string keys `pk` (hash) and `sk`
/// (range), on-demand billing, TTL on `ttl`. Answers `false`, changing
/// nothing, when a table of that name exists.
pub(crate) async fn create_table(
    table: &str,
    settings: &AwsSettings,
) -> Result<bool, SandboxError> {
    check_table_name(table)?;
    let client = connect(settings).await?;
    match client
        .create_table(table, &[(PK, KeyRole::Hash), (SK, KeyRole::Range)])
        .await
    {
        Ok(()) => {}
        Err(failure) if failure.code.as_deref() == Some("ResourceInUseException") => {
            return Ok(false);
        }
        Err(failure) => return Err(store_error(failure)),
    }
    // TTL can only be set on an active table.
    let by = tokio::time::Instant::now() + ACTIVE_WITHIN;
    loop {
        if client.table_active(table).await.map_err(store_error)? {
            break;
        }
        if tokio::time::Instant::now() >= by {
            return Err(SandboxError::invalid_argument(
                "table",
                "the new DynamoDB table did not become active within 120 s; run the creation again once it is active (it sets the TTL)",
            ));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    client.enable_ttl(table, TTL).await.map_err(store_error)?;
    Ok(true)
}

/// DynamoDB's rule for table names: 3 to 255 of `[A-Za-z0-9_.-]`.
fn check_table_name(table: &str) -> Result<(), SandboxError> {
    let valid = (3..=255).contains(&table.len())
        && table
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(SandboxError::invalid_argument(
            "table",
            "a DynamoDB table name is 3 to 255 letters, digits, '_', '.' or '-'; pass such a name",
        ))
    }
}

/// A pool name: 1 to 255 printable ASCII characters (it is part of every
/// key of the pool).
fn check_pool_name(name: &str) -> Result<(), SandboxError> {
    if (1..=255).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_graphic()) {
        Ok(())
    } else {
        Err(SandboxError::invalid_argument(
            "pool_name",
            "a pool name is 1 to 255 printable ASCII characters without spaces; pass such a name",
        ))
    }
}

/// An AWS failure of a store call, mapped as the control plane's are but
/// without AWS's text; a missing table is the store's `InvalidArgument`.
fn store_error(mut failure: AwsFailure) -> SandboxError {
    if failure.code.as_deref() == Some("ResourceNotFoundException") {
        return SandboxError::invalid_argument(
            "store",
            "the pool's DynamoDB table does not exist; create it (PoolStore::create_dynamodb_table) or name another table",
        );
    }
    failure.message = None;
    from_aws(failure)
}

fn s(text: String) -> Attr {
    Attr::S(text)
}

fn n(value: u64) -> Attr {
    Attr::N(value.to_string())
}

/// Seconds since the epoch, rounded down (a slot's expiry: never later
/// than the truth).
fn secs_floor(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Seconds since the epoch, rounded up (a minimum expiry, a lease: never
/// earlier than asked).
fn secs_ceil(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| {
        d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0))
    })
}

/// The attributes a record sets: state, image, expiry, parked time, the
/// record's JSON and the TTL.
fn record_attributes(record: &SlotRecord) -> Vec<(&'static str, Attr)> {
    let expires_at = secs_floor(record.expires_at());
    let mut attributes = vec![
        (STATE, s(record.state.as_str().to_owned())),
        (IMAGE_ARN, s(record.template.clone())),
        (EXPIRES_AT, n(expires_at)),
        (RECORD, s(record_to_json(record))),
        (TTL, n(expires_at.saturating_add(TTL_AFTER_EXPIRY))),
    ];
    if let Some(parked) = record.parked_at {
        attributes.push((PARKED_AT, n(secs_floor(parked))));
    }
    attributes
}

fn bad_item() -> SandboxError {
    SandboxError::invalid_argument(
        "store",
        "the pool's DynamoDB table holds an item that is not a slot of this SDK; remove it or give the pool a table of its own",
    )
}

fn number(item: &Item, name: &str) -> Option<u64> {
    item.get(name)?.as_n()?.parse().ok()
}

fn slot_id(item: &Item) -> Option<&str> {
    item.get(SK)?.as_s()?.strip_prefix("slot#")
}

/// A slot from an item (the table is shared: every item is checked).
fn decode(item: &Item) -> Result<StoredSlot, SandboxError> {
    let text = |name: &str| item.get(name).and_then(Attr::as_s).map(String::as_str);
    let record = text(RECORD)
        .and_then(record_from_json)
        .ok_or_else(bad_item)?;
    let state = match text(STATE) {
        Some("ready") => SlotState::Ready,
        Some("warming") => SlotState::Warming,
        _ => return Err(bad_item()),
    };
    if slot_id(item) != Some(record.sandbox_id.as_str()) {
        return Err(bad_item());
    }
    let lease_until = match item.get(LEASE_UNTIL) {
        None => None,
        Some(_) => Some(
            number(item, LEASE_UNTIL)
                .and_then(|secs| UNIX_EPOCH.checked_add(Duration::from_secs(secs)))
                .ok_or_else(bad_item)?,
        ),
    };
    Ok(StoredSlot {
        record: SlotRecord { state, ..record },
        owner: text(OWNER).map(str::to_owned),
        lease_until,
    })
}

#[cfg(test)]
#[path = "../../tests/skip_support/mod.rs"]
mod skip;

#[cfg(test)]
#[path = "../../tests/sdk_support/moto.rs"]
mod moto;

#[cfg(test)]
mod tests {
    use super::moto::MotoServer;
    use super::*;
    use crate::pool::slot::tests::record;
    use crate::sandbox::AwsOptions;

    /// Set to a table name, the contract also runs against real DynamoDB
    /// (the AWS configuration of the environment; the table is created
    /// when missing). Opt-in: unset, that test does nothing.
    const REAL_TABLE_ENV: &str = "RAYITO_TEST_DYNAMODB_TABLE";
    /// `<endpoint> <table>`: turns `claimer` into a claiming child.
    const CLAIMER_ENV: &str = "RAYITO_POOL_RACE_DYNAMODB";

    fn moto_settings(endpoint: &str) -> AwsSettings {
        AwsOptions::new()
            .endpoint_url(endpoint)
            .region("us-east-1")
            .static_credentials("AKIDMOTOTEST", "moto-test-secret")
            .settings()
            .clone()
    }

    /// A fresh table on a fresh moto server (`None`: skipped).
    async fn moto_table(table: &str) -> Option<(MotoServer, AwsSettings)> {
        let moto = MotoServer::start()?;
        let settings = moto_settings(&moto.endpoint_url());
        assert!(create_table(table, &settings).await.unwrap());
        Some((moto, settings))
    }

    async fn raw_item(settings: &AwsSettings, table: &str, pk: &str, sk: &str) -> Option<Item> {
        let key = HashMap::from([
            (PK.to_owned(), s(pk.to_owned())),
            (SK.to_owned(), s(sk.to_owned())),
        ]);
        connect(settings).await.unwrap().get_item(table, key).await
    }

    #[tokio::test]
    async fn the_dynamodb_store_keeps_the_contract() {
        let Some((_moto, settings)) = moto_table("rayito-pools").await else {
            return;
        };
        // A second creation changes nothing.
        assert!(!create_table("rayito-pools", &settings).await.unwrap());
        let store = PoolTable::new("rayito-pools".into(), "contract".into(), settings.clone());
        crate::pool::store::contract::check(&store).await;
        // Another pool's partition of the same table is another store.
        let other = PoolTable::new("rayito-pools".into(), "other".into(), settings);
        crate::pool::store::contract::check(&other).await;
    }

    #[tokio::test]
    async fn the_contract_holds_on_real_dynamodb_when_opted_in() {
        let Some(table) = std::env::var(REAL_TABLE_ENV).ok().filter(|t| !t.is_empty()) else {
            return;
        };
        let settings = AwsSettings::default();
        create_table(&table, &settings).await.unwrap();
        let pool_name = format!("contract-{:016x}", rand::random::<u64>());
        let store = PoolTable::new(table, pool_name, settings);
        crate::pool::store::contract::check(&store).await;
    }

    /// The items are the spec's layout: keys, state, owner and lease
    /// while warming only, epoch seconds, the record with its token, the
    /// TTL an hour after expiry.
    #[tokio::test]
    async fn items_have_the_table_layout_of_the_spec() {
        let Some((_moto, settings)) = moto_table("layout").await else {
            return;
        };
        let store = PoolTable::new("layout".into(), "p1".into(), settings.clone());
        let store: &dyn SlotStore = &store;
        let lease = UNIX_EPOCH + Duration::from_secs(2_000_000_000);
        let mut warming = record(
            "microvm-1",
            "arn:img",
            SlotState::Warming,
            Duration::from_secs(3_600),
        );
        warming.started_at = UNIX_EPOCH + Duration::from_secs(1_796_083_200);
        warming.maximum_duration_seconds = 28_800;
        let expires = 1_796_083_200 + 28_800;
        assert!(
            store
                .record_warming(StoredSlot {
                    record: warming.clone(),
                    owner: Some("host:1:abcd".into()),
                    lease_until: Some(lease),
                })
                .await
                .unwrap()
        );
        let item = raw_item(&settings, "layout", "pool#p1", "slot#microvm-1")
            .await
            .expect("the item");
        let text = |name: &str| item.get(name).unwrap().as_s().unwrap().clone();
        let num = |name: &str| item.get(name).unwrap().as_n().unwrap().clone();
        assert_eq!(text(STATE), "warming");
        assert_eq!(text(OWNER), "host:1:abcd");
        assert_eq!(num(LEASE_UNTIL), "2000000000");
        assert_eq!(text(IMAGE_ARN), "arn:img");
        assert_eq!(num(EXPIRES_AT), expires.to_string());
        assert_eq!(num(TTL), (expires + 3_600).to_string());
        assert!(!item.contains_key(PARKED_AT));
        let json = text(RECORD);
        assert!(json.contains("\"access_token\":\"dG9rZW4"), "{json}");
        assert!(
            json.contains("\"started_at\":\"2026-12-01T00:00:00Z\""),
            "{json}"
        );

        let mut parked = SlotRecord {
            state: SlotState::Ready,
            ..warming
        };
        parked.parked_at = Some(UNIX_EPOCH + Duration::from_secs(1_796_083_260));
        assert!(store.mark_ready(parked, "host:1:abcd").await.unwrap());
        let item = raw_item(&settings, "layout", "pool#p1", "slot#microvm-1")
            .await
            .expect("the item");
        let mut names: Vec<_> = item.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [EXPIRES_AT, IMAGE_ARN, PARKED_AT, PK, RECORD, SK, STATE, TTL],
            "no owner or lease once ready"
        );
        assert_eq!(item[STATE].as_s().unwrap(), "ready");
        assert_eq!(item[PARKED_AT].as_n().unwrap(), "1796083260");
        assert!(item[RECORD].as_s().unwrap().contains("\"state\":\"ready\""));
    }

    #[tokio::test]
    async fn a_missing_table_or_bad_names_are_refused_with_pinned_messages() {
        let Some(moto) = MotoServer::start() else {
            return;
        };
        let settings = moto_settings(&moto.endpoint_url());
        let store = PoolTable::new("no-such-table".into(), "p".into(), settings.clone());
        let err = (&store as &dyn SlotStore).list("img").await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid store: the pool's DynamoDB table does not exist; create it (PoolStore::create_dynamodb_table) or name another table"
        );
        let store = PoolTable::new("x".into(), "p".into(), settings.clone());
        let err = (&store as &dyn SlotStore).list("img").await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid table: a DynamoDB table name is 3 to 255 letters, digits, '_', '.' or '-'; pass such a name"
        );
        let err = create_table("bad name", &settings).await.unwrap_err();
        assert!(
            matches!(err, SandboxError::InvalidArgument { .. }),
            "{err:?}"
        );
        let store = PoolTable::new("rayito-pools".into(), "a b".into(), settings);
        let err = (&store as &dyn SlotStore).list("img").await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid pool_name: a pool name is 1 to 255 printable ASCII characters without spaces; pass such a name"
        );
    }

    /// The table is shared: an item of the partition that is not a slot
    /// (another program's, or tampered with) fails the read, naming the
    /// store, never its content.
    #[tokio::test]
    async fn an_item_that_is_not_a_slot_is_refused() {
        let Some((_moto, settings)) = moto_table("foreign").await else {
            return;
        };
        let client = connect(&settings).await.unwrap();
        let item = HashMap::from([
            (PK.to_owned(), s("pool#p".into())),
            (SK.to_owned(), s("slot#microvm-1".into())),
            (STATE.to_owned(), s("ready".into())),
            (IMAGE_ARN.to_owned(), s("img".into())),
            (RECORD.to_owned(), s("{\"secret\":\"do-not-show\"}".into())),
        ]);
        client
            .put_item("foreign", item, Expression::default())
            .await
            .unwrap();
        let store = PoolTable::new("foreign".into(), "p".into(), settings);
        let err = (&store as &dyn SlotStore).list("img").await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid store: the pool's DynamoDB table holds an item that is not a slot of this SDK; remove it or give the pool a table of its own"
        );
        // Another pool's partition is not read.
        let other = PoolTable::new("foreign".into(), "q".into(), store.settings.clone());
        assert!(
            (&other as &dyn SlotStore)
                .list("img")
                .await
                .unwrap()
                .is_empty()
        );
    }

    /// A refused request maps as the control plane's failures do, naming
    /// the call and never repeating AWS's text. (moto answers a refused
    /// signature with an XML body that DynamoDB's JSON protocol cannot
    /// read, so only the HTTP status is known here; real DynamoDB's
    /// `UnrecognizedClientException` is `Authentication` by its code,
    /// whatever the call: tests/sdk/errors_map_aws.rs.)
    #[tokio::test]
    async fn a_refused_request_maps_through_the_aws_mapping_without_awss_text() {
        let Some((moto, settings)) = moto_table("auth").await else {
            return;
        };
        moto.enforce_auth();
        let store = PoolTable::new("auth".into(), "p".into(), settings);
        let err = (&store as &dyn SlotStore).list("img").await.unwrap_err();
        moto.relax_auth();
        assert_eq!(
            err.to_string(),
            "control plane call Query failed (http 403); the SDK does not retry this failure"
        );
        assert_eq!(err.meta().server_message(), None);
        assert_eq!(err.meta().http_status(), Some(403));
    }

    /// In a child process (re-executed test binary): claims slots from the
    /// table until none is left, printing each id claimed.
    #[tokio::test]
    async fn claimer() {
        let Some(spec) = std::env::var(CLAIMER_ENV).ok() else {
            return;
        };
        let (endpoint, table) = spec.split_once(' ').unwrap();
        let store = PoolTable::new(table.into(), "race".into(), moto_settings(endpoint));
        let store: &dyn SlotStore = &store;
        let mut claimed = Vec::new();
        // A loaded machine can make moto fail a call after the SDK's own
        // retries; a claim that failed is asked again, and a slot it took
        // without the answer arriving shows up as lost in the parent.
        let mut failures = 0;
        loop {
            match store.claim("img", UNIX_EPOCH).await {
                Ok(Some(slot)) => claimed.push(slot.record.sandbox_id),
                Ok(None) => break,
                Err(e) if failures < 5 => {
                    failures += 1;
                    eprintln!("claim failed, asking again: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("claims keep failing: {e}"),
            }
        }
        println!("CLAIMED {}", claimed.join(","));
    }

    /// N processes claim M slots of one table at once: each slot is
    /// claimed exactly once and none is lost.
    #[tokio::test]
    async fn processes_racing_on_one_table_claim_each_slot_exactly_once() {
        const PROCESSES: usize = 6;
        const SLOTS: usize = 60;
        let Some((moto, settings)) = moto_table("race").await else {
            return;
        };
        let store = PoolTable::new("race".into(), "race".into(), settings);
        let store: &dyn SlotStore = &store;
        for i in 0..SLOTS {
            let slot = StoredSlot {
                record: record(
                    &format!("microvm-{i:03}"),
                    "img",
                    SlotState::Ready,
                    Duration::from_secs(3_600 + i as u64 % 7),
                ),
                owner: None,
                lease_until: None,
            };
            assert!(store.record_warming(slot).await.unwrap());
        }
        let race = format!("{} race", moto.endpoint_url());
        let all = crate::pool::slot::tests::race_claimers(
            "pool::dynamodb_store::tests::claimer",
            PROCESSES,
            CLAIMER_ENV,
            race.as_ref(),
        );
        let mut sorted = all.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), all.len(), "a slot was claimed twice");
        assert_eq!(sorted.len(), SLOTS, "a slot was lost");
        assert!(store.list("img").await.unwrap().is_empty());
    }
}
