//! Code contexts and rich results on the local backend (a real agent and
//! Python kernel behind the emulated proxy): create with options, list,
//! restart, remove, their failures by variant and exact message; results
//! in every `_repr_*_` format, `display()`, `formats()`, `Execution::text`;
//! per-cell envs and timeout; the four streaming callbacks.

use crate::sdk_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rayito::{CodeContextOptions, ErrorKind, RunCodeOptions, SandboxError};
use sdk_support::{emulator, sandbox};

fn assert_send<T: Send>(_: &T) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contexts_are_created_listed_restarted_and_removed() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    sbx.files().make_dir("/home/user/proj").await.unwrap();

    let creating = sbx.create_code_context(
        CodeContextOptions::new()
            .cwd("/home/user/proj")
            .env("CTX_FLAVOUR", "mint"),
    );
    assert_send(&creating);
    let ctx = creating.await.expect("create");
    assert!(ctx.id.starts_with("ctx-"), "{}", ctx.id);
    assert_eq!(ctx.language, "python");
    assert_eq!(ctx.cwd.as_deref(), Some("/home/user/proj"));

    let in_ctx = || RunCodeOptions::new().context(ctx.id.clone());
    let out = sbx
        .run_code_with(
            "import os\nstate = 41\n(os.getcwd(), os.environ['CTX_FLAVOUR'])",
            in_ctx(),
        )
        .await
        .unwrap();
    assert_eq!(out.error, None);
    assert_eq!(out.text(), Some("('/home/user/proj', 'mint')"));
    assert_eq!(
        sbx.run_code_with("state + 1", in_ctx())
            .await
            .unwrap()
            .text(),
        Some("42")
    );

    let listing = sbx.list_code_contexts();
    assert_send(&listing);
    let listed = listing.await.expect("list");
    assert!(listed.contains(&ctx), "{listed:?}");

    // Restart: the state is gone, the context stays.
    let restarting = sbx.restart_code_context(&ctx.id);
    assert_send(&restarting);
    restarting.await.expect("restart");
    let after = sbx.run_code_with("state", in_ctx()).await.unwrap();
    assert_eq!(after.error.expect("state is gone").name, "NameError");

    let removing = sbx.remove_code_context(&ctx.id);
    assert_send(&removing);
    removing.await.expect("remove");
    let listed = sbx.list_code_contexts().await.unwrap();
    assert!(listed.iter().all(|c| c.id != ctx.id), "{listed:?}");

    // Failures, by variant and exact message.
    let err = sbx.restart_code_context(&ctx.id).await.unwrap_err();
    assert!(matches!(err, SandboxError::NotFound { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "not found (code.restart_context): context not found; the process, context or execution no longer exists"
    );
    let err = sbx.remove_code_context(&ctx.id).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "not found (code.remove_context): context not found; the process, context or execution no longer exists"
    );
    let err = sbx.remove_code_context("default").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        err.to_string(),
        "the agent refused an argument of code.remove_context: the default context cannot be destroyed; fix the value before retrying"
    );
    let err = sbx
        // A relative cwd is relative to /home/user (like file paths); one
        // that climbs out of it is the agent's to refuse.
        .create_code_context(CodeContextOptions::new().cwd("../outside"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        err.to_string(),
        "the agent refused an argument of code.create_context: cwd must be an absolute path without '..'; fix the value before retrying"
    );
    let err = sbx
        .create_code_context(CodeContextOptions::new().language("cobol"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unimplemented);
}

const RICH: &str = r#"
import base64
class Rich:
    def _repr_html_(self): return "<b>rich</b>"
    def _repr_markdown_(self): return "**rich**"
    def _repr_svg_(self): return "<svg></svg>"
    def _repr_png_(self): return b"\x89PNG"
    def _repr_jpeg_(self): return b"\xff\xd8"
    def _repr_pdf_(self): return b"%PDF"
    def _repr_latex_(self): return r"$\rho$"
    def _repr_json_(self): return {"rich": True}
    def _repr_javascript_(self): return "console.log('rich')"
    def __repr__(self): return "Rich()"

class Table:
    def _repr_html_(self): return "<table><tr><td>1</td></tr></table>"
    def __repr__(self): return "Table(1 row)"

display(Table())
print("between")
Rich()
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rich_results_come_in_every_format_with_display_and_callbacks() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;

    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let (out, err, res) = (seen.clone(), seen.clone(), seen.clone());
    let options = RunCodeOptions::new()
        .on_stdout(move |m| out.lock().unwrap().push(format!("stdout:{}", m.line)))
        .on_stderr(move |m| err.lock().unwrap().push(format!("stderr:{}", m.line)))
        .on_result(move |r| {
            res.lock()
                .unwrap()
                .push(format!("result:{}", r.text.as_deref().unwrap_or("")));
        });
    let execution = sbx.run_code_with(RICH, options).await.expect("run");
    assert_eq!(execution.error, None);
    assert_eq!(
        *seen.lock().unwrap(),
        ["result:Table(1 row)", "stdout:between\n", "result:Rich()"]
    );

    // display(): a result that is not the main one, with its HTML.
    let table = &execution.results[0];
    assert!(!table.is_main_result);
    assert_eq!(
        table.html.as_deref(),
        Some("<table><tr><td>1</td></tr></table>")
    );
    assert_eq!(table.formats(), ["text", "html"]);

    // The last expression: every format it offers, in the contract's order.
    let rich = &execution.results[1];
    assert!(rich.is_main_result);
    assert_eq!(
        rich.formats(),
        [
            "text",
            "html",
            "markdown",
            "svg",
            "png",
            "jpeg",
            "pdf",
            "latex",
            "javascript",
            "json"
        ]
    );
    assert_eq!(rich.html.as_deref(), Some("<b>rich</b>"));
    assert_eq!(rich.markdown.as_deref(), Some("**rich**"));
    assert_eq!(rich.svg.as_deref(), Some("<svg></svg>"));
    assert_eq!(rich.png.as_deref(), Some("iVBORw=="));
    assert_eq!(rich.jpeg.as_deref(), Some("/9g="));
    assert_eq!(rich.pdf.as_deref(), Some("JVBERg=="));
    assert_eq!(rich.latex.as_deref(), Some(r"$\rho$"));
    assert_eq!(rich.json.as_deref(), Some(r#"{"rich": true}"#));
    assert_eq!(rich.javascript.as_deref(), Some("console.log('rich')"));
    assert_eq!(execution.text(), Some("Rich()"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_cell_envs_timeout_and_the_error_callback() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;

    // Per-cell envs exist during the cell only.
    let out = sbx
        .run_code_with(
            "import os\nos.environ.get('CELL_ONLY')",
            RunCodeOptions::new().env("CELL_ONLY", "yes"),
        )
        .await
        .unwrap();
    assert_eq!(out.text(), Some("'yes'"));
    let out = sbx
        .run_code("import os\nos.environ.get('CELL_ONLY')")
        .await
        .unwrap();
    assert_eq!(out.text(), None, "None is not a result");

    // The error callback sees the kernel exception; stderr its output.
    let errors = Arc::new(Mutex::new(Vec::new()));
    let stderr = Arc::new(Mutex::new(String::new()));
    let (e, s) = (errors.clone(), stderr.clone());
    let failed = sbx
        .run_code_with(
            "import sys\nprint('warn', file=sys.stderr)\nraise ValueError('bad value')",
            RunCodeOptions::new()
                .on_error(move |err| e.lock().unwrap().push(err.clone()))
                .on_stderr(move |m| s.lock().unwrap().push_str(&m.line)),
        )
        .await
        .unwrap();
    let error = failed.error.expect("the exception");
    assert_eq!(error.name, "ValueError");
    assert_eq!(error.value, "bad value");
    assert!(error.traceback.contains("ValueError: bad value"));
    assert_eq!(*errors.lock().unwrap(), vec![error]);
    assert_eq!(*stderr.lock().unwrap(), "warn\n");

    // The cell's timeout: the agent interrupts it; the kernel survives.
    let timed_out = sbx
        .run_code_with(
            "import time\ntime.sleep(600)",
            RunCodeOptions::new().timeout(Duration::from_secs(1)),
        )
        .await
        .unwrap();
    assert_eq!(timed_out.error.expect("timeout").name, "ExecutionTimeout");
    assert_eq!(sbx.run_code("6 * 7").await.unwrap().text(), Some("42"));
}

/// `sandbox.code()` is a view like `commands()` and `files()`: the same
/// kernel and contexts as the `run_code` shortcuts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_code_view_runs_cells_and_manages_contexts() {
    use futures_util::StreamExt as _;
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let code = sbx.code();
    code.run("x = 20").await.unwrap();
    // The view and the shortcut share the default context.
    assert_eq!(sbx.run_code("x + 1").await.unwrap().text(), Some("21"));
    let out = code
        .run_with("print('hi'); x * 2", RunCodeOptions::new())
        .await
        .unwrap();
    assert_eq!(out.text(), Some("40"));
    assert_eq!(out.logs.stdout.concat(), "hi\n");
    let mut events = code.stream("x - 1", RunCodeOptions::new()).await.unwrap();
    let mut last = None;
    while let Some(event) = events.next().await {
        last = Some(event.unwrap());
    }
    assert!(
        matches!(last, Some(rayito::ExecutionEvent::End { .. })),
        "{last:?}"
    );
    let ctx = code
        .create_context(CodeContextOptions::new())
        .await
        .unwrap();
    assert!(
        code.contexts()
            .await
            .unwrap()
            .iter()
            .any(|c| c.id == ctx.id)
    );
    code.restart_context(&ctx.id).await.unwrap();
    code.remove_context(&ctx.id).await.unwrap();
    assert!(
        !code
            .contexts()
            .await
            .unwrap()
            .iter()
            .any(|c| c.id == ctx.id)
    );
    sbx.kill().await.unwrap();
}
