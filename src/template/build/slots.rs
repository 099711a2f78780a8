//! The process-wide build guard: at most [`BUILD_QUOTA`] builds submitted
//! at once from this process, the 11th refused at once (the account's
//! quota would refuse it anyway, after an upload).

use std::sync::{Arc, OnceLock};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::aws::microvms::images::BUILD_QUOTA;
use crate::error::SandboxError;

fn slots() -> &'static Arc<Semaphore> {
    static SLOTS: OnceLock<Arc<Semaphore>> = OnceLock::new();
    SLOTS.get_or_init(|| Arc::new(Semaphore::new(BUILD_QUOTA as usize)))
}

/// A slot, held while a build is submitted (and, for `build`, waited on).
///
/// # Errors
/// `Build { build_quota }` when every slot is taken.
pub(crate) fn take() -> Result<OwnedSemaphorePermit, SandboxError> {
    slots()
        .clone()
        .try_acquire_owned()
        .map_err(|_| SandboxError::build_quota(BUILD_QUOTA))
}
