//! The agent as a library: [`Agent::start`] binds the gRPC and hooks servers
//! on loopback and serves the `rayito.v1` contract for one sandbox.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::code::CodeServiceImpl;
use crate::filesystem::FilesystemServiceImpl;
use crate::gate::GateLayer;
use crate::health::HealthServiceImpl;
use crate::lifecycle::LifecycleServiceImpl;
use crate::pb;
use crate::persist::PersistenceAccess;
use crate::process::ProcessServiceImpl;
use crate::sandbox::{SandboxEnv, SandboxLimits};
use crate::server::ServeState;
use crate::state::Shared;

/// Free space a `Write` must leave on the destination filesystem by default.
pub const DEFAULT_DISK_RESERVE_BYTES: u64 = 256 * 1024 * 1024;
/// Largest gRPC message the agent encodes or decodes.
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// How to start an [`Agent`].
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// The sandbox's root directory on the host (`home/user` and `tmp` live below).
    pub root: PathBuf,
    /// Where the gRPC server listens (port 0 picks a free port).
    pub grpc_addr: SocketAddr,
    /// Where the hooks server listens (port 0 picks a free port).
    pub hooks_addr: SocketAddr,
    /// Free bytes a `Write` must leave on the destination filesystem.
    pub disk_reserve_bytes: u64,
    /// Remove `root` when the agent stops (set by [`AgentConfig::default`],
    /// which creates a fresh temporary root).
    pub remove_root_on_drop: bool,
    /// Start the default Python kernel at once instead of at `/run`
    /// (default `false`): a sandbox prepared ahead of its RunMicrovm (the
    /// emulator's warm spare) then answers its first cell without waiting
    /// for an interpreter. `/run` keeps that kernel when the payload leaves
    /// the environment as it was, and starts a fresh one otherwise.
    pub prestart_kernel: bool,
    /// Limits on what the sandbox's processes use together (default
    /// [`SandboxLimits::default`]: 512 processes and threads, 2,048 MiB).
    /// The run payload cannot set them (its `limits` carry only
    /// `cpu_seconds` in the wire contract).
    pub limits: SandboxLimits,
    /// Put the sandbox in its own cgroup v2 where the host has a writable
    /// one (default `true`). `false` contains it the way a host without
    /// cgroup v2 does (process groups and the `RAYITO_SANDBOX` marker): how
    /// the tests exercise that fallback on a host that has cgroup v2.
    pub cgroup: bool,
    /// The secret every hook request must carry (default `None`: hooks
    /// are open, as on a MicroVM, where only AWS reaches them). The
    /// emulator sets one, because on a host sandbox code can reach the
    /// hooks port (see [`crate::hooks::HooksToken`]).
    pub hooks_token: Option<crate::hooks::HooksToken>,
    /// The directory holding the image's template files, `template.json`
    /// and `template-env.json` (see [`crate::template`]), read once when
    /// the agent starts; `None` (the default) reads none, as for an image
    /// without a template. A real image keeps them in
    /// [`IMAGE_TEMPLATE_DIR`](crate::template::IMAGE_TEMPLATE_DIR) (`/etc/rayito`); the local backend passes the
    /// directory of the image layer that holds them.
    pub template_dir: Option<PathBuf>,
    /// The image layer the sandbox runs on (the local backend's built
    /// template: an overlayfs upper directory kept by the emulator),
    /// mounted read-only over the host's root in the sandbox's mount
    /// namespace; `None` (the default): the host's root as it is.
    pub image_layer: Option<PathBuf>,
    /// Start the template's start command at `/run` instead of at once:
    /// the local backend's MicroVMs made ahead (warm spares) run it only
    /// once a sandbox is theirs, so that two agents on one image never run
    /// it at the same time on one host. An image build's check (which
    /// asks `/ready`) starts it at once, as AWS does before its snapshot.
    pub defer_template_start: bool,
    /// Let the gRPC server listen on an address other than loopback
    /// (default `false`). A MicroVM image sets it (`rayito-agent serve
    /// --grpc-addr 0.0.0.0:8080`): the MicroVMs proxy reaches the agent over
    /// the VM's network, and every call but Health needs the access token
    /// whose digest only `/run` installs. The hooks never leave loopback:
    /// they carry no token on a MicroVM, and `/run` is what installs one.
    pub grpc_beyond_loopback: bool,
    /// The local S3 endpoint (the emulator's, path-style over plain HTTP)
    /// that the S3-staged transfers' presigned URLs must name; `None`
    /// (the default): AWS's regional virtual-hosted endpoints over HTTPS,
    /// as on a MicroVM. The agent calls no other URL.
    pub local_s3_endpoint: Option<SocketAddr>,
    /// Where Checkpoint and Restore find S3 and credentials (default
    /// [`PersistenceAccess::Aws`]: the execution role's, as on a MicroVM).
    /// The emulator sets [`PersistenceAccess::Local`].
    pub persistence: PersistenceAccess,
    /// Serve the persistence and transfer RPCs (Checkpoint, Restore,
    /// StartImport, StartExport, GetTransfer, WatchTransfer,
    /// CancelTransfer; default `true`). `false` answers all seven
    /// UNIMPLEMENTED, as an agent built before them: how the tests exercise
    /// the SDK's fallback to gRPC.
    pub transfers: bool,
    /// Take a StartImport's chunks (`chunk_gets`) and announce it in
    /// Health's `features.chunked_import` (default `true`; only with
    /// [`AgentConfig::transfers`]). `false` makes an agent that ignores
    /// the chunks, as the reference's: how the tests exercise the SDK's
    /// single-object staged write.
    pub chunked_import: bool,
    /// How often the metrics history is sampled (default `Some(5 s)`,
    /// [`DEFAULT_METRICS_INTERVAL`]; tests shorten it). `None` answers
    /// Metrics and MetricsHistory UNIMPLEMENTED, as an agent built before
    /// them: how the tests exercise the SDK's `Unimplemented`.
    pub metrics_interval: Option<std::time::Duration>,
    /// Enforce an egress policy when the run payload asks for it
    /// (`network.enforce`) and the host allows it (root, network
    /// namespaces): the sandbox's processes get a loopback-only network
    /// namespace and a policy-checking proxy (default `true`; see
    /// docs/network.md). `false` reports `EGRESS_ENFORCEMENT_NONE`, as an
    /// agent on a host that cannot enforce: how the tests exercise the
    /// SDK's create gate.
    pub egress: bool,
    /// The secret gateways' setup (default [`GatewayOptions::default`]:
    /// served, verified against the OS trust store). The emulator adds its
    /// local upstream settings; `enabled: false` makes an agent without the
    /// feature, as one built before it.
    pub gateway: crate::gateway::GatewayOptions,
    /// The local backend's EFS stand-in (default `None`: a MicroVM, where
    /// the EFS volumes section runs `mount -t efs`). The emulator sets its
    /// own (see [`crate::local_volumes`]).
    pub local_volumes: Option<std::sync::Arc<dyn crate::local_volumes::LocalVolumes>>,
    /// Serve the EFS volumes section (default `true`; it also needs a
    /// mount namespace, and [`AgentConfig::local_volumes`] with the agent
    /// as root, or `mount.efs` with CAP_SYS_ADMIN). `false` reports
    /// `features.efs_volumes = false` and answers the section
    /// UNSUPPORTED, as an agent without the feature: how the tests
    /// exercise the SDK's `Unimplemented`.
    pub efs_volumes: bool,
    /// Serve the S3 mounts section (default `true`; it also needs FUSE,
    /// root and a helper, see docs/mounts.md). `false` makes an agent
    /// without the feature, as one built before it: Health's
    /// `features.s3_mounts` false and the section answered UNSUPPORTED.
    pub s3_mounts: bool,
    /// Serve the lifecycle events section (default `true`). `false` makes
    /// an agent without the feature: Health's `features.lifecycle_events`
    /// false and the section answered UNSUPPORTED.
    pub lifecycle_events: bool,
    /// Where signed event lines go (default `None`: stdout, the MicroVM's
    /// console). The emulator sets its own (see [`crate::event_lines`]).
    pub event_lines: Option<crate::event_lines::EventLines>,
    /// Serve the telemetry export section (default `true`). `false` makes
    /// an agent without the feature: Health's `features.telemetry_export`
    /// false and the section answered UNSUPPORTED.
    pub telemetry_export: bool,
    /// How long a command's output waits for its slowest reader before
    /// dropping what that reader has not read (it then ends with
    /// `output_truncated`; default 30 s, [`DEFAULT_SLOW_SUBSCRIBER_GRACE`]).
    /// Tests shorten it instead of waiting the default out.
    pub slow_subscriber_grace: std::time::Duration,
    /// How long an ended `run_code` execution can still be reattached to
    /// (default 30 s, [`DEFAULT_RETAINED_AFTER_END`], the wire contract's);
    /// afterwards Reattach answers NOT_FOUND `execution not found`. Tests
    /// shorten it instead of waiting the default out.
    pub retained_after_end: std::time::Duration,
}

/// The metrics history's default sampling interval (5 s).
pub const DEFAULT_METRICS_INTERVAL: std::time::Duration = crate::metrics::DEFAULT_SAMPLE_INTERVAL;

/// How long a command's output waits for a slow reader by default (30 s;
/// [`AgentConfig::slow_subscriber_grace`]).
pub const DEFAULT_SLOW_SUBSCRIBER_GRACE: std::time::Duration =
    crate::process::SLOW_SUBSCRIBER_GRACE;

/// How long an ended execution is kept for Reattach by default (30 s;
/// [`AgentConfig::retained_after_end`]).
pub const DEFAULT_RETAINED_AFTER_END: std::time::Duration = crate::code::RETAINED_AFTER_END;

impl Default for AgentConfig {
    /// A fresh root under the system temp dir, both servers on 127.0.0.1:0.
    fn default() -> Self {
        let unique = format!(
            "rayito-agent-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        );
        Self {
            root: std::env::temp_dir().join(unique),
            grpc_addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            hooks_addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            disk_reserve_bytes: DEFAULT_DISK_RESERVE_BYTES,
            remove_root_on_drop: true,
            prestart_kernel: false,
            limits: SandboxLimits::default(),
            cgroup: true,
            hooks_token: None,
            template_dir: None,
            image_layer: None,
            defer_template_start: false,
            grpc_beyond_loopback: false,
            local_s3_endpoint: None,
            persistence: PersistenceAccess::Aws,
            transfers: true,
            chunked_import: true,
            metrics_interval: Some(DEFAULT_METRICS_INTERVAL),
            egress: true,
            gateway: crate::gateway::GatewayOptions::default(),
            local_volumes: None,
            efs_volumes: true,
            s3_mounts: true,
            lifecycle_events: true,
            event_lines: None,
            telemetry_export: true,
            slow_subscriber_grace: DEFAULT_SLOW_SUBSCRIBER_GRACE,
            retained_after_end: DEFAULT_RETAINED_AFTER_END,
        }
    }
}

/// A running agent: its gRPC and hooks servers and every process of its
/// sandbox. Dropping it stops everything without blocking.
pub struct Agent {
    shared: Arc<Shared>,
    grpc_addr: SocketAddr,
    /// Hands the gRPC server connections made in this process.
    in_process: tokio::sync::mpsc::Sender<tokio::io::DuplexStream>,
    hooks_addr: SocketAddr,
    /// The two servers.
    tasks: Vec<JoinHandle<()>>,
    deadline_timer: Option<JoinHandle<()>>,
    root_to_remove: Option<PathBuf>,
}

// Written by hand: the shared state holds live commands' environments and
// output, kernels' code and the run payload's values, none of which may
// reach a log through `{:?}`.
impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("grpc_addr", &self.grpc_addr)
            .field("hooks_addr", &self.hooks_addr)
            .field("root", &self.shared.env.root())
            .field("phase", &self.shared.phase.get())
            .finish_non_exhaustive()
    }
}

/// Refuses anything but a loopback address for `server` (unless `allowed`).
fn require_loopback(server: &str, addr: SocketAddr, allowed: bool) -> std::io::Result<()> {
    if allowed || addr.ip().is_loopback() {
        Ok(())
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("the agent's {server} only binds loopback addresses"),
        ))
    }
}

impl Agent {
    /// Creates the sandbox root, binds both servers and starts serving.
    ///
    /// # Errors
    /// A non-loopback address (for gRPC, unless
    /// [`AgentConfig::grpc_beyond_loopback`]), a root that cannot be created, or a bind
    /// failure; with [`AgentConfig::image_layer`], a host without mount
    /// namespaces or a layer that cannot be mounted.
    pub async fn start(config: AgentConfig) -> std::io::Result<Agent> {
        require_loopback("gRPC server", config.grpc_addr, config.grpc_beyond_loopback)?;
        require_loopback("hooks server", config.hooks_addr, false)?;
        let env = SandboxEnv::create(
            &config.root,
            &config.limits,
            config.cgroup,
            config.image_layer.as_deref(),
        )?;
        if config.remove_root_on_drop {
            // Also when this process ends without dropping the agent.
            SandboxEnv::remove_at_exit(&config.root);
        }
        let grpc = TcpListener::bind(config.grpc_addr).await?;
        let hooks = TcpListener::bind(config.hooks_addr).await?;
        let grpc_addr = grpc.local_addr()?;
        let hooks_addr = hooks.local_addr()?;
        // Before anything starts in the sandbox: the image's envs are every
        // process's, the pre-started kernel's included.
        let template = config.template_dir.as_deref().map(crate::template::load);
        if let Some(Ok(files)) = &template {
            env.set_template_envs(files.envs.clone());
        }
        let mut shared = Shared::new(
            env,
            config.disk_reserve_bytes,
            crate::state::StreamWaits {
                slow_subscriber_grace: config.slow_subscriber_grace,
                retained_after_end: config.retained_after_end,
            },
        );
        shared.egress = Arc::new(crate::egress::Egress::new(
            config.egress,
            vec![grpc_addr, hooks_addr],
        ));
        shared.gateways = Arc::new(crate::gateway::Gateways::new(
            config.gateway.clone(),
            shared.env.clone(),
        ));
        // The image's bucket allowlist, read once (see s3_mounts::allowlist).
        let allowlist = crate::s3_mounts::Allowlist::load(
            &match &template {
                Some(Ok(files)) => files.envs.clone(),
                _ => Default::default(),
            },
            matches!(config.persistence, PersistenceAccess::Aws),
        );
        shared.s3_mounts = Arc::new(crate::s3_mounts::S3Mounts::new(
            config.s3_mounts,
            shared.env.clone(),
            shared.persist.clone(),
            allowlist,
        ));
        shared.volumes = Arc::new(crate::efs_volumes::EfsVolumes::new(
            crate::efs_volumes::VolumeOptions {
                enabled: config.efs_volumes,
                local: config.local_volumes.clone(),
            },
            shared.env.clone(),
        ));
        shared.events = Arc::new(crate::lifecycle_events::LifecycleEvents::new(
            config.lifecycle_events,
            config.event_lines.clone(),
            shared.run.clone(),
        ));
        let metrics = config
            .metrics_interval
            .map(|every| (every, Arc::new(crate::metrics::Metrics::new(&shared.env))));
        shared.telemetry = Arc::new(crate::telemetry_export::TelemetryExports::new(
            config.telemetry_export,
            metrics.as_ref().map(|(_, m)| m.clone()),
            shared.persist.clone(),
            shared.run.clone(),
        ));
        let shared = Arc::new(shared);
        if let Some(addr) = config.local_s3_endpoint {
            shared
                .transfers
                .set_endpoint(crate::transfer::S3Endpoint::Local(addr));
        }
        shared
            .transfers
            .set_chunked_import(config.transfers && config.chunked_import);
        shared.persist.set_access(config.persistence.clone());
        match template {
            None => {}
            Some(Err(reason)) => shared.template.fail(reason),
            Some(Ok(files)) => {
                if let Some(start) = files.start {
                    if config.defer_template_start {
                        *shared
                            .deferred_start
                            .lock()
                            .unwrap_or_else(|p| p.into_inner()) = Some(start);
                    } else {
                        shared.start_template(start);
                    }
                }
            }
        }
        if config.prestart_kernel {
            shared.code.prestart();
        }

        let routes = tonic::service::Routes::new(
            pb::health_service_server::HealthServiceServer::new(HealthServiceImpl {
                chunked_import: shared.transfers.chunked_import(),
                run: shared.run.clone(),
                code: shared.code.clone(),
                template: shared.template.clone(),
                lifecycle: shared.lifecycle.clone(),
                egress: shared.egress.clone(),
                gateways: shared.gateways.clone(),
                volumes: shared.volumes.clone(),
                s3_mounts: shared.s3_mounts.clone(),
                events: shared.events.clone(),
                telemetry: shared.telemetry.clone(),
                metrics: metrics.as_ref().map(|(_, m)| m.clone()),
            }),
        )
        .add_service(
            pb::process_service_server::ProcessServiceServer::new(ProcessServiceImpl {
                processes: shared.processes.clone(),
                ptys: shared.ptys.clone(),
            })
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES),
        )
        .add_service(
            pb::filesystem_service_server::FilesystemServiceServer::new(FilesystemServiceImpl {
                env: shared.env.clone(),
                phase: shared.phase.clone(),
                disk_reserve: shared.disk_reserve.clone(),
                persist: shared.persist.clone(),
                transfer: crate::transfer::Context {
                    transfers: shared.transfers.clone(),
                    env: shared.env.clone(),
                    disk_reserve: shared.disk_reserve.clone(),
                },
                transfers: config.transfers,
            })
            // A Write may come gzip-compressed (`files().write` with
            // `gzip`); tonic bounds the inflated message by the decoding
            // limit below, so a small bomb cannot grow past it.
            .accept_compressed(tonic::codec::CompressionEncoding::Gzip)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES),
        )
        .add_service(pb::lifecycle_service_server::LifecycleServiceServer::new(
            LifecycleServiceImpl {
                lifecycle: shared.lifecycle.clone(),
                phase: shared.phase.clone(),
            },
        ))
        .add_service(
            pb::code_service_server::CodeServiceServer::new(code_service(&shared))
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        )
        .add_service(pb::pty_service_server::PtyServiceServer::new(
            crate::pty::PtyServiceImpl {
                ptys: shared.ptys.clone(),
            },
        ))
        .add_service(pb::configure_service_server::ConfigureServiceServer::new(
            crate::configure::ConfigureServiceImpl::new(
                shared.gateways.clone(),
                shared.s3_mounts.clone(),
                shared.volumes.clone(),
                shared.events.clone(),
            )
            .counting(shared.configure_calls.clone())
            .with_telemetry(shared.telemetry.clone()),
        ))
        .add_service(pb::network_service_server::NetworkServiceServer::new(
            crate::egress::NetworkServiceImpl {
                egress: shared.egress.clone(),
            },
        ))
        .prepare();
        let svc = tower::ServiceBuilder::new()
            .layer(crate::trace_context::TraceLayer)
            .layer(GateLayer {
                run: shared.run.clone(),
                phase: shared.phase.clone(),
            })
            .map_request(crate::server::cancel_is_not_the_end)
            .service(routes);

        let mut tasks = Vec::new();
        let (in_process, in_process_rx) =
            tokio::sync::mpsc::channel(crate::server::IN_PROCESS_BACKLOG);
        tasks.push(tokio::spawn(crate::server::serve_grpc(
            grpc,
            in_process_rx,
            svc,
            shared.serve.subscribe(),
        )));
        let mut stop = shared.serve.subscribe();
        let router = crate::hooks::router(shared.clone(), config.hooks_token.clone());
        tasks.push(tokio::spawn(async move {
            let _ = axum::serve(hooks, router)
                .with_graceful_shutdown(async move {
                    let _ = stop.wait_for(|s| *s != ServeState::Serving).await;
                })
                .await;
        }));
        let deadline_timer = Some(tokio::spawn(deadline_timer(shared.clone())));
        if let Some((every, metrics)) = metrics {
            tasks.push(tokio::spawn(metrics.run_sampler(shared.run.clone(), every)));
        }

        Ok(Agent {
            shared,
            grpc_addr,
            in_process,
            hooks_addr,
            tasks,
            deadline_timer,
            root_to_remove: config.remove_root_on_drop.then_some(config.root),
        })
    }

    /// The address of the gRPC server (`http://` h2c).
    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc_addr
    }

    /// A connection to the gRPC server made inside this process (h2c over
    /// an in-memory pipe): what a caller in the same process, such as the
    /// emulator's proxy, uses instead of a loopback socket (no system
    /// call, no wake through the socket's readiness per message). It is
    /// served like a connection to [`Agent::grpc_addr`]: the same
    /// services, limits and stop.
    ///
    /// # Errors
    /// `ConnectionRefused` once the server stopped accepting, or while 16
    /// connections made so still wait for it to take them.
    pub fn connect_in_process(&self) -> std::io::Result<tokio::io::DuplexStream> {
        let (ours, theirs) = tokio::io::duplex(crate::server::IN_PROCESS_BUFFER);
        self.in_process
            .try_send(theirs)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::ConnectionRefused))?;
        Ok(ours)
    }

    /// The address of the hooks server (HTTP/1.1).
    pub fn hooks_addr(&self) -> SocketAddr {
        self.hooks_addr
    }

    /// Whether the kernel [`AgentConfig::prestart_kernel`] started is up
    /// and answering (false without one, and once `/run` took it).
    pub fn prestarted_kernel_live(&self) -> bool {
        self.shared.code.prestarted_live()
    }

    /// The sandbox's environment (root, spawning, path mapping).
    pub fn env(&self) -> &SandboxEnv {
        &self.shared.env
    }

    /// Stops the agent like `/terminate`: gate, kill every process, stop
    /// serving, then waits for the servers to finish.
    pub async fn shutdown(mut self) {
        self.shared.on_terminate();
        if let Some(timer) = self.deadline_timer.take() {
            timer.abort();
        }
        for task in self.tasks.drain(..) {
            let abort = task.abort_handle();
            if tokio::time::timeout(std::time::Duration::from_secs(3), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }

    /// Abrupt stop for fault injection: drops every connection, kills every
    /// process, runs no hook logic and does not resolve [`Agent::terminated`].
    pub fn kill(&self) {
        self.shared.abort();
        for task in self.tasks.iter().chain(&self.deadline_timer) {
            task.abort();
        }
    }

    /// How many Configure calls this agent answered, whatever their
    /// sections (a test checks that a `create` sends one).
    pub fn configure_calls(&self) -> u64 {
        self.shared.configure_calls.load(Ordering::Relaxed)
    }

    /// Stops the server of every S3 mount as if it had crashed, leaving the
    /// mounts attached (fault injection: `/resume` then remakes them).
    pub fn stop_s3_mount_helpers(&self) {
        self.shared.s3_mounts.crash_helpers();
    }

    /// Sets where Checkpoint and Restore find S3 and credentials: the
    /// emulator, once it knows whether the sandbox has an execution role
    /// (a MicroVM prepared ahead does not).
    pub fn set_persistence_access(&self, access: PersistenceAccess) {
        self.shared.persist.set_access(access);
    }

    /// Changes the free space a `Write` must leave (fault injection:
    /// a huge value makes the next write fail with `disk_reserve`).
    pub fn set_disk_reserve(&self, bytes: u64) {
        self.shared.disk_reserve.store(bytes, Ordering::Relaxed);
    }

    /// Fires the deadline gate now, as if the logical deadline had passed
    /// (kill mode when the payload had no lifecycle block).
    pub fn expire_deadline_now(&self) {
        self.shared.expire(true);
    }

    /// Resolves once the logical deadline has passed in kill mode (or
    /// [`Agent::expire_deadline_now`] forced it without a lifecycle block):
    /// where the real agent exits with status 124, which makes AWS end the
    /// MicroVM. The local agent keeps answering `sandbox_timeout`; its owner
    /// decides what to do.
    ///
    /// The future does not borrow the agent; it resolves to `false` if the
    /// agent is dropped first.
    pub fn deadline_exit(&self) -> impl std::future::Future<Output = bool> + Send + use<> {
        let mut rx = self.shared.deadline_exit.subscribe();
        async move { rx.wait_for(|exited| *exited).await.is_ok() }
    }

    /// Resolves once `/terminate` (or [`Agent::shutdown`]) has finished.
    pub async fn terminated(&self) {
        let mut rx = self.shared.terminated.subscribe();
        let _ = rx.wait_for(|t| *t).await;
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.shared.abort();
        for task in self.tasks.iter().chain(&self.deadline_timer) {
            task.abort();
        }
        if let Some(root) = self.root_to_remove.take() {
            // The killed processes die within milliseconds; one still
            // writing would make the removal fail half-way. Bounded wait.
            for _ in 0..100 {
                if !self.shared.env.has_processes() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            // Best effort; the exit cleanup retries when the process ends.
            // Once gone, it is withdrawn from that cleanup, whose list then
            // holds the live roots only.
            if std::fs::remove_dir_all(&root).is_ok() || !root.exists() {
                crate::isolation::exit_cleanup::forget_dir_at_exit(&root);
            }
        }
    }
}

fn code_service(shared: &Arc<Shared>) -> CodeServiceImpl {
    shared.code.clone()
}

/// Sleeps until the logical deadline (re-armed whenever SetTimeout moves it)
/// and then fires the deadline gate.
async fn deadline_timer(shared: Arc<Shared>) {
    let mut rx = shared.lifecycle.deadline_watch();
    loop {
        let deadline = *rx.borrow_and_update();
        match deadline {
            Some(at) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at) => shared.expire(false),
                    changed = rx.changed() => if changed.is_err() { return },
                }
            }
            None => {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        }
    }
}
