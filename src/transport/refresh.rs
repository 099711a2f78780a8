//! The proxy-token refresher of one sandbox: a background task that
//! re-mints the token every 45 minutes (a token lives 60), retrying every
//! 60 s after a failure while the old token stays in use. It belongs to
//! the sandbox handle: `kill()` stops it, and so does dropping the last
//! clone of the handle (no task outlives its handle).

use std::time::Duration;

use tokio::task::JoinHandle;

use super::AgentConn;

/// How often the proxy token is re-minted, and how soon after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RefreshSchedule {
    pub every: Duration,
    pub retry_after_failure: Duration,
}

impl Default for RefreshSchedule {
    fn default() -> Self {
        Self {
            every: Duration::from_secs(45 * 60),
            retry_after_failure: Duration::from_secs(60),
        }
    }
}

/// The running refresher; aborted when dropped or stopped.
#[derive(Debug)]
pub(crate) struct Refresher {
    task: JoinHandle<()>,
}

impl Refresher {
    /// Starts refreshing the proxy token of `conn` on the current runtime.
    pub(crate) fn spawn(conn: AgentConn, schedule: RefreshSchedule) -> Self {
        let task = tokio::spawn(async move {
            let mut wait = schedule.every;
            loop {
                tokio::time::sleep(wait).await;
                if conn.is_closed() {
                    return;
                }
                wait = match conn.remint().await {
                    Ok(()) => {
                        tracing::debug!(target: "rayito::refresh", "proxy token re-minted");
                        schedule.every
                    }
                    Err(err) => {
                        tracing::warn!(
                            target: "rayito::refresh",
                            kind = err.kind().as_str(),
                            "proxy token refresh failed; the current token is kept and the refresh retried"
                        );
                        schedule.retry_after_failure
                    }
                };
            }
        });
        Self { task }
    }

    /// Stops the task (idempotent).
    pub(crate) fn stop(&self) {
        self.task.abort();
    }

    /// True once the task has ended (stopped, or its runtime shut down).
    #[cfg(test)]
    pub(crate) fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl Drop for Refresher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::error::{RetryPolicy, SandboxError};
    use crate::secret::Secret;
    use crate::transport::ProxyMinter;

    /// A connection that is never dialled (the refresher only mints) and a
    /// minter that fails its first `failures` calls.
    fn conn(calls: Arc<AtomicU32>, failures: u32) -> AgentConn {
        let minter: ProxyMinter = Arc::new(move || {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                if n < failures {
                    Err(SandboxError::connection_lost(
                        "CreateMicrovmAuthToken",
                        None,
                    ))
                } else {
                    Ok(Secret::new(format!("proxy-{n}")))
                }
            })
        });
        AgentConn::open(
            "127.0.0.1:9",
            Secret::new("proxy-0"),
            Secret::new("access"),
            minter,
            RetryPolicy::default(),
            &crate::transport::AgentRoots::default(),
        )
        .unwrap()
    }

    async fn until(calls: &AtomicU32, n: u32) {
        tokio::time::timeout(Duration::from_secs(30), async {
            while calls.load(Ordering::SeqCst) < n {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the refresher mints");
    }

    #[tokio::test]
    async fn a_failure_is_retried_on_the_short_schedule_and_stop_ends_the_task() {
        let calls = Arc::new(AtomicU32::new(0));
        let refresher = Refresher::spawn(
            conn(calls.clone(), 2),
            RefreshSchedule {
                every: Duration::from_millis(20),
                retry_after_failure: Duration::from_millis(5),
            },
        );
        // Two failures do not end the task: it goes on minting.
        until(&calls, 4).await;
        assert!(!refresher.is_finished());
        refresher.stop();
        tokio::time::timeout(Duration::from_secs(10), async {
            while !refresher.is_finished() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the task ends once stopped");
        let n = calls.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(calls.load(Ordering::SeqCst), n);
    }

    #[tokio::test]
    async fn a_closed_connection_ends_the_task_by_itself() {
        let calls = Arc::new(AtomicU32::new(0));
        let conn = conn(calls.clone(), 0);
        let refresher = Refresher::spawn(
            conn.clone(),
            RefreshSchedule {
                every: Duration::from_millis(5),
                retry_after_failure: Duration::from_millis(5),
            },
        );
        until(&calls, 1).await;
        conn.close();
        tokio::time::timeout(Duration::from_secs(10), async {
            while !refresher.is_finished() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the task sees the closed connection");
    }
}
