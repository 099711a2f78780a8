//! OpenTelemetry spans of a sandbox's operations, exported over OTLP/gRPC
//! to a collector in this process (docs/observability.md).
//!
//! ```text
//! cargo run -p rayito-tests --example otel     # local backend, no AWS account
//! ```
//!
//! The collector is a bare OTLP trace receiver on 127.0.0.1 that prints
//! each span it gets; point the exporter at your own collector (an
//! OpenTelemetry Collector, Jaeger, Tempo) instead by changing its
//! endpoint.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_sdk::trace::SdkTracerProvider;
use rayito::Sandbox;

/// The in-process collector: keeps every request it receives.
#[derive(Clone, Default)]
struct Collector(Arc<Mutex<Vec<ExportTraceServiceRequest>>>);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// An attribute's value as text.
fn shown(value: Option<&Value>) -> String {
    match value {
        Some(Value::StringValue(s)) => format!("{s:?}"),
        Some(Value::IntValue(n)) => n.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => "(none)".to_owned(),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The collector, on a free loopback port.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = format!("http://{}", listener.local_addr()?);
    let collector = Collector::default();
    let server = tonic::transport::Server::builder()
        .add_service(TraceServiceServer::new(collector.clone()))
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener));
    tokio::spawn(server);

    // The exporter and the tracer provider the sandbox's spans go to.
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .with_timeout(Duration::from_secs(5))
        .build()?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .build();

    let sandbox = Sandbox::builder()
        .local()
        .tracer_provider(&provider)
        .create()
        .await?;
    let done = sandbox.commands().run("echo hello").await?;
    println!("command exited {}", done.exit_code);
    // A failure is a span with status ERROR and the error's kind only.
    let missing = sandbox.files().read("/home/user/no-such-file").await;
    println!("read a missing file: {}", missing.unwrap_err().kind());
    sandbox.kill().await?;

    // The batch processor exports from its own thread: flush it there.
    let flushed = provider.clone();
    tokio::task::spawn_blocking(move || flushed.force_flush()).await??;

    for request in collector.0.lock().unwrap().iter() {
        for resource in &request.resource_spans {
            for scope in &resource.scope_spans {
                let tracer = scope.scope.as_ref().map_or("", |s| s.name.as_str());
                for span in &scope.spans {
                    let status = span
                        .status
                        .as_ref()
                        .filter(|s| !s.message.is_empty())
                        .map_or(String::new(), |s| format!(" (ERROR: {})", s.message));
                    println!("{tracer}: {}{status}", span.name);
                    for kv in &span.attributes {
                        let value = kv.value.as_ref().and_then(|v| v.value.as_ref());
                        println!("    {} = {}", kv.key, shown(value));
                    }
                }
            }
        }
    }
    tokio::task::spawn_blocking(move || provider.shutdown()).await??;
    Ok(())
}
