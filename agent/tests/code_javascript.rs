//! run_code in javascript and typescript through node (issue 10, section 4):
//! state kept between cells, the last expression as a result, exceptions as
//! ExecutionError, timeouts, streaming output; and the exact error when node
//! is missing, produced by pointing a context's PATH away from node.
//!
//! The node tests run only where node is on the sandbox PATH (elsewhere
//! they print `SKIPPED: <test>: <reason>`, and fail under
//! `RAYITO_TEST_STRICT=1`); the missing-node tests always run.

use crate::code_support;
use crate::skip_support;

use std::time::Duration;

use code_support::{cell, cell_in, open, refused, run_ok, serve};
use rayito_agent::pb;
use rayito_agent::pb::execute_event::Event;
use tonic::Code;

const SANDBOX_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Whether `node` is on the sandbox's PATH (what the kernel will find).
fn node_version() -> Option<String> {
    let out = std::process::Command::new("node")
        .arg("--version")
        .env("PATH", SANDBOX_PATH)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// node 22.13 and later strip TypeScript types themselves.
fn node_strips_types(version: &str) -> bool {
    let mut parts = version.trim_start_matches('v').split('.');
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    major > 22 || (major == 22 && minor >= 13)
}

fn js(code: &str) -> pb::ExecuteRequest {
    pb::ExecuteRequest {
        language: Some("javascript".into()),
        ..cell(code)
    }
}

/// Whether node is on the sandbox PATH; skips (see `skip_support`) when not.
fn has_node() -> bool {
    let found = node_version().is_some();
    if !found {
        skip_support::skip(NO_NODE);
    }
    found
}

/// Why a node test skips.
const NO_NODE: &str = "node not found on the sandbox PATH (.ci/install-test-deps installs it)";

#[tokio::test]
async fn javascript_keeps_state_and_returns_the_last_expression() {
    if !has_node() {
        return;
    }
    let mut s = serve().await;
    let first = run_ok(&mut s.client, js("let x = 40; console.log('hi', x); x + 2")).await;
    assert_eq!(first.stdout(), "hi 40\n");
    assert_eq!(first.text().as_deref(), Some("42"));
    assert!(first.errors().is_empty());
    assert_eq!(first.started().execution_count, 1);

    // State carries over, in the language's default context.
    let second = run_ok(&mut s.client, cell_in("default-javascript", "x * 2")).await;
    assert_eq!(second.text().as_deref(), Some("80"));
    assert_eq!(second.started().execution_count, 2);

    // Objects come with a JSON form; strings print quoted, as node's REPL.
    let obj = run_ok(&mut s.client, js("({a: 1, b: [true]})")).await;
    let result = &obj.results()[0];
    assert!(result.is_main_result);
    assert_eq!(result.text.as_deref(), Some("{ a: 1, b: [ true ] }"));
    assert_eq!(result.json.as_deref(), Some(r#"{"a":1,"b":[true]}"#));
    let text = run_ok(&mut s.client, js("'é'.repeat(2)")).await;
    assert_eq!(text.text().as_deref(), Some("'éé'"));

    // A statement has no value; stderr is separate; top-level await works.
    let quiet = run_ok(&mut s.client, js("console.error('warn'); let y = 1;")).await;
    assert!(quiet.results().is_empty());
    assert_eq!(quiet.stderr(), "warn\n");
    let awaited = run_ok(
        &mut s.client,
        js("await new Promise(r => setTimeout(() => r(x + 1), 20))"),
    )
    .await;
    assert_eq!(awaited.text().as_deref(), Some("41"));

    // A subprocess's inherited output arrives as stderr, never corrupting frames.
    let sub = run_ok(
        &mut s.client,
        js("require('child_process').execSync('echo sub', {stdio: 'inherit'}); 7"),
    )
    .await;
    assert_eq!(sub.text().as_deref(), Some("7"));
    assert_eq!(sub.stderr(), "sub\n");
}

#[tokio::test]
async fn javascript_exceptions_are_data_and_the_context_survives() {
    if !has_node() {
        return;
    }
    let mut s = serve().await;
    run_ok(&mut s.client, js("globalThis.kept = 5")).await;
    let failed = run_ok(&mut s.client, js("null.boom")).await;
    let errors = failed.errors();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].name, "TypeError");
    assert_eq!(
        errors[0].value,
        "Cannot read properties of null (reading 'boom')"
    );
    assert_eq!(
        errors[0].traceback.first().map(String::as_str),
        Some("TypeError: Cannot read properties of null (reading 'boom')")
    );
    assert!(
        errors[0].traceback.iter().all(|l| !l.contains("[eval]")),
        "driver frames leak: {:?}",
        errors[0].traceback
    );
    let thrown = run_ok(&mut s.client, js("throw 'plain'")).await;
    assert_eq!(
        (
            thrown.errors()[0].name.as_str(),
            thrown.errors()[0].value.as_str()
        ),
        ("Error", "'plain'")
    );
    let after = run_ok(&mut s.client, js("kept")).await;
    assert_eq!(after.text().as_deref(), Some("5"));
}

#[tokio::test]
async fn javascript_timeouts_interrupt_busy_and_waiting_cells() {
    if !has_node() {
        return;
    }
    let mut s = serve().await;
    run_ok(&mut s.client, js("var survivor = 'still here'")).await;
    for code in ["while (true) {}", "await new Promise(() => {})"] {
        let mut req = js(code);
        req.timeout_ms = 500;
        let run = run_ok(&mut s.client, req).await;
        let errors = run.errors();
        assert_eq!(errors.len(), 1, "{code}: {errors:?}");
        assert_eq!(errors[0].name, "ExecutionTimeout");
        assert_eq!(
            errors[0].value,
            "execution did not finish within its timeout of 500 ms"
        );
        // Interrupted, not restarted: the state is intact.
        let after = run_ok(&mut s.client, js("survivor")).await;
        assert_eq!(after.text().as_deref(), Some("'still here'"), "{code}");
    }
}

#[tokio::test]
async fn javascript_output_streams_as_it_is_produced() {
    if !has_node() {
        return;
    }
    let mut s = serve().await;
    let mut stream = open(
        &mut s.client,
        js("console.log('first'); await new Promise(r => setTimeout(r, 60000))"),
    )
    .await
    .unwrap();
    // `first` arrives while the cell is still running.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let event = tokio::time::timeout_at(deadline, stream.message())
            .await
            .expect("output before the cell ends")
            .unwrap()
            .expect("stream open");
        match event.event {
            Some(Event::Stdout(chunk)) => {
                assert_eq!(chunk.text, "first\n");
                break;
            }
            Some(Event::Started(_)) | Some(Event::Keepalive(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    drop(stream);
}

#[tokio::test]
async fn javascript_without_node_is_unimplemented_and_says_so() {
    let mut s = serve().await;
    // A context whose PATH leads nowhere: node is missing there.
    let created = s
        .client
        .create_context(pb::CreateContextRequest {
            language: "javascript".into(),
            cwd: None,
            envs: [("PATH".to_owned(), "/nonexistent".to_owned())].into(),
        })
        .await
        .unwrap_err();
    assert_eq!(created.code(), Code::Unimplemented);
    assert_eq!(
        created.message(),
        "language javascript needs node, which is not installed on this host"
    );
    let created = s
        .client
        .create_context(pb::CreateContextRequest {
            language: "ts".into(),
            cwd: None,
            envs: [("PATH".to_owned(), "/nonexistent".to_owned())].into(),
        })
        .await
        .unwrap_err();
    assert_eq!(created.code(), Code::Unimplemented);
    assert_eq!(
        created.message(),
        "language typescript needs node, which is not installed on this host"
    );
    // The failed contexts were not kept.
    let listed = s
        .client
        .list_contexts(pb::ListContextsRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(listed.contexts.iter().all(|c| c.language != "javascript"));
}

#[tokio::test]
async fn typescript_runs_where_node_strips_types_else_says_why() {
    let Some(version) = node_version() else {
        skip_support::skip(NO_NODE);
        return;
    };
    let mut s = serve().await;
    let req = pb::ExecuteRequest {
        language: Some("typescript".into()),
        ..cell("const n: number = 20; n + 1")
    };
    if node_strips_types(&version) {
        eprintln!("node {version} strips types: running typescript");
        let run = run_ok(&mut s.client, req).await;
        assert_eq!(run.text().as_deref(), Some("21"));
    } else {
        eprintln!("node {version} cannot strip types: checking the refusal");
        let status = refused(&mut s.client, req).await;
        assert_eq!(status.code(), Code::Unimplemented);
        assert_eq!(
            status.message(),
            "language typescript needs node 22.13 or newer (type stripping); the node on this host is older"
        );
    }
}
