//! `PtyService`: terminals.

use std::time::Duration;

use super::Svc;
use crate::error::SandboxError;
use crate::error::map::grpc::CallContext;
use crate::pb;
use crate::pb::pty_service_client::PtyServiceClient;
use crate::transport::{AgentConn, AgentStream, ConnectRetry};

impl AgentConn {
    agent_calls! {
        PtyServiceClient
        /// `PtyService/SendInput`.
        fn pty_send_input(pb::SendInputRequest) -> () = send_input,
            CallContext::new("pty.send_input");
        /// `PtyService/Resize`.
        fn pty_resize(pb::ResizeRequest) -> () = resize, CallContext::new("pty.resize");
        /// `PtyService/Kill`.
        fn pty_kill(pb::KillPtyRequest) -> () = kill, CallContext::new("pty.kill");
        /// `PtyService/Create`, without a deadline (a terminal lasts until it
        /// ends; the agent enforces the session's own timeout).
        stream fn pty_create(pb::PtyStart) -> pb::PtyServerMessage = create,
            CallContext::new("pty.create"), LadderNoReplay;
        /// `PtyService/Connect`, without a deadline.
        stream fn pty_connect(pb::ConnectRequest) -> pb::PtyServerMessage = connect,
            CallContext::new("pty.connect"), Ladder;
    }
}
