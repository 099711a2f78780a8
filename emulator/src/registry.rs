//! The emulator's shared state: its settings, the MicroVMs it created (in
//! creation order, indexed by id; terminated ones stay listed for a bounded
//! time, [`Retention`]), the proxy tokens it minted, the clientTokens it has
//! seen, and the background tasks it owns. Nothing here grows with every
//! MicroVM ever created: a process that creates and kills sandboxes for
//! days keeps the live ones and the recently terminated ones.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};

use super::faults::{FaultState, Operation};
use super::hooks::HookClient;
use super::ids;
use super::model::{IdlePolicy, MicrovmItem, MicrovmOut, MicrovmState};
use super::validate::PortSet;
use rayito_agent::agent::Agent;
use rayito_agent::hooks::HooksToken;

/// What the emulator was configured with, as the handlers need it.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) region: String,
    pub(crate) account_id: String,
    pub(crate) images: Vec<String>,
    pub(crate) root: PathBuf,
    pub(crate) auth_token_ttl: Option<Duration>,
    pub(crate) hook_timeout: Duration,
    pub(crate) deadline_exit_delay: Duration,
    pub(crate) max_idle_override: Option<Duration>,
    /// The S3 endpoint the transfers' URLs must name: the emulator's own
    /// unless `EmulatorConfig::transfer_s3_endpoint` names another.
    pub(crate) transfer_s3_addr: SocketAddr,
    /// Keep one MicroVM prepared ahead, its kernel started (see
    /// `EmulatorConfig::warm_spare`).
    pub(crate) warm_spare: bool,
    /// Added create, suspend and resume times (`EmulatorConfig::latency`).
    pub(crate) latency: super::LatencyProfile,
    /// Each MicroVM's limits (`EmulatorConfig::sandbox_limits`).
    pub(crate) sandbox_limits: rayito_agent::sandbox::SandboxLimits,
    /// The control plane's own address: the only `Host` it answers.
    pub(crate) control_addr: SocketAddr,
    /// The access keys control-plane calls must be signed with.
    pub(crate) access_keys: Vec<super::AccessKey>,
    /// The S3 endpoint's address.
    pub(crate) s3_addr: SocketAddr,
    /// Whether agents serve transfers (`EmulatorConfig::agent_transfers`).
    pub(crate) agent_transfers: bool,
    /// Whether agents take chunked imports (`EmulatorConfig::agent_chunked_import`).
    pub(crate) agent_chunked_import: bool,
    /// The agents' metrics sampling (`EmulatorConfig::agent_metrics`).
    pub(crate) agent_metrics: Option<std::time::Duration>,
    /// The agents' wait for a slow output reader
    /// (`EmulatorConfig::agent_slow_subscriber_grace`).
    pub(crate) agent_slow_subscriber_grace: std::time::Duration,
    /// How long the agents keep an ended execution
    /// (`EmulatorConfig::agent_retained_after_end`).
    pub(crate) agent_retained_after_end: std::time::Duration,
    /// Whether agents enforce egress (`EmulatorConfig::agent_egress`).
    pub(crate) agent_egress: bool,
    /// Whether agents serve secret gateways
    /// (`EmulatorConfig::agent_secret_gateway`).
    pub(crate) agent_secret_gateway: bool,
    /// Whether agents serve EFS volumes
    /// (`EmulatorConfig::agent_efs_volumes`).
    pub(crate) agent_efs_volumes: bool,
    /// Whether agents serve S3 mounts (`EmulatorConfig::agent_s3_mounts`).
    pub(crate) agent_s3_mounts: bool,
    /// The agents' gateway upstream settings, shared
    /// (`EmulatorConfig::gateway_upstreams`).
    pub(crate) gateway_upstreams: rayito_agent::gateway::LocalUpstreams,
    /// How long, and how many, terminated MicroVMs stay visible.
    pub(crate) retention: Retention,
    /// The events reconciler's interval instead of the deploy's
    /// (`EmulatorConfig::events_reconcile_interval`).
    pub(crate) events_reconcile_interval: Option<Duration>,
}

/// How long a terminated MicroVM stays visible to GetMicrovm and
/// ListMicrovms (AWS: about 20 minutes), and at most how many are kept at
/// once (the oldest terminated go first): the bound that keeps a process
/// creating thousands of sandboxes flat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Retention {
    pub(crate) window: Duration,
    pub(crate) max: usize,
}

impl Settings {
    /// `arn:aws:lambda:<region>:<account>:microvm-image:<name>`.
    pub(crate) fn image_arn(&self, name: &str) -> String {
        format!(
            "arn:aws:lambda:{}:{}:microvm-image:{}",
            self.region, self.account_id, name
        )
    }

    /// The artifact bucket, as the `rayito-m0-artifacts` stack names it:
    /// `rayito-artifacts-<account>-<region>`.
    pub(crate) fn artifact_bucket(&self) -> String {
        format!("rayito-artifacts-{}-{}", self.account_id, self.region)
    }
}

/// A proxy token: which MicroVM, which ports, until when.
#[derive(Clone, Debug)]
pub(crate) struct Grant {
    pub(crate) microvm_id: String,
    pub(crate) ports: PortSet,
    pub(crate) expires: Instant,
}

/// Everything the servers and background tasks share.
pub(crate) struct Shared {
    pub(crate) settings: Settings,
    pub(crate) faults: FaultState,
    pub(crate) hooks: HookClient,
    /// TLS mode's CA, when on.
    pub(crate) tls: Option<super::tls::Tls>,
    /// The MicroVMs, their clientTokens, and which terminated when.
    vms: Mutex<Vms>,
    /// One lock per clientToken in use by a RunMicrovm in flight, so that
    /// simultaneous calls with one token create one MicroVM.
    token_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    tokens: Mutex<HashMap<String, Grant>>,
    tasks: Mutex<Option<JoinSet<()>>>,
    /// The runtime every emulator task runs on, whoever triggers it (a
    /// fault injected from another runtime, a handler, a timer).
    runtime: tokio::runtime::Handle,
    calls: Mutex<HashMap<Operation, u64>>,
    /// The clientTokens of the last [`SEEN_KEPT`] RunMicrovm calls.
    seen_client_tokens: Mutex<VecDeque<Option<String>>>,
    /// The last [`SEEN_KEPT`] proxy tokens minted that have not expired,
    /// with their expiry, for canary tests (never logged); expired ones
    /// are dropped.
    minted: Mutex<VecDeque<(String, Instant)>>,
    /// The warm spares, one per image layer (`None`: the host's root, the
    /// base image), and whether one is being prepared; the base image's
    /// first, then at most [`MAX_LAYER_SPARES`] layers, the least recently
    /// used dropped first.
    spares: Mutex<Vec<(Option<PathBuf>, SpareSlot)>>,
    /// The files behind the S3 endpoint (`<root>/s3`).
    pub(crate) objects: super::objects::ObjectStore,
    /// The CloudWatch Logs groups (build logs).
    pub(crate) logs: super::logs::LogStore,
    /// The MicroVM images and their versions.
    pub(crate) images: super::images::ImageRegistry,
    /// The EFS file systems and access points, and their directories.
    pub(crate) efs: super::efs::LocalEfs,
    /// The lifecycle events pipeline (the events-webhooks stack's part).
    pub(crate) events: Arc<super::events::Events>,
}

/// How many of the last clientTokens seen, and of the last proxy tokens
/// minted, are kept for tests (the older ones are forgotten).
pub(crate) const SEEN_KEPT: usize = 1_024;

/// The MicroVMs: by creation sequence (ListMicrovms's order), by id, and
/// the terminated ones in the order they ended, with the clientTokens that
/// name them; a terminated one leaves with its tokens once past the
/// [`Retention`].
#[derive(Default)]
struct Vms {
    by_seq: BTreeMap<u64, Arc<Vm>>,
    by_id: HashMap<String, u64>,
    /// (when it terminated, its sequence number), oldest first.
    ended: VecDeque<(Instant, u64)>,
    /// By clientToken: a SHA-256 digest of the RunMicrovm body it came with
    /// (never the body: it carries the run payload, environment values
    /// included) and its MicroVM.
    client_tokens: HashMap<String, (BodyDigest, Arc<Vm>)>,
    /// The clientToken of a MicroVM, by its sequence number.
    token_of: HashMap<u64, String>,
    next_seq: u64,
}

impl Vms {
    fn find(&self, id: &str) -> Option<&Arc<Vm>> {
        self.by_id.get(id).and_then(|seq| self.by_seq.get(seq))
    }

    /// Forgets the terminated MicroVMs past `retention` at `now`.
    fn prune(&mut self, retention: Retention, now: Instant) {
        while let Some(&(ended, seq)) = self.ended.front() {
            let expired = now.saturating_duration_since(ended) >= retention.window;
            if !expired && self.ended.len() <= retention.max {
                break;
            }
            self.ended.pop_front();
            if let Some(vm) = self.by_seq.remove(&seq) {
                self.by_id.remove(&vm.id);
            }
            if let Some(token) = self.token_of.remove(&seq) {
                self.client_tokens.remove(&token);
            }
        }
    }
}

/// How many image layers keep a warm spare besides the base image.
const MAX_LAYER_SPARES: usize = 3;

/// A warm spare's slot.
#[derive(Default)]
struct SpareSlot {
    ready: Option<super::lifecycle::Prepared>,
    preparing: bool,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Shared {
    pub(crate) fn new(
        settings: Settings,
        tls: Option<super::tls::Tls>,
        efs: super::efs::LocalEfs,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        Self {
            efs,
            events: Arc::new(super::events::Events::new(
                settings.events_reconcile_interval,
            )),
            objects: super::objects::ObjectStore::under(&settings.root),
            logs: super::logs::LogStore::default(),
            images: super::images::ImageRegistry::default(),
            tls,
            hooks: HookClient::new(settings.hook_timeout, HooksToken::generate()),
            settings,
            faults: FaultState::default(),
            vms: Mutex::new(Vms::default()),
            token_locks: Mutex::new(HashMap::new()),
            tokens: Mutex::new(HashMap::new()),
            tasks: Mutex::new(Some(JoinSet::new())),
            runtime,
            calls: Mutex::new(HashMap::new()),
            seen_client_tokens: Mutex::new(VecDeque::new()),
            minted: Mutex::new(VecDeque::new()),
            spares: Mutex::new(vec![(None, SpareSlot::default())]),
        }
    }

    /// Whether the base image's warm spare is ready, its kernel answering.
    pub(crate) fn spare_ready(&self) -> bool {
        self.spares.lock().expect("spare lock")[0]
            .1
            .ready
            .as_ref()
            .is_some_and(|p| p.agent.prestarted_kernel_live())
    }

    /// The warm spare of `layer`, if one is ready.
    pub(crate) fn take_spare(&self, layer: Option<&Path>) -> Option<super::lifecycle::Prepared> {
        let mut spares = self.spares.lock().expect("spare lock");
        let (_, slot) = spares.iter_mut().find(|(l, _)| l.as_deref() == layer)?;
        slot.ready.take()
    }

    /// Claims the right to prepare `layer`'s next spare: `false` when one
    /// is ready or under way. A layer new to the spares takes the place of
    /// the least recently used one past [`MAX_LAYER_SPARES`] (its spare,
    /// if ready, is killed).
    pub(crate) fn begin_spare(&self, layer: Option<&Path>) -> bool {
        let mut spares = self.spares.lock().expect("spare lock");
        let index = match spares.iter().position(|(l, _)| l.as_deref() == layer) {
            Some(i) => i,
            None => {
                spares.push((layer.map(Path::to_path_buf), SpareSlot::default()));
                spares.len() - 1
            }
        };
        // Most recently used last (the base image stays first).
        if index > 0 {
            let entry = spares.remove(index);
            spares.push(entry);
        }
        while spares.len() > MAX_LAYER_SPARES + 1 {
            let (_, evicted) = spares.remove(1);
            if let Some(p) = evicted.ready {
                p.agent.kill();
            }
        }
        let index = if layer.is_none() { 0 } else { spares.len() - 1 };
        let slot = &mut spares[index].1;
        if slot.ready.is_some() || slot.preparing {
            return false;
        }
        slot.preparing = true;
        true
    }

    /// Ends a preparation of `layer`'s spare with its outcome. A spare made
    /// after the emulator stopped, or for a layer no longer kept, is
    /// killed at once.
    pub(crate) fn end_spare(
        &self,
        layer: Option<&Path>,
        prepared: Option<super::lifecycle::Prepared>,
    ) {
        let mut spares = self.spares.lock().expect("spare lock");
        let stopped = self.tasks.lock().expect("tasks lock").is_none();
        match spares.iter_mut().find(|(l, _)| l.as_deref() == layer) {
            Some((_, slot)) if !stopped => {
                slot.preparing = false;
                slot.ready = prepared;
            }
            found => {
                if let Some((_, slot)) = found {
                    slot.preparing = false;
                }
                if let Some(p) = &prepared {
                    p.agent.kill();
                }
            }
        }
    }

    /// Forgets the spares of every layer under `dir` (an image or version
    /// being deleted), killing the ready ones.
    pub(crate) fn discard_spares_under(&self, dir: &Path) {
        let mut spares = self.spares.lock().expect("spare lock");
        spares.retain(|(layer, slot)| {
            let under = layer.as_deref().is_some_and(|l| l.starts_with(dir));
            if under && let Some(p) = &slot.ready {
                p.agent.kill();
            }
            !under
        });
    }

    /// Every proxy token minted that has not expired, oldest first.
    pub(crate) fn minted_tokens(&self) -> Vec<String> {
        let now = Instant::now();
        let mut minted = self.minted.lock().expect("minted lock");
        minted.retain(|(_, expires)| *expires > now);
        minted.iter().map(|(token, _)| token.clone()).collect()
    }

    /// Runs `fut` as a task the emulator owns (aborted when it stops).
    /// Returns `None` once the emulator has stopped.
    pub(crate) fn spawn(
        &self,
        fut: impl Future<Output = ()> + Send + 'static,
    ) -> Option<AbortHandle> {
        let mut guard = self.tasks.lock().expect("tasks lock");
        let set = guard.as_mut()?;
        while set.try_join_next().is_some() {}
        Some(set.spawn_on(fut, &self.runtime))
    }

    /// Stops everything at once without waiting: every task aborted, every
    /// agent killed (its processes with it). Returns the dead agents, whose
    /// drop removes their root directories, so that the caller can drop
    /// them off its thread. Never blocks.
    pub(crate) fn stop_now(&self) -> Vec<Agent> {
        let tasks = self.tasks.lock().expect("tasks lock").take();
        drop(tasks);
        let vms = self.all();
        let mut agents: Vec<Agent> = vms.iter().filter_map(|vm| vm.stop_now()).collect();
        let spares = std::mem::take(&mut *self.spares.lock().expect("spare lock"));
        for (_, slot) in spares {
            if let Some(spare) = slot.ready {
                spare.agent.kill();
                agents.push(spare.agent);
            }
        }
        self.tokens.lock().expect("tokens lock").clear();
        agents
    }

    /// Counts one call of `op`.
    pub(crate) fn count_call(&self, op: Operation) {
        *self
            .calls
            .lock()
            .expect("calls lock")
            .entry(op)
            .or_default() += 1;
    }

    /// How many calls of `op` reached the emulator (faulted ones included).
    pub(crate) fn calls(&self, op: Operation) -> u64 {
        self.calls
            .lock()
            .expect("calls lock")
            .get(&op)
            .copied()
            .unwrap_or(0)
    }

    /// Remembers the clientToken of a RunMicrovm call (None when absent).
    pub(crate) fn record_client_token(&self, token: Option<String>) {
        let mut seen = self.seen_client_tokens.lock().expect("seen lock");
        if seen.len() >= SEEN_KEPT {
            seen.pop_front();
        }
        seen.push_back(token);
    }

    /// The last [`SEEN_KEPT`] RunMicrovm clientTokens seen, in order.
    pub(crate) fn seen_client_tokens(&self) -> Vec<Option<String>> {
        let seen = self.seen_client_tokens.lock().expect("seen lock");
        seen.iter().cloned().collect()
    }

    /// The MicroVMs, the terminated ones past the retention forgotten.
    fn vms(&self) -> std::sync::MutexGuard<'_, Vms> {
        let mut vms = self.vms.lock().expect("vms lock");
        vms.prune(self.settings.retention, Instant::now());
        vms
    }

    /// The MicroVM with this id, live or terminated (within the retention).
    pub(crate) fn find(&self, id: &str) -> Option<Arc<Vm>> {
        self.vms().find(id).cloned()
    }

    /// All MicroVMs in creation order (the terminated ones within the
    /// retention).
    pub(crate) fn all(&self) -> Vec<Arc<Vm>> {
        self.vms().by_seq.values().cloned().collect()
    }

    /// Adds a new MicroVM (and its clientToken, if any).
    pub(crate) fn insert(&self, vm: Arc<Vm>, client_token: Option<(String, Value)>) {
        let mut vms = self.vms();
        let seq = vms.next_seq;
        vms.next_seq += 1;
        if let Some((token, body)) = client_token {
            vms.token_of.insert(seq, token.clone());
            vms.client_tokens
                .insert(token, (body_digest(&body), vm.clone()));
        }
        vms.by_id.insert(vm.id.clone(), seq);
        vms.by_seq.insert(seq, vm);
    }

    /// Records that `vm` reached TERMINATED: it stays visible for the
    /// retention, then is forgotten with its clientToken.
    pub(crate) fn ended(&self, vm: &Vm) {
        let mut vms = self.vms();
        if let Some(&seq) = vms.by_id.get(&vm.id) {
            vms.ended.push_back((Instant::now(), seq));
            vms.prune(self.settings.retention, Instant::now());
        }
    }

    /// Serialises the RunMicrovm calls that share `token` (from the replay
    /// check to the insert); the lock is forgotten once nobody holds it.
    pub(crate) async fn lock_client_token(&self, token: &str) -> ClientTokenGuard<'_> {
        let lock = self
            .token_locks
            .lock()
            .expect("token locks lock")
            .entry(token.to_string())
            .or_default()
            .clone();
        let guard = lock.clone().lock_owned().await;
        ClientTokenGuard {
            shared: self,
            token: token.to_string(),
            lock,
            _guard: guard,
        }
    }

    /// The MicroVM an earlier RunMicrovm created with this clientToken, and
    /// whether its body was the same.
    pub(crate) fn by_client_token(&self, token: &str, body: &Value) -> Option<(bool, Arc<Vm>)> {
        let digest = body_digest(body);
        let vms = self.vms();
        vms.client_tokens
            .get(token)
            .map(|(b, vm)| (*b == digest, vm.clone()))
    }

    /// Runs `f` on the MicroVM's agent, if it has a live one.
    pub(crate) fn with_agent<R>(&self, id: &str, f: impl FnOnce(&Agent) -> R) -> Option<R> {
        let vm = self.find(id)?;
        let guard = vm.agent.lock().expect("agent lock");
        guard.as_ref().map(f)
    }

    /// Stores a minted proxy token; drops expired ones on the way (from
    /// the grants and from the canary list alike: neither grows with every
    /// token ever minted).
    pub(crate) fn add_token(&self, token: String, grant: Grant) {
        let now = Instant::now();
        {
            let mut minted = self.minted.lock().expect("minted lock");
            minted.retain(|(_, expires)| *expires > now);
            if minted.len() >= SEEN_KEPT {
                minted.pop_front();
            }
            minted.push_back((token.clone(), grant.expires));
        }
        let mut map = self.tokens.lock().expect("tokens lock");
        map.retain(|_, g| g.expires > now);
        map.insert(token, grant);
    }

    /// The grant behind a token, if the token was minted here and has not
    /// expired (an expired one is forgotten on the way).
    pub(crate) fn grant(&self, token: &str) -> Option<Grant> {
        let mut map = self.tokens.lock().expect("tokens lock");
        let grant = map.get(token)?;
        if grant.expires <= Instant::now() {
            map.remove(token);
            return None;
        }
        Some(grant.clone())
    }

    /// How many grants the emulator holds (expired ones not yet dropped
    /// included).
    pub(crate) fn grant_count(&self) -> usize {
        self.tokens.lock().expect("tokens lock").len()
    }

    /// Forgets every token of a MicroVM (it terminated). The canary list
    /// keeps them until they expire (a test looks for them after a kill).
    pub(crate) fn revoke_tokens(&self, microvm_id: &str) {
        self.tokens
            .lock()
            .expect("tokens lock")
            .retain(|_, g| g.microvm_id != microvm_id);
    }
}

/// Held by a RunMicrovm while it checks and uses its clientToken.
pub(crate) struct ClientTokenGuard<'a> {
    shared: &'a Shared,
    token: String,
    lock: Arc<tokio::sync::Mutex<()>>,
    _guard: tokio::sync::OwnedMutexGuard<()>,
}

impl Drop for ClientTokenGuard<'_> {
    fn drop(&mut self) {
        let mut locks = self.shared.token_locks.lock().expect("token locks lock");
        // Two references left (the map's and ours): nobody else waits.
        if Arc::strong_count(&self.lock) <= 3 {
            locks.remove(&self.token);
        }
    }
}

/// The mutable part of a MicroVM.
#[derive(Clone, Debug)]
pub(crate) struct Status {
    pub(crate) state: MicrovmState,
    pub(crate) state_reason: Option<String>,
    pub(crate) terminated_at: Option<f64>,
}

/// What a RunMicrovm asked for, echoed in the `Microvm` shape.
#[derive(Clone, Debug)]
pub(crate) struct Spec {
    pub(crate) image_arn: String,
    pub(crate) image_version: String,
    pub(crate) execution_role_arn: Option<String>,
    pub(crate) idle_policy: Option<IdlePolicy>,
    pub(crate) kms_key_identifier: Option<String>,
    pub(crate) ingress: Vec<String>,
    pub(crate) egress: Vec<String>,
    pub(crate) max_duration_seconds: i64,
    /// RunMicrovm `logging.cloudWatch.logGroup`: the group of the
    /// MicroVM's log stream ([`super::sandbox_logs`]); `None` when disabled.
    pub(crate) log_group: Option<String>,
}

/// One emulated MicroVM: an agent, its proxy, its state.
pub(crate) struct Vm {
    pub(crate) id: String,
    pub(crate) spec: Spec,
    pub(crate) started_at: f64,
    pub(crate) proxy_addr: SocketAddr,
    /// What GetMicrovm answers as `endpoint`: `127.0.0.1:<port>`, or the
    /// bare address in TLS mode.
    pub(crate) endpoint: String,
    pub(crate) grpc_addr: SocketAddr,
    pub(crate) hooks_addr: SocketAddr,
    pub(crate) root: PathBuf,
    status: Mutex<Status>,
    agent: Mutex<Option<Agent>>,
    /// Serialises lifecycle transitions that call hooks.
    pub(crate) op: tokio::sync::Mutex<()>,
    cut: watch::Sender<u64>,
    proxy_task: Mutex<Option<AbortHandle>>,
    /// How many times the MicroVM reached SUSPENDED.
    suspensions: std::sync::atomic::AtomicU64,
    /// Timers (maximum duration, suspended duration) to drop once terminated.
    timers: Mutex<Vec<AbortHandle>>,
    /// When bytes last crossed the proxy (idle auto-suspend).
    last_activity: Mutex<Instant>,
    /// Signalled when the proxy has an answer from the agent (the warm
    /// spare's refill waits for the first: `lifecycle::create`).
    answered: tokio::sync::Notify,
}

impl std::fmt::Debug for Vm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vm")
            .field("id", &self.id)
            .field("state", &self.state())
            .field("proxy_addr", &self.proxy_addr)
            .finish_non_exhaustive()
    }
}

impl Vm {
    pub(crate) fn new(
        id: String,
        spec: Spec,
        proxy_addr: SocketAddr,
        endpoint: String,
        agent: Agent,
        root: PathBuf,
    ) -> Self {
        Self {
            id,
            spec,
            started_at: ids::epoch_seconds_now(),
            proxy_addr,
            endpoint,
            grpc_addr: agent.grpc_addr(),
            hooks_addr: agent.hooks_addr(),
            root,
            status: Mutex::new(Status {
                state: MicrovmState::Pending,
                state_reason: None,
                terminated_at: None,
            }),
            agent: Mutex::new(Some(agent)),
            op: tokio::sync::Mutex::new(()),
            cut: watch::channel(0).0,
            proxy_task: Mutex::new(None),
            suspensions: std::sync::atomic::AtomicU64::new(0),
            timers: Mutex::new(Vec::new()),
            last_activity: Mutex::new(Instant::now()),
            answered: tokio::sync::Notify::new(),
        }
    }

    /// The proxy has an answer from the agent.
    pub(crate) fn note_answered(&self) {
        self.answered.notify_one();
    }

    /// Resolves once the proxy has had an answer from the agent (at once
    /// when it already had one).
    pub(crate) async fn first_answer(&self) {
        self.answered.notified().await;
    }

    /// Records traffic through the proxy (it keeps the MicroVM awake).
    pub(crate) fn touch(&self) {
        *self.last_activity.lock().expect("activity lock") = Instant::now();
    }

    /// When bytes last crossed the proxy.
    pub(crate) fn last_activity(&self) -> Instant {
        *self.last_activity.lock().expect("activity lock")
    }

    /// The current state.
    pub(crate) fn state(&self) -> MicrovmState {
        self.status.lock().expect("status lock").state
    }

    /// Keeps a timer task to abort when the MicroVM is gone.
    pub(crate) fn add_timer(&self, timer: AbortHandle) {
        let mut timers = self.timers.lock().expect("timers lock");
        timers.retain(|t| !t.is_finished());
        timers.push(timer);
    }

    /// Aborts every timer of the MicroVM.
    pub(crate) fn abort_timers(&self) {
        for t in self.timers.lock().expect("timers lock").drain(..) {
            t.abort();
        }
    }

    /// How many times the MicroVM reached SUSPENDED.
    pub(crate) fn suspensions(&self) -> u64 {
        self.suspensions.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A copy of the mutable part.
    pub(crate) fn status(&self) -> Status {
        self.status.lock().expect("status lock").clone()
    }

    /// Moves to `to` if the state is one of `from`; returns the state seen.
    pub(crate) fn transition(
        &self,
        from: &[MicrovmState],
        to: MicrovmState,
    ) -> Result<MicrovmState, MicrovmState> {
        let mut s = self.status.lock().expect("status lock");
        let seen = s.state;
        if from.contains(&seen) {
            s.state = to;
            if to == MicrovmState::Suspended {
                self.suspensions
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            tracing::debug!(microvm = %self.id, from = seen.as_str(), to = to.as_str(), "emulator: MicroVM state");
            Ok(seen)
        } else {
            Err(seen)
        }
    }

    /// Moves to TERMINATING with `reason` unless already ending. Returns
    /// whether this call started the termination.
    pub(crate) fn begin_termination(&self, reason: &str) -> bool {
        let mut s = self.status.lock().expect("status lock");
        if s.state.is_ending() {
            return false;
        }
        s.state = MicrovmState::Terminating;
        s.state_reason = Some(reason.to_string());
        tracing::debug!(microvm = %self.id, reason, "emulator: MicroVM terminating");
        true
    }

    /// Records the end: TERMINATED, terminatedAt now.
    pub(crate) fn mark_terminated(&self) {
        let mut s = self.status.lock().expect("status lock");
        s.state = MicrovmState::Terminated;
        s.terminated_at = Some(ids::epoch_seconds_now());
        tracing::debug!(microvm = %self.id, "emulator: MicroVM terminated");
    }

    /// Takes the agent out (dropping it stops it).
    pub(crate) fn take_agent(&self) -> Option<Agent> {
        self.agent.lock().expect("agent lock").take()
    }

    /// Runs `f` on the live agent.
    pub(crate) fn with_agent<R>(&self, f: impl FnOnce(&Agent) -> R) -> Option<R> {
        self.agent.lock().expect("agent lock").as_ref().map(f)
    }

    /// A receiver that changes whenever the proxy's connections must be cut.
    pub(crate) fn cut_signal(&self) -> watch::Receiver<u64> {
        self.cut.subscribe()
    }

    /// Cuts every live proxied connection.
    pub(crate) fn cut_proxy_connections(&self) {
        self.cut.send_modify(|n| *n += 1);
    }

    /// Remembers the proxy's accept loop so that it can be stopped.
    pub(crate) fn set_proxy_task(&self, task: AbortHandle) {
        *self.proxy_task.lock().expect("proxy task lock") = Some(task);
    }

    /// Stops the proxy: no new connections, live ones dropped.
    pub(crate) fn stop_proxy(&self) {
        if let Some(t) = self.proxy_task.lock().expect("proxy task lock").take() {
            t.abort();
        }
        self.cut_proxy_connections();
    }

    /// Stops the proxy and kills the agent now (emulator drop); returns
    /// the killed agent.
    pub(crate) fn stop_now(&self) -> Option<Agent> {
        self.stop_proxy();
        let agent = self.take_agent();
        if let Some(a) = &agent {
            a.kill();
        }
        agent
    }

    /// The `Microvm` output shape.
    pub(crate) fn to_out(&self) -> MicrovmOut {
        let st = self.status();
        MicrovmOut {
            microvm_id: self.id.clone(),
            state: st.state,
            endpoint: self.endpoint.clone(),
            image_arn: self.spec.image_arn.clone(),
            image_version: self.spec.image_version.clone(),
            execution_role_arn: self.spec.execution_role_arn.clone(),
            idle_policy: self.spec.idle_policy.clone(),
            maximum_duration_in_seconds: self.spec.max_duration_seconds,
            started_at: self.started_at,
            terminated_at: st.terminated_at,
            state_reason: st.state_reason,
            kms_key_identifier: self.spec.kms_key_identifier.clone(),
            ingress_network_connectors: self.spec.ingress.clone(),
            egress_network_connectors: self.spec.egress.clone(),
        }
    }

    /// The `MicrovmItem` list shape.
    pub(crate) fn to_item(&self) -> MicrovmItem {
        MicrovmItem {
            microvm_id: self.id.clone(),
            state: self.state(),
            image_arn: self.spec.image_arn.clone(),
            image_version: self.spec.image_version.clone(),
            started_at: self.started_at,
        }
    }
}

/// A SHA-256 digest of a RunMicrovm body.
type BodyDigest = [u8; 32];

/// The digest two RunMicrovm bodies are compared by (serde_json writes a
/// `Value`'s object keys sorted, so equal bodies give equal digests).
fn body_digest(body: &Value) -> BodyDigest {
    use sha2::Digest as _;
    sha2::Sha256::digest(serde_json::to_vec(body).unwrap_or_default()).into()
}
