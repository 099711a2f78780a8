//! `ProcessService`: commands, their output streams, stdin and signals.

use std::time::Duration;

use super::Svc;
use crate::error::SandboxError;
use crate::error::map::grpc::CallContext;
use crate::pb;
use crate::pb::process_service_client::ProcessServiceClient;
use crate::transport::{AgentConn, AgentStream, ConnectRetry};

impl AgentConn {
    agent_calls! {
        ProcessServiceClient
        /// `ProcessService/SendInput`.
        fn send_input(pb::SendInputRequest) -> () = send_input,
            CallContext::new("commands.send_stdin");
        /// `ProcessService/CloseStdin`.
        fn close_stdin(pb::CloseStdinRequest) -> () = close_stdin,
            CallContext::new("commands.close_stdin");
        /// `ProcessService/SendSignal`.
        fn send_signal(pb::SendSignalRequest) -> () = send_signal,
            CallContext::new("commands.kill");
        /// `ProcessService/List`, used to prove an access token on connect
        /// (Health is anonymous; this is the cheapest authenticated call).
        fn verify_access() -> () = list(pb::ListRequest {}), CallContext::new("connect");
        /// `ProcessService/List`.
        fn list_processes() -> pb::ListResponse = list(pb::ListRequest {}),
            CallContext::new("commands.list");
    }

    /// `ProcessService/Start`; `total` bounds the whole stream, `opening`
    /// (when set) the wait until the agent says the process started.
    pub(crate) async fn start_process(
        &self,
        request: pb::StartRequest,
        (total, opening): (Option<Duration>, Option<Duration>),
    ) -> Result<AgentStream<pb::ProcessEvent>, SandboxError> {
        self.open_stream_within(
            CallContext::new("commands.run"),
            (total, opening),
            ConnectRetry::LadderNoReplay,
            || {
                let mut client = self.client::<ProcessServiceClient<Svc>>();
                let request = request.clone();
                async move { client.start(request).await }
            },
        )
        .await
    }

    /// `ProcessService/Connect`: the events of a running (or just ended)
    /// process from `from_seq` on (errors name `feature`); `total` bounds
    /// the whole stream. Idempotent, so a cut before its first message is
    /// sent again.
    pub(crate) async fn connect_process(
        &self,
        request: pb::ConnectRequest,
        total: Option<Duration>,
        feature: &'static str,
    ) -> Result<AgentStream<pb::ProcessEvent>, SandboxError> {
        self.open_stream(
            CallContext::new(feature),
            total,
            ConnectRetry::Ladder,
            || {
                let mut client = self.client::<ProcessServiceClient<Svc>>();
                async move { client.connect(request).await }
            },
        )
        .await
    }
}
