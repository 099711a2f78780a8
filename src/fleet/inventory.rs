//! The fleet's reads: every sandbox (all pages of ListMicrovms, then
//! GetMicrovm for its end and the image's versions for its size) and every
//! image with its versions.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime};

use futures_util::{StreamExt as _, TryStreamExt as _};
use serde::Serialize;

use super::{Fleet, wire};
use crate::control::{ImageItem, ImageVersionItem, Page};
use crate::error::{ErrorKind, SandboxError};
use crate::sandbox::ListQuery;
use crate::state::SandboxState;

/// How many GetMicrovm / ListMicrovmImageVersions a read keeps in flight
/// (the client's pacing still holds each to its rate).
const READ_CONCURRENCY: usize = 8;
/// The most pages one image listing reads (50 items or more each): a
/// service that answers pages with a token forever must not loop.
const MAX_PAGES: usize = 40;

/// Which sandboxes [`Fleet::sandboxes`] reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use]
pub struct FleetQuery {
    pub(crate) states: Vec<SandboxState>,
    pub(crate) image: Option<String>,
    pub(crate) metadata: BTreeMap<String, String>,
}

impl FleetQuery {
    /// Every sandbox that has not ended (TERMINATING and TERMINATED are
    /// left out, although the control plane lists them for a while).
    pub fn new() -> Self {
        Self::default()
    }

    /// Only sandboxes in one of these states (TERMINATED ones included
    /// when asked for).
    pub fn states(mut self, states: impl IntoIterator<Item = SandboxState>) -> Self {
        self.states = states.into_iter().collect();
        self
    }

    /// Only sandboxes of this image (a name on the local backend, an image
    /// ARN on AWS).
    pub fn image(mut self, image: impl Into<String>) -> Self {
        self.image = Some(image.into());
        self
    }

    /// Only RUNNING sandboxes whose metadata has every pair (read from
    /// each sandbox's agent, as [`crate::Sandbox::list`] does).
    pub fn metadata<K, V>(mut self, metadata: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        self.metadata = pairs(metadata);
        self
    }

    /// The listing this query is.
    pub(crate) fn list_query(&self) -> ListQuery {
        let mut query = ListQuery::new();
        if !self.states.is_empty() {
            query = query.states(self.states.clone());
        }
        if let Some(image) = &self.image {
            query = query.template(image.clone());
        }
        if !self.metadata.is_empty() {
            query = query.metadata(self.metadata.clone());
        }
        query
    }
}

/// One sandbox of the fleet.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct FleetSandbox {
    /// The MicroVM id.
    pub sandbox_id: String,
    /// Its state when read.
    #[serde(serialize_with = "wire::state")]
    pub state: SandboxState,
    /// The image ARN it runs.
    pub image: String,
    /// The image's name (the ARN's last part).
    pub image_name: String,
    /// The image version.
    pub version: String,
    /// When it started (RFC 3339 in JSON).
    #[serde(serialize_with = "wire::time")]
    pub started_at: Option<SystemTime>,
    /// When the platform ends it at the latest: its start plus its maximum
    /// duration (GetMicrovm; `None` when it could not be read). A managed
    /// lifecycle's own timeout, which its agent keeps, may end it sooner.
    #[serde(serialize_with = "wire::time")]
    pub end_at: Option<SystemTime>,
    /// Its maximum duration (whole seconds in JSON).
    #[serde(serialize_with = "wire::seconds")]
    pub max_duration: Option<Duration>,
    /// Its metadata, when the query's metadata filter read it from its
    /// agent; `None` otherwise (reading it takes a probe per sandbox).
    pub metadata: Option<BTreeMap<String, String>>,
    /// Its image version's memory in MiB, when the version could be read.
    pub memory_mib: Option<u32>,
    /// Its vCPUs, when its memory is one of the sizes' (docs/sizes.md).
    pub vcpu: Option<u32>,
}

/// One image with its versions.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct FleetImage {
    /// The image ARN.
    pub image_arn: String,
    /// Its name.
    pub name: String,
    /// `CREATING`, `ACTIVE`, ... as the service spells it.
    pub state: String,
    /// The newest version that built and is active.
    pub latest_active_version: Option<String>,
    /// The newest version whose build failed.
    pub latest_failed_version: Option<String>,
    /// When it was created (RFC 3339 in JSON).
    #[serde(serialize_with = "wire::time")]
    pub created_at: Option<SystemTime>,
    /// Its versions, newest first.
    pub versions: Vec<FleetImageVersion>,
    /// Why `versions` is empty although the image has some: the listing
    /// failed (the error's kind, e.g. `authentication`); `None` otherwise.
    pub versions_error: Option<String>,
}

/// One version of an image.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct FleetImageVersion {
    /// The version.
    pub version: String,
    /// Its build's state (`SUCCESSFUL`, `FAILED`, ...).
    pub state: String,
    /// `ACTIVE` or `INACTIVE`.
    pub status: String,
    /// The base image version it was built on.
    pub base_image_version: Option<String>,
    /// Its memory in MiB.
    pub memory_mib: Option<u32>,
    /// When it was created (RFC 3339 in JSON).
    #[serde(serialize_with = "wire::time")]
    pub created_at: Option<SystemTime>,
}

impl From<ImageVersionItem> for FleetImageVersion {
    fn from(v: ImageVersionItem) -> Self {
        Self {
            version: v.version,
            state: v.state,
            status: v.status,
            base_image_version: v.base_image_version,
            memory_mib: v.memory_mib,
            created_at: v.created_at,
        }
    }
}

impl Fleet {
    /// The sandboxes `query` selects, every page of them, each with its
    /// image, version, end and size when known: ListMicrovms, then one
    /// GetMicrovm per sandbox and one ListMicrovmImageVersions per image
    /// (all free). A sandbox gone between the listing and its GetMicrovm
    /// is kept with the listed state and no end.
    ///
    /// # Errors
    /// As [`crate::Sandbox::list`] (a metadata probe that fails ends the
    /// read with its error); GetMicrovm failures other than not-found.
    pub async fn sandboxes(&self, query: FleetQuery) -> Result<Vec<FleetSandbox>, SandboxError> {
        boxed!(Result<Vec<FleetSandbox>, SandboxError>, {
            let summaries: Vec<_> = self.client.list(query.list_query()).try_collect().await?;
            let images: Vec<String> = {
                let mut arns: Vec<String> = summaries.iter().map(|s| s.template.clone()).collect();
                arns.sort();
                arns.dedup();
                arns
            };
            let memory = self.version_memory(images).await;
            // The futures are made first (they run only when polled): a
            // closure inside the stream would not be `Send` for every
            // lifetime.
            let reads: Vec<_> = summaries
                .into_iter()
                .map(|summary| self.sandbox_of(summary, &memory))
                .collect();
            futures_util::stream::iter(reads)
                .buffered(READ_CONCURRENCY)
                .try_collect()
                .await
        })
    }

    /// Every image of the account (ListMicrovmImages, all pages), each
    /// with its versions newest first (ListMicrovmImageVersions). An image
    /// whose versions cannot be read is kept with none and the failure's
    /// kind in `versions_error`.
    ///
    /// # Errors
    /// ListMicrovmImages failures (`Authentication` without
    /// `lambda:ListMicrovmImages`, ...).
    pub async fn images(&self) -> Result<Vec<FleetImage>, SandboxError> {
        boxed!(Result<Vec<FleetImage>, SandboxError>, {
            let control = self.client.backend().control.clone();
            let items: Vec<ImageItem> = all_pages(|token| control.list_images(token)).await?;
            let reads: Vec<_> = items
                .into_iter()
                .map(|image| self.image_of(image))
                .collect();
            Ok(futures_util::stream::iter(reads)
                .buffered(READ_CONCURRENCY)
                .collect()
                .await)
        })
    }

    /// `summary` with its end (GetMicrovm) and its size (`memory`).
    async fn sandbox_of(
        &self,
        summary: crate::sandbox::SandboxSummary,
        memory: &HashMap<(String, String), Option<u32>>,
    ) -> Result<FleetSandbox, SandboxError> {
        let (end_at, max_duration) = self.end_of(&summary.sandbox_id).await?;
        let memory_mib = memory
            .get(&(summary.template.clone(), major(&summary.template_version)))
            .copied()
            .flatten();
        Ok(FleetSandbox {
            image_name: image_name(&summary.template).to_owned(),
            vcpu: memory_mib
                .and_then(|mib| crate::Size::for_memory_mib(mib).ok())
                .map(crate::Size::vcpus),
            sandbox_id: summary.sandbox_id,
            state: summary.state,
            image: summary.template,
            version: summary.template_version,
            started_at: summary.started_at,
            end_at,
            max_duration,
            metadata: summary.metadata,
            memory_mib,
        })
    }

    /// `image` with its versions.
    async fn image_of(&self, image: ImageItem) -> FleetImage {
        let (versions, versions_error) = match self.versions(&image.arn).await {
            Ok(versions) => (versions, None),
            Err(err) => (Vec::new(), Some(err.kind().as_str().to_owned())),
        };
        FleetImage {
            image_arn: image.arn,
            name: image.name,
            state: image.state,
            latest_active_version: image.latest_active_version,
            latest_failed_version: image.latest_failed_version,
            created_at: image.created_at,
            versions: versions.into_iter().map(FleetImageVersion::from).collect(),
            versions_error,
        }
    }

    /// The versions of the image `arn`, newest first.
    async fn versions(&self, arn: &str) -> Result<Vec<ImageVersionItem>, SandboxError> {
        let control = self.client.backend().control.clone();
        let mut versions =
            all_pages(|token| control.list_image_versions(arn.to_owned(), token)).await?;
        versions.sort_by_key(|v| std::cmp::Reverse(v.created_at));
        Ok(versions)
    }

    /// The memory of every version of `images`, by (ARN, version); an
    /// image whose versions cannot be read has none (its sandboxes' size
    /// is unknown rather than the read failing).
    async fn version_memory(&self, images: Vec<String>) -> HashMap<(String, String), Option<u32>> {
        let reads: Vec<_> = images.into_iter().map(|arn| self.memory_of(arn)).collect();
        futures_util::stream::iter(reads)
            .buffer_unordered(READ_CONCURRENCY)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// The memory of each version of the image `arn` (none when they
    /// cannot be read).
    async fn memory_of(&self, arn: String) -> Vec<((String, String), Option<u32>)> {
        let versions = self.versions(&arn).await.unwrap_or_default();
        versions
            .into_iter()
            .map(|v| ((arn.clone(), major(&v.version)), v.memory_mib))
            .collect()
    }

    /// The end and maximum duration of `sandbox_id` (GetMicrovm); both
    /// `None` when it is gone.
    async fn end_of(
        &self,
        sandbox_id: &str,
    ) -> Result<(Option<SystemTime>, Option<Duration>), SandboxError> {
        match self.client.get_info_by_id(sandbox_id).await {
            Ok(info) => Ok((
                info.started_at.map(|at| at + info.max_duration),
                Some(info.max_duration),
            )),
            Err(err) if err.kind() == ErrorKind::SandboxNotFound => Ok((None, None)),
            Err(err) => Err(err),
        }
    }
}

/// A version's major number: a MicroVM reports `1.0` for the image
/// version the version listing calls `1`.
fn major(version: &str) -> String {
    version.split('.').next().unwrap_or(version).to_owned()
}

/// Metadata pairs as owned strings (a query's and a bulk filter's).
pub(crate) fn pairs<K, V>(metadata: impl IntoIterator<Item = (K, V)>) -> BTreeMap<String, String>
where
    K: Into<String>,
    V: Into<String>,
{
    metadata
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
}

/// Every page of a listing, `MAX_PAGES` at most.
async fn all_pages<T, F, Fut>(mut page: F) -> Result<Vec<T>, SandboxError>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<Page<T>, SandboxError>>,
{
    let mut items = Vec::new();
    let mut token = None;
    for _ in 0..MAX_PAGES {
        let out = page(token.take()).await?;
        items.extend(out.items);
        match out.next_token {
            Some(next) if !next.is_empty() => token = Some(next),
            _ => break,
        }
    }
    Ok(items)
}

/// The name part of an image ARN (`...:microvm-image:<name>`), or the text
/// itself.
fn image_name(arn: &str) -> &str {
    arn.rsplit([':', '/']).next().unwrap_or(arn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_name_is_the_arns_last_part() {
        assert_eq!(
            image_name("arn:aws:lambda:us-east-1:123456789012:microvm-image:rayito-base"),
            "rayito-base"
        );
        assert_eq!(image_name("rayito-base"), "rayito-base");
    }
}
