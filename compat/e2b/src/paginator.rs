//! `Sandbox.list(...)`: E2B's `SandboxPaginator` (`has_next`,
//! `next_items`) over the SDK's listing stream.

use futures_util::StreamExt as _;
use rayito::{ListQuery, SandboxError, SandboxList, SandboxSummary};

use crate::options::Backend;
use crate::sandbox::{E2B_LISTED, builder_for};
use crate::warnings::{CompatWarning, Warnings};

/// E2B's default page size.
const DEFAULT_LIMIT: u32 = 50;

/// `Sandbox.list` keyword arguments.
#[derive(Clone, Default)]
pub struct ListOpts {
    /// `limit`: sandboxes per page (1 to 50, E2B's default 50 here).
    pub limit: Option<u32>,
    /// `next_token`: resume the listing that handed it out
    /// ([`SandboxPaginator::next_token`], or the reference SDK's), with the
    /// same query, limit aside.
    pub next_token: Option<String>,
    /// `order`: by start time, then id (every page is read first).
    pub order: Option<ListOrder>,
    /// rayito only: where the sandboxes run.
    pub backend: Backend,
}

/// Says whether a `next_token` was given, never the token.
impl std::fmt::Debug for ListOpts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListOpts")
            .field("limit", &self.limit)
            .field("next_token", &self.next_token.as_ref().map(|_| "***"))
            .field("order", &self.order)
            .field("backend", &self.backend)
            .finish()
    }
}

/// `order=` of `Sandbox.list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListOrder {
    /// Oldest first.
    Asc,
    /// Newest first.
    Desc,
}

/// E2B's `SandboxPaginator`: pages of sandboxes, read with
/// [`SandboxPaginator::next_items`] while [`SandboxPaginator::has_next`].
pub struct SandboxPaginator {
    /// The listing, once the client of the backend is built (on the first
    /// `next_items`).
    stream: Option<SandboxList>,
    /// What makes it: the backend's builder and the query.
    start: Option<(rayito::SandboxBuilder, ListQuery)>,
    limit: usize,
    done: bool,
    warnings: Warnings,
    /// The token the listing was asked to resume from.
    given_token: Option<String>,
}

/// Says whether a token was given, never the token.
impl std::fmt::Debug for SandboxPaginator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxPaginator")
            .field("limit", &self.limit)
            .field("done", &self.done)
            .field("given_token", &self.given_token.as_ref().map(|_| "***"))
            .finish_non_exhaustive()
    }
}

impl SandboxPaginator {
    pub(crate) fn new(query: ListQuery, opts: ListOpts) -> Result<Self, SandboxError> {
        let warnings = Warnings::default();
        let limit = opts.limit.unwrap_or(DEFAULT_LIMIT);
        let mut query = if query == ListQuery::new() {
            ListQuery::new().states(E2B_LISTED)
        } else {
            query
        };
        if let Some(order) = opts.order {
            query = query.order(match order {
                ListOrder::Asc => rayito::ListOrder::Ascending,
                ListOrder::Desc => rayito::ListOrder::Descending,
            });
        }
        let given_token = opts.next_token.clone();
        if let Some(token) = opts.next_token {
            query = query.next_token(token);
        }
        // A token or limit it cannot use is refused here, before any
        // client is built.
        let query = query.page_size(limit);
        query.validate()?;
        Ok(Self {
            given_token,
            stream: None,
            start: Some((builder_for(&opts.backend), query)),
            limit: usize::try_from(limit).unwrap_or(usize::MAX).max(1),
            done: false,
            warnings,
        })
    }

    /// `has_next`: whether [`SandboxPaginator::next_items`] may return more.
    pub fn has_next(&self) -> bool {
        !self.done
    }

    /// `next_token`: a token that resumes this listing after the items
    /// given so far (`ListOpts.next_token`, in this or another process);
    /// before the first page, the token it was given; `None` at the end.
    ///
    /// # Errors
    /// None today; the `Result` keeps E2B's shape (a property that may
    /// raise).
    pub fn next_token(&self) -> Result<Option<String>, SandboxError> {
        Ok(match &self.stream {
            Some(stream) if !self.done => stream.next_token(),
            Some(_) => None,
            None => self.given_token.clone(),
        })
    }

    /// `next_items()`: up to `limit` more sandboxes; an empty page and
    /// `has_next() == false` at the end.
    ///
    /// # Errors
    /// What the listing stream yields (the paginator then has no next).
    pub async fn next_items(&mut self) -> Result<Vec<SandboxSummary>, SandboxError> {
        let mut page = Vec::new();
        if let Some((builder, query)) = self.start.take() {
            match builder.client().await {
                Ok(client) => self.stream = Some(client.list(query)),
                Err(err) => {
                    self.done = true;
                    return Err(err);
                }
            }
        }
        while !self.done && page.len() < self.limit {
            let Some(stream) = self.stream.as_mut() else {
                self.done = true;
                break;
            };
            match stream.next().await {
                Some(Ok(item)) => page.push(item),
                Some(Err(err)) => {
                    self.done = true;
                    return Err(err);
                }
                None => self.done = true,
            }
        }
        Ok(page)
    }

    /// Every option this listing ignored.
    pub fn compat_warnings(&self) -> Vec<CompatWarning> {
        self.warnings.all()
    }
}
