//! A moto server (a local stand-in for S3, DynamoDB, Secrets Manager and
//! the other AWS services moto emulates) for the tests that need one: one
//! `moto_server` process per [`MotoServer`], on a free 127.0.0.1 port,
//! killed when the value is dropped.
//!
//! `moto_server` comes from `.ci/install-test-deps`, which installs
//! `moto[server]` into `target/test-deps/venv`; a `moto_server` on the PATH
//! also does. Where there is none, [`MotoServer::start`] skips the test
//! (`SKIPPED: <test>: <reason>`; a failure under `RAYITO_TEST_STRICT=1`).

// Shared by several test binaries, each using a part of it.
#![allow(dead_code)]

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::skip::skip;

/// How long a starting server has to answer (it imports every moto backend
/// first: seconds on a loaded 2-core machine).
const READY_WITHIN: Duration = Duration::from_secs(60);
/// Attempts at a free port: another process may take the port between our
/// probe and the server's bind.
const PORT_ATTEMPTS: usize = 3;

/// A running `moto_server` on 127.0.0.1. Dropping it kills the server.
#[derive(Debug)]
pub struct MotoServer {
    child: Child,
    port: u16,
    /// The server's stdout and stderr, shown when it fails to start.
    _log: tempfile::NamedTempFile,
}

impl MotoServer {
    /// Starts `moto_server` on a free loopback port and waits until it
    /// answers HTTP. `None` (after a skip line) when no `moto_server` is
    /// installed. Blocks the calling thread for the start-up (seconds): call
    /// it at the start of a test, or from `spawn_blocking`.
    ///
    /// # Panics
    /// When the server is installed but does not answer within 60 s, and
    /// under `RAYITO_TEST_STRICT=1` when it is not installed.
    pub fn start() -> Option<MotoServer> {
        let Some(program) = moto_server_program() else {
            skip(
                "moto_server not found in target/test-deps/venv or on the PATH \
                 (.ci/install-test-deps installs moto[server])",
            );
            return None;
        };
        let mut failures = Vec::new();
        for _ in 0..PORT_ATTEMPTS {
            match Self::start_on_a_free_port(&program) {
                Ok(server) => return Some(server),
                Err(failure) => failures.push(failure),
            }
        }
        panic!(
            "{} did not start:\n{}",
            program.display(),
            failures.join("\n---\n")
        );
    }

    /// The server's base URL, `http://127.0.0.1:<port>`: an AWS client's
    /// endpoint URL.
    pub fn endpoint_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Calls moto's IAM (the query protocol: `Action`, `Version` and
    /// `params` form-encoded) and returns the XML answer. Only while
    /// authentication is off (the default, or after [`Self::relax_auth`]):
    /// the request names IAM in an unsigned `Authorization` header, which
    /// is how moto routes a request to a service.
    ///
    /// # Panics
    /// When moto does not answer 200.
    pub fn iam(&self, action: &str, params: &[(&str, &str)]) -> String {
        let mut body = format!("Action={action}&Version=2010-05-08");
        for (name, value) in params {
            body.push('&');
            body.push_str(name);
            body.push('=');
            body.push_str(&form_encode(value));
        }
        let (status, answer) = http_post(
            self.port,
            "/",
            &[
                (
                    "Authorization",
                    "AWS4-HMAC-SHA256 Credential=AKIDMOTOSETUP/20260101/us-east-1/iam/aws4_request, \
                     SignedHeaders=host, Signature=0",
                ),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            body.as_bytes(),
        )
        .expect("moto's IAM answers");
        assert_eq!(status, 200, "IAM {action}: {answer}");
        answer
    }

    /// From now on moto checks every request's SigV4 signature against the
    /// access keys its IAM issued, and the caller's IAM policies against
    /// the action (`/moto-api/reset-auth` with a count of 0).
    pub fn enforce_auth(&self) {
        self.reset_auth("0");
    }

    /// Turns authentication off again (a count of infinity).
    pub fn relax_auth(&self) {
        self.reset_auth("inf");
    }

    fn reset_auth(&self, count: &str) {
        let (status, answer) = http_post(self.port, "/moto-api/reset-auth", &[], count.as_bytes())
            .expect("moto's reset-auth answers");
        assert_eq!(status, 200, "reset-auth: {answer}");
    }

    fn start_on_a_free_port(program: &PathBuf) -> Result<MotoServer, String> {
        let port = free_port();
        let log = tempfile::NamedTempFile::new().map_err(|e| format!("a log file: {e}"))?;
        let out = log.reopen().map_err(|e| format!("the log file: {e}"))?;
        let err = log.reopen().map_err(|e| format!("the log file: {e}"))?;
        let child = Command::new(program)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            // Its own process group: drop kills the server and anything it
            // started.
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
        let mut server = MotoServer {
            child,
            port,
            _log: log,
        };
        let by = Instant::now() + READY_WITHIN;
        loop {
            if matches!(http_get(port, "/"), Ok((200, _))) {
                return Ok(server);
            }
            let exited = server.child.try_wait().ok().flatten();
            if exited.is_some() || Instant::now() > by {
                let log = std::fs::read_to_string(server._log.path()).unwrap_or_default();
                let tail: String = log.lines().rev().take(20).collect::<Vec<_>>().join("\n");
                return Err(match exited {
                    Some(status) => format!("port {port}: exited with {status}: {tail}"),
                    None => format!("port {port}: no answer within {READY_WITHIN:?}: {tail}"),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        if let Some(group) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `target/test-deps/venv/bin/moto_server` of this workspace (looked
/// for from the test's crate upwards: the CLI's tests include this file
/// too), else `moto_server` on the PATH.
fn moto_server_program() -> Option<PathBuf> {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    if let Some(venv) = crate_dir
        .ancestors()
        .map(|dir| dir.join("target/test-deps/venv/bin/moto_server"))
        .find(|p| p.is_file())
    {
        return Some(venv);
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("moto_server"))
            .find(|p| p.is_file())
    })
}

/// A port nothing listens on now (the kernel's pick for port 0).
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// `value` form-encoded (`application/x-www-form-urlencoded`).
fn form_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An XML element's text: the first `<tag>…</tag>` of `xml`.
pub fn xml_text<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let start = xml.find(&open)? + open.len();
    let len = xml[start..].find(&format!("</{tag}>"))?;
    Some(&xml[start..start + len])
}

/// `POST path` on 127.0.0.1:`port` with `headers` and `body`, read as
/// [`http_get`] reads.
///
/// # Errors
/// The connection or the read fails, or the answer is not HTTP.
pub fn http_post(
    port: u16,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<(u16, String)> {
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut request = head.into_bytes();
    request.extend_from_slice(body);
    exchange(port, &request)
}

/// `GET path` on 127.0.0.1:`port` over plain HTTP/1.1: the status code
/// and the body (read to the end: the request asks the server to close;
/// not decoded, so for answers with a `Content-Length`, as moto's are).
///
/// # Errors
/// The connection or the read fails, or the answer is not HTTP.
pub fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    exchange(port, request.as_bytes())
}

/// Sends `request` to 127.0.0.1:`port` and reads the answer to the end.
fn exchange(port: u16, request: &[u8]) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(request)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let not_http = || std::io::Error::new(std::io::ErrorKind::InvalidData, "not an HTTP answer");
    let (head, body) = answer.split_once("\r\n\r\n").ok_or_else(not_http)?;
    let status = head
        .strip_prefix("HTTP/1.1 ")
        .or_else(|| head.strip_prefix("HTTP/1.0 "))
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .ok_or_else(not_http)?;
    Ok((status, body.to_owned()))
}
