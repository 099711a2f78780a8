//! The sandboxes whose memory counts against the region's quota (RUNNING,
//! SUSPENDING, SUSPENDED; `ListMicrovms`, every page) with each one's
//! memory, read from its image version (`GetMicrovmImageVersion`) once per
//! version per process: a version's memory never changes.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::SystemTime;

use crate::control::ListRequest;
use crate::error::SandboxError;
use crate::state::SandboxState;

/// ListMicrovms' page size (its maximum).
const PAGE_SIZE: i32 = 50;
/// Pages read at most (50 000 sandboxes): a listing that never ends must
/// not keep the loop going.
const MAX_PAGES: usize = 1000;

/// Each image version's memory (MiB), by `<image ARN> <version>`, for the
/// life of the process.
static VERSION_MEMORY: LazyLock<Mutex<HashMap<String, u32>>> = LazyLock::new(Mutex::default);

/// One counted sandbox.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Counted {
    pub id: String,
    pub state: SandboxState,
    pub started_at: Option<SystemTime>,
    /// Its image version's memory; `None` when it could not be read.
    pub memory_mib: Option<u32>,
}

/// Whether a sandbox in `state` holds memory against the quota.
pub(crate) fn counts(state: &SandboxState) -> bool {
    matches!(
        state,
        SandboxState::Running | SandboxState::Suspending | SandboxState::Suspended
    )
}

/// The counted sandboxes of `client`'s backend, with their memory.
///
/// # Errors
/// A ListMicrovms page failed (mapped). A version whose memory cannot be
/// read is no error: its sandboxes count as unresolved.
pub(crate) async fn counted(client: &crate::Client) -> Result<Vec<Counted>, SandboxError> {
    let backend = client.backend();
    let mut items = Vec::new();
    let mut next_token = None;
    for _ in 0..MAX_PAGES {
        let page = backend
            .control
            .list_microvms(ListRequest {
                max_results: PAGE_SIZE,
                next_token: next_token.take(),
                ..ListRequest::default()
            })
            .await?;
        items.extend(page.items.into_iter().filter(|i| counts(&i.state)));
        next_token = page.next_token.filter(|t| !t.is_empty());
        if next_token.is_none() {
            break;
        }
    }
    let images = backend
        .sdk_config
        .as_ref()
        .map(crate::aws::microvms::images::ImageApi::new);
    let mut counted = Vec::with_capacity(items.len());
    for item in items {
        let memory_mib = match &images {
            Some(images) => memory_of(images, &item.image_arn, &item.image_version).await,
            None => None,
        };
        counted.push(Counted {
            id: item.id,
            state: item.state,
            started_at: item.started_at,
            memory_mib,
        });
    }
    Ok(counted)
}

/// The memory of one image version, from the process's cache or read
/// once; `None` when it cannot be read (the failure is logged, no more).
async fn memory_of(
    images: &crate::aws::microvms::images::ImageApi,
    image_arn: &str,
    version: &str,
) -> Option<u32> {
    let key = format!("{image_arn} {version}");
    if let Some(mib) = VERSION_MEMORY.lock().ok()?.get(&key) {
        return Some(*mib);
    }
    match images.get_version(image_arn, version).await {
        Ok(info) => {
            let mib = info.config.memory_mib()?;
            if let Ok(mut cache) = VERSION_MEMORY.lock() {
                cache.insert(key, mib);
            }
            Some(mib)
        }
        Err(err) => {
            tracing::debug!(kind = ?err.kind(), "an image version's memory could not be read");
            None
        }
    }
}
