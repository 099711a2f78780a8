//! The operation spans (docs/observability.md) over a sandbox on the
//! emulator: the OpenTelemetry spans in an in-memory exporter (names,
//! CLIENT kind, tracer, the closed attribute set, ERROR with the kind only,
//! and no command text, code, path, env value or token anywhere); the
//! `traceparent` of each operation reaching the agent, whose request span
//! records its ids; the OTLP/gRPC export path end to end into a receiver
//! in this test; and the `tracing` spans with the same fields without any
//! tracer provider (what a `tracing-opentelemetry` user gets).

use crate::sdk_support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use opentelemetry::trace::{SpanKind, Status};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use rayito::error::ErrorKind;
use rayito::{CommandOptions, RunCodeOptions, WriteEntry};
use sdk_support::captured::Captured;

/// The closed attribute set (the spec's, part E).
const CLOSED_SET: [&str; 12] = [
    "rayito.sandbox.id",
    "rayito.region",
    "rayito.template.name",
    "rayito.resume_generation",
    "rayito.operation",
    "rayito.commands.exit_code",
    "rayito.commands.background",
    "rayito.code.language",
    "rayito.files.operation",
    "rayito.files.count",
    "rayito.files.bytes",
    "rayito.error.type",
];

/// Text that must appear in no attribute, event or span field.
const CANARY_CMD: &str = "canarycmd7d1e";
const CANARY_CODE: &str = "canarycode5b9a";
const CANARY_PATH: &str = "canarypath0c44";
const CANARY_ENV: &str = "canaryenv93f2";

/// Every event and span (with its fields, at creation and close) of the
/// whole process at TRACE, the agent's included: the emulator runs it in
/// this process.
fn log() -> &'static Captured {
    static LOG: OnceLock<Captured> = OnceLock::new();
    LOG.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_target(true)
            .with_span_events(
                tracing_subscriber::fmt::format::FmtSpan::NEW
                    | tracing_subscriber::fmt::format::FmtSpan::CLOSE,
            )
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
        captured
    })
}

fn attr(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.as_str().into_owned())
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|s| s.name == name).collect()
}

/// Runs one of each operation with canaries in its inputs; returns the
/// sandbox id.
async fn exercise(builder: rayito::SandboxBuilder) -> String {
    let first = builder
        .clone()
        .no_idle_policy()
        .create()
        .await
        .expect("create");
    let id = first.id().to_owned();
    assert!(first.pause().await.expect("pause"));
    first.resume().await.expect("resume");
    let sbx = builder
        .connect(&id, first.access_token().clone())
        .await
        .expect("connect");
    let ok = sbx
        .commands()
        .run_with(
            &format!("echo {CANARY_CMD} $X"),
            CommandOptions::new().env("X", CANARY_ENV),
        )
        .await
        .expect("run");
    assert!(ok.stdout.contains(CANARY_CMD));
    let exit = sbx
        .commands()
        .run(&format!("echo {CANARY_CMD}; exit 3"))
        .await
        .unwrap_err();
    assert_eq!(exit.kind(), ErrorKind::CommandExit);
    let _bg = sbx
        .commands()
        .spawn(
            &format!("sleep 0.1; echo {CANARY_CMD}"),
            CommandOptions::new(),
        )
        .await
        .expect("spawn");
    // A kernel may be missing on this host: the span exists either way.
    let _ = sbx
        .run_code_with(
            &format!("print('{CANARY_CODE}')"),
            RunCodeOptions::new().env("Y", CANARY_ENV),
        )
        .await;
    let dir = format!("/home/user/{CANARY_PATH}");
    let file = format!("{dir}/f.txt");
    let files = sbx.files();
    assert!(files.make_dir(&dir).await.expect("make_dir"));
    files.write(&file, "hello").await.expect("write");
    files
        .write_files(vec![
            WriteEntry::new(format!("{dir}/a"), "aa"),
            WriteEntry::new(format!("{dir}/b"), "bbb"),
        ])
        .await
        .expect("write_files");
    assert_eq!(files.read(&file).await.expect("read"), b"hello");
    assert_eq!(files.list(&dir).await.expect("list").len(), 3);
    assert!(files.exists(&file).await.expect("exists"));
    files.get_info(&file).await.expect("get_info");
    files
        .rename(&file, &format!("{dir}/g.txt"))
        .await
        .expect("rename");
    let missing = files.read(&file).await.unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::FileNotFound);
    files.remove(&dir).await.expect("remove");
    sbx.kill().await.expect("kill");
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_are_client_spans_with_the_closed_set_and_no_inputs() {
    let log = log();
    let emu = sdk_support::emulator().await;
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let builder = sdk_support::builder(&emu).tracer_provider(&provider);
    let id = exercise(builder).await;
    let spans = exporter.get_finished_spans().expect("spans");

    let names: BTreeSet<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
    for name in [
        "rayito.sandbox.create",
        "rayito.sandbox.connect",
        "rayito.sandbox.pause",
        "rayito.sandbox.resume",
        "rayito.sandbox.kill",
        "rayito.commands.run",
        "rayito.code.run",
        "rayito.files.read",
        "rayito.files.write",
        "rayito.files.write_files",
        "rayito.files.list",
        "rayito.files.exists",
        "rayito.files.get_info",
        "rayito.files.remove",
        "rayito.files.rename",
        "rayito.files.make_dir",
    ] {
        assert!(names.contains(name), "no span {name} in {names:?}");
    }
    for span in &spans {
        assert_eq!(span.span_kind, SpanKind::Client, "{}", span.name);
        assert_eq!(span.instrumentation_scope.name(), "rayito");
        assert_eq!(
            span.instrumentation_scope.version(),
            Some(env!("CARGO_PKG_VERSION"))
        );
        assert!(span.name.starts_with("rayito."), "{}", span.name);
        for kv in &span.attributes {
            assert!(
                CLOSED_SET.contains(&kv.key.as_str()),
                "{}: {} is outside the closed set",
                span.name,
                kv.key
            );
        }
        assert_eq!(
            attr(span, "rayito.sandbox.id").as_deref(),
            Some(id.as_str())
        );
        assert_eq!(attr(span, "rayito.region").as_deref(), Some("us-east-1"));
        let op = span.name.strip_prefix("rayito.").unwrap();
        assert_eq!(attr(span, "rayito.operation").as_deref(), Some(op));
        // Redaction: nothing the caller passed in, anywhere.
        let mut texts: Vec<String> = span
            .attributes
            .iter()
            .map(|kv| kv.value.as_str().into_owned())
            .collect();
        for event in &span.events.events {
            texts.push(event.name.to_string());
            texts.extend(
                event
                    .attributes
                    .iter()
                    .map(|kv| kv.value.as_str().into_owned()),
            );
        }
        if let Status::Error { description } = &span.status {
            texts.push(description.to_string());
        }
        for text in &texts {
            for canary in [CANARY_CMD, CANARY_CODE, CANARY_PATH, CANARY_ENV] {
                assert!(
                    !text.contains(canary),
                    "{}: {canary} in {text:?}",
                    span.name
                );
            }
            assert!(
                !text.contains("/home/user"),
                "{}: a path in {text:?}",
                span.name
            );
        }
    }

    // Outcomes: the exit codes, background, counts and bytes.
    let runs = named(&spans, "rayito.commands.run");
    let exits: BTreeSet<Option<String>> = runs
        .iter()
        .map(|s| attr(s, "rayito.commands.exit_code"))
        .collect();
    assert!(exits.contains(&Some("0".into())), "{exits:?}");
    assert!(exits.contains(&Some("3".into())), "{exits:?}");
    assert!(
        runs.iter()
            .any(|s| attr(s, "rayito.commands.background").as_deref() == Some("true"))
    );
    let code = named(&spans, "rayito.code.run");
    assert_eq!(
        attr(code[0], "rayito.code.language").as_deref(),
        Some("python")
    );
    let write_files = named(&spans, "rayito.files.write_files");
    assert_eq!(
        attr(write_files[0], "rayito.files.count").as_deref(),
        Some("2")
    );
    assert_eq!(
        attr(write_files[0], "rayito.files.bytes").as_deref(),
        Some("5")
    );
    assert_eq!(
        attr(write_files[0], "rayito.files.operation").as_deref(),
        Some("write_files")
    );
    let list = named(&spans, "rayito.files.list");
    assert_eq!(attr(list[0], "rayito.files.count").as_deref(), Some("3"));
    let create = named(&spans, "rayito.sandbox.create");
    assert!(attr(create[0], "rayito.template.name").is_some());
    assert_eq!(
        attr(create[0], "rayito.resume_generation").as_deref(),
        Some("0")
    );
    let resume = named(&spans, "rayito.sandbox.resume");
    assert_eq!(
        attr(resume[0], "rayito.resume_generation").as_deref(),
        Some("1")
    );
    let connect = named(&spans, "rayito.sandbox.connect");
    assert_eq!(
        attr(connect[0], "rayito.resume_generation").as_deref(),
        Some("1")
    );

    // ERROR: the kind as the status, the type, and the exception event.
    let failed_read = named(&spans, "rayito.files.read")
        .into_iter()
        .find(|s| matches!(s.status, Status::Error { .. }))
        .expect("the failed read");
    assert_eq!(
        failed_read.status,
        Status::Error {
            description: "file_not_found".into()
        }
    );
    assert_eq!(
        attr(failed_read, "rayito.error.type").as_deref(),
        Some("file_not_found")
    );
    let exception = &failed_read.events.events[0];
    assert_eq!(exception.name, "exception");
    let exception_attrs: Vec<(String, String)> = exception
        .attributes
        .iter()
        .map(|kv| (kv.key.to_string(), kv.value.as_str().into_owned()))
        .collect();
    assert_eq!(
        exception_attrs,
        [
            ("exception.type".to_owned(), "file_not_found".to_owned()),
            ("exception.message".to_owned(), "file_not_found".to_owned()),
        ]
    );
    let failed_run = runs
        .iter()
        .find(|s| attr(s, "rayito.commands.exit_code").as_deref() == Some("3"))
        .unwrap();
    assert_eq!(
        failed_run.status,
        Status::Error {
            description: "command_exit".into()
        }
    );
    let ok = named(&spans, "rayito.files.write");
    assert_eq!(ok[0].status, Status::Unset);

    // The trace context reached the agent: its request span of the run's
    // Start carries the run span's trace id and span id.
    let text = log.text();
    for run in &runs {
        let trace_id = run.span_context.trace_id().to_string();
        let span_id = run.span_context.span_id().to_string();
        let needle = format!(
            "rayito.agent.request{{rpc=/rayito.v1.ProcessService/Start trace_id={trace_id} span_id={span_id}}}"
        );
        assert!(text.contains(&needle), "the agent never saw {needle}");
    }
    // Never baggage or grpc-trace-bin (the agent's spans name only these).
    assert!(!text.contains("baggage"));
    assert!(!text.contains("grpc-trace-bin"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_tracer_provider_they_are_tracing_spans_with_the_fields() {
    let log = log();
    let emu = sdk_support::emulator().await;
    // No tracer provider: only the `tracing` spans (the feature-less path).
    let id = exercise(sdk_support::builder(&emu)).await;
    let text = log.text();
    let mine: Vec<&str> = text.lines().filter(|l| l.contains(&id)).collect();
    let spans_of = |name: &str| -> Vec<&str> {
        mine.iter()
            .copied()
            .filter(|l| l.contains(&format!("{name}{{")) && l.contains("rayito::span"))
            .collect()
    };
    for name in [
        "rayito.sandbox.connect",
        "rayito.sandbox.pause",
        "rayito.sandbox.resume",
        "rayito.sandbox.kill",
        "rayito.commands.run",
        "rayito.code.run",
        "rayito.files.read",
        "rayito.files.write",
        "rayito.files.write_files",
        "rayito.files.list",
        "rayito.files.exists",
        "rayito.files.get_info",
        "rayito.files.remove",
        "rayito.files.rename",
        "rayito.files.make_dir",
    ] {
        assert!(!spans_of(name).is_empty(), "no tracing span {name}");
    }
    let closes = spans_of("rayito.commands.run");
    assert!(
        closes
            .iter()
            .any(|l| l.contains("rayito.commands.exit_code=3")
                && l.contains("rayito.error.type=\"command_exit\"")
                && l.contains("otel.status_code=\"error\"")),
        "{closes:#?}"
    );
    assert!(
        spans_of("rayito.files.write_files")
            .iter()
            .any(|l| l.contains("rayito.files.count=2") && l.contains("rayito.files.bytes=5"))
    );
    assert!(
        text.lines()
            .any(|l| l.contains("rayito.sandbox.create{") && l.contains(&id)),
        "create records the id it got"
    );
    for line in text.lines().filter(|l| l.contains("rayito::span")) {
        for canary in [CANARY_CMD, CANARY_CODE, CANARY_PATH, CANARY_ENV] {
            assert!(!line.contains(canary), "{canary} in {line}");
        }
    }
}

/// The OTLP trace receiver of the export test.
#[derive(Clone, Default)]
struct Receiver(
    Arc<Mutex<Vec<opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest>>>,
);

#[tonic::async_trait]
impl opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceService
    for Receiver
{
    async fn export(
        &self,
        request: tonic::Request<
            opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest,
        >,
    ) -> Result<
        tonic::Response<
            opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse,
        >,
        tonic::Status,
    > {
        self.0.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(
            opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse {
                partial_success: None,
            },
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_are_exported_over_otlp_grpc() {
    use opentelemetry_otlp::WithExportConfig as _;
    let _ = log();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let receiver = Receiver::default();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(
                opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceServiceServer::new(
                    receiver.clone(),
                ),
            )
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .with_timeout(Duration::from_secs(10))
        .build()
        .expect("the exporter");
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .build();

    let emu = sdk_support::emulator().await;
    let sbx = sdk_support::builder(&emu)
        .tracer_provider(&provider)
        .create()
        .await
        .expect("create");
    sbx.commands().run("true").await.expect("run");
    let _ = sbx.files().read("/home/user/nope").await.unwrap_err();
    sbx.kill().await.expect("kill");
    let flushing = provider.clone();
    tokio::task::spawn_blocking(move || flushing.force_flush())
        .await
        .unwrap()
        .expect("flushed");

    let received = receiver.0.lock().unwrap().clone();
    let mut seen = Vec::new();
    for request in &received {
        for resource in &request.resource_spans {
            for scope in &resource.scope_spans {
                let tracer = scope.scope.as_ref().expect("a scope");
                assert_eq!(tracer.name, "rayito");
                assert_eq!(tracer.version, env!("CARGO_PKG_VERSION"));
                for span in &scope.spans {
                    // SPAN_KIND_CLIENT
                    assert_eq!(span.kind, 3, "{}", span.name);
                    let status = span.status.as_ref().map(|s| (s.code, s.message.clone()));
                    seen.push((span.name.clone(), status));
                }
            }
        }
    }
    let names: BTreeSet<&str> = seen.iter().map(|(n, _)| n.as_str()).collect();
    for name in [
        "rayito.sandbox.create",
        "rayito.commands.run",
        "rayito.files.read",
        "rayito.sandbox.kill",
    ] {
        assert!(names.contains(name), "{name} not exported: {names:?}");
    }
    // STATUS_CODE_ERROR with the kind only.
    assert!(
        seen.contains(&(
            "rayito.files.read".to_owned(),
            Some((2, "file_not_found".to_owned()))
        )),
        "{seen:?}"
    );
    tokio::task::spawn_blocking(move || provider.shutdown())
        .await
        .unwrap()
        .expect("shut down");
}
