//! `rayito.v1.PtyService`: a shell on a pseudo-terminal. `Create` starts it
//! and streams `started{pid}`, the terminal's output as numbered `data`
//! messages, then one `exited`; `Connect` re-attaches from a sequence number
//! (0: only new output) while the session lives or up to 30 s after it
//! ended; `SendInput`, `Resize` and `Kill` are unary calls.
//!
//! The shell is started through [`SandboxEnv`] like any command (same
//! launcher, isolation, cgroup and uid; `SandboxEnv::launch_on_terminal`)
//! but as a session leader whose controlling terminal is the pty, so job
//! control, SIGINT from `^C` and SIGWINCH on a resize work. The start
//! checks, the timeout's signals and the end are the process service's
//! (`crate::process`). The last 1 MiB of output is kept per session.
//!
//! Status messages are short fixed English strings.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd as _, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use rayito_proto::tokens::end_status;
use rustix::process::Signal;
use rustix::pty::OpenptFlags;
use rustix::termios::Winsize;
use tokio::io::unix::AsyncFd;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::pb;
use crate::pb::pty_server_message::Message;
use crate::phase::{Phase, PhaseCell};
use crate::sandbox::{SandboxEnv, SpawnSpec};

/// Output kept per session for `Connect`.
const RING_BYTES: usize = 1024 * 1024;
/// One data message at most this big.
const READ_CHUNK: usize = 32 * 1024;
/// Most live sessions at once.
const MAX_LIVE: usize = 64;
/// How long an ended session can still be connected to.
const RETAIN_ENDED: Duration = Duration::from_secs(30);
/// A silent stream gets a KeepAlive after this long.
const KEEPALIVE_AFTER: Duration = Duration::from_secs(30);
/// After the shell exits, how long the terminal may still drain.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(200);
/// Largest accepted terminal side.
const MAX_SIDE: u32 = 1000;
/// Events buffered between a subscriber task and its gRPC stream.
const STREAM_BUFFER: usize = 64;

/// The shell when the request names none.
const DEFAULT_SHELL: &str = "/bin/bash";

type Stream = ReceiverStream<Result<pb::PtyServerMessage, Status>>;

/// One terminal session.
#[derive(Debug)]
struct Session {
    pid: u32,
    /// What was started (for Process.List).
    config: pb::ProcessConfig,
    master: AsyncFd<OwnedFd>,
    state: Mutex<SessionState>,
    /// Bumped on every chunk and at the end; subscribers wait on it.
    version: watch::Sender<u64>,
    timed_out: AtomicBool,
    /// Serialises writers so that two inputs never interleave.
    input: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default)]
struct SessionState {
    chunks: VecDeque<(u64, Bytes)>,
    kept_bytes: usize,
    next_seq: u64,
    ending: crate::process::Ending<pb::PtyExited>,
}

impl Session {
    fn push(&self, data: Bytes) {
        let mut st = self.state.lock().expect("pty lock");
        let seq = st.next_seq;
        st.next_seq += 1;
        st.kept_bytes += data.len();
        st.chunks.push_back((seq, data));
        while st.kept_bytes > RING_BYTES && st.chunks.len() > 1 {
            if let Some((_, old)) = st.chunks.pop_front() {
                st.kept_bytes -= old.len();
            }
        }
        drop(st);
        self.version.send_modify(|v| *v += 1);
    }

    fn finish(&self, end: pb::PtyExited) {
        self.state.lock().expect("pty lock").ending.record(end);
        self.version.send_modify(|v| *v += 1);
    }

    fn has_ended(&self) -> bool {
        self.state.lock().expect("pty lock").ending.has_ended()
    }

    /// Chunks from `from_seq` on (`None` when some were already dropped),
    /// and the end if there is one.
    fn since(&self, from_seq: u64) -> (Option<Vec<(u64, Bytes)>>, Option<pb::PtyExited>) {
        let st = self.state.lock().expect("pty lock");
        let oldest = st.chunks.front().map_or(st.next_seq, |(seq, _)| *seq);
        let chunks = (from_seq >= oldest).then(|| {
            st.chunks
                .iter()
                .filter(|(seq, _)| *seq >= from_seq)
                .cloned()
                .collect()
        });
        (chunks, st.ending.end())
    }

    fn next_seq(&self) -> u64 {
        self.state.lock().expect("pty lock").next_seq
    }

    /// Writes all of `data` to the terminal.
    async fn write_all(&self, mut data: &[u8]) -> std::io::Result<()> {
        let _turn = self.input.lock().await;
        while !data.is_empty() {
            let mut guard = self.master.writable().await?;
            match guard.try_io(|fd| Ok(rustix::io::write(fd.get_ref(), data)?)) {
                Ok(Ok(n)) => data = &data[n..],
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
        Ok(())
    }
}

/// Every session of one agent.
#[derive(Debug)]
pub(crate) struct PtyTable {
    env: SandboxEnv,
    phase: PhaseCell,
    sessions: Mutex<HashMap<u32, Arc<Session>>>,
    /// Set by [`PtyTable::cut`]: subscribers send nothing more.
    cut: Arc<AtomicBool>,
}

fn sized(size: Option<&pb::PtySize>) -> Result<Winsize, Status> {
    let size = size.ok_or_else(|| Status::invalid_argument("invalid pty size"))?;
    let side = |n: u32| {
        u16::try_from(n)
            .ok()
            .filter(|n| (1..=MAX_SIDE).contains(&u32::from(*n)))
    };
    match (side(size.cols), side(size.rows)) {
        (Some(cols), Some(rows)) => Ok(Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        }),
        _ => Err(Status::invalid_argument("invalid pty size")),
    }
}

/// A terminal's end: a command's [`crate::process::end_event`] (the same
/// fields).
fn exited(end: pb::EndEvent) -> pb::PtyExited {
    pb::PtyExited {
        exit_code: end.exit_code,
        exited: end.exited,
        status: end.status,
        error: end.error,
        signal: end.signal,
    }
}

impl crate::process::Timed for Session {
    fn leader(&self) -> (u32, &AtomicBool) {
        (self.pid, &self.timed_out)
    }
    fn has_ended(&self) -> bool {
        Session::has_ended(self)
    }
}

fn detached(status: &str) -> pb::PtyExited {
    pb::PtyExited {
        exit_code: 0,
        exited: false,
        status: status.to_owned(),
        error: Some(pb::StreamError {
            code: status.to_owned(),
            message: status.to_owned(),
        }),
        signal: None,
    }
}

impl PtyTable {
    pub(crate) fn new(env: SandboxEnv, phase: PhaseCell) -> Self {
        Self {
            env,
            phase,
            sessions: Mutex::new(HashMap::new()),
            cut: Arc::default(),
        }
    }

    /// The agent is being killed (fault injection): every subscriber stops
    /// without another message, so its client sees the connection go, as
    /// when the agent's process dies, not the `exited` of the shells the
    /// kill ends racing the connection's drop.
    pub(crate) fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }

    fn prune(map: &mut HashMap<u32, Arc<Session>>) {
        map.retain(|_, s| {
            s.state
                .lock()
                .expect("pty lock")
                .ending
                .at()
                .is_none_or(|t| t.elapsed() < RETAIN_ENDED)
        });
    }

    #[allow(clippy::result_large_err)]
    fn get(&self, pid: u32) -> Result<Arc<Session>, Status> {
        crate::process::lookup(&self.sessions, Self::prune, pid, false, "pty")
    }

    #[allow(clippy::result_large_err)]
    fn get_live(&self, pid: u32) -> Result<Arc<Session>, Status> {
        crate::process::lookup(&self.sessions, Self::prune, pid, true, "pty")
    }

    #[allow(clippy::result_large_err)]
    fn create(&self, req: pb::PtyStart) -> Result<Stream, Status> {
        let size = sized(req.size.as_ref())?;
        crate::process::check_start(
            &self.env,
            req.user.as_ref().map(|u| u.username.as_str()),
            req.cwd.as_deref(),
        )?;
        {
            let mut map = self.sessions.lock().expect("pty table lock");
            Self::prune(&mut map);
            if map.values().filter(|s| !s.has_ended()).count() >= MAX_LIVE {
                return Err(Status::resource_exhausted("too many pty sessions"));
            }
        }
        let failed = |e: std::io::Error| crate::process::start_failed(&e, "shell", "pty");
        let (master, slave) = open_pty(size).map_err(failed)?;
        let mut envs: std::collections::BTreeMap<_, _> = req.envs.into_iter().collect();
        envs.entry("TERM".to_owned())
            .or_insert_with(|| "xterm-256color".to_owned());
        let spec = SpawnSpec {
            program: req
                .shell
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| DEFAULT_SHELL.to_owned()),
            args: vec!["-i".to_owned(), "-l".to_owned()],
            envs,
            cwd: req.cwd,
            cpu_limited: true,
        };
        let config = pb::ProcessConfig {
            cmd: spec.program.clone(),
            args: spec.args.clone(),
            envs: spec.envs.clone().into_iter().collect(),
            cwd: spec.cwd.clone(),
        };
        let oom_kills_before = self.env.oom_kills();
        let mut child = self
            .env
            .launch_on_terminal(&spec, slave.as_fd())
            .map_err(failed)?;
        // The agent's copy of the slave goes now: once the shell and its
        // children are gone, reads of the master end.
        drop(slave);
        let pid = child.id();
        self.env.track(pid);
        // SAFETY: an OwnedFd stays open until dropped and always names the
        // same descriptor; the AsyncFd owns it for its whole life.
        let master =
            unsafe { AsyncFd::register(master) }.map_err(|e| failed(std::io::Error::from(e)))?;
        let (version, _) = watch::channel(0);
        let session = Arc::new(Session {
            pid,
            config: crate::process::without_env_values(config),
            master,
            state: Mutex::new(SessionState {
                next_seq: 1,
                ..SessionState::default()
            }),
            version,
            timed_out: AtomicBool::new(false),
            input: tokio::sync::Mutex::new(()),
        });
        self.sessions
            .lock()
            .expect("pty table lock")
            .insert(pid, session.clone());

        let reader = tokio::spawn(pump(session.clone()));
        if req.timeout_ms > 0 {
            let limit = Duration::from_millis(req.timeout_ms);
            tokio::spawn(crate::process::enforce_timeout(
                session.clone(),
                limit,
                &[Signal::HUP, Signal::TERM],
            ));
        }
        let env = self.env.clone();
        let waiter = session.clone();
        tokio::spawn(async move {
            let status = child.wait().await.ok();
            drain_after_exit(reader, &waiter).await;
            env.untrack(pid);
            let timed_out = waiter.timed_out.load(Ordering::Acquire);
            let end = crate::process::final_end(&env, status, timed_out, oom_kills_before, "pty");
            waiter.finish(exited(end));
        });
        Ok(subscribe(session, 1, self.phase.clone(), self.cut.clone()))
    }

    /// The live sessions, as Process.List shows them (kind PTY).
    pub(crate) fn list(&self) -> Vec<pb::ProcessInfo> {
        let mut map = self.sessions.lock().expect("pty table lock");
        Self::prune(&mut map);
        map.values()
            .filter(|s| !s.has_ended())
            .map(|s| pb::ProcessInfo {
                pid: s.pid,
                config: Some(s.config.clone()),
                tag: None,
                kind: pb::ProcessKind::Pty as i32,
            })
            .collect()
    }

    #[allow(clippy::result_large_err)]
    fn connect(&self, req: pb::ConnectRequest) -> Result<Stream, Status> {
        let session = self.get(req.pid)?;
        let from_seq = if req.from_seq == 0 {
            session.next_seq()
        } else {
            req.from_seq
        };
        if session.since(from_seq).0.is_none() {
            return Err(Status::out_of_range("output already discarded"));
        }
        Ok(subscribe(
            session,
            from_seq,
            self.phase.clone(),
            self.cut.clone(),
        ))
    }
}

/// A pty pair: the master non-blocking, both close-on-exec from their
/// first instant (a child another thread starts meanwhile must not inherit
/// either: the master of a terminal is its keyboard), the slave sized.
fn open_pty(size: Winsize) -> std::io::Result<(OwnedFd, OwnedFd)> {
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    let slave = rustix::fs::open(
        name.as_c_str(),
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    rustix::termios::tcsetwinsize(&slave, size)?;
    rustix::io::ioctl_fionbio(&master, true)?;
    Ok((master, slave))
}

/// Copies the terminal's output into the session until it closes (EIO once
/// no process holds the slave).
async fn pump(session: Arc<Session>) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        let Ok(mut guard) = session.master.readable().await else {
            return;
        };
        match guard.try_io(|fd| Ok(rustix::io::read(fd.get_ref().as_fd(), &mut buf)?)) {
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(n)) => session.push(Bytes::copy_from_slice(&buf[..n])),
            Err(_would_block) => {}
        }
    }
}

/// The most read from the terminal without waiting once the drain window
/// after the exit has passed (a descendant may keep writing).
const FINAL_DRAIN_BYTES: usize = 4 * 1024 * 1024;

/// After the shell exited: the pump reads on until the terminal closes, for
/// at most [`DRAIN_AFTER_EXIT`] (a background descendant can hold the slave
/// open); then it is stopped and what the terminal still holds is read
/// directly, because on a busy machine the runtime may not have reported
/// the master readable yet, and that output would be lost.
async fn drain_after_exit(mut reader: tokio::task::JoinHandle<()>, session: &Session) {
    if tokio::time::timeout(DRAIN_AFTER_EXIT, &mut reader)
        .await
        .is_ok()
    {
        return;
    }
    reader.abort();
    // Stopped before anything more is read here, so chunks stay in order.
    let _ = reader.await;
    let mut buf = vec![0u8; READ_CHUNK];
    let mut taken = 0;
    while taken < FINAL_DRAIN_BYTES {
        // Non-blocking (the master is opened so): EAGAIN ends the drain,
        // as does EIO once no process holds the slave.
        match rustix::io::read(session.master.get_ref().as_fd(), &mut buf[..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                session.push(Bytes::copy_from_slice(&buf[..n]));
                taken += n;
            }
        }
    }
}

fn message(message: Message, seq: u64) -> pb::PtyServerMessage {
    pb::PtyServerMessage {
        message: Some(message),
        seq,
    }
}

/// A subscriber: `started`, output from `from_seq` on, one `exited`.
fn subscribe(
    session: Arc<Session>,
    from_seq: u64,
    phase: PhaseCell,
    cut: Arc<AtomicBool>,
) -> Stream {
    let (tx, rx) = mpsc::channel(STREAM_BUFFER);
    tokio::spawn(async move {
        let send = |m: pb::PtyServerMessage| {
            let tx = tx.clone();
            async move { tx.send(Ok(m)).await.is_ok() }
        };
        let started = Message::Started(pb::PtyStarted { pid: session.pid });
        if !send(message(started, 0)).await {
            return;
        }
        let mut version = session.version.subscribe();
        let mut phase_rx = phase.subscribe();
        let mut next_seq = from_seq;
        let mut last_sent = tokio::time::Instant::now();
        loop {
            version.borrow_and_update();
            phase_rx.borrow_and_update();
            if cut.load(Ordering::SeqCst) {
                return;
            }
            let (chunks, end) = session.since(next_seq);
            let Some(chunks) = chunks else {
                send(message(
                    Message::Exited(detached(end_status::OUTPUT_TRUNCATED)),
                    0,
                ))
                .await;
                return;
            };
            for (seq, data) in chunks {
                next_seq = seq + 1;
                if !send(message(Message::Data(data.to_vec()), seq)).await {
                    return;
                }
                last_sent = tokio::time::Instant::now();
            }
            match phase.get() {
                Phase::Suspending => {
                    send(message(
                        Message::Exited(detached(end_status::SUSPENDING)),
                        0,
                    ))
                    .await;
                    return;
                }
                Phase::Expired => {
                    send(message(
                        Message::Exited(detached(end_status::SANDBOX_TIMEOUT)),
                        0,
                    ))
                    .await;
                    return;
                }
                Phase::Running | Phase::Terminating => {}
            }
            if let Some(end) = end {
                send(message(Message::Exited(end), 0)).await;
                return;
            }
            tokio::select! {
                _ = version.changed() => {}
                _ = phase_rx.changed() => {}
                _ = tokio::time::sleep_until(last_sent + KEEPALIVE_AFTER) => {
                    if !send(message(Message::Keepalive(pb::KeepAlive {}), 0)).await {
                        return;
                    }
                    last_sent = tokio::time::Instant::now();
                }
                _ = tx.closed() => return,
            }
        }
    });
    ReceiverStream::new(rx)
}

/// `rayito.v1.PtyService`.
impl crate::process::AlsoListed for PtyTable {
    fn listed(&self) -> Vec<pb::ProcessInfo> {
        self.list()
    }
}

#[derive(Clone, Debug)]
pub(crate) struct PtyServiceImpl {
    pub(crate) ptys: Arc<PtyTable>,
}

#[tonic::async_trait]
impl pb::pty_service_server::PtyService for PtyServiceImpl {
    type CreateStream = Stream;
    type ConnectStream = Stream;

    async fn create(
        &self,
        request: Request<pb::PtyStart>,
    ) -> Result<Response<Self::CreateStream>, Status> {
        Ok(Response::new(self.ptys.create(request.into_inner())?))
    }

    async fn connect(
        &self,
        request: Request<pb::ConnectRequest>,
    ) -> Result<Response<Self::ConnectStream>, Status> {
        Ok(Response::new(self.ptys.connect(request.into_inner())?))
    }

    async fn send_input(
        &self,
        request: Request<pb::SendInputRequest>,
    ) -> Result<Response<pb::SendInputResponse>, Status> {
        let req = request.into_inner();
        let session = self.ptys.get_live(req.pid)?;
        session
            .write_all(&req.data)
            .await
            .map_err(|_| Status::failed_precondition("pty input is closed"))?;
        Ok(Response::new(pb::SendInputResponse {}))
    }

    async fn resize(
        &self,
        request: Request<pb::ResizeRequest>,
    ) -> Result<Response<pb::ResizeResponse>, Status> {
        let req = request.into_inner();
        let size = sized(req.size.as_ref())?;
        let session = self.ptys.get_live(req.pid)?;
        // On the master, the kernel also sends SIGWINCH to the foreground
        // process group.
        rustix::termios::tcsetwinsize(session.master.get_ref(), size)
            .map_err(|_| Status::failed_precondition("pty is closed"))?;
        Ok(Response::new(pb::ResizeResponse {}))
    }

    async fn kill(
        &self,
        request: Request<pb::KillPtyRequest>,
    ) -> Result<Response<pb::KillPtyResponse>, Status> {
        let session = self.ptys.get_live(request.into_inner().pid)?;
        if crate::process::signal_group(session.pid, Signal::KILL.as_raw()).is_err() {
            return Err(Status::not_found("pty not found"));
        }
        Ok(Response::new(pb::KillPtyResponse {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Output the terminal holds when the shell exits is kept even when
    /// the pump never got to read it (a busy machine).
    #[tokio::test]
    async fn output_held_at_the_exit_is_kept_when_the_pump_never_ran() {
        use std::io::Write as _;
        let (reader, mut writer) = std::io::pipe().unwrap();
        let reader = OwnedFd::from(reader);
        rustix::io::ioctl_fionbio(&reader, true).unwrap();
        writer.write_all(b"bye\r\n").unwrap();
        // SAFETY: as in `create`: the AsyncFd owns the OwnedFd for its whole
        // life, and an OwnedFd always names the same open descriptor.
        let master = unsafe { AsyncFd::register(reader) }.unwrap();
        let session = Session {
            pid: 1,
            config: pb::ProcessConfig::default(),
            master,
            state: Mutex::new(SessionState::default()),
            version: watch::channel(0).0,
            timed_out: AtomicBool::new(false),
            input: tokio::sync::Mutex::new(()),
        };
        let stalled_pump = tokio::spawn(std::future::pending::<()>());
        // The writer stays open, as a background descendant would keep it.
        drain_after_exit(stalled_pump, &session).await;
        let st = session.state.lock().unwrap();
        let output: Vec<u8> = st.chunks.iter().flat_map(|(_, c)| c.to_vec()).collect();
        assert_eq!(output, b"bye\r\n");
        drop(writer);
    }

    /// After `cut` (a killed agent), a subscriber whose shell the kill ends
    /// sends nothing more: no `exited`, the stream just ends.
    #[tokio::test]
    async fn a_cut_table_sends_no_exit_for_a_killed_shell() {
        use tokio_stream::StreamExt as _;
        let root = tempfile::tempdir().unwrap();
        let env = SandboxEnv::new(root.path()).unwrap();
        let table = PtyTable::new(env.clone(), PhaseCell::new());
        let mut stream = table
            .create(pb::PtyStart {
                size: Some(pb::PtySize { cols: 80, rows: 24 }),
                ..Default::default()
            })
            .unwrap();
        let started = stream.next().await.unwrap().unwrap();
        let Some(Message::Started(pb::PtyStarted { pid })) = started.message else {
            panic!("{started:?}");
        };
        table.cut();
        assert!(crate::process::signal_group(pid, Signal::KILL.as_raw()).is_ok());
        let rest = tokio::time::timeout(Duration::from_secs(30), async {
            let mut rest = Vec::new();
            while let Some(item) = stream.next().await {
                rest.push(item.unwrap().message);
            }
            rest
        })
        .await
        .expect("the stream ends");
        assert!(
            !rest.iter().any(|m| matches!(m, Some(Message::Exited(_)))),
            "{rest:?}"
        );
        env.kill_all();
    }
}
