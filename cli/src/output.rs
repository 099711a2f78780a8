//! Printing results and errors, the exit codes errors map to, and how
//! much goes to stderr (`-v`, `-q`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use rayito::SandboxError;
use serde_json::{Value, json};

use crate::Format;

/// Exit code of a failure that retrying may cure (`EX_TEMPFAIL`).
pub const EXIT_RETRYABLE: i32 = 75;
/// Exit code of a failure that retrying will not cure.
pub const EXIT_FAILURE: i32 = 1;
/// Exit code of a usage error (clap's).
pub const EXIT_USAGE: i32 = 2;
/// Exit code of `sandbox exec` and `sandbox shell` when rayito itself
/// failed (usage, connection, the SDK's error), whatever the kind: their
/// other codes are the command's own (as `docker run` and `env` do).
pub const EXIT_OWN: i32 = 125;
/// Exit code of `local status` when the daemon does not run (LSB's
/// "program is not running", as `systemctl status`): a script can test it.
pub const EXIT_NOT_RUNNING: i32 = 3;
/// Exit code of `sandbox exec` when the command ran past `--timeout` (as
/// GNU `timeout` does).
pub const EXIT_COMMAND_TIMEOUT: i32 = 124;

/// Set by `-q`: no spinner, progress bar, note or warning.
static QUIET: AtomicBool = AtomicBool::new(false);

/// Applies `-v`/`-q`: remembers quiet, and sends the SDK's own events
/// (redacted by the SDK: never a token, a value or a command's text) to
/// stderr at warn (default), info, debug or trace; `RUST_LOG` overrides.
pub fn init(global: &crate::Global) {
    QUIET.store(global.quiet, Ordering::Relaxed);
    let level = match (global.quiet, global.verbose) {
        (true, _) => "off",
        (false, 0) => "rayito=warn",
        (false, 1) => "rayito=info",
        (false, 2) => "rayito=debug",
        (false, _) => "rayito=trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(true)
        .try_init();
}

/// Whether `-q` was given.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// Prints a note for people on stderr (not with `-q`).
pub fn note(message: &str) {
    if !quiet() {
        eprintln!("{message}");
    }
}

/// `println!` for what rayito prints on stdout, through [`write_out`]:
/// a closed stdout ends the program instead of panicking.
macro_rules! outln {
    () => {
        $crate::output::write_out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` through [`write_out`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_out(format_args!($($arg)*))
    };
}

/// Writes `args` on stdout. A reader that went away (`rayito sandbox list
/// | head -1`) ends rayito quietly with exit code 0: the reader asked for
/// no more, which is no failure (`println!` would panic); any other write failure (a full disk behind `>`) ends it with
/// [`EXIT_FAILURE`] and one line on stderr, never with output silently
/// lost.
pub fn write_out(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if let Err(err) = out.write_fmt(args).and_then(|()| out.flush()) {
        std::process::exit(stdout_failed(&err));
    }
}

/// Writes `bytes` on stdout as they are and flushes them (a command's
/// output: never decoded). The caller decides what a failure ends (a
/// command still running in the sandbox first): [`stdout_failed`] then
/// gives the exit code.
///
/// # Errors
/// The write's.
pub fn write_bytes(bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(bytes).and_then(|()| out.flush())
}

/// The exit code of a failed write to stdout, said on stderr unless the
/// reader went away: 0 for a closed pipe (the reader asked for no more),
/// else [`EXIT_FAILURE`] with `rayito: cannot write to stdout: <why>`.
pub fn stdout_failed(err: &std::io::Error) -> i32 {
    if err.kind() == std::io::ErrorKind::BrokenPipe {
        return 0;
    }
    eprintln!("rayito: cannot write to stdout: {err}");
    EXIT_FAILURE
}

/// Prints one JSON document on stdout (through [`write_out`]).
pub fn json(value: &Value) {
    write_out(format_args!("{value}\n"));
}

/// Seconds since the epoch, for JSON.
pub fn unix(time: Option<SystemTime>) -> Value {
    time.and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(Value::Null, |d| json!(d.as_secs()))
}

/// Prints an SDK error (its message, kind and whether it is retryable)
/// and returns the exit code it maps to.
pub fn error(format: Format, err: &SandboxError) -> i32 {
    print_error(format, err, None)
}

/// The files commands' view of the sandbox: what they reach (relative
/// paths are under the home). Elsewhere the agent answers "not found".
const FILES_VIEW: [&str; 2] = ["/home/user", "/tmp"];

/// Prints an SDK error about the file at `path` in the sandbox: the path
/// leads the message (and is a field in JSON); a path outside the files'
/// view that is "not found" says why.
pub fn error_at(format: Format, err: &SandboxError, path: &str) -> i32 {
    print_error(format, err, Some(path))
}

fn in_files_view(path: &str) -> bool {
    !path.starts_with('/')
        || FILES_VIEW
            .iter()
            .any(|root| path == *root || path.starts_with(&format!("{root}/")))
}

fn print_error(format: Format, err: &SandboxError, path: Option<&str>) -> i32 {
    let info = classify(err);
    let mut message = crate::hints::message(err);
    if let Some(path) = path {
        message = format!("{path}: {message}");
        if err.kind() == rayito::ErrorKind::FileNotFound && !in_files_view(path) {
            message.push_str(
                " (files commands reach only /home/user and /tmp: another path is outside their view, absent to them, or refused for a system directory such as /etc)",
            );
        }
    }
    match format {
        Format::Json => {
            let mut error = json!({
                "message": message,
                "kind": info.kind,
                "retryable": info.retryable,
            });
            if let Value::Object(fields) = &mut error {
                if let Some(build) = build_json(err) {
                    fields.insert("build".to_owned(), build);
                }
                if let Some(path) = path {
                    fields.insert("path".to_owned(), json!(path));
                }
            }
            json(&json!({ "error": error }));
        }
        Format::Text => {
            eprintln!("error: {message}");
            eprintln!(
                "kind: {} ({}){}",
                info.kind,
                info.summary,
                if info.retryable {
                    "; retryable: the same call may succeed later"
                } else {
                    ""
                }
            );
        }
    }
    if info.retryable {
        EXIT_RETRYABLE
    } else {
        EXIT_FAILURE
    }
}

/// A failed build's details, which its message says the error carries:
/// the failed step, its command and exit code, and the end of the build
/// log (`null` where unknown); `None` for any other error.
fn build_json(err: &SandboxError) -> Option<Value> {
    let SandboxError::Build {
        reason,
        step,
        command,
        exit_code,
        log_tail,
        ..
    } = err
    else {
        return None;
    };
    Some(json!({
        "reason": reason.as_ref().map(|r| r.as_str()),
        "step": step,
        "command": command.as_ref().map(|c| c.as_str()),
        "exit_code": exit_code,
        "log_tail": log_tail.as_str(),
    }))
}

/// The end of the SDK's message for a missing image (`aws.image_not_found`).
const IMAGE_MISSING: &str =
    "the image is probably missing, check the image ARN or publish the image";

/// The kind printed for `err`: the SDK's, but `not_found` (the parent
/// kind) for a missing image, which the SDK files under
/// `sandbox_not_found` (its variant for any missing control-plane
/// resource): no sandbox is missing there.
fn classify(err: &SandboxError) -> rayito::error::ErrorInfo {
    if err.kind() == rayito::ErrorKind::SandboxNotFound && err.to_string().ends_with(IMAGE_MISSING)
    {
        return rayito::ErrorKind::NotFound.info();
    }
    err.classify()
}

/// Prints a failure of the CLI itself (not an SDK error).
pub fn cli_error(format: Format, message: &str) -> i32 {
    own_error(format, message, "cli");
    EXIT_FAILURE
}

/// Prints a failure of rayito's own of `kind` (never retryable).
fn own_error(format: Format, message: &str, kind: &str) {
    match format {
        Format::Json => {
            json(&json!({ "error": { "message": message, "kind": kind, "retryable": false } }))
        }
        Format::Text => eprintln!("error: {message}"),
    }
}

/// Prints a usage error found past clap's parsing (an id that names no
/// sandbox of the cache, say) and returns [`EXIT_USAGE`].
pub fn usage_error(format: Format, message: &str) -> i32 {
    own_error(format, message, "usage");
    EXIT_USAGE
}

/// Prints that something does not exist, known by the CLI itself, with
/// the SDK's `kind` for it.
pub fn not_found(format: Format, message: &str, kind: rayito::ErrorKind) -> i32 {
    match format {
        Format::Json => json(&json!({
            "error": { "message": message, "kind": kind.as_str(), "retryable": false }
        })),
        Format::Text => {
            eprintln!("error: {message}");
            eprintln!("kind: {} ({})", kind.as_str(), kind.info().summary);
        }
    }
    EXIT_FAILURE
}

/// Bytes for a JSON document: the text when they are UTF-8, else their
/// base64 (standard alphabet, padded); and which of the two it is,
/// `"utf-8"` or `"base64"`, for the field that says so. Never decoded
/// lossily: what the sandbox wrote is what a script gets back.
pub fn bytes_json(bytes: &[u8]) -> (Value, &'static str) {
    use base64::Engine as _;
    match std::str::from_utf8(bytes) {
        Ok(text) => (json!(text), "utf-8"),
        Err(_) => (
            json!(base64::engine::general_purpose::STANDARD.encode(bytes)),
            "base64",
        ),
    }
}
