//! The quickstart flow on the embedded local backend (`.local()`): the real
//! AWS client talks to the in-process emulator, real gRPC goes through its
//! proxy to a real agent.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt as _;
use rayito::{
    CommandOptions, ExecutionEvent, FileType, RunCodeOptions, Sandbox, SandboxState, WriteEntry,
};

const CSV: &str = "name,score\nada,3\nbob,4\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quickstart_flow_on_the_local_backend() {
    let sbx = Sandbox::builder()
        .local()
        .timeout(Duration::from_secs(600))
        .env("GREETING", "hello")
        .create()
        .await
        .expect("create on the local backend");
    assert!(sbx.id().starts_with("microvm-"), "id: {}", sbx.id());
    assert!(sbx.is_running().await);
    let info = sbx.get_info().await.expect("get_info");
    assert_eq!(info.sandbox_id, sbx.id());
    assert!(
        matches!(info.state, SandboxState::Running | SandboxState::Pending),
        "state: {}",
        info.state
    );
    assert!(info.image_arn.ends_with(":microvm-image:rayito-base"));
    assert_eq!(info.max_duration, Duration::from_secs(600));

    // Files: write, read back, stat, list.
    let entry = sbx
        .files()
        .write("/home/user/data.csv", CSV)
        .await
        .expect("write");
    assert_eq!(entry.path, "/home/user/data.csv");
    assert_eq!(entry.size, CSV.len() as u64);
    assert_eq!(
        sbx.files()
            .read_to_string("/home/user/data.csv")
            .await
            .unwrap(),
        CSV
    );
    assert!(sbx.files().exists("/home/user/data.csv").await.unwrap());
    assert!(!sbx.files().exists("/home/user/nothing-here").await.unwrap());
    let listed = sbx.files().list("/home/user").await.unwrap();
    assert!(
        listed
            .iter()
            .any(|e| e.name == "data.csv" && e.file_type == FileType::File)
    );

    // Python reads the same file, keeps state between cells.
    let seen = Arc::new(Mutex::new(String::new()));
    let seen_in_callback = seen.clone();
    let execution = sbx
        .run_code_with(
            "import csv\nrows = list(csv.DictReader(open('/home/user/data.csv')))\nprint(len(rows), 'rows')\ntotal = sum(int(r['score']) for r in rows)\ntotal",
            RunCodeOptions::new().on_stdout(move |m| seen_in_callback.lock().unwrap().push_str(&m.line)),
        )
        .await
        .expect("run_code");
    assert_eq!(execution.error, None);
    assert_eq!(execution.text(), Some("7"));
    assert_eq!(execution.logs.stdout.concat(), "2 rows\n");
    assert_eq!(*seen.lock().unwrap(), "2 rows\n");
    let next = sbx.run_code("total * 6").await.unwrap();
    assert_eq!(next.text(), Some("42"));
    assert!(next.execution_count > execution.execution_count);

    // The same cell as a stream of events, in order, ending with End.
    let events: Vec<ExecutionEvent> = sbx
        .run_code_stream("print('streamed')\n20 + 22", RunCodeOptions::new())
        .await
        .expect("stream opens")
        .map(|event| event.expect("event"))
        .collect()
        .await;
    assert!(
        matches!(&events[0], ExecutionEvent::Stdout(m) if m.line == "streamed\n"),
        "{events:?}"
    );
    assert!(
        matches!(&events[1], ExecutionEvent::Result(r) if r.text.as_deref() == Some("42")),
        "{events:?}"
    );
    assert!(
        matches!(
            events.last(),
            Some(ExecutionEvent::End {
                execution_count: Some(_)
            })
        ),
        "{events:?}"
    );

    // A kernel exception is data, not an error.
    let failed = sbx.run_code("1 / 0").await.expect("an exception is data");
    let error = failed.error.expect("the exception");
    assert_eq!(error.name, "ZeroDivisionError");
    assert_eq!(error.value, "division by zero");

    // Commands see the same file and the sandbox envs.
    let out = sbx
        .commands()
        .run("wc -l < /home/user/data.csv; echo $GREETING; echo oops >&2")
        .await
        .expect("command");
    assert_eq!(out.exit_code, 0);
    assert_eq!(out.stdout, "3\nhello\n");
    assert_eq!(out.stderr, "oops\n");
    let fed = sbx
        .commands()
        .run_with(
            "tr a-z A-Z",
            CommandOptions::new().stdin("shout\n").env("UNUSED", "1"),
        )
        .await
        .expect("stdin");
    assert_eq!(fed.stdout, "SHOUT\n");

    // More file operations.
    let written = sbx
        .files()
        .write_files(vec![
            WriteEntry::new("/home/user/dir/a.txt", "a"),
            WriteEntry::new("/home/user/dir/b.bin", vec![0u8, 159, 146, 150]),
        ])
        .await
        .unwrap();
    assert_eq!(written.len(), 2);
    assert_eq!(
        sbx.files().read("/home/user/dir/b.bin").await.unwrap(),
        vec![0u8, 159, 146, 150]
    );
    assert!(sbx.files().make_dir("/home/user/made").await.unwrap());
    assert!(!sbx.files().make_dir("/home/user/made").await.unwrap());
    let moved = sbx
        .files()
        .rename("/home/user/dir/a.txt", "/home/user/made/a.txt")
        .await
        .unwrap();
    assert_eq!(moved.path, "/home/user/made/a.txt");
    sbx.files().remove("/home/user/dir").await.unwrap();
    assert!(!sbx.files().exists("/home/user/dir").await.unwrap());

    // Connect to it again with its access token.
    let again = Sandbox::builder()
        .local()
        .connect(sbx.id(), sbx.access_token().clone())
        .await
        .expect("connect");
    assert_eq!(
        again
            .commands()
            .run("cat /home/user/made/a.txt")
            .await
            .unwrap()
            .stdout,
        "a"
    );

    assert!(sbx.kill().await.expect("kill"));
    assert!(!sbx.is_running().await);
}
