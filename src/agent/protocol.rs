//! Protocol v1: the JSON lines a runtime writes on stdout, one event each,
//! `{"v":1,"type":...}` with the types `session`, `text_delta`, `text`,
//! `reasoning`, `tool_call`, `step_started`, `step_finished`,
//! `agent_failed`, `done`, plus the run script's own `rayito.busy` and
//! `rayito.runtime_missing`. Pure: bytes in, events out. A line that is not
//! JSON, of another version, of an unknown type or malformed is dropped and
//! counted, never fatal; a line longer than [`MAX_LINE_BYTES`] too.
//! [`Limits`] then applies the run's [`AgentLimits`] to the events.

use serde_json::{Map, Value};

use super::events::{AgentEvent, ToolCall, ToolCallStatus, truncate_tool_output};
use super::spec::AgentLimits;
use crate::error::{AgentFailure, AgentFailureReason, TokenUsage, safe_detail_code};

/// The protocol's version.
pub const PROTOCOL_VERSION: u64 = 1;
/// Longest line kept (4 MiB); longer lines are dropped whole.
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// Whether `id` is a session id: `rda_` and 32 lower-case hex.
pub(crate) fn is_session_id(id: &str) -> bool {
    id.strip_prefix("rda_").is_some_and(|hex| {
        hex.len() == 32
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Splits stdout into whole lines, dropping (and counting) those longer
/// than [`MAX_LINE_BYTES`] without ever holding more than that of one line.
#[derive(Debug, Default)]
pub(crate) struct LineBuffer {
    current: Vec<u8>,
    /// The current line is already too long: skip to its end.
    skipping: bool,
    pub(crate) dropped: u64,
}

impl LineBuffer {
    /// The whole lines completed by `bytes` (without their `\n`).
    pub(crate) fn feed(&mut self, mut bytes: &[u8]) -> Vec<Vec<u8>> {
        let mut lines = Vec::new();
        while !bytes.is_empty() {
            let (part, rest, ended) = match bytes.iter().position(|b| *b == b'\n') {
                Some(i) => (&bytes[..i], &bytes[i + 1..], true),
                None => (bytes, &[][..], false),
            };
            bytes = rest;
            if !self.skipping {
                if self.current.len() + part.len() > MAX_LINE_BYTES {
                    self.skipping = true;
                    self.current = Vec::new();
                } else {
                    self.current.extend_from_slice(part);
                }
            }
            if ended {
                if self.skipping {
                    self.dropped += 1;
                    self.skipping = false;
                } else {
                    lines.push(std::mem::take(&mut self.current));
                }
            }
        }
        lines
    }

    /// The last line when stdout ended without a `\n`.
    pub(crate) fn finish(&mut self) -> Option<Vec<u8>> {
        if self.skipping {
            self.dropped += 1;
            self.skipping = false;
            return None;
        }
        (!self.current.is_empty()).then(|| std::mem::take(&mut self.current))
    }
}

/// What the decoder keeps of a run.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    pub(crate) session_id: Option<String>,
    steps: u32,
    usage: TokenUsage,
    usage_reported: bool,
    done: bool,
    failed: Option<AgentFailure>,
    pub(crate) dropped: u64,
    reasoning: bool,
}

impl Decoder {
    /// A decoder that keeps `reasoning` events only when asked.
    pub(crate) fn new(reasoning: bool) -> Self {
        Self {
            reasoning,
            ..Self::default()
        }
    }

    /// One line to zero or more events; anything else is counted dropped.
    pub(crate) fn line(&mut self, line: &[u8]) -> Vec<AgentEvent> {
        let Ok(Value::Object(payload)) = serde_json::from_slice::<Value>(line) else {
            self.dropped += 1;
            return Vec::new();
        };
        if payload.get("v").and_then(Value::as_u64) != Some(PROTOCOL_VERSION) {
            self.dropped += 1;
            return Vec::new();
        }
        match self.map(&payload) {
            Some(events) => events,
            None => {
                self.dropped += 1;
                Vec::new()
            }
        }
    }

    /// The last event once the runtime exited with `exit_code`: `Done` only
    /// with exit 0, the runtime's `done` and a session.
    pub(crate) fn finish(&self, exit_code: i32) -> AgentEvent {
        if let Some(failed) = &self.failed {
            return AgentEvent::AgentFailed(failed.clone());
        }
        let reason = if exit_code != 0 {
            AgentFailureReason::RuntimeError
        } else if !self.done || self.session_id.is_none() {
            AgentFailureReason::ProtocolError
        } else {
            return AgentEvent::Done {
                session_id: self.session_id.clone().unwrap_or_default(),
                exit_code,
                usage: self.usage,
                usage_reported: self.usage_reported,
            };
        };
        let mut failure = AgentFailure::new(reason);
        failure.exit_code = Some(exit_code);
        failure.session_id.clone_from(&self.session_id);
        AgentEvent::AgentFailed(failure)
    }

    fn map(&mut self, payload: &Map<String, Value>) -> Option<Vec<AgentEvent>> {
        let kind = payload.get("type")?.as_str()?;
        let text = || {
            payload
                .get("text")
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        Some(match kind {
            "rayito.busy" | "rayito.runtime_missing" => {
                let reason = if kind == "rayito.busy" {
                    AgentFailureReason::Busy
                } else {
                    AgentFailureReason::RuntimeMissing
                };
                let failure = AgentFailure::new(reason);
                self.failed = Some(failure.clone());
                vec![AgentEvent::AgentFailed(failure)]
            }
            "session" => {
                let id = payload.get("session_id")?.as_str()?;
                if !is_session_id(id) {
                    return None;
                }
                self.session_id = Some(id.to_owned());
                Vec::new()
            }
            "step_started" => {
                self.steps += 1;
                vec![AgentEvent::StepStarted { index: self.steps }]
            }
            "step_finished" => {
                let raw = payload.get("usage");
                let usage = raw.map(usage_of).unwrap_or_default();
                self.usage_reported |= matches!(raw, Some(Value::Object(_)));
                self.usage += usage;
                vec![AgentEvent::StepFinished {
                    index: self.steps,
                    usage,
                    finish_reason: payload
                        .get("finish_reason")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                }]
            }
            "text_delta" => vec![AgentEvent::TextDelta { text: text()? }],
            "text" => vec![AgentEvent::Text { text: text()? }],
            "reasoning" => {
                let text = text()?;
                if self.reasoning {
                    vec![AgentEvent::Reasoning { text }]
                } else {
                    Vec::new()
                }
            }
            "tool_call" => vec![AgentEvent::ToolCall(tool_call(payload)?)],
            "agent_failed" => {
                let reason = match payload.get("reason").and_then(Value::as_str) {
                    Some("model_error") => AgentFailureReason::ModelError,
                    Some("runtime_error") => AgentFailureReason::RuntimeError,
                    // A runtime may only report these three.
                    _ => AgentFailureReason::ProtocolError,
                };
                let mut failure = AgentFailure::new(reason);
                failure.detail_code = payload
                    .get("detail_code")
                    .and_then(Value::as_str)
                    .and_then(safe_detail_code)
                    .map(str::to_owned);
                failure.session_id.clone_from(&self.session_id);
                self.failed = Some(failure.clone());
                vec![AgentEvent::AgentFailed(failure)]
            }
            "done" => {
                self.done = true;
                Vec::new()
            }
            _ => return None,
        })
    }
}

fn usage_of(raw: &Value) -> TokenUsage {
    let n = |key: &str| raw.get(key).and_then(Value::as_u64).unwrap_or(0);
    TokenUsage::new(n("input"), n("output")).with_details(
        n("reasoning"),
        n("cache_read"),
        n("cache_write"),
    )
}

fn tool_call(payload: &Map<String, Value>) -> Option<ToolCall> {
    let status = match payload.get("status")?.as_str()? {
        "completed" => ToolCallStatus::Completed,
        "error" => ToolCallStatus::Error,
        _ => return None,
    };
    let string = |key: &str| match payload.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    let (output, cut) = match payload.get("output").and_then(Value::as_str) {
        Some(out) => {
            let (out, cut) = truncate_tool_output(out);
            (Some(out), cut)
        }
        None => (None, false),
    };
    Some(ToolCall {
        call_id: string("call_id"),
        name: string("name"),
        status,
        input: payload.get("input").and_then(Value::as_object).cloned(),
        output,
        output_truncated: cut || payload.get("output_truncated") == Some(&Value::Bool(true)),
    })
}

/// Applies [`AgentLimits`] to a run's events and keeps what the result
/// needs. `max_steps` is checked when step `max_steps + 1` starts; the
/// token budget after each finished step (one step may pass it).
#[derive(Debug)]
pub(crate) struct Limits {
    limits: AgentLimits,
    pub(crate) steps: u32,
    pub(crate) usage: TokenUsage,
    pub(crate) last_text: String,
    pub(crate) tool_calls: Vec<ToolCall>,
}

impl Limits {
    pub(crate) fn new(limits: AgentLimits) -> Self {
        Self {
            limits,
            steps: 0,
            usage: TokenUsage::default(),
            last_text: String::new(),
            tool_calls: Vec::new(),
        }
    }

    /// The reason the run must stop at `event`, if a limit is passed.
    pub(crate) fn track(&mut self, event: &AgentEvent) -> Option<AgentFailureReason> {
        match event {
            AgentEvent::StepStarted { index } => {
                self.steps = *index;
                (self.steps > self.limits.max_steps).then_some(AgentFailureReason::MaxSteps)
            }
            AgentEvent::StepFinished { usage, .. } => {
                self.usage += *usage;
                self.limits
                    .max_total_tokens
                    .is_some_and(|budget| self.usage.total() > budget)
                    .then_some(AgentFailureReason::TokenBudget)
            }
            AgentEvent::Text { text } => {
                self.last_text.clone_from(text);
                None
            }
            AgentEvent::ToolCall(call) => {
                self.tool_calls.push(call.clone());
                None
            }
            _ => None,
        }
    }
}
