//! The events of a run and its result. A runtime's protocol v1 lines become
//! [`AgentEvent`]s (src/agent/protocol.rs); the SDK's limits may end the
//! run with an [`AgentEvent::AgentFailed`] of its own; [`AgentResult`] sums
//! a successful run up.

use serde::Serialize;

use crate::error::{AgentFailure, TokenUsage};

/// Longest tool output kept in a [`ToolCall`] (64 KiB; longer is cut at a
/// character boundary and `output_truncated` set).
pub const MAX_TOOL_OUTPUT_BYTES: usize = 64 * 1024;

/// How a tool call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    /// It ran.
    Completed,
    /// It failed (the agent saw the failure and may go on).
    Error,
}

/// A finished tool call.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ToolCall {
    /// The runtime's id of the call.
    pub call_id: String,
    /// The tool (`bash`, `edit`, ...).
    pub name: String,
    /// How it ended.
    pub status: ToolCallStatus,
    /// Its input, a JSON object, when reported.
    pub input: Option<serde_json::Map<String, serde_json::Value>>,
    /// Its output, at most 64 KiB.
    pub output: Option<String>,
    /// Whether `output` was cut.
    pub output_truncated: bool,
}

/// One event of a run, in the runtime's order. A stream ends after
/// [`AgentEvent::Done`] or [`AgentEvent::AgentFailed`].
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// A piece of text in progress.
    TextDelta {
        /// The piece.
        text: String,
    },
    /// A whole block of the assistant's text.
    Text {
        /// The block.
        text: String,
    },
    /// The model's reasoning (only with `AgentSpec::reasoning(true)`).
    Reasoning {
        /// The reasoning text.
        text: String,
    },
    /// A finished tool call.
    ToolCall(ToolCall),
    /// Step `index` (from 1) starts: one call to the model.
    StepStarted {
        /// The step's number.
        index: u32,
    },
    /// Step `index` ended with its tokens.
    StepFinished {
        /// The step's number.
        index: u32,
        /// Its tokens.
        usage: TokenUsage,
        /// Why the model stopped (`stop`, `tool_calls`), when reported.
        finish_reason: Option<String>,
    },
    /// The run failed: the last event. The same failure is the error of
    /// `run()` ([`SandboxError::Agent`](crate::SandboxError::Agent)).
    AgentFailed(AgentFailure),
    /// The run succeeded: the last event.
    Done {
        /// The session (`rda_` and 32 hex), to continue it.
        session_id: String,
        /// The runtime's exit code (0).
        exit_code: i32,
        /// The tokens of the whole run.
        usage: TokenUsage,
        /// False when the runtime reported no tokens at all (`usage` is
        /// then zero because it is unknown).
        usage_reported: bool,
    },
}

impl AgentEvent {
    /// The protocol's name of the event (`step_finished`).
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::TextDelta { .. } => "text_delta",
            Self::Text { .. } => "text",
            Self::Reasoning { .. } => "reasoning",
            Self::ToolCall(_) => "tool_call",
            Self::StepStarted { .. } => "step_started",
            Self::StepFinished { .. } => "step_finished",
            Self::AgentFailed(_) => "agent_failed",
            Self::Done { .. } => "done",
        }
    }

    /// Whether this event ends the run.
    pub fn is_last(&self) -> bool {
        matches!(self, Self::AgentFailed(_) | Self::Done { .. })
    }
}

/// What `run()` returns for a successful run.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct AgentResult {
    /// The session, to continue it (`AgentSpec::session_id`).
    pub session_id: String,
    /// The assistant's last text block.
    pub text: String,
    /// Steps taken.
    pub steps: u32,
    /// Tokens of the whole run.
    pub usage: TokenUsage,
    /// The runtime's exit code (0).
    pub exit_code: i32,
    /// Every tool call, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Lines of the runtime dropped: not protocol v1, malformed, of an
    /// unknown type, or longer than 4 MiB.
    pub dropped_lines: u64,
    /// False when the runtime reported no tokens at all.
    pub usage_reported: bool,
}

/// `output` cut to [`MAX_TOOL_OUTPUT_BYTES`] at a character boundary, and
/// whether it was cut.
pub(crate) fn truncate_tool_output(output: &str) -> (String, bool) {
    if output.len() <= MAX_TOOL_OUTPUT_BYTES {
        return (output.to_owned(), false);
    }
    let mut end = MAX_TOOL_OUTPUT_BYTES;
    while !output.is_char_boundary(end) {
        end -= 1;
    }
    (output[..end].to_owned(), true)
}
