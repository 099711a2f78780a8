//! `RunCodeOptions::max_output_bytes` on the local backend (a real agent
//! and Python kernel): the newest log bytes kept per stream, `truncated`
//! set, 0 keeps nothing, the callbacks see everything.

use crate::sdk_support;

use std::sync::{Arc, Mutex};

use rayito::RunCodeOptions;

/// A cell printing 1,000 numbered lines of 10 bytes, and `err` to stderr.
const LINES: &str =
    "import sys\nfor i in range(1000):\n    print(f'line {i:04}')\nsys.stderr.write('err')\n";

fn full_output() -> String {
    (0..1000).map(|i| format!("line {i:04}\n")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_output_bytes_keeps_a_cells_newest_bytes_and_callbacks_see_all() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;
    let seen = Arc::new(Mutex::new(String::new()));
    let sink = seen.clone();
    let execution = sbx
        .run_code_with(
            LINES,
            RunCodeOptions::new()
                .max_output_bytes(25)
                .on_stdout(move |m| sink.lock().unwrap().push_str(&m.line)),
        )
        .await
        .expect("run");
    assert_eq!(execution.error, None);
    assert_eq!(
        execution.logs.stdout.concat(),
        "0997\nline 0998\nline 0999\n",
        "the newest 25 bytes"
    );
    assert_eq!(execution.logs.stderr.concat(), "err", "within the limit");
    assert!(execution.truncated);
    assert_eq!(*seen.lock().unwrap(), full_output(), "the callback saw all");

    let seen = Arc::new(Mutex::new(String::new()));
    let sink = seen.clone();
    let execution = sbx
        .run_code_with(
            LINES,
            RunCodeOptions::new()
                .max_output_bytes(0)
                .on_stdout(move |m| sink.lock().unwrap().push_str(&m.line)),
        )
        .await
        .expect("run");
    assert!(execution.logs.stdout.is_empty() && execution.logs.stderr.is_empty());
    assert!(execution.truncated);
    assert_eq!(*seen.lock().unwrap(), full_output(), "the callback saw all");

    let execution = sbx
        .run_code_with(LINES, RunCodeOptions::new())
        .await
        .expect("run");
    assert_eq!(
        execution.logs.stdout.concat(),
        full_output(),
        "the default keeps 64 MiB"
    );
    assert!(!execution.truncated);
    sbx.kill().await.expect("kill the sandbox");
}
