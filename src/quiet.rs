//! The AWS SDK's own tracing, kept away from every subscriber. At TRACE,
//! `aws-smithy-runtime` and `aws-sigv4` log whole requests (URIs with the
//! bucket and key, canonical requests, the access key id, a proxy token in
//! clear) and the credential chain logs what it found: no application
//! subscriber may see that. The SDK's own events say what happened
//! instead. Every future that runs an AWS SDK call is awaited through
//! [`Quiet::quiet`].

use std::future::Future;

use tracing::instrument::{WithDispatch, WithSubscriber as _};

/// `.quiet()` on a future: polled with no subscriber at all.
pub(crate) trait Quiet: Future + Sized {
    /// This future, silenced.
    fn quiet(self) -> WithDispatch<Self> {
        self.with_subscriber(tracing::Dispatch::none())
    }
}

impl<F: Future> Quiet for F {}
