//! `Fleet::plan_bulk`: the dry run of a bulk action. It reads the fleet,
//! decides for each selected sandbox whether the action would act on it or
//! skip it (and why), and derives the confirmation that
//! [`super::Fleet::run_bulk`] requires. It never acts.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use futures_util::{StreamExt as _, TryStreamExt as _};
use serde::Serialize;
use sha2::{Digest as _, Sha256};

use super::{Fleet, FleetQuery, wire};
use crate::error::messages as m;
use crate::error::{ErrorKind, SandboxError};
use crate::sandbox::lifecycle::check_sandbox_id;
use crate::state::SandboxState;

/// The most sandboxes one bulk run acts on (the reference dashboard's
/// `bulkMaxSandboxes`); skipped ones do not count.
pub const MAX_BULK_TARGETS: usize = 100;
/// The longest set-timeout (the platform's maximum duration, 8 h).
const MAX_TIMEOUT_SECS: u64 = 28_800;
/// How many GetMicrovm an id filter keeps in flight.
const LOOKUP_CONCURRENCY: usize = 8;

/// What a bulk run does to each sandbox it acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BulkAction {
    /// TerminateMicrovm.
    Kill,
    /// SuspendMicrovm, then wait for SUSPENDED.
    Pause,
    /// ResumeMicrovm, then wait for RUNNING.
    Resume,
    /// The agent's SetTimeout (EXACT): the sandbox's logical timeout moves
    /// to this long from the run. Needs a managed lifecycle and the
    /// sandbox's access token ([`super::Fleet::access_token`]).
    SetTimeout(Duration),
}

impl BulkAction {
    /// `kill`, `pause`, `resume` or `set_timeout`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Kill => "kill",
            Self::Pause => "pause",
            Self::Resume => "resume",
            Self::SetTimeout(_) => "set_timeout",
        }
    }

    /// The timeout of a set-timeout.
    pub fn timeout(self) -> Option<Duration> {
        match self {
            Self::SetTimeout(timeout) => Some(timeout),
            _ => None,
        }
    }
}

impl fmt::Display for BulkAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SetTimeout(t) => write!(f, "set_timeout {} s", t.as_secs()),
            other => f.write_str(other.name()),
        }
    }
}

/// `"kill"`, ..., `"set_timeout"` (its timeout is the plan's
/// `timeout_seconds`).
impl Serialize for BulkAction {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// Which sandboxes a bulk action selects. Every part given must match;
/// none given selects every sandbox that has not ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
#[must_use]
pub struct BulkFilter {
    /// These sandboxes (read one by one, so an ended or unknown one is
    /// listed as skipped); empty: every sandbox of the listing.
    pub ids: Vec<String>,
    /// Only sandboxes in one of these states; empty: every state but
    /// TERMINATING and TERMINATED for a listing, any state for `ids`.
    pub states: Vec<SandboxState>,
    /// Only sandboxes of this image (a name on the local backend, an image
    /// ARN on AWS; a name also matches an ARN's last part for `ids`).
    pub image: Option<String>,
    /// Only RUNNING sandboxes whose metadata has every pair (read from
    /// each sandbox's agent).
    pub metadata: BTreeMap<String, String>,
}

impl BulkFilter {
    /// Selects every sandbox that has not ended.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only these sandboxes.
    pub fn ids<I: Into<String>>(mut self, ids: impl IntoIterator<Item = I>) -> Self {
        self.ids = ids.into_iter().map(Into::into).collect();
        self
    }

    /// Only sandboxes in one of these states.
    pub fn states(mut self, states: impl IntoIterator<Item = SandboxState>) -> Self {
        self.states = states.into_iter().collect();
        self
    }

    /// Only sandboxes of this image.
    pub fn image(mut self, image: impl Into<String>) -> Self {
        self.image = Some(image.into());
        self
    }

    /// Only RUNNING sandboxes with this metadata.
    pub fn metadata<K, V>(mut self, metadata: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        self.metadata = super::inventory::pairs(metadata);
        self
    }
}

/// Whether a bulk run acts on a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BulkWill {
    /// The run applies the action to it.
    Act,
    /// The run leaves it alone (the target's reason says why).
    Skip,
}

/// One selected sandbox of a plan and what the run would do to it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct BulkTarget {
    /// The sandbox.
    pub sandbox_id: String,
    /// Its state when planned (`None` for an id the control plane does
    /// not know).
    #[serde(serialize_with = "state_or_null")]
    pub state: Option<SandboxState>,
    /// Act or skip.
    pub will: BulkWill,
    /// Why, as a stable code (docs/fleet.md lists them).
    pub reason_code: &'static str,
    /// Why, in words.
    pub reason: String,
}

fn state_or_null<S: serde::Serializer>(
    state: &Option<SandboxState>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match state {
        Some(state) => wire::state(state, s),
        None => s.serialize_none(),
    }
}

/// A bulk action's dry run: every selected sandbox with what the run would
/// do to it, and the confirmation [`super::Fleet::run_bulk`] requires.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct BulkPlan {
    /// The action.
    pub action: BulkAction,
    /// A set-timeout's timeout in seconds.
    pub timeout_seconds: Option<u64>,
    /// Every selected sandbox, in the listing's order (or the ids').
    pub targets: Vec<BulkTarget>,
    /// `<action>-<count>-<digest>`: the action, how many sandboxes it acts
    /// on and 8 hex characters of a SHA-256 over the action and their ids.
    /// A plan of other targets has another confirmation, so a fleet that
    /// changed between the dry run and the run is refused.
    pub confirmation: String,
}

impl BulkPlan {
    /// The targets the run acts on.
    pub fn acting(&self) -> Vec<&BulkTarget> {
        self.targets
            .iter()
            .filter(|t| t.will == BulkWill::Act)
            .collect()
    }

    /// How many sandboxes the run acts on.
    pub fn act_count(&self) -> usize {
        self.acting().len()
    }
}

/// The confirmation of `action` over the sandboxes `ids` acts on.
pub(crate) fn confirmation<'a>(action: BulkAction, ids: impl Iterator<Item = &'a str>) -> String {
    let ids: BTreeSet<&str> = ids.collect();
    let mut hash = Sha256::new();
    hash.update(action.name().as_bytes());
    hash.update(b"\n");
    if let Some(timeout) = action.timeout() {
        hash.update(timeout.as_secs().to_string().as_bytes());
    }
    hash.update(b"\n");
    for id in &ids {
        hash.update(id.as_bytes());
        hash.update(b"\n");
    }
    let digest = hash.finalize();
    let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{hex}", action.name().replace('_', "-"), ids.len())
}

/// What `action` does to a sandbox in `state`: act, or skip with a reason.
/// `has_token`: the fleet holds its access token (set-timeout needs it).
pub(crate) fn decide(
    action: BulkAction,
    state: &SandboxState,
    has_token: bool,
) -> (BulkWill, &'static str, String) {
    use BulkWill::{Act, Skip};
    use SandboxState as S;
    let skip = |code: &'static str, reason: String| (Skip, code, reason);
    if state.is_terminal() {
        return skip("ended", format!("already {state}: nothing to do"));
    }
    if let S::Unknown(_) = state {
        return skip(
            "unknown_state",
            format!("state {state} is unknown to this SDK: left alone"),
        );
    }
    match (action, state) {
        (BulkAction::Kill, _) => (Act, "act", "will be terminated".to_owned()),
        (BulkAction::Pause, S::Running) => (Act, "act", "will be paused".to_owned()),
        (BulkAction::Pause, S::Suspending | S::Suspended) => {
            skip("already_paused", format!("already {state}"))
        }
        (BulkAction::Resume, S::Suspended) => (Act, "act", "will be resumed".to_owned()),
        (BulkAction::Resume, S::Running) => skip("already_running", "already RUNNING".to_owned()),
        (BulkAction::Resume, S::Suspending) => skip(
            "still_pausing",
            "still SUSPENDING: resume it once it is SUSPENDED".to_owned(),
        ),
        (BulkAction::SetTimeout(t), S::Running) if has_token => (
            Act,
            "act",
            format!("its timeout will be {} s from the run", t.as_secs()),
        ),
        (BulkAction::SetTimeout(_), S::Running) => skip(
            "no_access_token",
            "the fleet holds no access token for it (set-timeout talks to its agent: Fleet::access_token)".to_owned(),
        ),
        (BulkAction::SetTimeout(_), _) => skip(
            "not_running",
            format!("{state}: set-timeout needs a RUNNING sandbox"),
        ),
        (_, S::Pending) => skip(
            "still_starting",
            "still PENDING: act once it is RUNNING".to_owned(),
        ),
        (_, _) => skip("unknown_state", format!("{state}: left alone")),
    }
}

/// Checks what needs no I/O: the ids and a set-timeout's timeout.
fn check(action: BulkAction, filter: &BulkFilter) -> Result<(), SandboxError> {
    for id in &filter.ids {
        check_sandbox_id(id)?;
    }
    if let Some(timeout) = action.timeout()
        && !(1..=MAX_TIMEOUT_SECS).contains(&timeout.as_secs())
    {
        return Err(SandboxError::invalid_argument(
            "timeout",
            m::FLEET_TIMEOUT.render(&[("seconds", &timeout.as_secs().to_string())]),
        ));
    }
    Ok(())
}

/// The refusal of a plan (or a run) that acts on more than
/// [`MAX_BULK_TARGETS`] sandboxes.
pub(crate) fn too_many(count: usize) -> SandboxError {
    SandboxError::invalid_argument(
        "filter",
        m::FLEET_TOO_MANY.render(&[
            ("count", &count.to_string()),
            ("max", &MAX_BULK_TARGETS.to_string()),
        ]),
    )
}

/// A selected sandbox before the decision: its state, or why the filter
/// leaves it out.
enum Selected {
    State(SandboxState),
    Out(&'static str, String),
}

impl Fleet {
    /// The dry run of `action` over the sandboxes `filter` selects: each
    /// with `act` or `skip` and the reason (a resume of a RUNNING sandbox
    /// skips, a kill of a TERMINATED one skips, ...), and the confirmation
    /// to pass to [`Fleet::run_bulk`]. It reads the fleet (ListMicrovms, or
    /// GetMicrovm per id) and never acts.
    ///
    /// # Errors
    /// `InvalidArgument` before any call for an id that is not 1 to 256
    /// characters (`sandbox_id`) or a set-timeout outside 1 to 28,800 s
    /// (`timeout`); `InvalidArgument` (`filter`) when more than
    /// [`MAX_BULK_TARGETS`] sandboxes would be acted on; the reads'
    /// failures.
    pub async fn plan_bulk(
        &self,
        action: BulkAction,
        filter: BulkFilter,
    ) -> Result<BulkPlan, SandboxError> {
        boxed!(Result<BulkPlan, SandboxError>, {
            check(action, &filter)?;
            let selected = if filter.ids.is_empty() {
                self.select_listed(&filter).await?
            } else {
                self.select_ids(&filter).await?
            };
            let targets: Vec<BulkTarget> = selected
                .into_iter()
                .map(|(sandbox_id, selected)| {
                    let (state, (will, reason_code, reason)) = match selected {
                        Selected::State(state) => {
                            let decision =
                                decide(action, &state, self.token(&sandbox_id).is_some());
                            (Some(state), decision)
                        }
                        Selected::Out(code, reason) => (None, (BulkWill::Skip, code, reason)),
                    };
                    BulkTarget {
                        sandbox_id,
                        state,
                        will,
                        reason_code,
                        reason,
                    }
                })
                .collect();
            let acting = targets.iter().filter(|t| t.will == BulkWill::Act);
            let count = acting.clone().count();
            if count > MAX_BULK_TARGETS {
                return Err(too_many(count));
            }
            Ok(BulkPlan {
                action,
                timeout_seconds: action.timeout().map(|t| t.as_secs()),
                confirmation: confirmation(action, acting.map(|t| t.sandbox_id.as_str())),
                targets,
            })
        })
    }

    /// The sandboxes of the listing `filter` describes.
    async fn select_listed(
        &self,
        filter: &BulkFilter,
    ) -> Result<Vec<(String, Selected)>, SandboxError> {
        let query = FleetQuery {
            states: filter.states.clone(),
            image: filter.image.clone(),
            metadata: filter.metadata.clone(),
        };
        let summaries: Vec<_> = self.client.list(query.list_query()).try_collect().await?;
        Ok(summaries
            .into_iter()
            .map(|s| (s.sandbox_id, Selected::State(s.state)))
            .collect())
    }

    /// The sandboxes `filter.ids` names (each read with GetMicrovm, once),
    /// the ones the rest of the filter leaves out marked so.
    async fn select_ids(
        &self,
        filter: &BulkFilter,
    ) -> Result<Vec<(String, Selected)>, SandboxError> {
        let mut seen = BTreeSet::new();
        let ids: Vec<&str> = filter
            .ids
            .iter()
            .map(String::as_str)
            .filter(|id| seen.insert(*id))
            .collect();
        let with_metadata: Option<BTreeSet<String>> = if filter.metadata.is_empty() {
            None
        } else {
            let query = FleetQuery::new().metadata(filter.metadata.clone());
            let listed: Vec<_> = self.client.list(query.list_query()).try_collect().await?;
            Some(listed.into_iter().map(|s| s.sandbox_id).collect())
        };
        let lookups: Vec<_> = ids
            .into_iter()
            .map(|id| self.select_id(id, filter, with_metadata.as_ref()))
            .collect();
        futures_util::stream::iter(lookups)
            .buffered(LOOKUP_CONCURRENCY)
            .try_collect()
            .await
    }

    /// The sandbox `id` (GetMicrovm) as `filter` selects it.
    async fn select_id(
        &self,
        id: &str,
        filter: &BulkFilter,
        with_metadata: Option<&BTreeSet<String>>,
    ) -> Result<(String, Selected), SandboxError> {
        let info = match self.client.get_info_by_id(id).await {
            Ok(info) => info,
            Err(err) if err.kind() == ErrorKind::SandboxNotFound => {
                return Ok((
                    id.to_owned(),
                    Selected::Out(
                        "not_found",
                        "not found: it ended or never existed".to_owned(),
                    ),
                ));
            }
            Err(err) => return Err(err),
        };
        let selected = if !filter.states.is_empty() && !filter.states.contains(&info.state) {
            Selected::Out(
                "filtered_state",
                format!("{} is not among the filter's states", info.state),
            )
        } else if filter
            .image
            .as_deref()
            .is_some_and(|image| !image_matches(&info.image_arn, image))
        {
            Selected::Out("filtered_image", "its image is not the filter's".to_owned())
        } else if with_metadata.is_some_and(|m| !m.contains(id)) {
            Selected::Out(
                "filtered_metadata",
                "its metadata does not match the filter's (or it is not RUNNING)".to_owned(),
            )
        } else {
            Selected::State(info.state)
        };
        Ok((id.to_owned(), selected))
    }
}

/// Whether the image ARN `arn` is the filter's `image` (an ARN, or a name
/// matching the ARN's last part).
fn image_matches(arn: &str, image: &str) -> bool {
    arn == image || arn.rsplit([':', '/']).next() == Some(image)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_action_acts_or_skips_by_state() {
        use BulkWill::{Act, Skip};
        use SandboxState as S;
        let t = BulkAction::SetTimeout(Duration::from_secs(60));
        let rows = [
            (BulkAction::Kill, S::Running, Act),
            (BulkAction::Kill, S::Suspended, Act),
            (BulkAction::Kill, S::Pending, Act),
            (BulkAction::Kill, S::Terminated, Skip),
            (BulkAction::Kill, S::Terminating, Skip),
            (BulkAction::Pause, S::Running, Act),
            (BulkAction::Pause, S::Suspended, Skip),
            (BulkAction::Pause, S::Suspending, Skip),
            (BulkAction::Pause, S::Pending, Skip),
            (BulkAction::Resume, S::Suspended, Act),
            (BulkAction::Resume, S::Running, Skip),
            (BulkAction::Resume, S::Suspending, Skip),
            (BulkAction::Resume, S::Terminated, Skip),
            (t, S::Running, Act),
            (t, S::Suspended, Skip),
        ];
        for (action, state, will) in rows {
            assert_eq!(decide(action, &state, true).0, will, "{action} of {state}");
        }
        assert_eq!(decide(t, &S::Running, false).1, "no_access_token");
    }

    #[test]
    fn a_confirmation_names_the_action_and_count_and_covers_the_ids() {
        let a = confirmation(BulkAction::Kill, ["b", "a"].into_iter());
        assert!(a.starts_with("kill-2-"), "{a}");
        assert_eq!(a.len(), "kill-2-".len() + 8);
        // The order of the ids does not matter; the ids and action do.
        assert_eq!(a, confirmation(BulkAction::Kill, ["a", "b"].into_iter()));
        assert_ne!(a, confirmation(BulkAction::Kill, ["a", "c"].into_iter()));
        assert_ne!(a, confirmation(BulkAction::Pause, ["a", "b"].into_iter()));
        let t = |s| {
            confirmation(
                BulkAction::SetTimeout(Duration::from_secs(s)),
                ["a"].into_iter(),
            )
        };
        assert!(t(60).starts_with("set-timeout-1-"));
        assert_ne!(t(60), t(61));
    }

    #[test]
    fn a_plan_past_the_bound_is_refused_with_its_message() {
        let err = too_many(MAX_BULK_TARGETS + 1);
        assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument);
        assert!(
            err.to_string().ends_with(
                "bulk action: 101 sandboxes would be acted on, more than the 100 of one run; \
                 narrow the filter (ids, states, image or metadata) and run it in parts"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_name_matches_an_arns_last_part() {
        let arn = "arn:aws:lambda:us-east-1:123456789012:microvm-image:rayito-base";
        assert!(image_matches(arn, "rayito-base"));
        assert!(image_matches(arn, arn));
        assert!(!image_matches(arn, "rayito"));
    }
}
