//! `CodeService`: code cells and their contexts.

use std::time::Duration;

use super::Svc;
use crate::error::SandboxError;
use crate::error::map::grpc::CallContext;
use crate::pb;
use crate::pb::code_service_client::CodeServiceClient;
use crate::transport::{AgentConn, AgentStream, ConnectRetry};

impl AgentConn {
    agent_calls! {
        CodeServiceClient
        /// `CodeService/CreateContext`.
        fn create_context(pb::CreateContextRequest) -> pb::CreateContextResponse = create_context,
            CallContext::new("code.create_context");
        /// `CodeService/DestroyContext`.
        fn destroy_context(pb::DestroyContextRequest) -> () = destroy_context,
            CallContext::new("code.remove_context");
        /// `CodeService/RestartContext`.
        fn restart_context(pb::RestartContextRequest) -> () = restart_context,
            CallContext::new("code.restart_context");
        /// `CodeService/ListContexts`.
        fn list_contexts() -> pb::ListContextsResponse = list_contexts(pb::ListContextsRequest {}),
            CallContext::new("code.list_contexts");
        /// `CodeService/Execute`; `total` bounds the whole stream.
        stream fn execute(pb::ExecuteRequest, total) -> pb::ExecuteEvent = execute,
            CallContext::new("run_code"), LadderNoReplay;
        /// `CodeService/Reattach`: the events of a running (or just ended)
        /// execution from `from_seq` on; `total` bounds the whole stream.
        /// Idempotent (it only reads), so a cut before its first message is
        /// sent again.
        stream fn reattach(pb::ReattachRequest, total) -> pb::ExecuteEvent = reattach,
            CallContext::new("run_code"), Ladder;
    }
}
