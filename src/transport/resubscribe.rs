//! The bookkeeping every re-subscribing server stream shares (wire
//! contract 2.7): after a cut, wait until the sandbox is back (or know it
//! gone), then let the stream open itself again from where it stopped
//! (`Process.Connect(pid, last_seq + 1)`, `Pty.Connect`, `WatchDir`
//! reissued, `Read` skipping what was delivered). A stream that keeps being
//! cut without bringing anything new surfaces the cut.

use super::{AgentConn, Cut};
use crate::error::SandboxError;

/// Re-subscriptions in a row that bring nothing new before the cut is
/// surfaced (2.7: more than 3 consecutive reconnects).
const MAX_FRUITLESS_RESUBSCRIBES: u32 = 3;

/// Who waits on the stream, which decides whether the reconnect may wake a
/// suspended sandbox (2.7: only new requests and foreground calls may).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waiter {
    /// A call its caller awaits (`commands.run`, `files.read`): the
    /// reconnect probes the agent, which wakes a sandbox with auto-resume.
    Foreground,
    /// A handle that outlives the call that made it (background commands,
    /// terminals, watches): asleep while the sandbox is suspended.
    Background,
}

/// The reconnect state of one re-subscribing stream.
#[derive(Debug)]
pub(crate) struct Resubscription {
    /// The reconnect epoch the current stream was opened in.
    epoch: Option<u64>,
    fruitless: u32,
    waiter: Waiter,
    feature: &'static str,
}

impl Resubscription {
    /// For a stream opened at `epoch` (read with
    /// [`AgentConn::reconnect_epoch`] before opening it).
    pub(crate) fn new(epoch: Option<u64>, waiter: Waiter, feature: &'static str) -> Self {
        Self {
            epoch,
            fruitless: 0,
            waiter,
            feature,
        }
    }

    /// The stream delivered something new: the cuts before it were not
    /// fruitless.
    pub(crate) fn progressed(&mut self) {
        self.fruitless = 0;
    }

    /// After the stream met `cut` (which ended it with `err`): `Ok` when
    /// the sandbox is back and the stream should be opened again.
    ///
    /// # Errors
    /// `err` itself without the reconnect contract (no reconnector) or
    /// after more than 3 fruitless re-subscriptions in a row; else what the
    /// wait found: `SandboxNotFound`, `SandboxLifetime`, `SandboxState`,
    /// `Sandbox { connection_lost }`.
    pub(crate) async fn after_cut(
        &mut self,
        conn: &AgentConn,
        cut: Cut,
        err: SandboxError,
    ) -> Result<(), SandboxError> {
        self.fruitless += 1;
        if self.fruitless > MAX_FRUITLESS_RESUBSCRIBES {
            return Err(err);
        }
        let back = match self.waiter {
            Waiter::Foreground => conn.reconnect(self.epoch, cut, self.feature).await?,
            Waiter::Background => conn.reconnect_asleep(self.epoch, cut, self.feature).await?,
        };
        if !back {
            return Err(err);
        }
        self.epoch = conn.reconnect_epoch();
        Ok(())
    }
}
