//! Reattach: an execution outlives its Execute stream (a cut, a suspend)
//! and a client reads on from the last `seq` it saw, every event once.

use crate::code_support;

use std::time::Duration;

use code_support::{Run, cell, collect, open, serve};
use rayito_agent::pb;
use rayito_agent::pb::execute_event::Event;
use rayito_agent::phase::Phase;
use tonic::Code;

/// Numbered lines, 0.2 s apart, then the value of `done`.
const LINES: &str = "import time\nfor i in range(8):\n    print('line', i, flush=True)\n    time.sleep(0.2)\n'done'";

/// Reads events until the stdout so far contains `marker`.
async fn until_stdout_has(
    stream: &mut tonic::Streaming<pb::ExecuteEvent>,
    marker: &str,
) -> Vec<pb::ExecuteEvent> {
    let mut seen = Vec::new();
    let mut stdout = String::new();
    tokio::time::timeout(Duration::from_secs(60), async {
        while !stdout.contains(marker) {
            let event = stream
                .message()
                .await
                .expect("ok")
                .expect("an event before the marker");
            if let Some(Event::Stdout(chunk)) = &event.event {
                stdout.push_str(&chunk.text);
            }
            seen.push(event);
        }
    })
    .await
    .expect("marker within 60 s");
    seen
}

fn numbered(events: &[pb::ExecuteEvent]) -> Vec<pb::ExecuteEvent> {
    events.iter().filter(|e| e.seq > 0).cloned().collect()
}

fn stdout_of(events: &[pb::ExecuteEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Some(Event::Stdout(chunk)) => Some(chunk.text.as_str()),
            _ => None,
        })
        .collect()
}

fn started_of(events: &[pb::ExecuteEvent]) -> pb::ExecutionStarted {
    match &events[0].event {
        Some(Event::Started(started)) => started.clone(),
        other => panic!("first event {other:?}"),
    }
}

fn reattach(execution_id: &str, from_seq: u64) -> pb::ReattachRequest {
    pb::ReattachRequest {
        context_id: "default".into(),
        execution_id: execution_id.into(),
        from_seq,
    }
}

fn all_lines() -> String {
    (0..8).map(|i| format!("line {i}\n")).collect()
}

#[tokio::test]
async fn a_cut_stream_is_read_on_from_the_last_seq_and_the_cell_is_not_rerun() {
    let mut s = serve().await;
    let mut stream = open(&mut s.client, cell(LINES)).await.expect("open");
    let before = numbered(&until_stdout_has(&mut stream, "line 2\n").await);
    let started = started_of(&before);
    let last_seq = before.last().expect("events").seq;
    drop(stream);

    let rest = s
        .client
        .reattach(reattach(&started.execution_id, last_seq + 1))
        .await
        .expect("reattach")
        .into_inner();
    let rest = collect(rest).await;
    assert!(rest.status.is_none(), "{:?}", rest.status);
    let after = numbered(
        &rest
            .events
            .iter()
            .map(|(_, e)| e.clone())
            .collect::<Vec<_>>(),
    );
    assert_eq!(after.first().map(|e| e.seq), Some(last_seq + 1));
    let mut all = before.clone();
    all.extend(after);
    // Every event once, in order, numbered without a gap.
    let seqs: Vec<u64> = all.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert_eq!(stdout_of(&all), all_lines());
    assert!(matches!(
        all.last().and_then(|e| e.event.as_ref()),
        Some(Event::End(_))
    ));
    let whole = Run {
        events: all
            .iter()
            .map(|e| (std::time::Instant::now(), e.clone()))
            .collect(),
        status: None,
    };
    assert_eq!(whole.text().as_deref(), Some("'done'"));
    assert!(whole.errors().is_empty(), "{:?}", whole.errors());

    // Ended, it is still kept: a replay from 1 is the whole execution.
    let replay = s
        .client
        .reattach(reattach(&started.execution_id, 1))
        .await
        .expect("replay")
        .into_inner();
    let replay = collect(replay).await;
    assert_eq!(
        numbered(
            &replay
                .events
                .iter()
                .map(|(_, e)| e.clone())
                .collect::<Vec<_>>()
        ),
        all
    );
    // The next cell runs once (the count says the first was not re-run).
    let next = code_support::run_ok(&mut s.client, cell("1")).await;
    assert_eq!(next.started().execution_count, started.execution_count + 1);

    // Another context's id does not find it.
    let status = s
        .client
        .reattach(pb::ReattachRequest {
            context_id: "default-bash".into(),
            execution_id: started.execution_id.clone(),
            from_seq: 1,
        })
        .await
        .expect_err("foreign context");
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(status.message(), "execution not found");
}

#[tokio::test]
async fn a_suspend_ends_the_stream_not_the_cell_and_reattach_follows_it_to_the_end() {
    let mut s = serve().await;
    let mut stream = open(&mut s.client, cell(LINES)).await.expect("open");
    let mut before = numbered(&until_stdout_has(&mut stream, "line 1\n").await);
    let started = started_of(&before);
    s.phase.set(Phase::Suspending);
    let cut = collect(stream).await;
    let status = cut.status.clone().expect("the suspend ends the stream");
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(status.message(), "suspending");
    before.extend(numbered(
        &cut.events
            .iter()
            .map(|(_, e)| e.clone())
            .collect::<Vec<_>>(),
    ));
    assert!(!cut.kinds().contains(&"end"));

    // While suspending, a follower is refused in the gate's form.
    let gated = s
        .client
        .reattach(reattach(&started.execution_id, 1))
        .await
        .expect("opened")
        .into_inner();
    let gated = collect(gated).await;
    assert_eq!(gated.status.expect("gated").message(), "suspending");

    s.phase.set(Phase::Running);
    let last_seq = before.last().expect("events").seq;
    let rest = s
        .client
        .reattach(reattach(&started.execution_id, last_seq + 1))
        .await
        .expect("reattach")
        .into_inner();
    let rest = collect(rest).await;
    assert!(rest.status.is_none(), "{:?}", rest.status);
    let mut all = before;
    all.extend(numbered(
        &rest
            .events
            .iter()
            .map(|(_, e)| e.clone())
            .collect::<Vec<_>>(),
    ));
    let seqs: Vec<u64> = all.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert_eq!(stdout_of(&all), all_lines());
}

#[tokio::test]
async fn output_dropped_from_the_log_is_out_of_range() {
    let mut s = serve().await;
    // 5 MiB of output: more than the 4 MiB log keeps.
    let run = code_support::run_ok(
        &mut s.client,
        cell("for i in range(80):\n    print('x' * 65535, flush=True)"),
    )
    .await;
    let started = run.started();
    let status = s
        .client
        .reattach(reattach(&started.execution_id, 1))
        .await
        .expect_err("dropped");
    assert_eq!(status.code(), Code::OutOfRange);
    assert_eq!(status.message(), "execution output already discarded");
    // The end is still there.
    let last = run.events.last().expect("end").1.seq;
    let tail = s
        .client
        .reattach(reattach(&started.execution_id, last))
        .await
        .expect("the end is kept")
        .into_inner();
    let tail = collect(tail).await;
    assert_eq!(tail.kinds(), ["end"]);
}

#[tokio::test]
async fn a_cell_nobody_follows_is_interrupted_after_the_grace() {
    let mut s = serve().await;
    let mut stream = open(
        &mut s.client,
        cell("import time\nprint('sleeping', flush=True)\ntime.sleep(600)"),
    )
    .await
    .expect("open");
    let before = until_stdout_has(&mut stream, "sleeping").await;
    let started = started_of(&before);
    drop(stream);
    // Replayed by a late follower: the agent says why the cell ended.
    let began = std::time::Instant::now();
    // The next cell waits for the first one (keepalives meanwhile).
    let next = code_support::run(&mut s.client, cell("'after'")).await;
    assert!(next.status.is_none(), "{:?}", next.status);
    assert_eq!(next.text().as_deref(), Some("'after'"));
    assert!(
        began.elapsed() >= rayito_agent::code::DETACH_GRACE - Duration::from_secs(1),
        "interrupted after {:?}",
        began.elapsed()
    );
    let replay = s
        .client
        .reattach(reattach(&started.execution_id, 1))
        .await
        .expect("kept")
        .into_inner();
    let replay = collect(replay).await;
    assert_eq!(replay.kinds(), ["started", "stdout", "error", "end"]);
    let errors = replay.errors();
    assert_eq!(errors[0].name, "ExecutionAborted");
    assert_eq!(
        errors[0].value,
        "no client followed the execution for 10 s, so it was interrupted"
    );
}
