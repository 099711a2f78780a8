//! One started process: its output ring, its end, its stdin and the
//! bookkeeping its subscribers need.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::watch;

use super::Ending;
use super::ring::{Channel, OutputRing, RING_BYTES};
use crate::isolation::cgroup::CommandCgroup;
use crate::pb;

/// Most subscribers (Start stream included) one process may have.
pub(crate) const MAX_SUBSCRIBERS: usize = 8;
/// How long output waits for a slow subscriber before dropping unread output
/// (that subscriber then ends with `output_truncated`), unless the agent is
/// configured otherwise (`AgentConfig::slow_subscriber_grace`).
pub(crate) const SLOW_SUBSCRIBER_GRACE: Duration = Duration::from_secs(30);

/// A process the agent started.
#[derive(Debug)]
pub(crate) struct ProcessEntry {
    pub pid: u32,
    pub config: pb::ProcessConfig,
    pub tag: Option<String>,
    state: Mutex<EntryState>,
    /// Bumped on every chunk and at the end; subscribers wait on it.
    version: watch::Sender<u64>,
    pub stdin: tokio::sync::Mutex<Option<tokio::net::unix::pipe::Sender>>,
    /// Each subscriber's next seq, by subscriber id.
    cursors: Mutex<HashMap<u64, u64>>,
    next_cursor: AtomicU64,
    /// Bumped whenever a subscriber reads or leaves; the pumps wait on it.
    progress: watch::Sender<u64>,
    pub timed_out: AtomicBool,
    /// The command's own cgroup, where the sandbox has one: SIGKILL from
    /// the client kills it whole.
    pub cgroup: Option<CommandCgroup>,
    /// `StartRequest.kill_tree`: its timeout's SIGTERM reaches every
    /// process of the command, and its end waits for all of them (see
    /// [`super::tree`]). Only ever set with a cgroup.
    pub kill_tree: bool,
    /// Set (before any signal) when its timeout or a client's SIGKILL
    /// started ending a `kill_tree` command: its end is then recorded only
    /// once nothing of it is left.
    pub tree_ending: AtomicBool,
    /// How long the pumps wait for a slow subscriber ([`SLOW_SUBSCRIBER_GRACE`]
    /// unless configured).
    grace: Duration,
}

#[derive(Debug)]
struct EntryState {
    ring: OutputRing,
    ending: Ending<pb::EndEvent>,
}

/// What a subscriber sees at one moment.
pub(crate) struct Snapshot {
    pub chunks: Result<Vec<super::ring::Chunk>, super::ring::Discarded>,
    pub end: Option<pb::EndEvent>,
}

impl ProcessEntry {
    pub(crate) fn new(
        pid: u32,
        config: pb::ProcessConfig,
        tag: Option<String>,
        stdin: Option<tokio::net::unix::pipe::Sender>,
    ) -> Self {
        let (version, _) = watch::channel(0);
        let (progress, _) = watch::channel(0);
        Self {
            pid,
            config: super::without_env_values(config),
            tag,
            state: Mutex::new(EntryState {
                ring: OutputRing::new(RING_BYTES),
                ending: Ending::default(),
            }),
            version,
            stdin: tokio::sync::Mutex::new(stdin),
            cursors: Mutex::new(HashMap::new()),
            next_cursor: AtomicU64::new(0),
            progress,
            timed_out: AtomicBool::new(false),
            cgroup: None,
            kill_tree: false,
            tree_ending: AtomicBool::new(false),
            grace: SLOW_SUBSCRIBER_GRACE,
        }
    }

    /// The same entry, its pumps waiting at most `grace` for a slow
    /// subscriber.
    pub(crate) fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// The entry of a command running in `cgroup` (see
    /// `SandboxEnv::launch_command`).
    pub(crate) fn in_cgroup(mut self, cgroup: Option<CommandCgroup>) -> Self {
        self.cgroup = cgroup;
        self
    }

    /// The same entry, ending its whole tree (`kill_tree`): only with a
    /// cgroup, which the caller checked.
    pub(crate) fn killing_tree(mut self, kill_tree: bool) -> Self {
        self.kill_tree = kill_tree && self.cgroup.is_some();
        self
    }

    /// Records a chunk of output.
    pub(crate) fn push(&self, channel: Channel, data: Bytes) {
        self.state
            .lock()
            .expect("entry lock")
            .ring
            .push(channel, data);
        self.version.send_modify(|v| *v += 1);
    }

    /// Records the end (once).
    pub(crate) fn finish(&self, end: pb::EndEvent) {
        self.state.lock().expect("entry lock").ending.record(end);
        self.version.send_modify(|v| *v += 1);
    }

    /// Whether the process has ended.
    pub(crate) fn has_ended(&self) -> bool {
        self.state.lock().expect("entry lock").ending.has_ended()
    }

    /// How the process ended, if it has.
    pub(crate) fn end(&self) -> Option<pb::EndEvent> {
        self.state.lock().expect("entry lock").ending.end()
    }

    /// When the process ended, if it has.
    pub(crate) fn ended_at(&self) -> Option<Instant> {
        self.state.lock().expect("entry lock").ending.at()
    }

    /// Output from `from_seq` on, and the end if there is one.
    pub(crate) fn snapshot(&self, from_seq: u64) -> Snapshot {
        let st = self.state.lock().expect("entry lock");
        Snapshot {
            chunks: st.ring.since(from_seq),
            end: st.ending.end(),
        }
    }

    /// The seq of the next chunk (where "only new output" starts).
    pub(crate) fn next_seq(&self) -> u64 {
        self.state.lock().expect("entry lock").ring.next_seq()
    }

    /// A receiver woken on every chunk and at the end.
    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Takes a subscriber slot reading from `from_seq`; `None` when all
    /// slots are taken. Returns the subscriber id.
    pub(crate) fn attach(&self, from_seq: u64) -> Option<u64> {
        let mut cursors = self.cursors.lock().expect("cursor lock");
        if cursors.len() >= MAX_SUBSCRIBERS {
            return None;
        }
        let id = self.next_cursor.fetch_add(1, Ordering::Relaxed);
        cursors.insert(id, from_seq);
        Some(id)
    }

    /// A subscriber has sent everything before `next_seq`.
    pub(crate) fn advance(&self, id: u64, next_seq: u64) {
        if let Some(c) = self.cursors.lock().expect("cursor lock").get_mut(&id) {
            *c = next_seq;
        }
        self.progress.send_modify(|v| *v += 1);
    }

    /// Gives a subscriber slot back.
    pub(crate) fn detach(&self, id: u64) {
        self.cursors.lock().expect("cursor lock").remove(&id);
        self.progress.send_modify(|v| *v += 1);
    }

    /// Whether pushing `incoming` bytes would drop output a subscriber has
    /// not read yet.
    fn would_drop_unread(&self, incoming: usize) -> bool {
        let Some(slowest) = self
            .cursors
            .lock()
            .expect("cursor lock")
            .values()
            .min()
            .copied()
        else {
            return false;
        };
        let st = self.state.lock().expect("entry lock");
        let unread = st.ring.bytes_since(slowest) as usize;
        unread > 0 && unread + incoming > st.ring.capacity()
    }

    /// Backpressure for the output pumps: waits (at most the grace, 30 s by
    /// default) until the slowest subscriber has read enough that
    /// `incoming` bytes fit.
    pub(crate) async fn wait_for_room(&self, incoming: usize) {
        let mut progress = self.progress.subscribe();
        let deadline = tokio::time::Instant::now() + self.grace;
        loop {
            progress.borrow_and_update();
            if !self.would_drop_unread(incoming) {
                return;
            }
            if tokio::time::timeout_at(deadline, progress.changed())
                .await
                .is_err()
            {
                return;
            }
        }
    }
}
