//! Execute on Python contexts, through a real tonic client over loopback.

use crate::code_support;

use std::time::{Duration, Instant};

use code_support::{cell, collect, open, run_ok, serve};
use rayito_agent::pb;
use rayito_agent::pb::execute_event::Event;

#[tokio::test]
async fn state_is_kept_between_cells_and_the_last_expression_is_the_main_result() {
    let mut s = serve().await;
    let first = run_ok(&mut s.client, cell("x = 40")).await;
    assert!(first.results().is_empty());
    let second = run_ok(&mut s.client, cell("x + 2")).await;
    let results = second.results();
    assert_eq!(results.len(), 1);
    assert!(results[0].is_main_result);
    assert_eq!(results[0].text.as_deref(), Some("42"));
    assert_eq!(results[0].html, None);
    assert_eq!(second.kinds(), ["started", "result", "end"]);
}

#[tokio::test]
async fn started_is_first_and_counts_and_seq_increase() {
    let mut s = serve().await;
    for expected in 1..=3u64 {
        let run = run_ok(&mut s.client, cell("print('hi')")).await;
        let started = run.started();
        assert_eq!(started.execution_count, expected);
        assert_eq!(started.execution_id.len(), "exec-".len() + 16);
        assert!(started.execution_id.starts_with("exec-"));
        assert!(
            started.execution_id[5..]
                .bytes()
                .all(|b| b.is_ascii_hexdigit())
        );
        assert_eq!(run.end().expect("end").execution_count, expected);
        let seqs: Vec<u64> = run.events.iter().map(|(_, e)| e.seq).collect();
        assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
        assert_eq!(run.stdout(), "hi\n");
    }
}

#[tokio::test]
async fn an_exception_is_an_error_event_and_the_context_survives() {
    let mut s = serve().await;
    run_ok(&mut s.client, cell("y = 7")).await;
    let failed = run_ok(&mut s.client, cell("print('before')\n1 / 0")).await;
    assert_eq!(failed.kinds(), ["started", "stdout", "error", "end"]);
    let errors = failed.errors();
    assert_eq!(errors[0].name, "ZeroDivisionError");
    assert_eq!(errors[0].value, "division by zero");
    let tb = &errors[0].traceback;
    assert_eq!(
        tb.first().map(String::as_str),
        Some("Traceback (most recent call last):")
    );
    assert_eq!(
        tb.last().map(String::as_str),
        Some("ZeroDivisionError: division by zero")
    );
    assert!(
        tb.iter()
            .any(|l| l.starts_with("  File \"<cell-2>\", line 2")),
        "{tb:?}"
    );
    assert!(
        !tb.iter().any(|l| l.contains("driver")),
        "driver frames leak: {tb:?}"
    );
    let after = run_ok(&mut s.client, cell("y * 6")).await;
    assert_eq!(after.text().as_deref(), Some("42"));
}

#[tokio::test]
async fn a_syntax_error_is_reported_without_a_traceback_into_the_driver() {
    let mut s = serve().await;
    let run = run_ok(&mut s.client, cell("def f(:")).await;
    let errors = run.errors();
    assert_eq!(errors[0].name, "SyntaxError");
    assert_eq!(
        errors[0].traceback.last().map(String::as_str),
        Some("SyntaxError: invalid syntax")
    );
}

/// Reads events until the first stdout chunk; returns them all.
async fn until_stdout(
    stream: &mut tonic::Streaming<pb::ExecuteEvent>,
) -> Vec<(Instant, pb::ExecuteEvent)> {
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(60), stream.message())
            .await
            .expect("an event within 60 s")
            .expect("stream ok")
            .expect("the stream goes on");
        let is_stdout = matches!(event.event, Some(Event::Stdout(_)));
        seen.push((Instant::now(), event));
        if is_stdout {
            return seen;
        }
    }
}

#[tokio::test]
async fn stdout_streams_as_produced() {
    let mut s = serve().await;
    // The cell prints a port, then blocks until the test connects to it:
    // the first chunk can only arrive before the end if output streams.
    let code = "import socket, time\nsrv = socket.socket()\nsrv.bind(('127.0.0.1', 0))\nsrv.listen()\nprint(srv.getsockname()[1])\nsrv.accept()[0].close()\nprint('after')\n";
    let mut stream = open(&mut s.client, cell(code)).await.expect("open");
    let mut events = until_stdout(&mut stream).await;
    let Some(Event::Stdout(first)) = &events.last().expect("stdout").1.event else {
        unreachable!()
    };
    let port: u16 = first.text.trim().parse().expect("a port");
    std::net::TcpStream::connect(("127.0.0.1", port)).expect("the cell listens");
    let rest = collect(stream).await;
    assert!(rest.status.is_none(), "{:?}", rest.status);
    events.extend(rest.events);
    let run = code_support::Run {
        events,
        status: None,
    };
    assert_eq!(run.kinds(), ["started", "stdout", "stdout", "end"]);
    let texts: Vec<String> = run
        .events
        .iter()
        .filter_map(|(_, e)| match &e.event {
            Some(Event::Stdout(c)) => Some(c.text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, [format!("{port}\n"), "after\n".to_owned()]);
    let stamps: Vec<i64> = run
        .events
        .iter()
        .filter_map(|(_, e)| match &e.event {
            Some(Event::Stdout(c)) => Some(c.timestamp_unix_ns),
            _ => None,
        })
        .collect();
    assert!(stamps[0] < stamps[1]);
}

#[tokio::test]
async fn stderr_and_subprocess_output_are_forwarded() {
    let mut s = serve().await;
    let code =
        "import sys, subprocess\nsys.stderr.write('warn\\n')\nsubprocess.run(['echo', 'child'])\n";
    let run = run_ok(&mut s.client, cell(code)).await;
    assert_eq!(run.stderr(), "warn\n");
    assert_eq!(run.stdout(), "child\n");
}

#[tokio::test]
async fn large_output_is_split_in_chunks_of_at_most_64_kib() {
    let mut s = serve().await;
    let run = run_ok(&mut s.client, cell("print('a' * 300000, end='')")).await;
    let stdout = run.stdout();
    assert_eq!(stdout.len(), 300_000);
    for (_, e) in &run.events {
        if let Some(Event::Stdout(c)) = &e.event {
            assert!(c.text.len() <= 64 * 1024);
        }
    }
}

#[tokio::test]
async fn rich_results_come_from_repr_methods() {
    let mut s = serve().await;
    let code = r#"
class Rich:
    def __repr__(self): return 'Rich()'
    def _repr_html_(self): return '<b>rich</b>'
    def _repr_markdown_(self): return '**rich**'
    def _repr_png_(self): return b'\x89PNG'
    def _repr_svg_(self): return '<svg/>'
    def _repr_latex_(self): return '$x$'
    def _repr_json_(self): return {'a': 1}
Rich()
"#;
    let run = run_ok(&mut s.client, cell(code)).await;
    let result = run.results().pop().expect("a result");
    assert!(result.is_main_result);
    assert_eq!(result.text.as_deref(), Some("Rich()"));
    assert_eq!(result.html.as_deref(), Some("<b>rich</b>"));
    assert_eq!(result.markdown.as_deref(), Some("**rich**"));
    assert_eq!(result.png.as_deref(), Some("iVBORw=="));
    assert_eq!(result.svg.as_deref(), Some("<svg/>"));
    assert_eq!(result.latex.as_deref(), Some("$x$"));
    assert_eq!(result.json.as_deref(), Some(r#"{"a": 1}"#));
    assert_eq!(result.jpeg, None);
}

#[tokio::test]
async fn display_results_are_not_main_and_keep_their_order_with_output() {
    let mut s = serve().await;
    let run = run_ok(&mut s.client, cell("print('a')\ndisplay(1)\nprint('b')\n2")).await;
    assert_eq!(
        run.kinds(),
        ["started", "stdout", "result", "stdout", "result", "end"]
    );
    let results = run.results();
    assert!(!results[0].is_main_result);
    assert_eq!(results[0].text.as_deref(), Some("1"));
    assert!(results[1].is_main_result);
    assert_eq!(results[1].text.as_deref(), Some("2"));
}

#[tokio::test]
async fn none_is_not_a_result_and_top_level_await_works() {
    let mut s = serve().await;
    let run = run_ok(&mut s.client, cell("None")).await;
    assert!(run.results().is_empty());
    let run = run_ok(
        &mut s.client,
        cell("import asyncio\nawait asyncio.sleep(0.01)\n'done'"),
    )
    .await;
    assert_eq!(run.text().as_deref(), Some("'done'"));
}

#[tokio::test]
async fn per_execution_envs_apply_to_one_cell_only() {
    let mut s = serve().await;
    let mut req = cell("import os\nos.environ.get('RAYITO_K')");
    req.envs.insert("RAYITO_K".into(), "v1".into());
    let run = run_ok(&mut s.client, req).await;
    assert_eq!(run.text().as_deref(), Some("'v1'"));
    let run = run_ok(&mut s.client, cell("import os\nos.environ.get('RAYITO_K')")).await;
    assert!(run.results().is_empty(), "the env outlived its cell");
}

#[tokio::test]
async fn a_timeout_too_large_for_the_clock_is_no_limit() {
    // A hostile client's u64::MAX used to panic the Execute handler.
    let mut s = serve().await;
    let mut req = cell("1 + 1");
    req.timeout_ms = u64::MAX;
    let run = run_ok(&mut s.client, req).await;
    assert_eq!(run.text().as_deref(), Some("2"));
}

#[tokio::test]
async fn a_timeout_interrupts_the_cell_and_keeps_the_state() {
    let mut s = serve().await;
    run_ok(&mut s.client, cell("kept = 5")).await;
    let mut req = cell("import time\nprint('start')\ntime.sleep(30)");
    req.timeout_ms = 500;
    let began = Instant::now();
    let run = run_ok(&mut s.client, req).await;
    assert!(
        // Far below the cell's 30 s sleep, far above a loaded machine's delay.
        began.elapsed() < Duration::from_secs(20),
        "took {:?}",
        began.elapsed()
    );
    assert_eq!(run.kinds(), ["started", "stdout", "error", "end"]);
    let errors = run.errors();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].name, "ExecutionTimeout");
    assert_eq!(
        errors[0].value,
        "execution did not finish within its timeout of 500 ms"
    );
    assert!(errors[0].traceback.is_empty());
    let after = run_ok(&mut s.client, cell("kept + 1")).await;
    assert_eq!(after.text().as_deref(), Some("6"));
}

#[tokio::test]
async fn a_cell_that_ignores_the_interrupt_gets_its_context_restarted() {
    let mut s = serve().await;
    run_ok(&mut s.client, cell("lost = 1")).await;
    let code = "import time\nwhile True:\n    try:\n        time.sleep(10)\n    except KeyboardInterrupt:\n        pass\n";
    let mut req = cell(code);
    req.timeout_ms = 300;
    let began = Instant::now();
    let run = run_ok(&mut s.client, req).await;
    let took = began.elapsed();
    assert!(
        took >= Duration::from_secs(5) && took < Duration::from_secs(30),
        "took {took:?}"
    );
    let kinds: Vec<&str> = run
        .kinds()
        .into_iter()
        .filter(|k| *k != "keepalive")
        .collect();
    assert_eq!(kinds, ["started", "error", "end"]);
    assert_eq!(run.errors()[0].name, "ExecutionTimeout");
    assert_eq!(
        run.errors()[0].value,
        "execution did not finish within its timeout of 300 ms"
    );
    // A fresh kernel: the count restarts and the old state is gone.
    let after = run_ok(&mut s.client, cell("'lost' in globals()")).await;
    assert_eq!(after.text().as_deref(), Some("False"));
    assert_eq!(after.started().execution_count, 1);
}

#[tokio::test]
async fn a_kernel_that_dies_is_reported_and_restarted() {
    let mut s = serve().await;
    let run = run_ok(&mut s.client, cell("import os\nos._exit(3)")).await;
    let errors = run.errors();
    assert_eq!(errors[0].name, "KernelDied");
    assert_eq!(
        errors[0].value,
        "the kernel exited during the execution; the context was restarted and its state lost"
    );
    let after = run_ok(&mut s.client, cell("1 + 1")).await;
    assert_eq!(after.text().as_deref(), Some("2"));
}

/// A cancelled stream is not followed by anyone: after the detach grace
/// (a cut client would have reattached within it) the cell is interrupted.
#[tokio::test]
async fn cancelling_the_stream_interrupts_the_cell() {
    let mut s = serve().await;
    let mut stream = open(&mut s.client, cell("import time\ntime.sleep(30)"))
        .await
        .expect("open");
    let first = stream.message().await.expect("ok").expect("an event");
    assert!(matches!(first.event, Some(Event::Started(_))));
    drop(stream);
    let began = Instant::now();
    // The second cell waits for the first (keepalives meanwhile).
    let after = code_support::run(&mut s.client, cell("1 + 1")).await;
    assert!(after.status.is_none(), "{:?}", after.status);
    assert!(
        // Far below the cell's 30 s sleep, far above a loaded machine's delay.
        began.elapsed() < Duration::from_secs(25),
        "took {:?}",
        began.elapsed()
    );
    let kinds: Vec<_> = after
        .kinds()
        .into_iter()
        .filter(|k| *k != "keepalive")
        .collect();
    assert_eq!(kinds, ["started", "result", "end"]);
    assert_eq!(after.text().as_deref(), Some("2"));
}

#[tokio::test]
async fn a_second_cell_waits_for_the_first_and_output_never_mixes() {
    let mut s = serve().await;
    let mut first = open(
        &mut s.client,
        cell("import time\nfor i in range(3):\n    print('first', i)\n    time.sleep(0.2)\ntime.time()"),
    )
    .await
    .expect("open");
    // The first cell is running (it printed) before the second is sent.
    let first_events = until_stdout(&mut first).await;
    let second = open(
        &mut s.client,
        cell("import time\nprint('second')\ntime.time()"),
    )
    .await
    .expect("open");
    let (first_rest, second) = tokio::join!(collect(first), collect(second));
    let mut events = first_events;
    events.extend(first_rest.events);
    let first = code_support::Run {
        events,
        status: first_rest.status,
    };
    assert!(first.status.is_none(), "{:?}", first.status);
    assert_eq!(first.stdout(), "first 0\nfirst 1\nfirst 2\n");
    assert_eq!(second.stdout(), "second\n");
    // The kernel's own clocks: the second cell began after the first ended.
    let first_done: f64 = first.text().expect("time").parse().expect("a float");
    let second_done: f64 = second.text().expect("time").parse().expect("a float");
    assert!(second_done > first_done);
    assert_eq!(first.started().execution_count, 1);
    assert_eq!(second.started().execution_count, 2);
}

#[tokio::test]
async fn a_silent_cell_gets_keepalives_with_seq_zero() {
    let mut s = serve().await;
    // The cell connects to the test and waits, silent, until the test hangs
    // up, which it does once a keepalive arrived: no race with the 5 s timer.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let code = format!(
        "import socket\nc = socket.create_connection(('127.0.0.1', {port}))\n_ = c.recv(1)\n"
    );
    let mut stream = open(&mut s.client, cell(&code)).await.expect("open");
    let (conn, _) = tokio::time::timeout(Duration::from_secs(60), listener.accept())
        .await
        .expect("the cell connects")
        .unwrap();
    let mut events = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(60), stream.message())
            .await
            .expect("a keepalive within 60 s")
            .expect("stream ok")
            .expect("the stream goes on");
        let keepalive = matches!(event.event, Some(Event::Keepalive(_)));
        events.push((Instant::now(), event));
        if keepalive {
            break;
        }
    }
    drop(conn);
    let rest = collect(stream).await;
    events.extend(rest.events);
    let run = code_support::Run {
        events,
        status: rest.status,
    };
    assert!(run.status.is_none(), "{:?}", run.status);
    let keepalives: Vec<u64> = run
        .events
        .iter()
        .filter(|(_, e)| matches!(e.event, Some(Event::Keepalive(_))))
        .map(|(_, e)| e.seq)
        .collect();
    assert!(
        !keepalives.is_empty() && keepalives.iter().all(|&seq| seq == 0),
        "{keepalives:?}"
    );
    let kinds: Vec<&str> = run
        .kinds()
        .into_iter()
        .filter(|k| *k != "keepalive")
        .collect();
    assert_eq!(kinds, ["started", "end"]);
    assert_eq!(run.end().expect("end").execution_count, 1);
}

#[tokio::test]
async fn warm_up_makes_the_kernel_ready_and_shutdown_kills_it() {
    let s = serve().await;
    assert!(!s.service.kernel_ready());
    s.service.warm_up();
    // Ready means the interpreter has answered, not that it is starting.
    assert!(
        !s.service.kernel_ready(),
        "ready while the interpreter starts"
    );
    assert!(
        s.service.kernel_ready_within(Duration::from_secs(20)).await,
        "kernel never became ready"
    );
    let mut client = s.client.clone();
    let run = run_ok(&mut client, cell("import os\nos.getpid()")).await;
    let pid: i32 = run.text().expect("pid").parse().expect("a number");
    s.service.shutdown();
    assert!(!s.service.kernel_ready());
    let began = Instant::now();
    loop {
        let status = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Gone, or a zombie waiting to be reaped.
        if status.is_empty() || status.contains(") Z ") {
            break;
        }
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "kernel survived shutdown"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refused = code_support::refused(&mut client, cell("1")).await;
    assert_eq!(refused.code(), tonic::Code::Unavailable);
    assert_eq!(refused.message(), "terminating");
}

#[tokio::test]
async fn a_value_above_8_mib_is_omitted_and_named() {
    let mut s = serve().await;
    let run = run_ok(&mut s.client, cell("'x' * (8 * 1024 * 1024)")).await;
    let result = run.results().pop().expect("a result");
    assert_eq!(result.text, None);
    assert_eq!(
        result.extra.get("rayito/omitted").map(String::as_str),
        Some("text/plain")
    );
}

/// A cell can write to the driver's own protocol descriptor: a forged
/// frame header announcing more than the 32 MiB cap ends the kernel at once
/// (the agent neither waits for nor reserves the announced 200 MiB), and
/// the next cell runs in a fresh kernel.
#[tokio::test]
async fn a_forged_frame_past_the_cap_ends_the_kernel_at_once() {
    let mut s = serve().await;
    let forge = "import gc, os, struct\n\
                 proto = [o for o in gc.get_objects() if type(o).__name__ == '_Protocol'][0]\n\
                 os.write(proto._out, struct.pack('>I', 200 << 20) + b'{')\n";
    let started = Instant::now();
    let stream = open(&mut s.client, cell(forge)).await.expect("Execute");
    let run = tokio::time::timeout(Duration::from_secs(20), collect(stream))
        .await
        .expect("the forged frame ended the cell within 20 s");
    assert!(run.status.is_none(), "{:?}", run.status);
    let errors = run.errors();
    assert_eq!(errors.len(), 1, "{:?}", run.kinds());
    assert_eq!(errors[0].name, "KernelDied");
    assert!(started.elapsed() < Duration::from_secs(20));
    let after = run_ok(&mut s.client, cell("1 + 1")).await;
    assert_eq!(after.text().as_deref(), Some("2"));
}

/// A frame that would pass the cap is shrunk by the driver, not refused:
/// an exception whose message is 40 MiB arrives cut to 1 MiB characters.
#[tokio::test]
async fn an_error_larger_than_a_frame_arrives_shrunk() {
    let mut s = serve().await;
    let run = run_ok(&mut s.client, cell("raise ValueError('x' * (40 << 20))")).await;
    let errors = run.errors();
    assert_eq!(errors.len(), 1, "{:?}", run.kinds());
    assert_eq!(errors[0].name, "ValueError");
    assert_eq!(errors[0].value.len(), 1 << 20);
    let after = run_ok(&mut s.client, cell("1 + 1")).await;
    assert_eq!(after.text().as_deref(), Some("2"));
}
