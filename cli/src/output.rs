//! Printing results and errors, and the exit codes errors map to.

use std::time::{SystemTime, UNIX_EPOCH};

use rayito::SandboxError;
use serde_json::{Value, json};

use crate::Format;

/// Exit code of a failure that retrying may cure (`EX_TEMPFAIL`).
pub const EXIT_RETRYABLE: i32 = 75;
/// Exit code of a failure that retrying will not cure.
pub const EXIT_FAILURE: i32 = 1;

/// Prints one JSON document on stdout.
pub fn json(value: &Value) {
    println!("{value}");
}

/// Seconds since the epoch, for JSON.
pub fn unix(time: Option<SystemTime>) -> Value {
    time.and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(Value::Null, |d| json!(d.as_secs()))
}

/// Prints an SDK error (its message, kind and whether it is retryable)
/// and returns the exit code it maps to.
pub fn error(format: Format, err: &SandboxError) -> i32 {
    let info = err.classify();
    match format {
        Format::Json => json(&json!({
            "error": {
                "message": err.to_string(),
                "kind": info.kind,
                "retryable": info.retryable,
            }
        })),
        Format::Text => {
            eprintln!("error: {err}");
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

/// Prints a failure of the CLI itself (not an SDK error).
pub fn cli_error(format: Format, message: &str) -> i32 {
    match format {
        Format::Json => {
            json(&json!({ "error": { "message": message, "kind": "cli", "retryable": false } }))
        }
        Format::Text => eprintln!("error: {message}"),
    }
    EXIT_FAILURE
}
