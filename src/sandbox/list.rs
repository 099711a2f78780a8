//! `Sandbox::list` (wire contract 3.5): ListMicrovms pages as a `Stream` of
//! summaries, with the metadata filter that works through Health probes.

use std::any::Any;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use futures_util::Stream;
use futures_util::stream::BoxStream;

use super::backend::ResolvedBackend;
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
    /// The metadata index the list reads rows from (feature `dynamodb`).
    index: Option<Indexed>,
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

    /// Only sandboxes of this template (an image name on the local backend,
    /// an image ARN on AWS).
    pub fn template(mut self, template: impl Into<String>) -> Self {
        self.template = Some(template.into());
        self
    }

    /// Only sandboxes of this template version.
    pub fn template_version(mut self, version: impl Into<String>) -> Self {
        self.template_version = Some(version.into());
        self
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

    /// How many sandboxes one ListMicrovms call asks for (1 to 50, default
    /// 50).
    pub fn page_size(mut self, page_size: u32) -> Self {
        self.page_size = Some(page_size);
        self
    }

    /// Checks everything that needs no I/O.
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
}

impl fmt::Debug for SandboxList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SandboxList").finish_non_exhaustive()
    }
}

impl Stream for SandboxList {
    type Item = Result<SandboxSummary, SandboxError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// Where the listing stands.
struct Lister {
    query: ListQuery,
    /// Set on the first page.
    client: Option<Client>,
    source: ClientSource,
    image: Option<String>,
    next_token: Option<String>,
    buffered: VecDeque<SandboxSummary>,
    /// No page left to ask for.
    last_page: bool,
    /// An error ended the stream.
    failed: bool,
}

/// The listing on `client`.
pub(crate) fn list(client: Client, query: ListQuery) -> SandboxList {
    list_from(ClientSource::given(client), query)
}

/// The listing on the client of `source`, resolved on the first poll.
pub(crate) fn list_from(source: ClientSource, query: ListQuery) -> SandboxList {
    let lister = Lister {
        query,
        client: None,
        source,
        image: None,
        next_token: None,
        buffered: VecDeque::new(),
        last_page: false,
        failed: false,
    };
    let stream = futures_util::stream::unfold(lister, |mut lister| async move {
        if lister.failed {
            return None;
        }
        loop {
            if let Some(item) = lister.buffered.pop_front() {
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
    }
}

impl Lister {
    /// Reads the next page into the buffer, probing each candidate when a
    /// metadata filter is set.
    async fn fill(&mut self) -> Result<(), SandboxError> {
        let client = match &self.client {
            Some(client) => client.clone(),
            None => {
                self.query.check()?;
                let client = self.source.client().await?;
                self.image = match &self.query.template {
                    Some(template) => Some(client.image_arn(Some(template)).await?),
                    None => None,
                };
                self.client = Some(client.clone());
                client
            }
        };
        let backend = client.backend();
        let request = ListRequest {
            image: self.image.clone(),
            image_version: self.query.template_version.clone(),
            max_results: i32::try_from(self.query.page_size.unwrap_or(MAX_PAGE_SIZE)).unwrap_or(50),
            next_token: self.next_token.take(),
        };
        let page = backend.control.list_microvms(request).await?;
        self.last_page = page.next_token.is_none();
        self.next_token = page.next_token;
        if let Some(index) = &self.query.index {
            let items: Vec<MicrovmItem> = page
                .items
                .into_iter()
                .filter(|item| self.query.wants(&item.state))
                .collect();
            let selected = index.0.select(&client, items, &self.query.metadata).await?;
            for (item, metadata) in selected {
                self.buffered.push_back(summary(item, Some(metadata)));
            }
            return Ok(());
        }
        for item in page.items {
            if !self.query.wants(&item.state) {
                continue;
            }
            if self.query.metadata.is_empty() {
                self.buffered.push_back(summary(item, None));
                continue;
            }
            if let Some(metadata) = probe_metadata(backend, client.retry_policy(), &item.id).await?
                && self
                    .query
                    .metadata
                    .iter()
                    .all(|(k, v)| metadata.get(k) == Some(v))
            {
                self.buffered.push_back(summary(item, Some(metadata)));
            }
        }
        Ok(())
    }
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
