//! The signals `exec` passes on to its command (Ctrl-C, a `kill`, a
//! closed terminal), as `docker exec` and `ssh` do: once caught here they
//! no longer end rayito by themselves, so the command in the sandbox is
//! never left running behind it.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// SIGHUP, SIGINT and SIGTERM, caught from [`Caught::new`] on.
pub(crate) struct Caught {
    hangup: Option<Signal>,
    interrupt: Option<Signal>,
    terminate: Option<Signal>,
}

impl Caught {
    /// Catches the three signals (one that cannot be caught keeps its
    /// default action).
    pub(crate) fn new() -> Caught {
        Caught {
            hangup: signal(SignalKind::hangup()).ok(),
            interrupt: signal(SignalKind::interrupt()).ok(),
            terminate: signal(SignalKind::terminate()).ok(),
        }
    }

    /// The number of the next signal caught (1, 2 or 15).
    pub(crate) async fn next(&mut self) -> i32 {
        async fn one(signal: &mut Option<Signal>) {
            match signal {
                Some(signal) => {
                    if signal.recv().await.is_none() {
                        // No more signals will come (the runtime is ending).
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            () = one(&mut self.interrupt) => 2,
            () = one(&mut self.terminate) => 15,
            () = one(&mut self.hangup) => 1,
        }
    }
}
