//! The hook through which large reads and writes leave gRPC: a feature
//! (the S3 staging of `transfer`) puts a [`StagingHook`] in the handle's
//! parts, and the file view asks it before each read and write. Without
//! one everything goes over gRPC.

use bytes::Bytes;
use futures_util::stream::BoxStream;

use super::EntryInfo;
use crate::sandbox::Sandbox;
use crate::sandbox::steps::StepFuture;

/// A file a staged read or write moves, and the operation's name.
#[cfg_attr(not(feature = "s3"), allow(dead_code))]
pub(crate) struct StagedFile<'a> {
    pub(crate) sandbox: &'a Sandbox,
    pub(crate) path: &'a str,
    pub(crate) feature: &'static str,
}

/// A staged read's bytes.
pub(crate) type Feed = Box<dyn ChunkFeed>;

/// A staged write's bytes.
pub(crate) type Chunks = BoxStream<'static, Bytes>;

/// The bytes of a read that do not come from the agent's Read stream.
pub(crate) trait ChunkFeed: Send {
    /// The next chunk; `None` at the end (a failure is the last item).
    fn next(&mut self) -> StepFuture<'_, Option<Bytes>>;
}

/// What the file view asks a staging.
pub(crate) trait FileStaging: Send + Sync {
    /// Whether the handle stages anything at all.
    fn active(&self, sandbox: &Sandbox) -> bool;

    /// A staged read of `file` (`size` bytes when stat'ed), or `None` to
    /// read over gRPC.
    fn open_read<'a>(&'a self, file: StagedFile<'a>, size: u64) -> StepFuture<'a, Option<Feed>>;

    /// Whether a write of `len` bytes (a stream: `None`) is staged.
    fn stages_write<'a>(&'a self, sandbox: &'a Sandbox, len: Option<u64>) -> StepFuture<'a, bool>;

    /// A staged write of `chunks` to `file` (the caller checked
    /// [`FileStaging::stages_write`]).
    fn write<'a>(&'a self, file: StagedFile<'a>, chunks: Chunks) -> StepFuture<'a, EntryInfo>;
}

/// The staging of a handle, as a part of it.
pub(crate) struct StagingHook(pub(crate) Box<dyn FileStaging>);

crate::secret::redacted_debug!(non_exhaustive StagingHook);

/// The staging of `sandbox`'s file view when it stages anything.
pub(crate) fn of(sandbox: &Sandbox) -> Option<&dyn FileStaging> {
    let hook = sandbox.parts().get::<StagingHook>()?;
    hook.0.active(sandbox).then_some(&*hook.0)
}
