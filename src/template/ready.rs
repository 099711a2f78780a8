//! Ready checks: the command the agent polls after starting a template's
//! start command, until it exits 0 (then `/ready` answers 200) or its
//! timeout passes (then 500).

use std::time::Duration;

use super::shell::quote;
use super::validate;
use crate::SandboxError;

/// How often the agent runs the ready command.
pub const READY_POLL_INTERVAL: Duration = Duration::from_millis(500);
/// How long the agent waits for the ready command to pass, by default.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A check that a template's start command is ready, run by the agent
/// every 0.5 s until it exits 0 or [`timeout`](ReadyCmd::timeout) passes
/// (60 s by default).
///
/// The helpers write a fixed shell command, their arguments POSIX-quoted:
///
/// | helper | command |
/// |---|---|
/// | [`port(8000)`](ReadyCmd::port) | `cat < /dev/null > /dev/tcp/127.0.0.1/8000` |
/// | [`url(u)`](ReadyCmd::url) | `test "$(curl -s -o /dev/null -w '%{http_code}' u)" = 200` |
/// | [`process(p)`](ReadyCmd::process) | `pgrep -f p` |
/// | [`file(f)`](ReadyCmd::file) | `test -e f` |
/// | [`custom(c)`](ReadyCmd::custom) | `c` |
///
/// An invalid argument is kept and reported by the template the check is
/// given to (see [`Template`](super::Template)).
#[derive(Clone, PartialEq, Eq)]
pub struct ReadyCmd {
    pub(crate) cmd: String,
    pub(crate) timeout: Duration,
    pub(crate) error: Option<SandboxError>,
}

impl ReadyCmd {
    fn checked(cmd: String, check: Result<(), SandboxError>) -> Self {
        Self {
            cmd,
            timeout: DEFAULT_READY_TIMEOUT,
            error: check.err(),
        }
    }

    /// Ready once something accepts TCP connections on `port` of
    /// 127.0.0.1 (bash's `/dev/tcp`). Port 0 is refused (`ready`).
    pub fn port(port: u16) -> Self {
        let check = if port == 0 {
            Err(SandboxError::invalid_argument(
                "ready",
                "the port must be between 1 and 65535",
            ))
        } else {
            Ok(())
        };
        Self::checked(
            format!("cat < /dev/null > /dev/tcp/127.0.0.1/{port}"),
            check,
        )
    }

    /// Ready once `url` answers HTTP 200 to `curl`.
    pub fn url(url: impl Into<String>) -> Self {
        Self::url_status(url, 200)
    }

    /// Ready once `url` answers HTTP `status` to `curl`.
    pub fn url_status(url: impl Into<String>, status: u16) -> Self {
        let url = url.into();
        let check = validate::not_blank("ready", &url).and_then(|()| {
            if (100..=599).contains(&status) {
                Ok(())
            } else {
                Err(SandboxError::invalid_argument(
                    "ready",
                    "the HTTP status must be between 100 and 599",
                ))
            }
        });
        Self::checked(
            format!(
                "test \"$(curl -s -o /dev/null -w '%{{http_code}}' {})\" = {status}",
                quote(&url)
            ),
            check,
        )
    }

    /// Ready once a process whose command line matches `pattern` runs
    /// (`pgrep -f`).
    pub fn process(pattern: impl Into<String>) -> Self {
        let pattern = pattern.into();
        let check = validate::not_blank("ready", &pattern);
        Self::checked(format!("pgrep -f {}", quote(&pattern)), check)
    }

    /// Ready once `path` exists.
    pub fn file(path: impl Into<String>) -> Self {
        let path = path.into();
        let check = validate::not_blank("ready", &path);
        Self::checked(format!("test -e {}", quote(&path)), check)
    }

    /// Ready once `cmd` (a shell command) exits 0.
    pub fn custom(cmd: impl Into<String>) -> Self {
        let cmd = cmd.into();
        let check = validate::not_blank("ready", &cmd);
        Self::checked(cmd, check)
    }

    /// How long the agent waits for the check to pass before `/ready`
    /// answers 500 (60 s by default). Zero is refused (`timeout`).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        if self.error.is_none() && timeout.is_zero() {
            self.error = Some(SandboxError::invalid_argument(
                "timeout",
                "the ready check's timeout must be above zero",
            ));
        }
        self.timeout = timeout;
        self
    }

    /// The shell command the agent runs.
    pub fn command(&self) -> &str {
        &self.cmd
    }

    /// How long the agent waits for the check to pass.
    pub fn timeout_duration(&self) -> Duration {
        self.timeout
    }
}

crate::secret::redacted_debug! {
    ReadyCmd |o| cmd, timeout, invalid = o.error.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_write_the_documented_commands() {
        assert_eq!(
            ReadyCmd::port(8000).command(),
            "cat < /dev/null > /dev/tcp/127.0.0.1/8000"
        );
        assert_eq!(
            ReadyCmd::url("http://localhost:3000/health").command(),
            "test \"$(curl -s -o /dev/null -w '%{http_code}' http://localhost:3000/health)\" = 200"
        );
        assert_eq!(
            ReadyCmd::url_status("http://127.0.0.1/?a=1&b=2", 204).command(),
            "test \"$(curl -s -o /dev/null -w '%{http_code}' 'http://127.0.0.1/?a=1&b=2')\" = 204"
        );
        assert_eq!(
            ReadyCmd::process("uvicorn app:main").command(),
            "pgrep -f 'uvicorn app:main'"
        );
        assert_eq!(ReadyCmd::file("/tmp/ready").command(), "test -e /tmp/ready");
        assert_eq!(ReadyCmd::custom("exit 0").command(), "exit 0");
        assert_eq!(
            ReadyCmd::port(1).timeout_duration(),
            Duration::from_secs(60)
        );
    }

    #[test]
    fn invalid_checks_keep_their_first_refusal() {
        let arg = |r: &ReadyCmd| match &r.error {
            Some(SandboxError::InvalidArgument { argument, .. }) => {
                argument.as_deref().map(str::to_owned)
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(arg(&ReadyCmd::port(0)).as_deref(), Some("ready"));
        assert_eq!(arg(&ReadyCmd::url("")).as_deref(), Some("ready"));
        assert_eq!(
            arg(&ReadyCmd::url_status("http://x", 42)).as_deref(),
            Some("ready")
        );
        assert_eq!(arg(&ReadyCmd::custom("a\nb")).as_deref(), Some("ready"));
        assert_eq!(
            arg(&ReadyCmd::port(80).timeout(Duration::ZERO)).as_deref(),
            Some("timeout")
        );
        // The first refusal stays.
        assert_eq!(
            arg(&ReadyCmd::port(0).timeout(Duration::ZERO)).as_deref(),
            Some("ready")
        );
    }
}
