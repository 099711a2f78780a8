//! `rayito.v1.ProcessService`: processes, their output rings and subscribers.
//!
//! Status messages are short fixed English strings: they never echo a
//! command, a path or an env value.

mod ending;
mod entry;
mod ring;
mod spawn;
mod stream;
mod tree;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt as _;
use tonic::{Request, Response, Status};

pub(crate) use self::ending::Ending;
use self::entry::ProcessEntry;
pub(crate) use self::entry::SLOW_SUBSCRIBER_GRACE;
pub(crate) use self::spawn::{
    Timed, check_start, enforce_timeout, final_end, lookup, signal_group, start_failed,
};
use self::stream::EventStream;
use crate::pb;
use crate::phase::PhaseCell;
use crate::sandbox::{SandboxEnv, SpawnSpec};

/// Most live processes at once.
const MAX_LIVE: usize = 256;
/// Most finished processes remembered (for Connect replays).
const MAX_FINISHED: usize = 256;
/// How long a finished process can still be connected to.
const RETAIN_FINISHED: Duration = Duration::from_secs(30);

/// A process the agent started on its own (the template's start command):
/// listed and connectable like any other, its end readable by the agent.
#[derive(Clone, Debug)]
pub(crate) struct ManagedProcess(Arc<ProcessEntry>);

impl ManagedProcess {
    pub(crate) fn pid(&self) -> u32 {
        self.0.pid
    }

    /// How it ended, once it has.
    pub(crate) fn end(&self) -> Option<pb::EndEvent> {
        self.0.end()
    }
}

/// Every process the agent started, live or recently finished.
#[derive(Debug)]
pub(crate) struct ProcessTable {
    env: SandboxEnv,
    phase: PhaseCell,
    entries: Mutex<HashMap<u32, Arc<ProcessEntry>>>,
    /// How long output waits for a slow subscriber before dropping what
    /// it has not read (`AgentConfig::slow_subscriber_grace`).
    grace: Duration,
    /// Set by an abrupt stop: subscribers stop without an EndEvent, as if
    /// the connection had been cut.
    cut: Arc<AtomicBool>,
}

impl ProcessTable {
    pub(crate) fn new(env: SandboxEnv, phase: PhaseCell, grace: Duration) -> Self {
        Self {
            env,
            phase,
            entries: Mutex::new(HashMap::new()),
            grace,
            cut: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Drops finished processes older than the retention (or beyond the cap).
    fn prune(map: &mut HashMap<u32, Arc<ProcessEntry>>) {
        map.retain(|_, e| e.ended_at().is_none_or(|t| t.elapsed() < RETAIN_FINISHED));
        let mut finished: Vec<_> = map
            .values()
            .filter_map(|e| e.ended_at().map(|t| (t, e.pid)))
            .collect();
        if finished.len() > MAX_FINISHED {
            finished.sort();
            for (_, pid) in &finished[..finished.len() - MAX_FINISHED] {
                map.remove(pid);
            }
        }
    }

    /// A process, running or recently finished.
    #[allow(clippy::result_large_err)]
    fn get(&self, pid: u32) -> Result<Arc<ProcessEntry>, Status> {
        lookup(&self.entries, Self::prune, pid, false, "process")
    }

    /// A live process (ended ones are NOT_FOUND for signals and stdin).
    #[allow(clippy::result_large_err)]
    fn get_live(&self, pid: u32) -> Result<Arc<ProcessEntry>, Status> {
        lookup(&self.entries, Self::prune, pid, true, "process")
    }

    /// Marks the agent as abruptly stopped (before its processes are killed).
    pub(crate) fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }

    /// Kills every live process group.
    pub(crate) fn kill_all(&self) {
        let map = self.entries.lock().expect("process table lock");
        for entry in map.values().filter(|e| !e.has_ended()) {
            let _ = spawn::signal_group(entry.pid, rustix::process::Signal::KILL.as_raw());
        }
    }

    #[allow(clippy::result_large_err)]
    fn start(&self, req: pb::StartRequest) -> Result<EventStream, Status> {
        let config = req.process.unwrap_or_default();
        if config.cmd.is_empty() {
            return Err(Status::invalid_argument("empty command"));
        }
        check_start(
            &self.env,
            req.user.as_ref().map(|u| u.username.as_str()),
            config.cwd.as_deref(),
        )?;
        let spec = SpawnSpec {
            program: config.cmd.clone(),
            args: config.args.clone(),
            envs: config.envs.clone().into_iter().collect(),
            cwd: config.cwd.clone(),
            cpu_limited: true,
        };
        if req.kill_tree && !self.env.containment().cgroup {
            return Err(Status::failed_precondition(tree::NEEDS_CGROUP));
        }
        let timeout = (req.timeout_ms > 0).then(|| Duration::from_millis(req.timeout_ms));
        let mut map = self.entries.lock().expect("process table lock");
        Self::prune(&mut map);
        if map.values().filter(|e| !e.has_ended()).count() >= MAX_LIVE {
            return Err(Status::resource_exhausted("too many processes"));
        }
        let (entry, first) = spawn::spawn(
            &self.env,
            &spec,
            config,
            req.tag,
            req.stdin,
            timeout,
            req.kill_tree,
            self.grace,
        )?;
        map.insert(entry.pid, entry.clone());
        drop(map);
        Ok(stream::spawn_subscriber(
            entry,
            first,
            1,
            self.phase.clone(),
            self.cut.clone(),
        ))
    }

    /// Starts a process of the agent's own, with `tag` and no stream
    /// reading it: its output goes to its ring like any process's (the
    /// last 1 MiB, for `Connect`), without holding the process back.
    #[allow(clippy::result_large_err)]
    pub(crate) fn start_managed(
        &self,
        spec: &SpawnSpec,
        tag: &str,
    ) -> Result<ManagedProcess, Status> {
        let config = pb::ProcessConfig {
            cmd: spec.program.clone(),
            args: spec.args.clone(),
            envs: spec.envs.clone().into_iter().collect(),
            cwd: spec.cwd.clone(),
        };
        let mut map = self.entries.lock().expect("process table lock");
        let (entry, first) = spawn::spawn(
            &self.env,
            spec,
            config,
            Some(tag.to_owned()),
            false,
            None,
            false,
            self.grace,
        )?;
        entry.detach(first);
        map.insert(entry.pid, entry.clone());
        Ok(ManagedProcess(entry))
    }

    #[allow(clippy::result_large_err)]
    fn connect(&self, req: pb::ConnectRequest) -> Result<EventStream, Status> {
        let entry = self.get(req.pid)?;
        let from_seq = if req.from_seq == 0 {
            entry.next_seq()
        } else {
            req.from_seq
        };
        if entry.snapshot(from_seq).chunks.is_err() {
            return Err(Status::out_of_range("output already discarded"));
        }
        let Some(id) = entry.attach(from_seq) else {
            return Err(Status::resource_exhausted("too many subscribers"));
        };
        Ok(stream::spawn_subscriber(
            entry,
            id,
            from_seq,
            self.phase.clone(),
            self.cut.clone(),
        ))
    }

    fn list(&self) -> Vec<pb::ProcessInfo> {
        let mut map = self.entries.lock().expect("process table lock");
        Self::prune(&mut map);
        let mut out: Vec<_> = map
            .values()
            .filter(|e| !e.has_ended())
            .map(|e| pb::ProcessInfo {
                pid: e.pid,
                config: Some(e.config.clone()),
                tag: e.tag.clone(),
                kind: pb::ProcessKind::Process as i32,
            })
            .collect();
        out.sort_by_key(|p| p.pid);
        out
    }
}

/// The config a process is remembered (and listed) by: its environment
/// variables' names, never their values. A value may be an injected
/// secret, which travels only in the request that starts the process
/// (`src/secrets/inject.rs`); the reference agent's listing carries the
/// same map, so the field stays, with each value empty.
pub(crate) fn without_env_values(mut config: pb::ProcessConfig) -> pb::ProcessConfig {
    for value in config.envs.values_mut() {
        *value = String::new();
    }
    config
}

/// Sessions that Process.List reports with the processes (the terminals),
/// behind a trait so that this module need not know the PTY table.
pub(crate) trait AlsoListed: std::fmt::Debug + Send + Sync {
    /// The sessions, as Process.List answers them.
    fn listed(&self) -> Vec<pb::ProcessInfo>;
}

/// `rayito.v1.ProcessService`.
#[derive(Clone, Debug)]
pub(crate) struct ProcessServiceImpl {
    pub(crate) processes: Arc<ProcessTable>,
    /// Terminal sessions, listed with the processes.
    pub(crate) ptys: Arc<dyn AlsoListed>,
}

#[tonic::async_trait]
impl pb::process_service_server::ProcessService for ProcessServiceImpl {
    type StartStream = EventStream;
    type ConnectStream = EventStream;

    async fn start(
        &self,
        request: Request<pb::StartRequest>,
    ) -> Result<Response<Self::StartStream>, Status> {
        let stream = self.processes.start(request.into_inner())?;
        Ok(Response::new(stream))
    }

    async fn connect(
        &self,
        request: Request<pb::ConnectRequest>,
    ) -> Result<Response<Self::ConnectStream>, Status> {
        let stream = self.processes.connect(request.into_inner())?;
        Ok(Response::new(stream))
    }

    async fn send_input(
        &self,
        request: Request<pb::SendInputRequest>,
    ) -> Result<Response<pb::SendInputResponse>, Status> {
        let req = request.into_inner();
        let entry = self.processes.get_live(req.pid)?;
        let mut stdin = entry.stdin.lock().await;
        let pipe = stdin
            .as_mut()
            .ok_or_else(|| Status::failed_precondition("stdin is not open"))?;
        if pipe.write_all(&req.data).await.is_err() || pipe.flush().await.is_err() {
            *stdin = None;
            return Err(Status::failed_precondition("stdin is not open"));
        }
        Ok(Response::new(pb::SendInputResponse {}))
    }

    async fn close_stdin(
        &self,
        request: Request<pb::CloseStdinRequest>,
    ) -> Result<Response<pb::CloseStdinResponse>, Status> {
        let entry = self.processes.get_live(request.into_inner().pid)?;
        let closed = entry.stdin.lock().await.take();
        if closed.is_none() {
            return Err(Status::failed_precondition("stdin is not open"));
        }
        Ok(Response::new(pb::CloseStdinResponse {}))
    }

    async fn send_signal(
        &self,
        request: Request<pb::SendSignalRequest>,
    ) -> Result<Response<pb::SendSignalResponse>, Status> {
        let req = request.into_inner();
        if !(1..=64).contains(&req.signal) {
            return Err(Status::invalid_argument("signal must be between 1 and 64"));
        }
        let entry = self.processes.get_live(req.pid)?;
        if req.signal == libc::SIGKILL && entry.kill_tree {
            // Before any signal: the end waits for the whole tree.
            entry.tree_ending.store(true, Ordering::Release);
        }
        let sent = spawn::signal_group(entry.pid, req.signal);
        // SIGKILL ends the whole command: what it moved out of its process
        // group (`setsid`, a double fork) too.
        if req.signal == libc::SIGKILL {
            entry.kill_whole();
        }
        sent.map_err(|_| Status::not_found("process not found"))?;
        Ok(Response::new(pb::SendSignalResponse {}))
    }

    async fn list(
        &self,
        _request: Request<pb::ListRequest>,
    ) -> Result<Response<pb::ListResponse>, Status> {
        let mut processes = self.processes.list();
        processes.extend(self.ptys.listed());
        processes.sort_by_key(|p| p.pid);
        Ok(Response::new(pb::ListResponse { processes }))
    }
}
