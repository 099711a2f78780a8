//! `rayito local fault ...`: the failures of AWS and of a sandbox, injected
//! on the local daemon, for scripts that test a service against them. The
//! same faults as the SDK's `LocalFaults` (docs/testing.md), sent to the
//! daemon's admin endpoint (`POST /_emulator/faults`, docs/local.md),
//! signed with the key the daemon recorded: the emulator refuses any other.

use std::io::{Read as _, Write as _};
use std::time::Duration;

use clap::{Args, Subcommand};
use rayito::SandboxError;
use serde_json::{Value, json};

use crate::Format;
use crate::local::{self, BackendState};
use crate::output;

/// One fault to inject on the local daemon (started first if it does not
/// run). Each says in `--help` what the SDK then returns.
#[derive(Debug, Subcommand)]
pub enum FaultCommand {
    /// Throttles the next creates (or calls of another operation): the SDK
    /// retries after --retry-after, then fails with kind rate_limit
    /// (exit 75).
    Throttle(ThrottleArgs),
    /// The next COUNT creates find no capacity: retried inside the SDK's
    /// capacity budget, then kind capacity (exit 75).
    Capacity {
        /// How many creates.
        #[arg(long, default_value_t = 1)]
        count: u32,
    },
    /// The next COUNT creates meet a spent account quota: kind
    /// quota_exceeded at once (exit 1).
    Quota {
        /// How many creates.
        #[arg(long, default_value_t = 1)]
        count: u32,
    },
    /// The next COUNT requests to any sandbox answer this HTTP status from
    /// its proxy (403: one is invisible, two are kind authentication; 429,
    /// 502, 503, 504: waited out, else connection_lost).
    ProxyStatus {
        /// The HTTP status, 400..=599.
        #[arg(long, value_parser = clap::value_parser!(u16).range(400..=599))]
        status: u16,
        /// How many requests.
        #[arg(long, default_value_t = 1)]
        count: u32,
    },
    /// Cuts every live connection to a sandbox (the SDK reconnects).
    Cut {
        /// The sandbox.
        sandbox_id: String,
    },
    /// Kills a sandbox's agent, as if its MicroVM crashed: every later call
    /// on it is kind sandbox_not_found.
    KillAgent {
        /// The sandbox.
        sandbox_id: String,
    },
    /// Fills a sandbox's disk for writes: every later file write is kind
    /// disk_full.
    FillDisk {
        /// The sandbox.
        sandbox_id: String,
    },
    /// Makes a sandbox's timeout pass now: the next call is kind timeout.
    Expire {
        /// The sandbox.
        sandbox_id: String,
    },
    /// Holds template builds in progress until `hold-builds --release` or
    /// `clear`.
    HoldBuilds {
        /// Releases held builds instead.
        #[arg(long)]
        release: bool,
    },
    /// Forgets every pending fault and releases held builds (a killed
    /// agent, an expired or full sandbox stays so).
    Clear,
    /// The counted faults still pending, and whether builds are held.
    List,
}

/// `local fault throttle`.
#[derive(Debug, Args)]
pub struct ThrottleArgs {
    /// How many creates (RunMicrovm calls) to throttle.
    #[arg(long, conflicts_with_all = ["operation", "count"], required_unless_present = "operation")]
    creates: Option<u32>,
    /// Another control-plane operation, by its AWS name (GetMicrovm,
    /// ListMicrovms, TerminateMicrovm...), with --count.
    #[arg(long, requires = "count", value_parser = operation_name)]
    operation: Option<String>,
    /// How many calls of --operation.
    #[arg(long)]
    count: Option<u32>,
    /// The Retry-After the throttled calls carry, in seconds.
    #[arg(long, default_value_t = 1)]
    retry_after: u32,
}

/// An operation the local backend serves, by its AWS name.
fn operation_name(name: &str) -> Result<String, String> {
    match rayito_emulator::Operation::from_name(name) {
        Some(op) => Ok(op.as_str().to_owned()),
        None => Err(
            "not a control-plane operation of the local backend (an AWS name such as RunMicrovm or GetMicrovm)"
                .to_owned(),
        ),
    }
}

impl FaultCommand {
    /// The admin endpoint's JSON for this fault, and the sandbox it names.
    fn body(&self) -> (Value, Option<&str>) {
        match self {
            FaultCommand::Throttle(args) => {
                let (operation, count) = match (&args.operation, args.creates) {
                    (Some(op), _) => (op.as_str(), args.count.unwrap_or(1)),
                    (None, creates) => ("RunMicrovm", creates.unwrap_or(1)),
                };
                (
                    json!({"fault": "throttle", "operation": operation, "count": count,
                           "retryAfterSeconds": args.retry_after}),
                    None,
                )
            }
            FaultCommand::Capacity { count } => (
                json!({"fault": "insufficientCapacity", "count": count}),
                None,
            ),
            FaultCommand::Quota { count } => {
                (json!({"fault": "quotaExceeded", "count": count}), None)
            }
            FaultCommand::ProxyStatus { status, count } => (
                json!({"fault": "proxyStatus", "count": count, "status": status}),
                None,
            ),
            FaultCommand::Cut { sandbox_id } => (
                json!({"fault": "cutConnections", "microvmId": sandbox_id}),
                Some(sandbox_id),
            ),
            FaultCommand::KillAgent { sandbox_id } => (
                json!({"fault": "killAgent", "microvmId": sandbox_id}),
                Some(sandbox_id),
            ),
            FaultCommand::FillDisk { sandbox_id } => (
                json!({"fault": "diskReserve", "microvmId": sandbox_id, "bytes": u64::MAX}),
                Some(sandbox_id),
            ),
            FaultCommand::Expire { sandbox_id } => (
                json!({"fault": "expireDeadline", "microvmId": sandbox_id}),
                Some(sandbox_id),
            ),
            FaultCommand::HoldBuilds { release } => {
                (json!({"fault": "holdBuilds", "hold": !release}), None)
            }
            FaultCommand::Clear => (json!({"fault": "clear"}), None),
            FaultCommand::List => (Value::Null, None),
        }
    }
}

/// Runs `local fault ...`; the exit code.
pub fn run(command: &FaultCommand, format: Format) -> i32 {
    let state = match local::ensure() {
        Ok(state) => state,
        Err(err) => {
            return output::cli_error(format, &format!("cannot start the local backend: {err}"));
        }
    };
    if matches!(command, FaultCommand::List) {
        return list(&state, format);
    }
    let (body, sandbox_id) = command.body();
    let fault = body["fault"].as_str().unwrap_or_default().to_owned();
    match call(&state, "POST", &body.to_string()) {
        Ok((200, _)) => {
            match format {
                Format::Json => output::json(&json!({ "applied": true, "fault": fault })),
                Format::Text => outln!("applied: {fault}"),
            }
            0
        }
        Ok((404, _)) => {
            let id = sandbox_id.unwrap_or_default();
            output::error(format, &SandboxError::sandbox_not_found(id))
        }
        Ok((status, _)) => output::cli_error(
            format,
            &format!("the local backend answered HTTP {status} to the fault"),
        ),
        Err(err) => output::cli_error(
            format,
            &format!(
                "cannot reach the local backend at {}: {err}",
                state.endpoint_url
            ),
        ),
    }
}

/// `local fault list`: the daemon's pending faults.
fn list(state: &BackendState, format: Format) -> i32 {
    let pending = match call(state, "GET", "") {
        Ok((200, body)) => serde_json::from_str::<Value>(&body).ok(),
        _ => None,
    };
    let Some(pending) = pending else {
        return output::cli_error(
            format,
            &format!(
                "cannot read the faults of the local backend at {}",
                state.endpoint_url
            ),
        );
    };
    match format {
        Format::Json => output::json(&pending),
        Format::Text => {
            let lines = pending_lines(&pending);
            if lines.is_empty() {
                outln!("no pending faults");
            }
            for line in lines {
                outln!("{line}");
            }
        }
    }
    0
}

/// One line per pending fault, for people.
fn pending_lines(pending: &Value) -> Vec<String> {
    let count = |field: &str| pending[field].as_u64().unwrap_or(0);
    let mut lines = Vec::new();
    for t in pending["throttles"].as_array().into_iter().flatten() {
        lines.push(format!(
            "throttle {} x{} (retry after {} s)",
            t["operation"].as_str().unwrap_or_default(),
            t["count"],
            t["retryAfterSeconds"]
        ));
    }
    if count("insufficientCapacity") > 0 {
        lines.push(format!("capacity x{}", count("insufficientCapacity")));
    }
    if count("quotaExceeded") > 0 {
        lines.push(format!("quota x{}", count("quotaExceeded")));
    }
    for status in pending["proxyStatuses"].as_array().into_iter().flatten() {
        lines.push(format!("proxy-status {status}"));
    }
    if count("stalls") > 0 {
        lines.push(format!("stalled proxy requests x{}", count("stalls")));
    }
    if pending["buildsHeld"] == Value::Bool(true) {
        lines.push("hold-builds".to_owned());
    }
    lines
}

/// Sends `method` with `body` to the daemon's admin endpoint (plain
/// HTTP/1.1 on loopback, one request per connection), signed with its
/// key; the answer's status and body.
fn call(state: &BackendState, method: &str, body: &str) -> std::io::Result<(u16, String)> {
    let url = format!("{}/_emulator/faults", state.endpoint_url);
    let key = rayito_emulator::AccessKey::new(&state.access_key_id, &state.secret_access_key);
    let headers: String = key
        .sign(method, &url, body.as_bytes(), &state.region)
        .map_err(std::io::Error::other)?
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let addr = state
        .endpoint_url
        .strip_prefix("http://")
        .ok_or_else(|| std::io::Error::other("the endpoint is not plain HTTP"))?;
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        stream,
        "{method} /_emulator/faults HTTP/1.1\r\nhost: {addr}\r\n{headers}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other("not an HTTP answer"))?;
    let body = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, body)| body)
        .to_owned();
    Ok((status, body))
}
