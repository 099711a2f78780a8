//! The proxy's way to a MicroVM's agent, which in the emulator always runs
//! in this process: an in-memory h2c connection
//! ([`Agent::connect_in_process`]) in place of a loopback socket to the
//! agent's gRPC port. The requests and answers are the same bytes; what
//! goes is a system call and a readiness wake per message on the hop every
//! call to the agent takes (docs/performance.md, "Session 26: the proxy's
//! hop and the command cgroup's directory (issue 44, item 3)").

use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use rayito_agent::agent::Agent;
use tokio::io::DuplexStream;

use super::registry::Vm;

/// Connects to the agent of one MicroVM, whatever the URI says (the
/// proxy's client still names the agent's gRPC address, which keys its
/// pool). Refused, as a closed port would be, once the MicroVM or its
/// agent is gone or its server stopped accepting.
#[derive(Clone, Debug)]
pub(crate) struct AgentConnector {
    vm: Weak<Vm>,
}

impl AgentConnector {
    pub(crate) fn new(vm: &Arc<Vm>) -> Self {
        Self {
            vm: Arc::downgrade(vm),
        }
    }

    fn connect(&self) -> std::io::Result<AgentConnection> {
        let refused = || std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let vm = self.vm.upgrade().ok_or_else(refused)?;
        let stream = vm
            .with_agent(Agent::connect_in_process)
            .unwrap_or_else(|| Err(refused()))?;
        Ok(AgentConnection(TokioIo::new(stream)))
    }
}

impl tower::Service<Uri> for AgentConnector {
    type Response = AgentConnection;
    type Error = std::io::Error;
    type Future = std::future::Ready<std::io::Result<AgentConnection>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Uri) -> Self::Future {
        std::future::ready(self.connect())
    }
}

/// One in-process connection to an agent, as hyper's client wants it.
pub(crate) struct AgentConnection(TokioIo<DuplexStream>);

impl Connection for AgentConnection {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl hyper::rt::Read for AgentConnection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for AgentConnection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}
