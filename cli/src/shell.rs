//! `rayito sandbox shell ID`: an interactive terminal in the sandbox.
//!
//! Our terminal goes into raw mode (restored however the session ends),
//! keystrokes go to the sandbox's pty as they are typed, its output is
//! written as it comes, and SIGWINCH resizes it. Without a terminal on
//! stdin (a pipe), the input is sent as it is and no mode is changed.

use std::io::{IsTerminal as _, Write as _};

use futures_util::StreamExt as _;
use rayito::{PtyOptions, PtySize, Sandbox, SandboxError};
use rustix::termios::{self, OptionalActions, Termios};
use tokio::io::AsyncReadExt as _;
use tokio::signal::unix::{SignalKind, signal};

/// Puts the terminal back as it was when dropped.
struct RawMode {
    saved: Termios,
}

impl RawMode {
    fn enter() -> Option<RawMode> {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return None;
        }
        let saved = termios::tcgetattr(&stdin).ok()?;
        let mut raw = saved.clone();
        raw.make_raw();
        termios::tcsetattr(&stdin, OptionalActions::Now, &raw).ok()?;
        Some(RawMode { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = termios::tcsetattr(std::io::stdin(), OptionalActions::Now, &self.saved);
    }
}

fn terminal_size() -> PtySize {
    termios::tcgetwinsize(std::io::stdout())
        .ok()
        .filter(|w| w.ws_col > 0 && w.ws_row > 0)
        .map_or(PtySize::new(80, 24), |w| PtySize::new(w.ws_col, w.ws_row))
}

/// Runs the session; returns the shell's exit code.
///
/// # Errors
/// The SDK's, from creating the terminal or talking to it.
pub async fn run(sandbox: &Sandbox) -> Result<i32, SandboxError> {
    let mut options = PtyOptions::new();
    if let Ok(term) = std::env::var("TERM") {
        options = options.env("TERM", term);
    }
    let mut pty = sandbox.pty().create(terminal_size(), options).await?;
    let pid = pty.pid();
    let raw = RawMode::enter();
    let mut winch = signal(SignalKind::window_change()).ok();
    let mut stdin = tokio::io::stdin();
    let mut stdin_open = true;
    let mut buf = vec![0u8; 4096];
    loop {
        tokio::select! {
            output = pty.next() => match output {
                Some(Ok(chunk)) => {
                    let mut out = std::io::stdout().lock();
                    let _ = out.write_all(&chunk.data);
                    let _ = out.flush();
                }
                Some(Err(err)) => return Err(err),
                None => break,
            },
            read = stdin.read(&mut buf), if stdin_open => match read {
                Ok(0) | Err(_) => stdin_open = false,
                Ok(n) => sandbox.pty().send_input(pid, buf[..n].to_vec()).await?,
            },
            Some(()) = async { match winch.as_mut() { Some(w) => w.recv().await, None => None } } => {
                sandbox.pty().resize(pid, terminal_size()).await?;
            }
        }
    }
    let exit = pty.wait().await;
    drop(raw);
    Ok(exit?.exit_code)
}
