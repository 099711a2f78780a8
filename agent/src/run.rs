//! What `/run` installed and the hook counters: the run state Health, the
//! gate, the metrics sampler and the hooks read, kept apart from the services
//! so that none of them needs the agent's whole state.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Instant;

use tokio::sync::watch;

/// What `/run` installed.
#[derive(Debug, Default)]
pub(crate) struct RunInfo {
    pub sandbox_id: String,
    pub metadata: BTreeMap<String, String>,
    pub token_sha256: Option<[u8; 32]>,
}

/// One agent's run state.
#[derive(Debug)]
pub(crate) struct RunState {
    pub started: Instant,
    pub info: Mutex<Option<RunInfo>>,
    /// Set once `/run` was accepted (after the default kernel's warm-up
    /// began): what a Health probe that came first waits for.
    pub ran: watch::Sender<bool>,
    pub resume_generation: AtomicU64,
    /// Between an accepted `/suspend` and the next `/resume`.
    pub suspended: AtomicBool,
    pub hook_anomalies: AtomicU64,
}

impl RunState {
    pub(crate) fn new() -> Self {
        let (ran, _) = watch::channel(false);
        Self {
            started: Instant::now(),
            info: Mutex::new(None),
            ran,
            resume_generation: AtomicU64::new(0),
            suspended: AtomicBool::new(false),
            hook_anomalies: AtomicU64::new(0),
        }
    }

    /// The installed token digest, if any.
    pub(crate) fn token_digest(&self) -> Option<[u8; 32]> {
        self.info
            .lock()
            .expect("run lock")
            .as_ref()
            .and_then(|r| r.token_sha256)
    }
}
