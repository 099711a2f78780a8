//! The `agent` kind's data: why an AI agent run failed
//! ([`AgentFailureReason`], a closed list), the tokens it had spent
//! ([`TokenUsage`]) and the fixed message of each reason. A message never
//! carries the provider's text, the prompt or sandbox content: only the
//! reason's sentence and, at most, a short `detail_code` (an error class
//! name such as `APIError`) in parentheses.

use serde::{Deserialize, Serialize};

use super::messages as m;

/// Why an agent run failed. `model_error`, `runtime_error` and
/// `protocol_error` can come from the runtime itself; the others are
/// decided by the SDK (limits, abort, the sandbox's state).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentFailureReason {
    /// The model (through its gateway) answered an error.
    ModelError,
    /// The runtime exited non-zero without `done`, or said so.
    RuntimeError,
    /// The runtime's check failed: it is not installed in the image.
    RuntimeMissing,
    /// Reserved: the image's runtime is another version than the one asked.
    RuntimeVersionMismatch,
    /// The runtime ended without `done` and a session, or reported a
    /// failure it may not report.
    ProtocolError,
    /// The run went past `AgentLimits::timeout`.
    Timeout,
    /// A step started past `AgentLimits::max_steps`.
    MaxSteps,
    /// The tokens spent went past `AgentLimits::max_total_tokens`.
    TokenBudget,
    /// Reserved: the run's output went past its limit.
    OutputLimit,
    /// The caller aborted the run (`AgentStream::abort`).
    Aborted,
    /// Another agent run is in progress in this sandbox.
    Busy,
}

impl AgentFailureReason {
    /// Every reason, in the reference's order.
    pub const ALL: [Self; 11] = [
        Self::ModelError,
        Self::RuntimeError,
        Self::RuntimeMissing,
        Self::RuntimeVersionMismatch,
        Self::ProtocolError,
        Self::Timeout,
        Self::MaxSteps,
        Self::TokenBudget,
        Self::OutputLimit,
        Self::Aborted,
        Self::Busy,
    ];

    /// The stable string (`max_steps`), as the protocol and the wire form
    /// write it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ModelError => "model_error",
            Self::RuntimeError => "runtime_error",
            Self::RuntimeMissing => "runtime_missing",
            Self::RuntimeVersionMismatch => "runtime_version_mismatch",
            Self::ProtocolError => "protocol_error",
            Self::Timeout => "timeout",
            Self::MaxSteps => "max_steps",
            Self::TokenBudget => "token_budget",
            Self::OutputLimit => "output_limit",
            Self::Aborted => "aborted",
            Self::Busy => "busy",
        }
    }

    /// The reason named `name`, if it is one.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// The fixed sentence of this reason (no detail code).
    pub const fn message(self) -> &'static str {
        self.template().text
    }

    const fn template(self) -> m::Template {
        match self {
            Self::ModelError => m::AGENT_MODEL_ERROR,
            Self::RuntimeError => m::AGENT_RUNTIME_ERROR,
            Self::RuntimeMissing => m::AGENT_RUNTIME_MISSING,
            Self::RuntimeVersionMismatch => m::AGENT_RUNTIME_VERSION_MISMATCH,
            Self::ProtocolError => m::AGENT_PROTOCOL_ERROR,
            Self::Timeout => m::AGENT_TIMEOUT,
            Self::MaxSteps => m::AGENT_MAX_STEPS,
            Self::TokenBudget => m::AGENT_TOKEN_BUDGET,
            Self::OutputLimit => m::AGENT_OUTPUT_LIMIT,
            Self::Aborted => m::AGENT_ABORTED,
            Self::Busy => m::AGENT_BUSY,
        }
    }
}

impl std::fmt::Display for AgentFailureReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Tokens of one step or of a whole run. `input` excludes the tokens read
/// from the cache (`cache_read`) and written to it (`cache_write`), as
/// providers bill them apart; [`TokenUsage::total`] adds all five. No cost:
/// prices depend on the region and the account.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TokenUsage {
    /// Input tokens (cache reads and writes excluded).
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Reasoning tokens.
    pub reasoning: u64,
    /// Tokens read from the prompt cache.
    pub cache_read: u64,
    /// Tokens written to the prompt cache.
    pub cache_write: u64,
}

impl TokenUsage {
    /// A usage of `input` and `output` tokens (the rest zero).
    pub const fn new(input: u64, output: u64) -> Self {
        Self {
            input,
            output,
            reasoning: 0,
            cache_read: 0,
            cache_write: 0,
        }
    }

    /// With `reasoning`, `cache_read` and `cache_write` set.
    #[must_use]
    pub const fn with_details(mut self, reasoning: u64, cache_read: u64, cache_write: u64) -> Self {
        self.reasoning = reasoning;
        self.cache_read = cache_read;
        self.cache_write = cache_write;
        self
    }

    /// All five added (saturating).
    pub const fn total(&self) -> u64 {
        self.input
            .saturating_add(self.output)
            .saturating_add(self.reasoning)
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write)
    }
}

impl std::ops::Add for TokenUsage {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self {
            input: self.input.saturating_add(other.input),
            output: self.output.saturating_add(other.output),
            reasoning: self.reasoning.saturating_add(other.reasoning),
            cache_read: self.cache_read.saturating_add(other.cache_read),
            cache_write: self.cache_write.saturating_add(other.cache_write),
        }
    }
}

impl std::ops::AddAssign for TokenUsage {
    fn add_assign(&mut self, other: Self) {
        *self = *self + other;
    }
}

/// What an `agent` error carries besides its message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AgentFailure {
    /// Why the run failed.
    pub reason: AgentFailureReason,
    /// The run's session (`rda_` and 32 hex), when the runtime gave one.
    pub session_id: Option<String>,
    /// The runtime's exit code, when it exited.
    pub exit_code: Option<i32>,
    /// A short error class name from the runtime (`APIError`), when it
    /// gave a safe one ([`safe_detail_code`]).
    pub detail_code: Option<String>,
    /// The tokens spent before the failure, as far as reported.
    pub usage: Option<TokenUsage>,
}

impl AgentFailure {
    /// A failure for `reason` and nothing else.
    pub const fn new(reason: AgentFailureReason) -> Self {
        Self {
            reason,
            session_id: None,
            exit_code: None,
            detail_code: None,
            usage: None,
        }
    }

    /// The message: the reason's sentence, with ` (<detail_code>)` when
    /// there is a safe detail code.
    pub fn message(&self) -> String {
        failure_message(self.reason, self.detail_code.as_deref())
    }
}

/// Longest detail code.
pub const MAX_DETAIL_CODE_CHARS: usize = 64;

/// `code` when it is a short identifier (`[A-Za-z0-9_.-]{1,64}`, an error
/// class name); `None` otherwise, so that no free text reaches a message.
pub fn safe_detail_code(code: &str) -> Option<&str> {
    let ok = !code.is_empty()
        && code.len() <= MAX_DETAIL_CODE_CHARS
        && code
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    ok.then_some(code)
}

/// The fixed message of `reason`, with ` (<code>)` when `detail_code` is a
/// safe identifier.
pub fn failure_message(reason: AgentFailureReason, detail_code: Option<&str>) -> String {
    match detail_code.and_then(safe_detail_code) {
        Some(code) => format!("{} ({code})", reason.message()),
        None => reason.message().to_owned(),
    }
}
