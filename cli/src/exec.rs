//! `rayito sandbox exec`: a command in the sandbox as if it ran here.
//!
//! Its output is bytes end to end (written as they come, never decoded;
//! with `--output json`, text when UTF-8, else base64 with a field saying
//! so). `-i` streams rayito's stdin to it (else it reads `/dev/null`),
//! `-t` runs it on a terminal (`crate::shell`). SIGINT, SIGTERM and SIGHUP
//! are passed on to it, a second one kills it, as `docker exec` and `ssh`
//! do; `--detach` starts it and prints its pid instead. A stdout that
//! cannot be written ends it too: nothing runs on unseen.

use std::time::Duration;

use futures_util::StreamExt as _;
use rayito::error::TimeoutScope;
use rayito::{CommandEvent, CommandOptions, Commands, Sandbox, SandboxError};
use serde_json::json;
use tokio::io::AsyncReadExt as _;

use crate::Format;
use crate::commands::Failure;
use crate::output::{self, EXIT_FAILURE};
use crate::signals::Caught;

/// Bytes of rayito's stdin sent per write with `-i`.
const STDIN_CHUNK: usize = 64 * 1024;

/// `exec`'s options.
#[derive(Debug, clap::Args)]
pub(crate) struct ExecArgs {
    /// Working directory.
    #[arg(long)]
    pub(crate) cwd: Option<String>,
    /// Command timeout in seconds (default: none; the command then runs
    /// as long as the sandbox).
    #[arg(long, value_name = "SECS")]
    pub(crate) timeout: Option<u64>,
    /// An environment variable of the command, K=V, or K alone for the
    /// value K has in rayito's own environment, which keeps it off
    /// rayito's command line (repeatable).
    #[arg(long = "env", short = 'e', value_name = "K[=V]", value_parser = crate::commands::parse_env)]
    pub(crate) env: Vec<(String, String)>,
    /// Stream rayito's stdin to the command (else it reads /dev/null),
    /// as `docker exec -i`.
    #[arg(short, long)]
    pub(crate) interactive: bool,
    /// Run the command on a terminal in the sandbox (raw mode here
    /// with -i when stdin is a terminal), as `docker exec -t`.
    #[arg(short, long)]
    pub(crate) tty: bool,
    /// End the command's whole process tree at its timeout and when it is
    /// killed, also what left its process group (`setsid`, a double
    /// fork); it ends only once none of them runs.
    #[arg(long, conflicts_with = "tty")]
    pub(crate) kill_tree: bool,
    /// Start the command, print its pid and leave it running (its
    /// stdin is /dev/null; nothing waits for it).
    #[arg(short, long, conflicts_with_all = ["interactive", "tty"])]
    pub(crate) detach: bool,
}

/// Runs `line` in the sandbox; returns the exit code to exit with.
pub(crate) async fn run(
    sandbox: &Sandbox,
    format: Format,
    line: &str,
    args: ExecArgs,
) -> Result<i32, Failure> {
    if args.tty {
        if format == Format::Json {
            return Err(Failure::Cli(
                "exec -t writes the terminal's output as it comes: it has no JSON form (leave out -t or --output json)".to_owned(),
            ));
        }
        return Ok(crate::shell::exec(sandbox, line, &args).await?);
    }
    let mut options = CommandOptions::new().kill_tree(args.kill_tree);
    options = match args.timeout {
        Some(secs) => options.timeout(Duration::from_secs(secs)),
        None => options.no_timeout(),
    };
    if let Some(cwd) = args.cwd {
        options = options.cwd(cwd);
    }
    for (name, value) in args.env {
        options = options.env(name, value);
    }
    if args.interactive {
        options = options.open_stdin();
    }
    let commands = sandbox.commands();
    if args.detach {
        let handle = commands.spawn(line, options).await?;
        let pid = handle.pid();
        // The process runs on without a reader (the agent keeps the last
        // MiB of its output).
        handle.disconnect();
        match format {
            Format::Json => output::json(&json!({ "sandbox_id": sandbox.id(), "pid": pid })),
            Format::Text => outln!("{pid}"),
        }
        return Ok(0);
    }
    // Caught before the command starts: a Ctrl-C while it starts is
    // passed on once it has a pid, never leaving it behind.
    let mut signals = Caught::new();
    let spawn = commands.spawn(line, options);
    tokio::pin!(spawn);
    let mut pending = None;
    let mut handle = loop {
        tokio::select! {
            spawned = &mut spawn => break spawned?,
            signal = signals.next() => match pending {
                // A second one: stop waiting.
                Some(first) => return Ok(128 + first),
                None => pending = Some(signal),
            },
        }
    };
    let pid = handle.pid();
    let mut session = Session {
        commands,
        pid,
        format,
        stdout: Vec::new(),
        stderr: Vec::new(),
        forwarded: None,
    };
    if let Some(signal) = pending
        && let Some(code) = session.signal(signal).await
    {
        return Ok(code);
    }
    let mut stdin = args
        .interactive
        .then(|| Box::pin(pump_stdin(commands, pid)));
    loop {
        tokio::select! {
            event = handle.next() => match event {
                Some(Ok(event)) => {
                    if let Err(code) = session.show(&event) {
                        let _ = commands.kill(pid).await;
                        return Ok(code);
                    }
                }
                Some(Err(err)) => return Err(err.into()),
                None => break,
            },
            () = async {
                match stdin.as_mut() {
                    Some(pump) => pump.await,
                    None => std::future::pending().await,
                }
            }, if stdin.is_some() => stdin = None,
            signal = signals.next() => {
                if let Some(code) = session.signal(signal).await {
                    return Ok(code);
                }
            }
        }
    }
    session.finish(handle.wait().await)
}

/// A command being run: where its output goes and the signals passed on.
struct Session<'a> {
    commands: Commands<'a>,
    pid: u32,
    format: Format,
    /// With `--output json`: the output, printed at the end.
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    /// The first signal passed on.
    forwarded: Option<i32>,
}

impl Session<'_> {
    /// Writes (or keeps) a chunk of output; `Err` with the exit code when
    /// stdout cannot be written (said on stderr).
    fn show(&mut self, event: &CommandEvent) -> Result<(), i32> {
        match (event, self.format) {
            (CommandEvent::Stdout { data, .. }, Format::Text) => {
                output::write_bytes(data).map_err(|err| output::stdout_failed(&err))
            }
            (CommandEvent::Stderr { data, .. }, Format::Text) => {
                use std::io::Write as _;
                let mut err = std::io::stderr().lock();
                // Nowhere to say that stderr failed: the output goes on.
                let _ = err.write_all(data).and_then(|()| err.flush());
                Ok(())
            }
            (CommandEvent::Stdout { data, .. }, Format::Json) => {
                self.stdout.extend_from_slice(data);
                Ok(())
            }
            (CommandEvent::Stderr { data, .. }, Format::Json) => {
                self.stderr.extend_from_slice(data);
                Ok(())
            }
            (CommandEvent::OutputLost { .. }, _) => {
                output::note("rayito: some output was lost while the connection was down");
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Passes the first signal on to the command's process group; a
    /// second one kills it and gives the exit code (128 + the first).
    async fn signal(&mut self, signal: i32) -> Option<i32> {
        if let Some(first) = self.forwarded {
            if let Err(err) = self.commands.kill(self.pid).await {
                eprintln!("rayito: could not kill the command: {err}");
            }
            return Some(128 + first);
        }
        self.forwarded = Some(signal);
        if let Err(err) = self.commands.signal(self.pid, signal).await {
            eprintln!("rayito: could not pass signal {signal} on to the command: {err}");
        }
        None
    }

    /// The exit code of the command's end (printed with `--output json`).
    fn finish(self, end: Result<rayito::CommandResult, SandboxError>) -> Result<i32, Failure> {
        let exit_code = match end {
            Ok(result) => result.exit_code,
            Err(SandboxError::CommandExit { exit_code, .. }) => exit_code,
            Err(
                err @ SandboxError::Timeout {
                    scope: TimeoutScope::Command,
                    ..
                },
            ) => {
                output::error(self.format, &err);
                return Ok(output::EXIT_COMMAND_TIMEOUT);
            }
            Err(err) => return Err(err.into()),
        };
        if self.format == Format::Json {
            let (stdout, stdout_encoding) = output::bytes_json(&self.stdout);
            let (stderr, stderr_encoding) = output::bytes_json(&self.stderr);
            output::json(&json!({
                "exit_code": exit_code,
                "stdout": stdout,
                "stdout_encoding": stdout_encoding,
                "stderr": stderr,
                "stderr_encoding": stderr_encoding,
            }));
        }
        // A code outside 0-255 (none is expected) would wrap: say failure.
        Ok(if (0..=255).contains(&exit_code) {
            exit_code
        } else {
            EXIT_FAILURE
        })
    }
}

/// `-i`: rayito's stdin to the command's, as it comes, then its end. A
/// command that ended or closed its stdin first takes no more: not an
/// error (its end decides the outcome, as in a shell pipe).
async fn pump_stdin(commands: Commands<'_>, pid: u32) {
    let mut stdin = tokio::io::stdin();
    let mut buf = vec![0u8; STDIN_CHUNK];
    loop {
        match stdin.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if commands.send_stdin(pid, buf[..n].to_vec()).await.is_err() {
                    return;
                }
            }
        }
    }
    let _ = commands.close_stdin(pid).await;
}
