//! Lifecycle events' part in `create`: the builder's setter, the checks
//! before launch (logging to CloudWatch, the events' backend the
//! sandbox's, no pool, no connect), the stack key read once before launch
//! (a stack that is not deployed launches nothing), and the
//! `lifecycle_events` section of the one Configure after readiness.

use super::LifecycleEvents;
use crate::configure::{Section, SectionPlan};
use crate::error::SandboxError;
use crate::error::messages as m;
use crate::pb;
use crate::sandbox::parts::Parts;
use crate::sandbox::steps::{Launch, Stage, Step, StepFuture};
use crate::sandbox::{Sandbox, SandboxBuilder};

/// The events given to a builder (its part).
#[derive(Clone, Debug)]
struct BuilderEvents(LifecycleEvents);

/// The events a `create` configures once the sandbox is ready.
#[derive(Clone, Debug)]
struct ToConfigure(LifecycleEvents);

/// The events setter of the sandbox builder.
impl SandboxBuilder {
    /// Emits the sandbox's lifecycle events (created, paused, resumed,
    /// killed) into `events`' stack, which keeps them and delivers them to
    /// its webhooks (docs/events.md). The sandbox must log to CloudWatch
    /// ([`SandboxLogging::cloudwatch`](crate::SandboxLogging::cloudwatch) or
    /// a group): the stack reads the signed event lines from the sandbox's
    /// logs (on AWS, from the stack's `LogGroupName`).
    ///
    /// `create` checks the logging and that `events` is bound to the
    /// builder's backend before any call, reads the stack key once per
    /// `LifecycleEvents` (a stack not deployed fails `Webhook` before
    /// launching), and after readiness sends the sandbox's own key (derived
    /// from the stack key and the sandbox id) in the one Configure. An
    /// agent without the feature fails `Unimplemented`
    /// (`lifecycle_events`) and the sandbox is terminated unless
    /// [`Self::keep_on_failure`]. A pool's builder and `connect` refuse
    /// events.
    ///
    /// Only with the `events` cargo feature.
    pub fn events(mut self, events: LifecycleEvents) -> Self {
        self.parts_mut().set(BuilderEvents(events));
        self
    }
}

fn given(builder: &SandboxBuilder) -> Option<&LifecycleEvents> {
    builder.parts().get::<BuilderEvents>().map(|e| &e.0)
}

/// Lifecycle events' steps.
pub(crate) struct Steps;

impl Step for Steps {
    fn check_create(&self, builder: &SandboxBuilder) -> Result<(), SandboxError> {
        if given(builder).is_some() && !builder.logs_to_cloudwatch() {
            return Err(SandboxError::invalid_argument(
                "logging",
                m::EVENTS_LOGGING.render(&[]),
            ));
        }
        Ok(())
    }

    fn check_connect(&self, builder: &SandboxBuilder) -> Result<(), SandboxError> {
        match given(builder) {
            Some(_) => Err(SandboxError::invalid_argument(
                "events",
                m::EVENTS_CONNECT.render(&[]),
            )),
            None => Ok(()),
        }
    }

    fn check_pooled(&self, builder: &SandboxBuilder) -> Result<(), SandboxError> {
        match given(builder) {
            Some(_) => Err(SandboxError::invalid_argument(
                "events",
                m::EVENTS_POOLED.render(&[]),
            )),
            None => Ok(()),
        }
    }

    fn prepare(
        &self,
        builder: &SandboxBuilder,
        stage: Stage,
        handle: &mut Parts,
    ) -> Result<(), SandboxError> {
        if stage == Stage::Create
            && let Some(events) = given(builder)
        {
            handle.set(ToConfigure(events.clone()));
        }
        Ok(())
    }

    fn before_launch<'a>(&'a self, at: Launch<'a>) -> StepFuture<'a, ()> {
        Box::pin(async move {
            let Some(ToConfigure(events)) = at.handle.get::<ToConfigure>() else {
                return Ok(());
            };
            same_backend(events, at.client)?;
            events.stack_key().await.map(drop)
        })
    }

    fn configure_section<'a>(
        &'a self,
        sandbox: &'a Sandbox,
    ) -> StepFuture<'a, Option<SectionPlan>> {
        Box::pin(async move {
            let Some(ToConfigure(events)) = sandbox.parts().get::<ToConfigure>() else {
                return Ok(None);
            };
            let stack_key = events.stack_key().await?;
            let info = sandbox.get_info().await?;
            let request = section(
                stack_key,
                sandbox.id(),
                &info.image_arn,
                &info.image_version,
            );
            Ok(Some(SectionPlan::generic(
                Section::LifecycleEvents,
                request,
            )))
        })
    }
}

/// The request carrying only the `lifecycle_events` section of
/// `sandbox_id` (its key derived from `stack_key`).
pub(super) fn section(
    stack_key: &[u8],
    sandbox_id: &str,
    image_arn: &str,
    image_version: &str,
) -> pb::ConfigureRequest {
    let key = rayito_events::key::sandbox_key(stack_key, sandbox_id);
    pb::ConfigureRequest {
        lifecycle_events: Some(pb::LifecycleEventsConfig {
            sandbox_key: key.to_vec(),
            sandbox_id: sandbox_id.to_owned(),
            image_arn: image_arn.to_owned(),
            image_version: image_version.to_owned(),
        }),
        ..Default::default()
    }
}

/// Refuses events bound to another backend than the sandbox's client: a
/// local events API must be the client's own emulator; AWS events need a
/// client of AWS (not the embedded local backend).
fn same_backend(events: &LifecycleEvents, client: &crate::Client) -> Result<(), SandboxError> {
    let sandbox = if client.is_local() { "local" } else { "aws" };
    let (same, events_name) = match events.local_endpoint() {
        Some(mine) => (
            local_endpoint(client).as_deref() == Some(mine),
            if client.is_local() {
                "another local"
            } else {
                "local"
            },
        ),
        None => (!client.is_local(), "aws"),
    };
    if same {
        return Ok(());
    }
    Err(SandboxError::invalid_argument(
        "events",
        m::EVENTS_BACKEND.render(&[("events", events_name), ("sandbox", sandbox)]),
    ))
}

/// The endpoint of `client`'s control plane when it is not AWS's: the
/// embedded local backend's, or the one its options set (the CLI's local
/// daemon).
fn local_endpoint(client: &crate::Client) -> Option<String> {
    let backend = client.backend();
    embedded_endpoint(backend)
        .or_else(|| {
            backend
                .sdk_config
                .as_ref()
                .and_then(|c| c.endpoint_url().map(str::to_owned))
        })
        .map(|e| e.trim_end_matches('/').to_owned())
}

#[cfg(feature = "local")]
fn embedded_endpoint(backend: &crate::sandbox::backend::ResolvedBackend) -> Option<String> {
    backend.local.as_ref().map(|l| l.endpoint_url().to_owned())
}

#[cfg(not(feature = "local"))]
fn embedded_endpoint(_backend: &crate::sandbox::backend::ResolvedBackend) -> Option<String> {
    None
}
