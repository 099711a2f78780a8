//! `rayito-emulator`: the local emulator of the Lambda MicroVMs control
//! plane and its proxy (docs/local.md, "The MicroVMs emulator"), with the S3,
//! STS, CloudWatch Logs and EFS calls rayito makes, local image builds, fault
//! injection and a TLS mode. The SDK's `local` feature and the CLI's local
//! daemon embed it; the `rayito-emulator` binary serves it on its own.
//!
//! [`Emulator::start`] serves, on one loopback port, the restJson1 API that
//! `aws-sdk-lambdamicrovms` speaks (RunMicrovm, GetMicrovm, ListMicrovms,
//! TerminateMicrovm, SuspendMicrovm, ResumeMicrovm, CreateMicrovmAuthToken,
//! and the MicroVM image API: images, versions, their builds), the read
//! side of CloudWatch Logs (DescribeLogStreams, GetLogEvents), STS
//! GetCallerIdentity, the EFS calls rayito makes ([`LocalEfs`]: file
//! systems and access points that are directories of the emulator's root,
//! which its sandboxes mount as volumes), the lifecycle events pipeline and
//! its API under `/_rayito/events` (docs/local.md, "Lifecycle events pipeline") and
//! an admin endpoint for fault injection; on a
//! second loopback port, an S3 endpoint ([`Emulator::s3_endpoint_url`])
//! over the emulator's object store, where code artifacts travel. Every
//! call must be
//! SigV4-signed with one of its access keys ([`Emulator::access_key`]: one
//! generated at start unless [`EmulatorConfig::access_keys`] says
//! otherwise), as on AWS, so that sandbox code on the same host cannot
//! drive it. Each MicroVM is a local
//! [`Agent`](rayito_agent::agent::Agent) driven through its HTTP hooks, behind its
//! own emulated proxy listener whose address (`127.0.0.1:<port>`) is the
//! MicroVM's `endpoint` (in TLS mode: a bare `127.0.0.N`, TLS on port 443).
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use rayito_emulator::{Emulator, EmulatorConfig};
//! let emulator = Emulator::start(EmulatorConfig::default()).await?;
//! println!("AWS_ENDPOINT_URL={}", emulator.endpoint_url());
//! println!("AWS_ENDPOINT_URL_S3={}", emulator.s3_endpoint_url());
//! let key = emulator.access_key(); // sign with key.id and key.secret
//! println!("RAYITO_TEMPLATE={}", emulator.image_arn("rayito-base"));
//! emulator.shutdown().await;
//! # Ok(()) }
//! ```

mod access_key;
mod admin;
mod agent_link;
mod api_error;
mod build;
#[cfg(feature = "cli")]
pub mod cli;
mod control;
mod efs;
mod events;
mod faults;
mod guard;
mod hooks;
mod ids;
mod images;
mod latency;
mod lifecycle;
mod logs;
mod logs_api;
mod model;
mod objects;
mod proxy;
mod registry;
mod root_lock;
mod s3;
mod sandbox_logs;
mod servicequotas;
mod sigv4;
mod sts;
mod test_upstream;
pub mod tls;
mod validate;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

pub use access_key::AccessKey;
pub use efs::LocalEfs;
pub use faults::ProxyStall;
pub use faults::{Faults, Operation, PendingFaults, PendingThrottle};
pub use latency::LatencyProfile;
pub use model::MicrovmState;
pub use test_upstream::{SeenRequest, TestUpstream};

use registry::{Settings, Shared};

use rayito_agent::sandbox::SandboxLimits;

/// How the emulator is set up. Build it with `..Default::default()`.
#[derive(Clone, Debug)]
pub struct EmulatorConfig {
    /// Control-plane address; must be a loopback address (default `127.0.0.1:0`).
    pub addr: SocketAddr,
    /// Directory under which each MicroVM gets its root directory
    /// (default: a fresh `rayito-emulator-<uuid>` under the system temp dir).
    pub root: PathBuf,
    /// Region in image ARNs (default `us-east-1`).
    pub region: String,
    /// Account id in image ARNs (default `000000000000`).
    pub account_id: String,
    /// Image names seeded at start (default `["rayito-base"]`; the
    /// official `rayito-base`, `rayito-base-caps` and
    /// `rayito-base-caps-efs` are seeded anyway, the caps ones with
    /// `additionalOsCapabilities: ["ALL"]`): each has version 1 SUCCESSFUL and
    /// ACTIVE, which runs on the host as it is. Other images exist once
    /// created through the image API (CreateMicrovmImage); RunMicrovm with
    /// an ARN of an unknown name answers ResourceNotFoundException.
    pub images: Vec<String>,
    /// For tests: every minted proxy token lives this long instead of its
    /// `expirationInMinutes` (default `None`).
    pub auth_token_ttl: Option<Duration>,
    /// How long a lifecycle hook may take before it counts as failed
    /// (default 30 s).
    pub hook_timeout: Duration,
    /// TLS mode (default off): every MicroVM's `endpoint` is a bare
    /// loopback address (`127.0.0.N`) served with TLS (ALPN h2) on port 443,
    /// with certificates from a CA generated at start (see
    /// [`Emulator::ca_pem`]). Binding port 443 needs root or
    /// CAP_NET_BIND_SERVICE.
    pub tls: bool,
    /// TLS mode: whether the CA's name constraints limit IP addresses to
    /// loopback (default `true`) besides DNS names to `.invalid`. Turn it
    /// off only for a client whose TLS stack refuses a CA that constrains
    /// iPAddress names: BoringSSL, so grpc-core and the reference Python
    /// SDK ("unsupported name constraint type"). Then a leaked CA key could
    /// sign for any IP address (DNS names stay limited).
    pub tls_ip_name_constraints: bool,
    /// How long after the agent's deadline passed in kill mode (where the
    /// real agent exits with status 124) the MicroVM is terminated with
    /// `Container Stopped with Exit Code: 124` (default 15 s, as measured on
    /// AWS; meanwhile calls get `sandbox_timeout`).
    pub deadline_exit_delay: Duration,
    /// For tests: every idle policy's `maxIdleDurationSeconds` (at least 60
    /// by the model) counts as this long instead (default `None`).
    pub max_idle_override: Option<Duration>,
    /// For tests: the S3 endpoint (path style over plain HTTP) that the
    /// sandboxes' S3-staged transfers must name instead of the emulator's
    /// own (default `None`: the emulator's), so a client that signs its
    /// transfer URLs for another S3 (a moto server) has them accepted. The
    /// agents call no other endpoint for transfers; checkpoints still go to
    /// the emulator's S3.
    pub transfer_s3_endpoint: Option<SocketAddr>,
    /// Keep one MicroVM prepared ahead of the next RunMicrovm, its agent
    /// running and its default Python kernel started (default `false`):
    /// a new sandbox's first cell then does not wait for an interpreter to
    /// start. Costs one idle agent and interpreter while the emulator runs;
    /// a run payload that sets envs or a CPU limit gets a fresh kernel
    /// anyway (see `AgentConfig::prestart_kernel`).
    pub warm_spare: bool,
    /// Limits on what each MicroVM's processes use together (default
    /// [`SandboxLimits::default`]: 512 processes and threads, 2,048 MiB; see
    /// `AgentConfig::limits`).
    pub sandbox_limits: SandboxLimits,
    /// The access keys control-plane calls may be signed with (default:
    /// one fresh random key, [`AccessKey::generate`]). Give fixed ones for
    /// clients configured ahead; a call signed with any other key is
    /// refused (UnrecognizedClientException).
    pub access_keys: Vec<AccessKey>,
    /// Whether every MicroVM's agent serves the persistence and transfer
    /// RPCs (default `true`); `false` starts agents that answer them
    /// UNIMPLEMENTED, as agents built before them (see
    /// `AgentConfig::transfers`).
    pub agent_transfers: bool,
    /// Whether every MicroVM's agent takes chunked imports (default
    /// `true`); `false` starts agents that ignore the chunks, as the
    /// reference's (see `AgentConfig::chunked_import`).
    pub agent_chunked_import: bool,
    /// Every MicroVM agent's metrics history interval (default `Some(5 s)`;
    /// see `AgentConfig::metrics_interval`); `None` starts agents that answer
    /// Metrics and MetricsHistory UNIMPLEMENTED, as agents built before them.
    pub agent_metrics: Option<Duration>,
    /// For tests: how long every MicroVM agent's command output waits for
    /// its slowest reader before dropping what that reader has not read
    /// (default 30 s; see `AgentConfig::slow_subscriber_grace`).
    pub agent_slow_subscriber_grace: Duration,
    /// For tests: how long every MicroVM's agent keeps an ended `run_code`
    /// execution for Reattach (default 30 s; see
    /// `AgentConfig::retained_after_end`).
    pub agent_retained_after_end: Duration,
    /// Whether every MicroVM's agent enforces an egress policy when its
    /// run payload asks (default `true`; it also needs root, see
    /// `AgentConfig::egress`); `false` starts agents that report no
    /// enforcement, as on a host that cannot.
    pub agent_egress: bool,
    /// Whether every MicroVM's agent serves secret gateways (default
    /// `true`); `false` starts agents that report
    /// `features.secret_gateway = false` and answer the section
    /// UNSUPPORTED, as agents built before it: how a test reaches the
    /// SDK's `Unimplemented` for gateways (see `GatewayOptions::enabled`).
    pub agent_secret_gateway: bool,
    /// Whether every MicroVM's agent serves EFS volumes (default `true`;
    /// it also needs root, see `AgentConfig::efs_volumes`); `false` starts
    /// agents that report `features.efs_volumes = false` and answer the
    /// section UNSUPPORTED, as agents without the feature: how a test
    /// reaches the SDK's `Unimplemented` for volumes.
    pub agent_efs_volumes: bool,
    /// Whether every MicroVM's agent serves S3 mounts (default `true`;
    /// they also need root and `/dev/fuse`); `false` starts agents that
    /// report `features.s3_mounts = false` and answer the section
    /// UNSUPPORTED, as agents built before it (see `AgentConfig::s3_mounts`).
    pub agent_s3_mounts: bool,
    /// The secret gateways' upstream settings of every MicroVM's agent
    /// (default: none): extra trusted root CAs and host names dialled at a
    /// fixed address (a loopback one included), so that a test's own HTTPS
    /// server can stand in for an API. A shared handle: what is added after
    /// the emulator started applies to each agent's next Configure
    /// ([`Emulator::gateway_upstreams`]). Local only: a MicroVM's agent has
    /// no such setting.
    pub gateway_upstreams: rayito_agent::gateway::LocalUpstreams,
    /// How long a terminated MicroVM stays visible to GetMicrovm (which
    /// answers TERMINATED) and ListMicrovms before the emulator forgets it
    /// and its clientToken (default 20 minutes, as AWS keeps one listed:
    /// [`DEFAULT_TERMINATED_RETENTION`]). Then GetMicrovm answers
    /// ResourceNotFoundException, as for an id never seen.
    pub terminated_retention: Duration,
    /// At most this many terminated MicroVMs are kept at once, the oldest
    /// forgotten first even within [`EmulatorConfig::terminated_retention`]
    /// (default 1,000, [`DEFAULT_TERMINATED_KEPT`]): what keeps the memory
    /// of a process that creates sandboxes faster than the retention lets
    /// them go bounded (about 1 KiB each).
    pub terminated_kept: usize,
    /// Whether the images (their registry and built layers, under
    /// `<root>/images`) outlive the emulator (default `false`): a later
    /// emulator on the same root finds them, as the objects of a root of
    /// the caller's are found. For a daemon that restarts (the CLI's).
    pub keep_images: bool,
    /// How long create, suspend and resume take on top of the emulator's
    /// own work (default [`LatencyProfile::OFF`]; [`LatencyProfile::AWS`]
    /// for AWS-like figures, docs/local.md "Latency profile").
    pub latency: LatencyProfile,
    /// For tests: the lifecycle events reconciler runs this often instead
    /// of every `reconcilerIntervalMinutes` of the stack's deploy
    /// (default `None`; docs/local.md, "Lifecycle events pipeline").
    pub events_reconcile_interval: Option<Duration>,
}

/// How long a terminated MicroVM stays visible by default: 20 minutes, as
/// measured on AWS (ListMicrovms keeps terminated MicroVMs about that long).
pub const DEFAULT_TERMINATED_RETENTION: Duration = Duration::from_secs(20 * 60);

/// How many terminated MicroVMs are kept at most by default.
pub const DEFAULT_TERMINATED_KEPT: usize = 1_000;

impl Default for EmulatorConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            root: std::env::temp_dir().join(format!("rayito-emulator-{}", ids::uuid_v4())),
            region: "us-east-1".to_string(),
            account_id: "000000000000".to_string(),
            images: vec!["rayito-base".to_string()],
            auth_token_ttl: None,
            hook_timeout: Duration::from_secs(30),
            tls: false,
            tls_ip_name_constraints: true,
            deadline_exit_delay: Duration::from_secs(15),
            max_idle_override: None,
            transfer_s3_endpoint: None,
            warm_spare: false,
            sandbox_limits: SandboxLimits::default(),
            access_keys: vec![AccessKey::generate()],
            agent_transfers: true,
            agent_chunked_import: true,
            agent_metrics: Some(rayito_agent::agent::DEFAULT_METRICS_INTERVAL),
            agent_slow_subscriber_grace: rayito_agent::agent::DEFAULT_SLOW_SUBSCRIBER_GRACE,
            agent_retained_after_end: rayito_agent::agent::DEFAULT_RETAINED_AFTER_END,
            agent_egress: true,
            agent_secret_gateway: true,
            agent_efs_volumes: true,
            agent_s3_mounts: true,
            gateway_upstreams: rayito_agent::gateway::LocalUpstreams::default(),
            terminated_retention: DEFAULT_TERMINATED_RETENTION,
            terminated_kept: DEFAULT_TERMINATED_KEPT,
            keep_images: false,
            latency: LatencyProfile::OFF,
            events_reconcile_interval: None,
        }
    }
}

/// The registry's file under `<root>/images` when images are kept.
const KEPT_IMAGES: &str = "registry.json";

/// A running emulator. Dropping it stops everything at once (servers,
/// proxies, agents and their processes) without blocking;
/// [`Emulator::shutdown`] terminates the MicroVMs through their hooks first.
pub struct Emulator {
    shared: Arc<Shared>,
    faults: Faults,
    addr: SocketAddr,
    /// Set by [`Emulator::start_detached`]: the emulator's own runtime.
    runtime: Option<tokio::runtime::Runtime>,
    /// Whether `start` created the root directory: its object store then
    /// goes with the emulator.
    owns_root: bool,
    /// [`EmulatorConfig::keep_images`].
    keep_images: bool,
    /// The root's `.owner.lock`, held while the emulator lives (created
    /// roots only).
    root_lock: Option<std::fs::File>,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Emulator {
    /// Creates the root directory, binds the control plane and starts serving.
    ///
    /// # Errors
    /// `InvalidInput` when `config.addr` is not a loopback address or
    /// `config.access_keys` is empty; `PermissionDenied` when sandbox uids
    /// could not traverse a directory above the root (the error names it);
    /// any I/O error from creating the root directory, binding the port or
    /// writing the seeded images' code artifact.
    pub async fn start(config: EmulatorConfig) -> std::io::Result<Emulator> {
        if !config.addr.ip().is_loopback() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the emulator binds loopback addresses only",
            ));
        }
        if config.access_keys.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the emulator needs at least one access key; leave access_keys at its default to get a generated one",
            ));
        }
        // The roots of emulators whose process ended without removing
        // them (SIGKILL, a watcher that was killed too): gone now.
        let temp = std::env::temp_dir();
        tokio::task::spawn_blocking(move || root_lock::prune_stale_roots(&temp))
            .await
            .map_err(std::io::Error::other)?;
        let keep_images = config.keep_images;
        let created = !tokio::fs::try_exists(&config.root).await.unwrap_or(false);
        tokio::fs::create_dir_all(&config.root).await?;
        let mut root_lock = None;
        if created {
            // Its own root: traversable, not listable, by other users.
            use std::os::unix::fs::PermissionsExt as _;
            tokio::fs::set_permissions(&config.root, std::fs::Permissions::from_mode(0o711))
                .await?;
            // Held for the emulator's life: the next start's prune tells a
            // live root from a dead one by it.
            root_lock = Some(root_lock::take(&config.root)?);
            // Removed when the process ends, however it ends (a static
            // emulator is never dropped; `std::process::exit`, SIGKILL).
            rayito_agent::sandbox::SandboxEnv::remove_at_exit(&config.root);
        }
        // Sandbox file calls run as the sandbox's uid, which must reach each
        // MicroVM's root below this one: say so now rather than fail every
        // write later (`mktemp -d` makes 0700: that is opened up to 0711).
        rayito_agent::for_emulator::open_for_sandboxes(&config.root)?;
        let tls = if config.tls {
            // Fail now, with a clear message, if port 443 is out of reach.
            drop(tls::bind().await?);
            Some(tls::Tls::new(&config.root, config.tls_ip_name_constraints)?)
        } else {
            None
        };
        let listener = TcpListener::bind(config.addr).await?;
        let addr = listener.local_addr()?;
        let s3 = s3::S3Endpoint::bind(
            addr.ip(),
            &objects::ObjectStore::under(&config.root),
            &config.access_keys,
            &config.account_id,
        )
        .await?;
        let s3_addr = s3.local_addr()?;
        let efs = efs::LocalEfs::open(&config.root, &config.region, &config.account_id)?;
        let shared = Arc::new(Shared::new(
            Settings {
                region: config.region,
                account_id: config.account_id,
                images: config.images,
                root: config.root,
                auth_token_ttl: config.auth_token_ttl,
                hook_timeout: config.hook_timeout,
                deadline_exit_delay: config.deadline_exit_delay,
                max_idle_override: config.max_idle_override,
                transfer_s3_addr: config.transfer_s3_endpoint.unwrap_or(s3_addr),
                warm_spare: config.warm_spare,
                latency: config.latency,
                sandbox_limits: config.sandbox_limits,
                control_addr: addr,
                access_keys: config.access_keys,
                s3_addr,
                agent_transfers: config.agent_transfers,
                agent_chunked_import: config.agent_chunked_import,
                agent_metrics: config.agent_metrics,
                agent_slow_subscriber_grace: config.agent_slow_subscriber_grace,
                agent_retained_after_end: config.agent_retained_after_end,
                agent_egress: config.agent_egress,
                agent_secret_gateway: config.agent_secret_gateway,
                agent_efs_volumes: config.agent_efs_volumes,
                agent_s3_mounts: config.agent_s3_mounts,
                gateway_upstreams: config.gateway_upstreams,
                retention: registry::Retention {
                    window: config.terminated_retention,
                    max: config.terminated_kept,
                },
                events_reconcile_interval: config.events_reconcile_interval,
            },
            tls,
            efs,
            tokio::runtime::Handle::current(),
        ));
        if keep_images {
            let dir = shared.settings.root.join("images");
            tokio::fs::create_dir_all(&dir).await?;
            shared.images.keep_at(dir.join(KEPT_IMAGES))?;
        }
        // The artifact bucket, and the seeded images' artifacts in it.
        images::seed(&shared).await?;
        let router = control::router(shared.clone());
        shared.spawn(serve_control(listener, router));
        shared.spawn(s3.serve());
        shared.spawn(events::run(shared.clone()));
        if shared.settings.warm_spare {
            lifecycle::refill_spare(&shared, None);
        }
        Ok(Emulator {
            faults: Faults {
                shared: shared.clone(),
            },
            shared,
            addr,
            runtime: None,
            owns_root: created,
            root_lock,
            keep_images,
        })
    }

    /// Like [`Emulator::start`], but on a runtime of its own (two worker
    /// threads named `rayito-emulator`) instead of the caller's: the emulator
    /// then outlives the runtime that started it. Use it for an emulator
    /// shared by several runtimes, e.g. a process-wide one used by many
    /// `#[tokio::test]`s. Dropping the emulator shuts that runtime down in
    /// the background.
    ///
    /// # Errors
    /// Those of [`Emulator::start`], and a failure to build the runtime.
    pub async fn start_detached(config: EmulatorConfig) -> std::io::Result<Emulator> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("rayito-emulator")
            .enable_all()
            .build()?;
        let mut emulator = runtime
            .spawn(Emulator::start(config))
            .await
            .map_err(std::io::Error::other)??;
        emulator.runtime = Some(runtime);
        Ok(emulator)
    }

    /// The control-plane URL, e.g. `http://127.0.0.1:4566`: the
    /// `endpoint_url` of an AWS SDK client.
    pub fn endpoint_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The control-plane address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The S3 endpoint's URL, e.g. `http://127.0.0.1:4567`: the
    /// `endpoint_url` of an S3 client, with path-style addressing
    /// (`force_path_style`) and the emulator's access key. Objects live
    /// under `<root>/s3/<bucket>/<key>`.
    pub fn s3_endpoint_url(&self) -> String {
        format!("http://{}", self.shared.settings.s3_addr)
    }

    /// The bucket code artifacts are uploaded to,
    /// `rayito-artifacts-<account>-<region>`, created at start.
    pub fn artifact_bucket(&self) -> String {
        self.shared.settings.artifact_bucket()
    }

    /// For tests: writes an object as the emulator itself does (straight
    /// into its object store, not through S3).
    ///
    /// # Errors
    /// No such bucket, a key the store cannot hold, or the write fails.
    #[doc(hidden)]
    pub async fn put_object_directly(
        &self,
        bucket: &str,
        key: &str,
        body: Vec<u8>,
    ) -> std::io::Result<()> {
        self.shared.objects.put(bucket, key, body.into()).await
    }

    /// For tests: reads an object as the emulator itself does; `None`
    /// when it does not exist.
    ///
    /// # Errors
    /// Reading fails for another reason than absence.
    #[doc(hidden)]
    pub async fn get_object_directly(
        &self,
        bucket: &str,
        key: &str,
    ) -> std::io::Result<Option<Vec<u8>>> {
        let bytes = self.shared.objects.get(bucket, key).await?;
        Ok(bytes.map(|b| b.to_vec()))
    }

    /// For tests: appends lines to a CloudWatch Logs stream as a build
    /// does (each stamped with the current time), creating the group and
    /// the stream as needed.
    #[doc(hidden)]
    pub fn append_log_lines(&self, group: &str, stream: &str, lines: Vec<String>) {
        self.shared.logs.append(group, stream, lines);
    }

    /// The access key control-plane calls are signed with (the first of
    /// [`EmulatorConfig::access_keys`]; a generated one by default): hand
    /// it to the client, e.g. as static credentials.
    pub fn access_key(&self) -> &AccessKey {
        // `start` refuses an empty list.
        &self.shared.settings.access_keys[0]
    }

    /// `arn:aws:lambda:<region>:<account>:microvm-image:<name>`.
    pub fn image_arn(&self, name: &str) -> String {
        self.shared.settings.image_arn(name)
    }

    /// The account id in ARNs ([`EmulatorConfig::account_id`]).
    pub fn account_id(&self) -> &str {
        &self.shared.settings.account_id
    }

    /// The lines of every build log stream of `image` (log group
    /// `/rayito/<image>`), by stream name, oldest line first: lets a test
    /// read build logs without a CloudWatch Logs client.
    #[doc(hidden)]
    pub fn build_log_lines(&self, image: &str) -> Vec<(String, Vec<String>)> {
        self.shared
            .logs
            .streams(&format!("/rayito/{image}"))
            .unwrap_or_default()
            .into_iter()
            .filter(|(name, _)| name.contains("]build-"))
            .map(|(name, stream)| (name, stream.events.into_iter().map(|e| e.message).collect()))
            .collect()
    }

    /// TLS mode: the CA certificate (PEM) that signs every MicroVM's
    /// certificate; `None` without TLS mode.
    pub fn ca_pem(&self) -> Option<&str> {
        self.shared.tls.as_ref().map(|t| t.ca_pem())
    }

    /// TLS mode: the file the CA certificate was written to
    /// (`<root>/ca.pem`); `None` without TLS mode.
    pub fn ca_path(&self) -> Option<&std::path::Path> {
        self.shared.tls.as_ref().map(|t| t.ca_path())
    }

    /// Fault injection.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// The secret gateways' upstream settings every agent of this emulator
    /// reads at each Configure (see [`EmulatorConfig::gateway_upstreams`]):
    /// add a root CA or a host override while sandboxes run.
    pub fn gateway_upstreams(&self) -> &rayito_agent::gateway::LocalUpstreams {
        &self.shared.settings.gateway_upstreams
    }

    /// The emulator's EFS (docs/local.md, "EFS"): the calls it served,
    /// throttles to inject, where its file systems' directories are, and
    /// the volume lookups its agents make.
    pub fn efs(&self) -> &LocalEfs {
        &self.shared.efs
    }

    /// How many calls of `op` reached the emulator (rejected ones included).
    pub fn calls(&self, op: Operation) -> u64 {
        self.shared.calls(op)
    }

    /// The `clientToken` of the last 1,024 RunMicrovm calls that passed the
    /// SigV4 gate, in arrival order (`None` when the call had none): lets a
    /// test check that retries reused one token.
    pub fn run_client_tokens(&self) -> Vec<Option<String>> {
        self.shared.seen_client_tokens()
    }

    /// The last 1,024 proxy tokens this emulator minted that have not
    /// expired yet (the emulator forgets expired ones), oldest first: lets a canary
    /// test look for them in logs and errors.
    pub fn minted_proxy_tokens(&self) -> Vec<String> {
        self.shared.minted_tokens()
    }

    /// How many proxy grants the emulator holds (a test checks that expired
    /// ones are dropped).
    #[doc(hidden)]
    pub fn proxy_grant_count(&self) -> usize {
        self.shared.grant_count()
    }

    /// For tests: hands `line` to the events pipeline as MicroVM
    /// `microvm_id`'s agent would (its log stream, then the forwarder):
    /// lets a test feed lines it signed itself, forged ones included.
    #[doc(hidden)]
    pub fn event_line(&self, microvm_id: &str, line: &str) {
        self.shared.events.offer(microvm_id, line);
    }

    /// The state of a MicroVM, if it exists.
    pub fn state(&self, microvm_id: &str) -> Option<MicrovmState> {
        self.shared.find(microvm_id).map(|vm| vm.state())
    }

    /// The gRPC address of a MicroVM's agent while it runs, bypassing the
    /// proxy (for benchmarks comparing a raw client with the proxied path).
    pub fn agent_grpc_addr(&self, microvm_id: &str) -> Option<SocketAddr> {
        let vm = self.shared.find(microvm_id)?;
        vm.with_agent(|_| vm.grpc_addr)
    }

    /// How many Configure calls a MicroVM's agent answered while it runs
    /// (a test checks that a `create` sends its sections in one).
    pub fn agent_configure_calls(&self, microvm_id: &str) -> Option<u64> {
        self.shared.with_agent(microvm_id, |a| a.configure_calls())
    }

    /// Terminates every MicroVM through its `/terminate` hook (waiting at
    /// most a few seconds), then stops everything.
    pub async fn shutdown(self) {
        let vms = self.shared.all();
        for vm in &vms {
            lifecycle::terminate(&self.shared, vm);
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while tokio::time::Instant::now() < deadline
            && vms.iter().any(|vm| vm.state() != MicrovmState::Terminated)
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(self);
    }

    /// Whether a warm spare is ready for the next RunMicrovm, its kernel
    /// answering (see [`EmulatorConfig::warm_spare`]): lets a test or a
    /// benchmark wait for it instead of guessing.
    pub fn warm_spare_ready(&self) -> bool {
        self.shared.spare_ready()
    }

    /// The id of every MicroVM this emulator created, terminated ones
    /// included while retained ([`EmulatorConfig::terminated_retention`]),
    /// oldest first: lets a test find a MicroVM whose id the caller never
    /// saw (a create that failed after RunMicrovm), and count what the
    /// emulator keeps.
    pub fn microvm_ids(&self) -> Vec<String> {
        self.shared.all().iter().map(|vm| vm.id.clone()).collect()
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let agents = self.shared.stop_now();
        if let Some(runtime) = self.runtime.take() {
            // Never blocks, and is allowed inside an async context.
            runtime.shutdown_background();
        }
        // Drop the killed agents and remove what the MicroVMs left behind
        // off the caller's thread (both touch the disk); the root itself
        // only if nothing else is in it.
        let root = self.shared.settings.root.clone();
        let mut dirs: Vec<PathBuf> = self.shared.all().iter().map(|vm| vm.root.clone()).collect();
        // The image layers go with the registry that knew them (in memory),
        // unless the registry is kept.
        if !self.keep_images {
            dirs.push(root.join("images"));
        }
        let ca_file = self.shared.tls.as_ref().map(|t| t.ca_path().to_path_buf());
        // A root of the caller's keeps its objects (a later emulator on it
        // finds them, as a bucket would); a root of its own goes whole.
        let objects = self
            .owns_root
            .then(|| self.shared.objects.root().to_path_buf());
        // The EFS volumes are data too: kept with a root of the caller's.
        let volumes = self.owns_root.then(|| self.shared.efs.dir().to_path_buf());
        // Held until the root is removed, so no pruner races the cleanup.
        let root_lock = self.root_lock.take();
        let _ = std::thread::Builder::new()
            .name("rayito-emulator-cleanup".into())
            .spawn(move || {
                drop(agents);
                for d in dirs.drain(..) {
                    let _ = std::fs::remove_dir_all(d);
                }
                if let Some(ca) = ca_file {
                    let _ = std::fs::remove_file(ca);
                }
                if let Some(objects) = objects {
                    let _ = std::fs::remove_dir_all(objects);
                }
                if let Some(volumes) = volumes {
                    let _ = std::fs::remove_dir_all(volumes);
                }
                // The lock file, left when objects are: the root is then
                // empty but for it.
                if root_lock.is_some() {
                    let _ = std::fs::remove_file(root.join(root_lock::LOCK_NAME));
                }
                if std::fs::remove_dir(&root).is_ok() {
                    // Gone: the exit cleanup's list need not keep it.
                    rayito_agent::sandbox::SandboxEnv::forget_at_exit(&root);
                }
                drop(root_lock);
            });
    }
}

/// The control plane's accept loop; aborting it drops every connection.
async fn serve_control(listener: TcpListener, router: Router) {
    let mut conns = JoinSet::new();
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        while conns.try_join_next().is_some() {}
        let svc = TowerToHyperService::new(router.clone());
        conns.spawn(async move {
            let builder = auto::Builder::new(TokioExecutor::new());
            let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
        });
    }
}
