//! `Sandbox::list` (wire contract 3.5): ListMicrovms pages as a `Stream` of
//! summaries, with the metadata filter that works through Health probes,
//! `started_after`, an order, and a token that resumes a listing where it
//! stopped (`list_token`).

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures_util::stream::BoxStream;

use super::backend::ResolvedBackend;
use super::list_token::{self, Cursor, Filters, Token};
use super::parts::Part;
use super::proxy_minter;
use super::steps::StepFuture;
use crate::control::{ListRequest, MicrovmItem};
use crate::error::{ErrorKind, RetryPolicy, SandboxError};
use crate::sandbox::client::{Client, ClientSource};
use crate::state::SandboxState;
use crate::transport::{AGENT_PORT, ConnectRetry};

/// The largest ListMicrovms page (and the default).
pub(crate) const MAX_PAGE_SIZE: u32 = 50;
/// Health probe timeout of the metadata filter (3.5).
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Lifetime of the throw-away proxy token of a probe.
const PROBE_TOKEN_TTL: Duration = Duration::from_secs(5 * 60);

/// What [`crate::Sandbox::list`] returns: filters applied by the control
/// plane (template, version), by the SDK (states) and through each
/// sandbox's agent (metadata).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use]
pub struct ListQuery {
    template: Option<String>,
    template_version: Option<String>,
    states: Option<Vec<SandboxState>>,
    metadata: BTreeMap<String, String>,
    page_size: Option<u32>,
    started_after: Option<SystemTime>,
    order: Option<ListOrder>,
    /// Where to resume (a token a listing handed out).
    resume: Option<ResumeToken>,
    /// The metadata index the list reads rows from (feature `dynamodb`).
    index: Option<Indexed>,
}

/// A resume token as a query holds it: its Debug says only its length (a
/// token carries the image ARN and the filters' fingerprint, which a log
/// need not repeat).
#[derive(Clone, PartialEq, Eq)]
struct ResumeToken(String);

impl fmt::Debug for ResumeToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ResumeToken({} chars)", self.0.len())
    }
}

/// The order of [`ListQuery::order`]: by start time, then by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListOrder {
    /// Oldest first.
    Ascending,
    /// Newest first.
    Descending,
}

impl ListOrder {
    /// The reference SDK's name of the order (`asc`, `desc`), which resume
    /// tokens carry.
    fn as_str(self) -> &'static str {
        match self {
            Self::Ascending => "asc",
            Self::Descending => "desc",
        }
    }
}

/// A metadata index a list reads rows from (the index feature's).
pub(crate) trait ListIndex: Part {
    /// Checks what needs no I/O.
    fn check(&self) -> Result<(), SandboxError>;

    /// Of `items`, the ones whose live row matches (same image and start,
    /// every pair of `metadata`), each with its row's metadata.
    fn select<'a>(
        &'a self,
        client: &'a Client,
        items: Vec<MicrovmItem>,
        metadata: &'a BTreeMap<String, String>,
    ) -> StepFuture<'a, Vec<(MicrovmItem, BTreeMap<String, String>)>>;

    /// Whether `other` is the same index (queries compare by it).
    fn same(&self, other: &dyn Any) -> bool;

    /// The index's name, which resume tokens' fingerprints cover.
    fn name(&self) -> String;
}

/// The index of a query, compared by its own equality.
#[derive(Clone, Debug)]
struct Indexed(Arc<dyn ListIndex>);

impl PartialEq for Indexed {
    fn eq(&self, other: &Self) -> bool {
        self.0.same(&*other.0 as &dyn Any)
    }
}

impl Eq for Indexed {}

impl ListQuery {
    /// Every sandbox that has not ended (TERMINATING and TERMINATED are
    /// left out, although the control plane lists them for a while).
    pub fn new() -> Self {
        Self::default()
    }

    crate::setters::setters! {
        unmarked;
        /// Only sandboxes of this template (an image name on the local backend,
        /// an image ARN on AWS).
        template: Some impl String;
        /// Only sandboxes started at or after `at` (millisecond precision; the
        /// control plane cannot filter on it, so every page is still read).
        started_after: Some SystemTime;
        /// In this order of start time (then id), instead of the control
        /// plane's. Sorting needs every sandbox: the listing reads every page
        /// (probing with a metadata filter) before the first item.
        order: Some ListOrder;
    }

    /// Resumes the listing that handed out `token`
    /// ([`SandboxList::next_token`]): the items it already gave are not
    /// given again. The query must have the same filters and order as the
    /// one that made the token (a token for other filters is refused), and
    /// it works across processes and with the reference SDK's tokens.
    pub fn next_token(mut self, token: impl Into<String>) -> Self {
        self.resume = Some(ResumeToken(token.into()));
        self
    }

    crate::setters::setters! {
        unmarked;
        /// Only sandboxes of this template version.
        template_version: Some impl String;
    }

    /// Only sandboxes in one of these states (instead of every state but
    /// TERMINATING and TERMINATED).
    pub fn states(mut self, states: impl IntoIterator<Item = SandboxState>) -> Self {
        self.states = Some(states.into_iter().collect());
        self
    }

    /// Only sandboxes whose metadata holds every one of these pairs. The
    /// control plane cannot filter on metadata: each RUNNING sandbox is
    /// asked through its agent's Health (one GetMicrovm, one proxy token and
    /// one probe per sandbox), and suspended ones are never probed (that
    /// would wake them), so with a metadata filter only RUNNING may be asked
    /// for.
    pub fn metadata<K, V>(mut self, metadata: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        self.metadata
            .extend(metadata.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// Answers from `index` (what the index feature's `index` setter
    /// gives).
    #[cfg_attr(not(feature = "dynamodb"), allow(dead_code))]
    pub(crate) fn indexed_by(mut self, index: impl ListIndex) -> Self {
        self.index = Some(Indexed(Arc::new(index)));
        self
    }

    fn indexed(&self) -> bool {
        self.index.is_some()
    }

    crate::setters::setters! {
        unmarked;
        /// How many sandboxes one ListMicrovms call asks for (1 to 50, default
        /// 50).
        page_size: Some u32;
    }

    /// Checks everything that needs no I/O (a listing does so on its first
    /// poll): the page size, a metadata filter's states, an index, and a
    /// resume token's form (whether it fits the filters needs the
    /// template resolved).
    ///
    /// # Errors
    /// `InvalidArgument` naming the option: `page_size`, `states` or
    /// `next_token`.
    pub fn validate(&self) -> Result<(), SandboxError> {
        self.check()
    }

    fn check(&self) -> Result<(), SandboxError> {
        if let Some(size) = self.page_size
            && !(1..=MAX_PAGE_SIZE).contains(&size)
        {
            return Err(SandboxError::invalid_argument(
                "page_size",
                "a list page holds 1 to 50 sandboxes; pass a page size in that range",
            ));
        }
        if let Some(index) = &self.index {
            index.0.check()?;
        }
        if let Some(token) = self.resume_token()?
            && matches!(token.cursor, Cursor::Key { .. }) != self.order.is_some()
        {
            // The fingerprint covers the order: only a changed token
            // carries a cursor of the other kind.
            return Err(SandboxError::invalid_argument(
                "next_token",
                list_token::INVALID_TOKEN,
            ));
        }
        if !self.metadata.is_empty()
            && !self.indexed()
            && let Some(states) = &self.states
            && states.iter().any(|s| s != &SandboxState::Running)
        {
            return Err(SandboxError::invalid_argument(
                "states",
                "a metadata filter only considers RUNNING sandboxes (probing a suspended one would wake it); ask for RUNNING only, or drop the metadata filter",
            ));
        }
        Ok(())
    }

    /// The resume token, decoded (bounded before it is read).
    fn resume_token(&self) -> Result<Option<Token>, SandboxError> {
        self.resume
            .as_ref()
            .map(|token| list_token::decode(&token.0))
            .transpose()
    }

    /// The fingerprint of this query's filters, once the template is
    /// resolved to `image`.
    fn fingerprint(&self, image: Option<&str>) -> String {
        Filters {
            image,
            version: self.template_version.as_deref(),
            states: self
                .states
                .as_ref()
                .map(|states| states.iter().map(SandboxState::as_str).collect()),
            started_after_ms: self.started_after.map(|at| list_token::unix_ms(Some(at))),
            metadata: (!self.metadata.is_empty()).then_some(&self.metadata),
            order: self.order.map(ListOrder::as_str),
            index: self.index.as_ref().map(|index| index.0.name()),
        }
        .fingerprint()
    }

    /// Whether `item` started at or after `started_after`.
    fn started_in_time(&self, item: &MicrovmItem) -> bool {
        self.started_after
            .is_none_or(|at| list_token::unix_ms(item.started_at) >= list_token::unix_ms(Some(at)))
    }

    fn wants(&self, state: &SandboxState) -> bool {
        if !self.metadata.is_empty() && !self.indexed() {
            return state == &SandboxState::Running;
        }
        match &self.states {
            Some(states) => states.contains(state),
            None => !state.is_terminal(),
        }
    }
}

/// One sandbox as [`crate::Sandbox::list`] reports it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SandboxSummary {
    /// The MicroVM id.
    pub sandbox_id: String,
    /// Its state when listed.
    pub state: SandboxState,
    /// The image ARN it runs.
    pub template: String,
    /// The image version.
    pub template_version: String,
    /// When it started.
    pub started_at: Option<SystemTime>,
    /// Its metadata, as its agent reported it (with a metadata filter) or
    /// as its index row holds it (with an index); `None` otherwise:
    /// reading it takes a probe per sandbox.
    pub metadata: Option<BTreeMap<String, String>>,
}

/// The sandboxes [`crate::Sandbox::list`] finds, page after page (a
/// `Stream`; the first poll resolves the backend). After an error the
/// stream ends.
#[must_use = "a stream does nothing unless polled"]
pub struct SandboxList {
    inner: BoxStream<'static, Result<SandboxSummary, SandboxError>>,
    progress: Arc<Mutex<Progress>>,
}

crate::secret::redacted_debug!(non_exhaustive SandboxList);

inner_stream!(SandboxList => Result<SandboxSummary, SandboxError>);

impl SandboxList {
    /// A token that resumes this listing after the last item it gave
    /// ([`ListQuery::next_token`] on the same query): in another task,
    /// another process, or the reference SDK. `None` when nothing is left
    /// to resume: the listing has ended, or it has given no item yet (list
    /// again with the same query, and the same token if it had one). The
    /// token is opaque, at most 8,192 characters, and names no metadata
    /// value.
    #[must_use]
    pub fn next_token(&self) -> Option<String> {
        let progress = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        match (&progress.fingerprint, &progress.cursor) {
            (Some(fingerprint), Some(cursor)) => Some(list_token::encode(fingerprint, cursor)),
            _ => None,
        }
    }
}

/// What a resume token would say now: the fingerprint once the filters
/// are resolved, and the cursor after the last item given (`None` once
/// nothing is left).
#[derive(Default)]
struct Progress {
    fingerprint: Option<String>,
    cursor: Option<Cursor>,
}

/// Where the listing stands.
struct Lister {
    query: ListQuery,
    /// Set on the first page.
    client: Option<Client>,
    source: ClientSource,
    image: Option<String>,
    /// The ListMicrovms token of the next page.
    next_token: Option<String>,
    /// The ListMicrovms token that fetched the page being served.
    page_token: Option<String>,
    /// Digests of the ids served from that page (a resumed page starts
    /// with the token's, which are skipped).
    served: BTreeSet<String>,
    /// The next page is the one a resume token names.
    resuming: bool,
    buffered: VecDeque<SandboxSummary>,
    /// No page left to ask for.
    last_page: bool,
    /// An error ended the stream.
    failed: bool,
    progress: Arc<Mutex<Progress>>,
}

/// The listing on `client`.
pub(crate) fn list(client: Client, query: ListQuery) -> SandboxList {
    list_from(ClientSource::given(client), query)
}

/// The listing on the client of `source`, resolved on the first poll.
pub(crate) fn list_from(source: ClientSource, query: ListQuery) -> SandboxList {
    let progress = Arc::new(Mutex::new(Progress::default()));
    let lister = Lister {
        query,
        client: None,
        source,
        image: None,
        next_token: None,
        page_token: None,
        served: BTreeSet::new(),
        resuming: false,
        buffered: VecDeque::new(),
        last_page: false,
        failed: false,
        progress: progress.clone(),
    };
    let stream = futures_util::stream::unfold(lister, |mut lister| async move {
        if lister.failed {
            return None;
        }
        loop {
            if let Some(item) = lister.buffered.pop_front() {
                lister.gave(&item);
                return Some((Ok(item), lister));
            }
            if lister.last_page {
                return None;
            }
            if let Err(err) = lister.fill().await {
                lister.failed = true;
                return Some((Err(err), lister));
            }
        }
    });
    SandboxList {
        inner: Box::pin(stream),
        progress,
    }
}

impl Lister {
    /// Reads the next page into the buffer (every page, sorted, with an
    /// order), probing each candidate when a metadata filter is set.
    async fn fill(&mut self) -> Result<(), SandboxError> {
        let client = match &self.client {
            Some(client) => client.clone(),
            None => self.start().await?,
        };
        if let Some(order) = self.query.order {
            let mut all = Vec::new();
            while !self.last_page {
                all.extend(self.page(&client).await?);
            }
            self.buffered = ordered(all, order, self.resume_key());
        } else {
            let page = self.page(&client).await?;
            let skip = &self.served;
            self.buffered.extend(
                page.into_iter()
                    .filter(|item| !skip.contains(&list_token::digest(&item.sandbox_id))),
            );
        }
        self.note_progress(None);
        Ok(())
    }

    /// Resolves the client and the template, and checks a resume token
    /// against this query's filters.
    async fn start(&mut self) -> Result<Client, SandboxError> {
        self.query.check()?;
        let client = self.source.client().await?;
        self.image = match &self.query.template {
            Some(template) => Some(client.image_arn(Some(template)).await?),
            None => None,
        };
        let fingerprint = self.query.fingerprint(self.image.as_deref());
        if let Some(token) = self.query.resume_token()? {
            if token.fingerprint != fingerprint {
                return Err(SandboxError::invalid_argument(
                    "next_token",
                    list_token::FOREIGN_TOKEN,
                ));
            }
            if let Cursor::Page { aws_token, served } = token.cursor {
                self.next_token = aws_token;
                self.served = served;
                self.resuming = true;
            }
        }
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .fingerprint = Some(fingerprint);
        self.client = Some(client.clone());
        Ok(client)
    }

    /// The key an ordered listing resumes after.
    fn resume_key(&self) -> Option<(u64, String)> {
        match self.query.resume_token() {
            Ok(Some(Token {
                cursor:
                    Cursor::Key {
                        started_ms,
                        sandbox_id,
                    },
                ..
            })) => Some((started_ms, sandbox_id)),
            _ => None,
        }
    }

    /// One ListMicrovms page, filtered: the summaries it contributes.
    async fn page(&mut self, client: &Client) -> Result<Vec<SandboxSummary>, SandboxError> {
        let backend = client.backend();
        let aws_token = self.next_token.take();
        let request = ListRequest {
            image: self.image.clone(),
            image_version: self.query.template_version.clone(),
            max_results: i32::try_from(self.query.page_size.unwrap_or(MAX_PAGE_SIZE)).unwrap_or(50),
            next_token: aws_token.clone(),
        };
        let page = backend.control.list_microvms(request).await?;
        if !std::mem::take(&mut self.resuming) {
            // What was served was served from another page (a resumed
            // page keeps the token's digests, and skips them).
            self.served.clear();
        }
        self.page_token = aws_token;
        self.last_page = page.next_token.is_none();
        self.next_token = page.next_token;
        let items: Vec<MicrovmItem> = page
            .items
            .into_iter()
            .filter(|item| self.query.wants(&item.state) && self.query.started_in_time(item))
            .collect();
        if let Some(index) = &self.query.index {
            let selected = index.0.select(client, items, &self.query.metadata).await?;
            return Ok(selected
                .into_iter()
                .map(|(item, metadata)| summary(item, Some(metadata)))
                .collect());
        }
        let mut summaries = Vec::new();
        for item in items {
            if self.query.metadata.is_empty() {
                summaries.push(summary(item, None));
                continue;
            }
            if let Some(metadata) = probe_metadata(backend, client.retry_policy(), &item.id).await?
                && self
                    .query
                    .metadata
                    .iter()
                    .all(|(k, v)| metadata.get(k) == Some(v))
            {
                summaries.push(summary(item, Some(metadata)));
            }
        }
        Ok(summaries)
    }

    /// Notes that `item` was given.
    fn gave(&mut self, item: &SandboxSummary) {
        if self.query.order.is_none() {
            self.served.insert(list_token::digest(&item.sandbox_id));
        }
        self.note_progress(Some(item));
    }

    /// Where a token would resume now: after `last` (the item just
    /// given), or nowhere once nothing is left; otherwise (a page read,
    /// nothing given) the cursor stands.
    fn note_progress(&mut self, last: Option<&SandboxSummary>) {
        let cursor = if self.buffered.is_empty() && self.last_page {
            None
        } else if let Some(item) = last {
            Some(if self.query.order.is_some() {
                Cursor::Key {
                    started_ms: list_token::unix_ms(item.started_at),
                    sandbox_id: item.sandbox_id.clone(),
                }
            } else if self.buffered.is_empty() {
                // The page is used up: the next one, from its start.
                Cursor::Page {
                    aws_token: self.next_token.clone(),
                    served: BTreeSet::new(),
                }
            } else {
                Cursor::Page {
                    aws_token: self.page_token.clone(),
                    served: self.served.clone(),
                }
            })
        } else {
            return;
        };
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .cursor = cursor;
    }
}

/// `items` sorted by (start in ms, id) in `order`, after `after` if set.
fn ordered(
    mut items: Vec<SandboxSummary>,
    order: ListOrder,
    after: Option<(u64, String)>,
) -> VecDeque<SandboxSummary> {
    let key = |item: &SandboxSummary| {
        (
            list_token::unix_ms(item.started_at),
            item.sandbox_id.clone(),
        )
    };
    items.sort_by_key(key);
    if order == ListOrder::Descending {
        items.reverse();
    }
    items
        .into_iter()
        .filter(|item| match &after {
            None => true,
            Some(boundary) if order == ListOrder::Ascending => key(item) > *boundary,
            Some(boundary) => key(item) < *boundary,
        })
        .collect()
}

fn summary(item: MicrovmItem, metadata: Option<BTreeMap<String, String>>) -> SandboxSummary {
    SandboxSummary {
        sandbox_id: item.id,
        state: item.state,
        template: item.image_arn,
        template_version: item.image_version,
        started_at: item.started_at,
        metadata,
    }
}

/// The metadata of one listed sandbox, through an anonymous Health on a
/// throw-away connection; `None` when it is gone by now (a sandbox that
/// ended between the list and the probe is not listed).
///
/// # Errors
/// Any failure of GetMicrovm, CreateMicrovmAuthToken or Health while the
/// sandbox still runs: a probe that fails is an error, never a silent
/// drop.
async fn probe_metadata(
    backend: &ResolvedBackend,
    policy: &RetryPolicy,
    sandbox_id: &str,
) -> Result<Option<BTreeMap<String, String>>, SandboxError> {
    let control = backend.control.clone();
    let vm = match control.get_microvm(sandbox_id.to_owned()).await {
        Ok(vm) => vm,
        Err(err) if err.kind() == ErrorKind::SandboxNotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    if vm.state.is_terminal() {
        return Ok(None);
    }
    let minter = proxy_minter(
        control.clone(),
        vm.id.clone(),
        vec![AGENT_PORT],
        PROBE_TOKEN_TTL,
    );
    let probed = async {
        let proxy_token = minter().await?;
        let conn = backend.open_anonymous_agent(&vm.endpoint, proxy_token, minter, *policy)?;
        conn.health(PROBE_TIMEOUT, ConnectRetry::Ladder).await
    }
    .await;
    match probed {
        Ok(health) => Ok(Some(health.metadata.into_iter().collect())),
        // Killed while probed (CreateMicrovmAuthToken then answers a
        // conflict, or the agent goes away): not listed, as one that ended
        // before the probe. Any other failure stays an error.
        Err(err) => match control.get_microvm(sandbox_id.to_owned()).await {
            Ok(now) if now.state.is_terminal() => Ok(None),
            Err(gone) if gone.kind() == ErrorKind::SandboxNotFound => Ok(None),
            _ => Err(err),
        },
    }
}
