//! A running command reached by its pid, without its handle: a signal,
//! its stdin. For a caller that reads the handle's stream in one place and
//! must act on the process from another at the same time (a CLI that
//! forwards Ctrl-C, or streams its own stdin, while it prints the output).

use super::Commands;
use super::process::killed;
use crate::error::SandboxError;
use crate::pb;

impl Commands<'_> {
    /// Sends signal number `signal` (Linux numbering: 2 SIGINT, 15
    /// SIGTERM, 9 SIGKILL, ...) to the process group of command `pid`, as
    /// a terminal's Ctrl-C does; `false` when no such live process exists.
    /// A command may catch it; [`Commands::kill`] is the one that always
    /// ends it.
    ///
    /// # Errors
    /// `InvalidArgument` naming `signal` before any I/O when it is not
    /// between 1 and 64; transport failures.
    pub async fn signal(&self, pid: u32, signal: i32) -> Result<bool, SandboxError> {
        if !(1..=64).contains(&signal) {
            return Err(SandboxError::invalid_argument(
                "signal",
                "must be between 1 and 64",
            ));
        }
        killed(
            self.sandbox
                .conn()
                .send_signal(
                    pb::SendSignalRequest { pid, signal },
                    self.sandbox.request_timeout(),
                )
                .await,
        )
    }

    /// Writes bytes to the stdin of command `pid` (started with
    /// [`super::CommandOptions::open_stdin`]), as
    /// [`super::CommandHandle::send_stdin`] does.
    ///
    /// # Errors
    /// `InvalidArgument` when its stdin is not open; `NotFound` when the
    /// process has ended; transport failures.
    pub async fn send_stdin(&self, pid: u32, data: impl Into<Vec<u8>>) -> Result<(), SandboxError> {
        self.sandbox
            .conn()
            .send_input(
                pb::SendInputRequest {
                    pid,
                    data: data.into(),
                },
                self.sandbox.request_timeout(),
            )
            .await
    }

    /// Closes the stdin of command `pid` (it then reads end-of-file), as
    /// [`super::CommandHandle::close_stdin`] does.
    ///
    /// # Errors
    /// As [`Commands::send_stdin`].
    pub async fn close_stdin(&self, pid: u32) -> Result<(), SandboxError> {
        self.sandbox
            .conn()
            .close_stdin(
                pb::CloseStdinRequest { pid },
                self.sandbox.request_timeout(),
            )
            .await
    }
}
