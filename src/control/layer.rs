//! The layers over a [`ControlPlane`] (pacing, retries): a [`Layer`] says
//! once what it does around one call, and [`Layered`] applies it to every
//! operation of the control plane under it.

use std::fmt;

use futures_util::future::BoxFuture;

use super::{
    AuthTokenRequest, ControlPlane, ImageSummary, ListPage, ListRequest, Microvm, RunRequest,
};
use crate::error::SandboxError;
use crate::secret::Secret;

/// The operations of a [`ControlPlane`]; the first seven in the order of
/// [`super::pacing::Pacing`]'s rates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Run = 0,
    Get,
    Suspend,
    Resume,
    Terminate,
    AuthToken,
    List,
    GetImage,
    /// ListMicrovmImages (feature `fleet`).
    #[cfg(feature = "fleet")]
    ListImages,
    /// ListMicrovmImageVersions (feature `fleet`).
    #[cfg(feature = "fleet")]
    ListImageVersions,
}

impl Operation {
    /// The operation's name in the service's API.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Run => "RunMicrovm",
            Self::Get => "GetMicrovm",
            Self::Suspend => "SuspendMicrovm",
            Self::Resume => "ResumeMicrovm",
            Self::Terminate => "TerminateMicrovm",
            Self::AuthToken => "CreateMicrovmAuthToken",
            Self::List => "ListMicrovms",
            Self::GetImage => "GetMicrovmImage",
            #[cfg(feature = "fleet")]
            Self::ListImages => "ListMicrovmImages",
            #[cfg(feature = "fleet")]
            Self::ListImageVersions => "ListMicrovmImageVersions",
        }
    }
}

/// One call of an operation, which a layer may make more than once: each
/// call sends the same request again.
pub(crate) type Call<'a, T> =
    Box<dyn FnMut() -> BoxFuture<'a, Result<T, SandboxError>> + Send + 'a>;

/// What a layer does around every call of the control plane under it.
pub(crate) trait Layer: Send + Sync {
    /// The name the layered control plane shows in `Debug`.
    const NAME: &'static str;

    /// `operation`, made through `call`.
    fn around<'a, T: Send + 'a>(
        &'a self,
        operation: Operation,
        call: Call<'a, T>,
    ) -> BoxFuture<'a, Result<T, SandboxError>>;
}

/// The control plane `inner` under `layer`.
pub(crate) struct Layered<L, C> {
    layer: L,
    inner: C,
}

impl<L: Layer, C: ControlPlane> Layered<L, C> {
    /// `inner` under `layer`.
    pub(crate) fn under(layer: L, inner: C) -> Self {
        Self { layer, inner }
    }

    fn around<'a, T: Send + 'a>(
        &'a self,
        operation: Operation,
        call: impl FnMut() -> BoxFuture<'a, Result<T, SandboxError>> + Send + 'a,
    ) -> BoxFuture<'a, Result<T, SandboxError>> {
        self.layer.around(operation, Box::new(call))
    }
}

impl<L: Layer, C: fmt::Debug> fmt::Debug for Layered<L, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(L::NAME)
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<L: Layer, C: ControlPlane> ControlPlane for Layered<L, C> {
    fn run_microvm(&self, request: RunRequest) -> BoxFuture<'_, Result<Microvm, SandboxError>> {
        // The same request, hence the same clientToken, on every attempt.
        self.around(Operation::Run, move || {
            self.inner.run_microvm(request.clone())
        })
    }

    fn get_microvm(&self, id: String) -> BoxFuture<'_, Result<Microvm, SandboxError>> {
        self.around(Operation::Get, move || self.inner.get_microvm(id.clone()))
    }

    fn terminate_microvm(&self, id: String) -> BoxFuture<'_, Result<(), SandboxError>> {
        self.around(Operation::Terminate, move || {
            self.inner.terminate_microvm(id.clone())
        })
    }

    fn create_auth_token(
        &self,
        request: AuthTokenRequest,
    ) -> BoxFuture<'_, Result<Secret, SandboxError>> {
        self.around(Operation::AuthToken, move || {
            self.inner.create_auth_token(request.clone())
        })
    }

    fn suspend_microvm(&self, id: String) -> BoxFuture<'_, Result<(), SandboxError>> {
        self.around(Operation::Suspend, move || {
            self.inner.suspend_microvm(id.clone())
        })
    }

    fn resume_microvm(&self, id: String) -> BoxFuture<'_, Result<(), SandboxError>> {
        self.around(Operation::Resume, move || {
            self.inner.resume_microvm(id.clone())
        })
    }

    fn list_microvms(&self, request: ListRequest) -> BoxFuture<'_, Result<ListPage, SandboxError>> {
        self.around(Operation::List, move || {
            self.inner.list_microvms(request.clone())
        })
    }

    fn get_image(&self, image: String) -> BoxFuture<'_, Result<ImageSummary, SandboxError>> {
        self.around(Operation::GetImage, move || {
            self.inner.get_image(image.clone())
        })
    }

    #[cfg(feature = "fleet")]
    fn list_images(
        &self,
        next_token: Option<String>,
    ) -> BoxFuture<'_, Result<super::Page<super::ImageItem>, SandboxError>> {
        self.around(Operation::ListImages, move || {
            self.inner.list_images(next_token.clone())
        })
    }

    #[cfg(feature = "fleet")]
    fn list_image_versions(
        &self,
        image: String,
        next_token: Option<String>,
    ) -> BoxFuture<'_, Result<super::Page<super::ImageVersionItem>, SandboxError>> {
        self.around(Operation::ListImageVersions, move || {
            self.inner
                .list_image_versions(image.clone(), next_token.clone())
        })
    }
}
