//! Contexts, bash, every refusal of the Code service with its exact message,
//! and the phase watch on live streams; through a real tonic client.

use crate::code_support;

use std::time::Duration;

use code_support::{cell, cell_in, collect, open, refused, run_ok, serve};
use rayito_agent::pb;
use rayito_agent::pb::execute_event::Event;
use rayito_agent::phase::Phase;
use tonic::Code;

fn create(language: &str) -> pb::CreateContextRequest {
    pb::CreateContextRequest {
        language: language.to_owned(),
        ..Default::default()
    }
}

async fn create_ok(s: &mut code_support::Served, req: pb::CreateContextRequest) -> String {
    s.client
        .create_context(req)
        .await
        .expect("CreateContext")
        .into_inner()
        .context_id
}

// ---- contexts ---------------------------------------------------------

async fn context_ids(s: &code_support::Served) -> Vec<String> {
    s.client
        .clone()
        .list_contexts(pb::ListContextsRequest {})
        .await
        .expect("list")
        .into_inner()
        .contexts
        .into_iter()
        .map(|c| c.context_id)
        .collect()
}

/// A RestartContext the client cancels while the new kernel starts does
/// not leave the context refusing later restarts ("being restarted").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_cancelled_midway_does_not_block_the_next_one() {
    let mut s = serve().await;
    let id = create_ok(&mut s, create("python")).await;
    let pid_of_kernel = |run: code_support::Run| -> u32 {
        run.results()[0]
            .text
            .as_deref()
            .expect("text")
            .parse()
            .expect("a pid")
    };
    for attempt in 0..20u64 {
        let old =
            pid_of_kernel(run_ok(&mut s.client, cell_in(&id, "import os; os.getpid()")).await);
        let mut restarter = s.client.clone();
        let request = pb::RestartContextRequest {
            context_id: id.clone(),
        };
        let call = tokio::spawn(async move { restarter.restart_context(request).await });
        tokio::time::sleep(Duration::from_millis(1 + attempt)).await;
        if call.is_finished() {
            continue; // restarted before the cancel: not this case
        }
        call.abort();
        // The agent took the restart if the old kernel died (it kills first).
        let by = std::time::Instant::now() + Duration::from_secs(2);
        while std::path::Path::new(&format!("/proc/{old}")).exists()
            && std::time::Instant::now() < by
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if std::path::Path::new(&format!("/proc/{old}")).exists() {
            continue; // the cancel came before the agent saw the call
        }
        // Until the agent has seen the cancel, the restart is still under way
        // and a second one is refused with "retry"; after it, never.
        let by = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let next = s
                .client
                .restart_context(pb::RestartContextRequest {
                    context_id: id.clone(),
                })
                .await;
            match next {
                Ok(_) => break,
                Err(status) if status.code() == Code::Aborted && std::time::Instant::now() < by => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(status) => panic!("a later restart is refused: {status:?}"),
            }
        }
        let new =
            pid_of_kernel(run_ok(&mut s.client, cell_in(&id, "import os; os.getpid()")).await);
        assert_ne!(new, old);
        return;
    }
    panic!("no restart was cancelled midway");
}

/// A CreateContext the client cancels while its kernel starts leaves no
/// context behind: hyper drops the handler then, and a context whose id
/// nobody got would hold one of the eight slots for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_cancelled_while_its_kernel_starts_leaves_no_context() {
    let s = serve().await;
    let before = context_ids(&s).await;
    for _attempt in 0..20 {
        let mut creator = s.client.clone();
        let call = tokio::spawn(async move { creator.create_context(create("python")).await });
        // A new context is listed before its kernel answers: catch it then.
        let caught = loop {
            let new: Vec<String> = context_ids(&s)
                .await
                .into_iter()
                .filter(|id| !before.contains(id))
                .collect();
            if call.is_finished() {
                break None;
            }
            if let Some(id) = new.into_iter().next() {
                break Some(id);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        let Some(id) = caught else {
            // The kernel was up before the poll saw it: not this case.
            let created = call.await.unwrap().expect("create").into_inner();
            s.client
                .clone()
                .destroy_context(pb::DestroyContextRequest {
                    context_id: created.context_id,
                })
                .await
                .expect("destroy");
            continue;
        };
        call.abort();
        let by = std::time::Instant::now() + Duration::from_secs(30);
        while context_ids(&s).await.contains(&id) {
            assert!(
                std::time::Instant::now() < by,
                "the cancelled context {id} is still listed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        return;
    }
    panic!("no create was caught while its kernel started");
}

#[tokio::test]
async fn create_list_use_and_destroy_a_context() {
    let mut s = serve().await;
    std::fs::create_dir_all(s.root.path().join("home/user/work")).expect("mkdir");
    let mut req = create("python");
    req.cwd = Some("/home/user/work".into());
    req.envs.insert("RAYITO_CTX".into(), "ctx-value".into());
    let id = create_ok(&mut s, req).await;
    assert_eq!(id.len(), "ctx-".len() + 12, "{id}");
    assert!(id.starts_with("ctx-") && id[4..].bytes().all(|b| b.is_ascii_hexdigit()));

    let listed = s
        .client
        .list_contexts(pb::ListContextsRequest {})
        .await
        .expect("list")
        .into_inner();
    let info = listed
        .contexts
        .iter()
        .find(|c| c.context_id == id)
        .expect("listed");
    assert_eq!(info.language, "python");
    assert_eq!(info.cwd, "/home/user/work");

    let run = run_ok(
        &mut s.client,
        cell_in(
            &id,
            "import os\nos.environ['RAYITO_CTX'], os.path.basename(os.getcwd())",
        ),
    )
    .await;
    assert_eq!(run.text().as_deref(), Some("('ctx-value', 'work')"));
    // Its own namespace: the default context does not see its variables.
    run_ok(&mut s.client, cell_in(&id, "only_here = 1")).await;
    let other = run_ok(&mut s.client, cell("'only_here' in globals()")).await;
    assert_eq!(other.text().as_deref(), Some("False"));

    s.client
        .destroy_context(pb::DestroyContextRequest {
            context_id: id.clone(),
        })
        .await
        .expect("destroy");
    let listed = s
        .client
        .list_contexts(pb::ListContextsRequest {})
        .await
        .expect("list")
        .into_inner();
    assert!(listed.contexts.iter().all(|c| c.context_id != id));
    let status = refused(&mut s.client, cell_in(&id, "1")).await;
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(status.message(), "context not found");
}

#[tokio::test]
async fn restart_loses_the_state_and_resets_the_count() {
    let mut s = serve().await;
    let id = create_ok(&mut s, create("python")).await;
    run_ok(&mut s.client, cell_in(&id, "gone = 1")).await;
    run_ok(&mut s.client, cell_in(&id, "gone")).await;
    s.client
        .restart_context(pb::RestartContextRequest {
            context_id: id.clone(),
        })
        .await
        .expect("restart");
    let run = run_ok(&mut s.client, cell_in(&id, "'gone' in globals()")).await;
    assert_eq!(run.text().as_deref(), Some("False"));
    assert_eq!(run.started().execution_count, 1);
}

#[tokio::test]
async fn restart_during_a_cell_ends_it_with_kernel_restarted() {
    let mut s = serve().await;
    let id = create_ok(&mut s, create("python")).await;
    let mut stream = open(&mut s.client, cell_in(&id, "import time\ntime.sleep(30)"))
        .await
        .expect("open");
    let first = stream.message().await.expect("ok").expect("started");
    assert!(matches!(first.event, Some(Event::Started(_))));
    let mut client = s.client.clone();
    let restart = tokio::spawn(async move {
        client
            .restart_context(pb::RestartContextRequest { context_id: id })
            .await
    });
    let run = collect(stream).await;
    assert!(run.status.is_none(), "{:?}", run.status);
    let errors = run.errors();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].name, "KernelRestarted");
    assert_eq!(
        errors[0].value,
        "the context was restarted during the execution"
    );
    assert!(run.end().is_some());
    restart.await.expect("join").expect("restart ok");
}

#[tokio::test]
async fn destroy_during_a_cell_ends_it_with_context_destroyed() {
    let mut s = serve().await;
    let id = create_ok(&mut s, create("python")).await;
    let mut stream = open(&mut s.client, cell_in(&id, "import time\ntime.sleep(30)"))
        .await
        .expect("open");
    stream.message().await.expect("ok").expect("started");
    s.client
        .destroy_context(pb::DestroyContextRequest { context_id: id })
        .await
        .expect("destroy");
    let run = collect(stream).await;
    let errors = run.errors();
    assert_eq!(errors[0].name, "ContextDestroyed");
    assert_eq!(
        errors[0].value,
        "the context was destroyed during the execution"
    );
    assert!(run.end().is_some());
}

/// A killed agent (`cut`, then `shutdown`, as `Agent::kill` does) sends a
/// running cell's stream nothing more: no `ContextDestroyed`, no end, so its
/// client sees the connection go, as when the agent's process dies. (The
/// shutdown's events used to race the connection's drop, and the SDK once
/// read a killed sandbox's cell as ended by `ContextDestroyed`.)
#[tokio::test]
async fn a_cut_then_a_shutdown_sends_a_running_cell_nothing_more() {
    let mut s = serve().await;
    let mut stream = open(
        &mut s.client,
        cell("import time\nprint('up', flush=True)\ntime.sleep(30)"),
    )
    .await
    .expect("open");
    stream.message().await.expect("ok").expect("started");
    stream.message().await.expect("ok").expect("stdout");
    s.service.cut();
    s.service.shutdown();
    let run = collect(stream).await;
    assert!(run.kinds().is_empty(), "{:?}", run.kinds());
    assert!(run.status.is_none(), "{:?}", run.status);
}

#[tokio::test]
async fn at_most_eight_contexts() {
    let mut s = serve().await;
    // `default` counts once it exists.
    run_ok(&mut s.client, cell("1")).await;
    let mut ids = Vec::new();
    for _ in 0..7 {
        ids.push(create_ok(&mut s, create("bash")).await);
    }
    let status = s
        .client
        .create_context(create("bash"))
        .await
        .expect_err("ninth");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(
        status.message(),
        "too many code contexts (at most 8); destroy one first"
    );
    let status = refused(
        &mut s.client,
        pb::ExecuteRequest {
            language: Some("bash".into()),
            code: "true".into(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(status.code(), Code::ResourceExhausted);
    s.client
        .destroy_context(pb::DestroyContextRequest {
            context_id: ids.pop().expect("one"),
        })
        .await
        .expect("destroy");
    create_ok(&mut s, create("python")).await;
}

// ---- bash ---------------------------------------------------------------

#[tokio::test]
async fn bash_keeps_cwd_and_variables_between_cells() {
    let mut s = serve().await;
    let bash = |code: &str| pb::ExecuteRequest {
        language: Some("bash".into()),
        code: code.to_owned(),
        ..Default::default()
    };
    let first = run_ok(
        &mut s.client,
        bash("mkdir -p sub && cd sub\nGREETING=hello\necho set"),
    )
    .await;
    assert_eq!(first.stdout(), "set\n");
    assert_eq!(first.started().execution_count, 1);
    let second = run_ok(
        &mut s.client,
        bash("echo \"$GREETING\" from \"$(basename \"$PWD\")\"\necho oops >&2"),
    )
    .await;
    assert_eq!(second.stdout(), "hello from sub\n");
    assert_eq!(second.stderr(), "oops\n");
    assert_eq!(second.started().execution_count, 2);
    let listed = s
        .client
        .list_contexts(pb::ListContextsRequest {})
        .await
        .expect("list")
        .into_inner();
    let info = listed
        .contexts
        .iter()
        .find(|c| c.context_id == "default-bash")
        .expect("listed");
    assert_eq!(info.language, "bash");
    // The same context by id.
    let third = run_ok(&mut s.client, cell_in("default-bash", "echo $GREETING")).await;
    assert_eq!(third.stdout(), "hello\n");
}

#[tokio::test]
async fn bash_output_streams_and_stdin_is_empty() {
    let mut s = serve().await;
    let id = create_ok(&mut s, create("bash")).await;
    // The cell prints, then waits for the test on a TCP connection: its
    // first line can only arrive before the end if output streams.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut stream = open(
        &mut s.client,
        cell_in(
            &id,
            &format!("echo 1\nexec 3<>/dev/tcp/127.0.0.1/{port}\nread -r -u 3 line\necho \"2 $line\"\nexec 3<&-\ncat"),
        ),
    )
    .await
    .expect("open");
    let first = loop {
        let event = tokio::time::timeout(Duration::from_secs(60), stream.message())
            .await
            .expect("an event within 60 s")
            .expect("stream ok")
            .expect("the stream goes on");
        if let Some(Event::Stdout(chunk)) = event.event {
            break chunk.text;
        }
    };
    assert_eq!(first, "1\n");
    let (mut conn, _) = tokio::time::timeout(Duration::from_secs(60), listener.accept())
        .await
        .expect("the cell connects")
        .unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut conn, b"go\n")
        .await
        .unwrap();
    let rest = collect(stream).await;
    assert!(rest.status.is_none(), "{:?}", rest.status);
    // `cat` read an empty stdin: nothing after the second line.
    assert_eq!(rest.stdout(), "2 go\n");
}

#[tokio::test]
async fn bash_timeout_restarts_the_shell_and_it_works_after() {
    let mut s = serve().await;
    let id = create_ok(&mut s, create("bash")).await;
    let mut req = cell_in(&id, "sleep 30");
    req.timeout_ms = 300;
    let run = run_ok(&mut s.client, req).await;
    let errors = run.errors();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].name, "ExecutionTimeout");
    assert_eq!(
        errors[0].value,
        "execution did not finish within its timeout of 300 ms"
    );
    let after = run_ok(&mut s.client, cell_in(&id, "echo alive")).await;
    assert_eq!(after.stdout(), "alive\n");
}

// ---- refusals, each with its exact message --------------------------------

#[tokio::test]
async fn execute_refusals() {
    let mut s = serve().await;

    let status = refused(&mut s.client, cell(&"#".repeat(1024 * 1024 + 1))).await;
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(
        status.message(),
        "code is larger than 1 MiB; split it into smaller cells"
    );
    // Exactly 1 MiB is accepted.
    run_ok(&mut s.client, cell(&"#".repeat(1024 * 1024))).await;

    let mut both = cell_in("default", "1");
    both.language = Some("python".into());
    let status = refused(&mut s.client, both).await;
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(
        status.message(),
        "language and context_id are mutually exclusive; pass only one"
    );

    for bad in ["", "a/b", "x y", &"a".repeat(65)] {
        let status = refused(&mut s.client, cell_in(bad, "1")).await;
        assert_eq!(status.code(), Code::InvalidArgument, "{bad:?}");
        assert_eq!(
            status.message(),
            "invalid context id; use 1 to 64 characters from A-Z, a-z, 0-9, '_' and '-'"
        );
    }

    let status = refused(&mut s.client, cell_in("ctx-000000000000", "1")).await;
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(status.message(), "context not found");

    let mut ruby = cell("1");
    ruby.language = Some("ruby".into());
    let status = refused(&mut s.client, ruby).await;
    assert_eq!(status.code(), Code::Unimplemented);
    assert_eq!(
        status.message(),
        "language ruby is not installed in this image; use python, bash, javascript or typescript"
    );

    let mut odd = cell("1");
    odd.language = Some("py thon; echo SECRET".into());
    let status = refused(&mut s.client, odd).await;
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(status.message(), "invalid language name");

    let mut bash_envs = cell("echo");
    bash_envs.language = Some("bash".into());
    bash_envs.envs.insert("K".into(), "SECRET-VALUE".into());
    let status = refused(&mut s.client, bash_envs).await;
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(
        status.message(),
        "per-execution envs are only supported in Python contexts"
    );

    let mut bad_env = cell("1");
    bad_env.envs.insert("A=B".into(), "SECRET-VALUE".into());
    let status = refused(&mut s.client, bad_env).await;
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(status.message(), "invalid environment variable name");

    let mut nul_env = cell("1");
    nul_env.envs.insert("K".into(), "SECRET\0VALUE".into());
    let status = refused(&mut s.client, nul_env).await;
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(status.message(), "invalid environment variable value");

    let status = s
        .client
        .reattach(pb::ReattachRequest {
            context_id: "default".into(),
            execution_id: "exec-0000000000000000".into(),
            from_seq: 1,
        })
        .await
        .expect_err("reattach");
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(status.message(), "execution not found");

    let status = s
        .client
        .reattach(pb::ReattachRequest {
            context_id: "default".into(),
            execution_id: "exec-zz".into(),
            from_seq: 1,
        })
        .await
        .expect_err("reattach");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(status.message(), "invalid execution id");
}

#[tokio::test]
async fn context_refusals() {
    let mut s = serve().await;

    let status = s
        .client
        .create_context(create("cobol"))
        .await
        .expect_err("cobol");
    assert_eq!(status.code(), Code::Unimplemented);
    assert_eq!(
        status.message(),
        "language cobol is not installed in this image; use python, bash, javascript or typescript"
    );

    let mut rel = create("python");
    rel.cwd = Some("home/user".into());
    let status = s
        .client
        .create_context(rel)
        .await
        .expect_err("relative cwd");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(
        status.message(),
        "cwd must be an absolute path without '..'"
    );

    let mut dots = create("python");
    dots.cwd = Some("/home/user/../../etc".into());
    let status = s.client.create_context(dots).await.expect_err("dotted cwd");
    assert_eq!(
        status.message(),
        "cwd must be an absolute path without '..'"
    );

    let mut missing = create("python");
    missing.cwd = Some("/home/user/missing-dir".into());
    let status = s
        .client
        .create_context(missing)
        .await
        .expect_err("missing cwd");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(status.message(), "cwd is not a directory");

    let mut bad_env = create("bash");
    bad_env.envs.insert(String::new(), "SECRET-VALUE".into());
    let status = s
        .client
        .create_context(bad_env)
        .await
        .expect_err("empty env name");
    assert_eq!(status.message(), "invalid environment variable name");

    let status = s
        .client
        .destroy_context(pb::DestroyContextRequest {
            context_id: "default".into(),
        })
        .await
        .expect_err("default");
    assert_eq!(status.code(), Code::FailedPrecondition);
    assert_eq!(status.message(), "the default context cannot be destroyed");

    for (name, status) in [
        (
            "destroy",
            s.client
                .destroy_context(pb::DestroyContextRequest {
                    context_id: "ctx-ffffffffffff".into(),
                })
                .await
                .expect_err("unknown"),
        ),
        (
            "restart",
            s.client
                .restart_context(pb::RestartContextRequest {
                    context_id: "ctx-ffffffffffff".into(),
                })
                .await
                .expect_err("unknown"),
        ),
    ] {
        assert_eq!(status.code(), Code::NotFound, "{name}");
        assert_eq!(status.message(), "context not found", "{name}");
    }

    let status = s
        .client
        .destroy_context(pb::DestroyContextRequest {
            context_id: "bad id!".into(),
        })
        .await
        .expect_err("bad id");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(
        status.message(),
        "invalid context id; use 1 to 64 characters from A-Z, a-z, 0-9, '_' and '-'"
    );
}

// ---- the phase watch --------------------------------------------------------

async fn phase_ends_live_stream(phase: Phase, code: Code, message: &str) {
    let mut s = serve().await;
    let mut stream = open(
        &mut s.client,
        cell("import time\nprint('working')\ntime.sleep(30)"),
    )
    .await
    .expect("open");
    let first = stream.message().await.expect("ok").expect("started");
    assert!(matches!(first.event, Some(Event::Started(_))));
    let second = stream.message().await.expect("ok").expect("stdout");
    assert!(matches!(second.event, Some(Event::Stdout(_))));
    s.phase.set(phase);
    let run = tokio::time::timeout(Duration::from_secs(30), collect(stream))
        .await
        .expect("the stream ended promptly");
    assert!(
        run.end().is_none(),
        "no end after a phase change: {:?}",
        run.kinds()
    );
    let status = run.status.expect("an error status");
    assert_eq!(status.code(), code);
    assert_eq!(status.message(), message);
}

#[tokio::test]
async fn suspending_ends_a_live_stream_with_unavailable() {
    phase_ends_live_stream(Phase::Suspending, Code::Unavailable, "suspending").await;
}

#[tokio::test]
async fn terminating_ends_a_live_stream_with_unavailable() {
    phase_ends_live_stream(Phase::Terminating, Code::Unavailable, "terminating").await;
}

#[tokio::test]
async fn the_deadline_ends_a_live_stream_with_sandbox_timeout() {
    phase_ends_live_stream(Phase::Expired, Code::FailedPrecondition, "sandbox_timeout").await;
}

#[tokio::test]
async fn a_suspended_cell_keeps_running_and_the_context_serves_after_resume() {
    let mut s = serve().await;
    let mut stream = open(
        &mut s.client,
        cell("import time\ntime.sleep(1)\nfinished = True"),
    )
    .await
    .expect("open");
    stream.message().await.expect("ok").expect("started");
    s.phase.set(Phase::Suspending);
    let run = collect(stream).await;
    assert_eq!(run.status.expect("status").message(), "suspending");
    s.phase.set(Phase::Running);
    // The next cell waits for the suspended one, which ran to its end.
    let after = run_ok(&mut s.client, cell("finished")).await;
    assert_eq!(after.text().as_deref(), Some("True"));
}
