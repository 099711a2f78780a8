//! `Sandbox.list(...)`: E2B's `SandboxPaginator` (`has_next`,
//! `next_items`) over the SDK's listing stream.

use futures_util::StreamExt as _;
use rayito::{ListQuery, SandboxError, SandboxList, SandboxSummary};

use crate::options::Backend;
use crate::sandbox::{E2B_LISTED, builder_for};
use crate::unimplemented::Missing;
use crate::warnings::{CompatWarning, Warnings, reason};

/// E2B's default page size.
const DEFAULT_LIMIT: u32 = 50;

/// `Sandbox.list` keyword arguments.
#[derive(Clone, Default)]
pub struct ListOpts {
    /// `limit`: sandboxes per page (1 to 50, E2B's default 50 here).
    pub limit: Option<u32>,
    /// `next_token`: `Unimplemented` when set (keep the paginator instead).
    pub next_token: Option<String>,
    /// `order`: ignored with a warning.
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
#[derive(Debug)]
pub struct SandboxPaginator {
    /// The listing, once the client of the backend is built (on the first
    /// `next_items`).
    stream: Option<SandboxList>,
    /// What makes it: the backend's builder and the query.
    start: Option<(rayito::SandboxBuilder, ListQuery)>,
    limit: usize,
    done: bool,
    warnings: Warnings,
}

impl SandboxPaginator {
    pub(crate) fn new(query: ListQuery, opts: ListOpts) -> Result<Self, SandboxError> {
        if opts.next_token.is_some() {
            return Err(Missing::ListNextToken.error());
        }
        let warnings = Warnings::default();
        if opts.order.is_some() {
            warnings.warn("order", reason::LIST_ORDER);
        }
        let limit = opts.limit.unwrap_or(DEFAULT_LIMIT);
        let query = if query == ListQuery::new() {
            ListQuery::new().states(E2B_LISTED)
        } else {
            query
        };
        Ok(Self {
            stream: None,
            start: Some((builder_for(&opts.backend), query.page_size(limit))),
            limit: usize::try_from(limit).unwrap_or(usize::MAX).max(1),
            done: false,
            warnings,
        })
    }

    /// `has_next`: whether [`SandboxPaginator::next_items`] may return more.
    pub fn has_next(&self) -> bool {
        !self.done
    }

    /// `next_token`: the SDK's listing resumes itself and hands out no
    /// token.
    ///
    /// # Errors
    /// Always `Unimplemented { feature: "list(next_token)" }`.
    pub fn next_token(&self) -> Result<Option<String>, SandboxError> {
        Err(Missing::ListNextToken.error())
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
