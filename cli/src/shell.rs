//! `rayito sandbox shell ID`: an interactive terminal in the sandbox.
//!
//! Our terminal goes into raw mode (restored however the session ends),
//! keystrokes go to the sandbox's pty as they are typed, its output is
//! written as it comes, and SIGWINCH resizes it. Without a terminal on
//! stdin (a pipe), the input is sent as it is and no mode is changed.
//! `rayito sandbox exec -t` runs its command on such a terminal.

use std::io::IsTerminal as _;
use std::time::Duration;

use futures_util::StreamExt as _;
use rayito::{CommandOptions, PtyOptions, PtySize, Sandbox, SandboxError};
use rustix::termios::{self, OptionalActions, Termios};
use tokio::io::AsyncReadExt as _;
use tokio::signal::unix::{SignalKind, signal};

use crate::output;
use crate::signals::Caught;

/// SIGINT's number.
const SIGINT: i32 = 2;
/// What Ctrl-C types: the terminal in the sandbox makes it SIGINT.
const CTRL_C: u8 = 0x03;

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

/// The session's options: the caller's `TERM`.
fn terminal_options() -> PtyOptions {
    let mut options = PtyOptions::new();
    if let Ok(term) = std::env::var("TERM") {
        options = options.env("TERM", term);
    }
    options
}

/// Runs the session; returns the shell's exit code.
///
/// # Errors
/// The SDK's, from creating the terminal or talking to it.
pub async fn run(sandbox: &Sandbox) -> Result<i32, SandboxError> {
    session(sandbox, terminal_options(), true).await
}

/// Where `exec -t` finds its command line and directory; the launcher
/// unsets both before the command starts.
const COMMAND_ENV: &str = "RAYITO_EXEC_COMMAND";
const CWD_ENV: &str = "RAYITO_EXEC_CWD";

/// `exec -t`'s launcher: the agent starts a terminal's program as
/// `PROGRAM -i -l` (a shell), so this one ignores those, removes itself,
/// and runs the command line as `exec` does (`bash -l -c`), in the
/// directory asked for (relative to the home directory, as for commands).
const LAUNCHER: &str = r#"#!/bin/bash
rm -f -- "$0"
c=$RAYITO_EXEC_COMMAND d=$RAYITO_EXEC_CWD
unset RAYITO_EXEC_COMMAND RAYITO_EXEC_CWD
if [ -n "$d" ]; then cd -- "$d" || exit 1; fi
exec /bin/bash -l -c "$c"
"#;

/// `exec -t`: `line` on a terminal of the sandbox (as `docker exec -t`),
/// with rayito's stdin typed into it when `-i`; returns its exit code.
///
/// # Errors
/// The SDK's, from writing the launcher, creating the terminal or talking
/// to it.
pub async fn exec(
    sandbox: &Sandbox,
    line: &str,
    args: &crate::exec::ExecArgs,
) -> Result<i32, SandboxError> {
    // A terminal runs a program, not a command line: a launcher of this
    // session's own (mode 0700 in the sandbox's temporary directory)
    // turns it into one.
    let made = sandbox
        .commands()
        .run_with(
            r#"umask 077 && f=$(mktemp -t .rayito-exec.XXXXXX) && cat > "$f" && chmod 700 "$f" && printf %s "$f""#,
            CommandOptions::new().stdin(LAUNCHER).login_shell(false),
        )
        .await?;
    let mut options = terminal_options().shell(made.stdout).env(COMMAND_ENV, line);
    if let Some(cwd) = &args.cwd {
        options = options.env(CWD_ENV, cwd);
    }
    for (name, value) in &args.env {
        options = options.env(name, value);
    }
    if let Some(secs) = args.timeout {
        options = options.timeout(Duration::from_secs(secs));
    }
    session(sandbox, options, args.interactive).await
}

/// A terminal of `options` with ours in raw mode (when `input` and stdin
/// is one), our input typed into it when `input`; returns its program's
/// exit code. SIGINT is typed as Ctrl-C; SIGTERM, SIGHUP or a second
/// signal hang it up (exit 128 + the signal), and a stdout that cannot be
/// written too: the terminal is never left running behind rayito.
async fn session(sandbox: &Sandbox, options: PtyOptions, input: bool) -> Result<i32, SandboxError> {
    let mut pty = sandbox.pty().create(terminal_size(), options).await?;
    let pid = pty.pid();
    let raw = if input { RawMode::enter() } else { None };
    let mut signals = Caught::new();
    let mut interrupted = false;
    let mut winch = signal(SignalKind::window_change()).ok();
    let mut stdin = tokio::io::stdin();
    let mut stdin_open = input;
    let mut buf = vec![0u8; 4096];
    loop {
        tokio::select! {
            output = pty.next() => match output {
                Some(Ok(chunk)) => {
                    if let Err(err) = output::write_bytes(&chunk.data) {
                        let _ = sandbox.pty().kill(pid).await;
                        drop(raw);
                        return Ok(output::stdout_failed(&err));
                    }
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
            signal = signals.next() => {
                if signal == SIGINT && !interrupted {
                    interrupted = true;
                    sandbox.pty().send_input(pid, vec![CTRL_C]).await?;
                } else {
                    let _ = sandbox.pty().kill(pid).await;
                    drop(raw);
                    return Ok(128 + signal);
                }
            }
        }
    }
    let exit = pty.wait().await;
    drop(raw);
    Ok(exit?.exit_code)
}
