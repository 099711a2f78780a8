//! An interactive terminal: start bash on a pty in a sandbox, type a line,
//! print what the terminal shows (the echo of the line, then its output).
//!
//! ```text
//! cargo run --example pty            # local backend, no AWS account
//! ```

use std::time::Duration;

use futures_util::StreamExt as _;
use rayito::{PtyOptions, PtySize, Sandbox, SandboxError};

#[tokio::main]
async fn main() -> Result<(), SandboxError> {
    let sandbox = Sandbox::builder().local().create().await?;
    let mut pty = sandbox
        .pty()
        .create(
            PtySize::new(100, 30),
            PtyOptions::new().env("PS1", "sandbox$ "),
        )
        .await?;
    // The terminal echoes the line as typed; the shell then prints
    // "answer: 42" (which the typed line does not contain).
    pty.send_input("echo answer: $((6 * 7))\n").await?;

    // Print what the terminal shows until the shell has answered.
    let mut screen = String::new();
    while !screen.contains("answer: 42") {
        let next = tokio::time::timeout(Duration::from_secs(30), pty.next()).await;
        let Ok(Some(chunk)) = next else { break };
        let text = String::from_utf8_lossy(&chunk?.data).into_owned();
        print!("{text}");
        screen.push_str(&text);
    }
    println!();

    pty.resize(PtySize::new(120, 40)).await?;
    pty.send_input("exit\n").await?;
    let exit = pty.wait().await?;
    println!("the shell exited with {}", exit.exit_code);
    sandbox.kill().await?;
    Ok(())
}
