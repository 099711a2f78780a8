//! The one log line of a tool call: the tool, sizes, duration, sandbox
//! id, exit code and error kind, never what was sent or received.

use std::time::Instant;

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use crate::failure::Failure;

/// What one call logs: sizes, never contents.
#[derive(Debug)]
pub(super) struct Record {
    tool: &'static str,
    started: Instant,
    bytes_in: usize,
    /// The lease's sandbox, once the call has it.
    pub(super) sandbox_id: Option<String>,
    /// Bytes of the result's blocks, added as they are made.
    pub(super) bytes_out: usize,
    /// A command's exit code.
    pub(super) exit_code: Option<i32>,
}

impl Record {
    pub(super) fn new(tool: &'static str, bytes_in: usize) -> Record {
        Record {
            tool,
            started: Instant::now(),
            sandbox_id: None,
            bytes_in,
            bytes_out: 0,
            exit_code: None,
        }
    }

    /// The tool's result, and its log line.
    pub(super) fn finish(self, outcome: Result<Vec<ContentBlock>, Failure>) -> CallToolResult {
        let duration_ms = self.started.elapsed().as_millis() as u64;
        let sandbox_id = self.sandbox_id.as_deref().unwrap_or("");
        match outcome {
            Ok(content) => {
                tracing::info!(
                    tool = self.tool,
                    sandbox_id,
                    bytes_in = self.bytes_in,
                    bytes_out = self.bytes_out,
                    exit_code = self.exit_code,
                    duration_ms,
                    "tool call"
                );
                CallToolResult::success(content)
            }
            Err(failure) => {
                tracing::info!(
                    tool = self.tool,
                    sandbox_id,
                    bytes_in = self.bytes_in,
                    duration_ms,
                    error_kind = failure.kind,
                    grpc_code = failure.codes.grpc_code,
                    aws_code = failure.codes.aws_code.as_deref(),
                    request_id = failure.codes.request_id.as_deref(),
                    "tool call failed"
                );
                CallToolResult::error(vec![ContentBlock::text(failure.message)])
            }
        }
    }
}

/// The JSON text block every successful tool returns first.
pub(super) fn json_block(value: &Value, record: &mut Record) -> ContentBlock {
    let text = value.to_string();
    record.bytes_out += text.len();
    ContentBlock::text(text)
}
