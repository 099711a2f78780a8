//! Shared by the `code_*` tests: serves the Code service alone on loopback
//! with a temporary sandbox root and collects Execute streams.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use rayito_agent::code::CodeServiceImpl;
use rayito_agent::pb;
use rayito_agent::pb::code_service_client::CodeServiceClient;
use rayito_agent::pb::execute_event::Event;
use rayito_agent::phase::PhaseCell;
use rayito_agent::sandbox::SandboxEnv;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::{Channel, Server};

/// A served Code service and a client connected to it.
pub struct Served {
    pub client: CodeServiceClient<Channel>,
    pub service: CodeServiceImpl,
    pub phase: PhaseCell,
    pub root: tempfile::TempDir,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.service.shutdown();
    }
}

pub async fn serve() -> Served {
    let root = tempfile::tempdir().expect("temp root");
    let env = SandboxEnv::new(root.path()).expect("sandbox env");
    let phase = PhaseCell::new();
    let service = CodeServiceImpl::new(env, phase.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = Server::builder()
        .add_service(pb::code_service_server::CodeServiceServer::new(
            service.clone(),
        ))
        .serve_with_incoming(TcpListenerStream::new(listener));
    tokio::spawn(server);
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    Served {
        client: CodeServiceClient::new(channel),
        service,
        phase,
        root,
    }
}

/// An Execute request for `code` on the default context, no timeout.
pub fn cell(code: &str) -> pb::ExecuteRequest {
    pb::ExecuteRequest {
        code: code.to_owned(),
        ..Default::default()
    }
}

/// An Execute request for `code` on context `id`.
pub fn cell_in(id: &str, code: &str) -> pb::ExecuteRequest {
    pb::ExecuteRequest {
        context_id: Some(id.to_owned()),
        code: code.to_owned(),
        ..Default::default()
    }
}

/// Everything one Execute stream delivered, with arrival times.
#[derive(Debug)]
pub struct Run {
    pub events: Vec<(Instant, pb::ExecuteEvent)>,
    /// The status the stream ended with, if it was not OK.
    pub status: Option<tonic::Status>,
}

impl Run {
    pub fn kinds(&self) -> Vec<&'static str> {
        self.events
            .iter()
            .map(|(_, e)| match e.event.as_ref().expect("event") {
                Event::Started(_) => "started",
                Event::Stdout(_) => "stdout",
                Event::Stderr(_) => "stderr",
                Event::Result(_) => "result",
                Event::Error(_) => "error",
                Event::End(_) => "end",
                Event::Keepalive(_) => "keepalive",
            })
            .collect()
    }

    pub fn stdout(&self) -> String {
        self.events
            .iter()
            .filter_map(|(_, e)| match &e.event {
                Some(Event::Stdout(c)) => Some(c.text.as_str()),
                _ => None,
            })
            .collect()
    }

    pub fn stderr(&self) -> String {
        self.events
            .iter()
            .filter_map(|(_, e)| match &e.event {
                Some(Event::Stderr(c)) => Some(c.text.as_str()),
                _ => None,
            })
            .collect()
    }

    pub fn results(&self) -> Vec<pb::ExecutionResult> {
        self.events
            .iter()
            .filter_map(|(_, e)| match &e.event {
                Some(Event::Result(r)) => Some(r.clone()),
                _ => None,
            })
            .collect()
    }

    /// The `text` of the main result.
    pub fn text(&self) -> Option<String> {
        self.results()
            .into_iter()
            .find(|r| r.is_main_result)
            .and_then(|r| r.text)
    }

    pub fn errors(&self) -> Vec<pb::ExecutionError> {
        self.events
            .iter()
            .filter_map(|(_, e)| match &e.event {
                Some(Event::Error(r)) => Some(r.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn started(&self) -> pb::ExecutionStarted {
        match &self.events.first().expect("a first event").1.event {
            Some(Event::Started(s)) => s.clone(),
            other => panic!("first event is not started: {other:?}"),
        }
    }

    pub fn end(&self) -> Option<pb::ExecutionEnd> {
        self.events.iter().find_map(|(_, e)| match &e.event {
            Some(Event::End(end)) => Some(*end),
            _ => None,
        })
    }
}

/// Opens an Execute stream (the initial status error, if any, is returned).
pub async fn open(
    client: &mut CodeServiceClient<Channel>,
    req: pb::ExecuteRequest,
) -> Result<tonic::Streaming<pb::ExecuteEvent>, tonic::Status> {
    client.execute(req).await.map(|r| r.into_inner())
}

/// Reads a stream to its end (bounded by 60 s).
pub async fn collect(mut stream: tonic::Streaming<pb::ExecuteEvent>) -> Run {
    let mut events = Vec::new();
    let status = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            match stream.message().await {
                Ok(Some(event)) => events.push((Instant::now(), event)),
                Ok(None) => return None,
                Err(status) => return Some(status),
            }
        }
    })
    .await
    .expect("stream did not end within 60 s");
    Run { events, status }
}

/// Runs a cell to its end; panics if the call itself is refused.
pub async fn run(client: &mut CodeServiceClient<Channel>, req: pb::ExecuteRequest) -> Run {
    let stream = open(client, req).await.expect("Execute accepted");
    collect(stream).await
}

/// Runs a cell that must succeed with a well-formed stream, returns it.
pub async fn run_ok(client: &mut CodeServiceClient<Channel>, req: pb::ExecuteRequest) -> Run {
    let run = run(client, req).await;
    assert!(run.status.is_none(), "stream failed: {:?}", run.status);
    let kinds = run.kinds();
    assert_eq!(kinds.first(), Some(&"started"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"end"), "{kinds:?}");
    run
}

/// The status of an Execute that must be refused (at open or as the stream's
/// first item).
pub async fn refused(
    client: &mut CodeServiceClient<Channel>,
    req: pb::ExecuteRequest,
) -> tonic::Status {
    match open(client, req).await {
        Err(status) => status,
        Ok(stream) => {
            let run = collect(stream).await;
            assert!(
                run.events.is_empty(),
                "events before refusal: {:?}",
                run.kinds()
            );
            run.status.expect("a refusal status")
        }
    }
}
