//! Fault injection: the Rust API ([`Faults`]) and the counters the control
//! plane and the proxies consume. The admin endpoint (`admin.rs`) calls the
//! same methods.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use super::registry::Shared;

/// A control-plane operation, for per-operation faults and call counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `POST /2025-09-09/microvms`
    RunMicrovm,
    /// `GET /2025-09-09/microvms/{id}`
    GetMicrovm,
    /// `GET /2025-09-09/microvms`
    ListMicrovms,
    /// `DELETE /2025-09-09/microvms/{id}`
    TerminateMicrovm,
    /// `POST /2025-09-09/microvms/{id}/suspend`
    SuspendMicrovm,
    /// `POST /2025-09-09/microvms/{id}/resume`
    ResumeMicrovm,
    /// `POST /2025-09-09/microvms/{id}/auth-token`
    CreateMicrovmAuthToken,
    /// `GET /2025-09-09/microvm-images/{id}`
    GetMicrovmImage,
    /// `POST /2025-09-09/microvm-images`
    CreateMicrovmImage,
    /// `PUT /2025-09-09/microvm-images/{id}`
    UpdateMicrovmImage,
    /// `GET /2025-09-09/microvm-images`
    ListMicrovmImages,
    /// `DELETE /2025-09-09/microvm-images/{id}`
    DeleteMicrovmImage,
    /// `GET /2025-09-09/microvm-images/{id}/versions/{version}`
    GetMicrovmImageVersion,
    /// `GET /2025-09-09/microvm-images/{id}/versions`
    ListMicrovmImageVersions,
    /// `PATCH /2025-09-09/microvm-images/{id}/versions/{version}`
    UpdateMicrovmImageVersion,
    /// `DELETE /2025-09-09/microvm-images/{id}/versions/{version}`
    DeleteMicrovmImageVersion,
    /// `GET /2025-09-09/microvm-images/{id}/versions/{version}/builds`
    ListMicrovmImageBuilds,
    /// `GET /2025-09-09/microvm-images/{id}/versions/{version}/builds/{buildId}`
    GetMicrovmImageBuild,
    /// `GET /2025-09-09/managed-microvm-images/{id}/versions`
    ListManagedMicrovmImageVersions,
}

impl Operation {
    /// Every operation the emulator serves.
    pub const ALL: [Operation; 19] = [
        Operation::RunMicrovm,
        Operation::GetMicrovm,
        Operation::ListMicrovms,
        Operation::TerminateMicrovm,
        Operation::SuspendMicrovm,
        Operation::ResumeMicrovm,
        Operation::CreateMicrovmAuthToken,
        Operation::GetMicrovmImage,
        Operation::CreateMicrovmImage,
        Operation::UpdateMicrovmImage,
        Operation::ListMicrovmImages,
        Operation::DeleteMicrovmImage,
        Operation::GetMicrovmImageVersion,
        Operation::ListMicrovmImageVersions,
        Operation::UpdateMicrovmImageVersion,
        Operation::DeleteMicrovmImageVersion,
        Operation::ListMicrovmImageBuilds,
        Operation::GetMicrovmImageBuild,
        Operation::ListManagedMicrovmImageVersions,
    ];

    /// The AWS operation name, e.g. `RunMicrovm`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::RunMicrovm => "RunMicrovm",
            Operation::GetMicrovm => "GetMicrovm",
            Operation::ListMicrovms => "ListMicrovms",
            Operation::TerminateMicrovm => "TerminateMicrovm",
            Operation::SuspendMicrovm => "SuspendMicrovm",
            Operation::ResumeMicrovm => "ResumeMicrovm",
            Operation::CreateMicrovmAuthToken => "CreateMicrovmAuthToken",
            Operation::GetMicrovmImage => "GetMicrovmImage",
            Operation::CreateMicrovmImage => "CreateMicrovmImage",
            Operation::UpdateMicrovmImage => "UpdateMicrovmImage",
            Operation::ListMicrovmImages => "ListMicrovmImages",
            Operation::DeleteMicrovmImage => "DeleteMicrovmImage",
            Operation::GetMicrovmImageVersion => "GetMicrovmImageVersion",
            Operation::ListMicrovmImageVersions => "ListMicrovmImageVersions",
            Operation::UpdateMicrovmImageVersion => "UpdateMicrovmImageVersion",
            Operation::DeleteMicrovmImageVersion => "DeleteMicrovmImageVersion",
            Operation::ListMicrovmImageBuilds => "ListMicrovmImageBuilds",
            Operation::GetMicrovmImageBuild => "GetMicrovmImageBuild",
            Operation::ListManagedMicrovmImageVersions => "ListManagedMicrovmImageVersions",
        }
    }

    /// The operation with this AWS name, if any.
    pub fn from_name(name: &str) -> Option<Operation> {
        Operation::ALL.into_iter().find(|op| op.as_str() == name)
    }
}

/// Pending throttles of one operation.
#[derive(Clone, Copy, Debug, Default)]
struct Throttle {
    remaining: u32,
    retry_after_seconds: u32,
}

/// The counters behind [`Faults`]; consumed one per call.
#[derive(Debug, Default)]
pub(crate) struct FaultState {
    capacity: AtomicU32,
    quota: AtomicU32,
    throttles: Mutex<HashMap<Operation, Throttle>>,
    conflicts: Mutex<HashMap<Operation, u32>>,
    proxy: Mutex<VecDeque<u16>>,
    stalls: Mutex<Vec<StallRule>>,
    release: StallRelease,
    builds: BuildHold,
    /// Service Quotas' values set by a test, by code (`None`: not listed).
    applied_quotas: Mutex<HashMap<String, Option<f64>>>,
}

fn take_one(counter: &AtomicU32) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

impl FaultState {
    /// Consumes one pending InsufficientCapacity fault.
    pub(crate) fn take_capacity(&self) -> bool {
        take_one(&self.capacity)
    }

    /// Consumes one pending ServiceQuotaExceeded fault.
    pub(crate) fn take_quota(&self) -> bool {
        take_one(&self.quota)
    }

    /// Consumes one pending conflict of `op`.
    pub(crate) fn take_conflict(&self, op: Operation) -> bool {
        let mut map = self.conflicts.lock().expect("conflicts lock");
        match map.get_mut(&op) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }

    /// Consumes one pending throttle of `op`; returns its Retry-After seconds.
    pub(crate) fn take_throttle(&self, op: Operation) -> Option<u32> {
        let mut map = self.throttles.lock().expect("throttles lock");
        let t = map.get_mut(&op)?;
        if t.remaining == 0 {
            return None;
        }
        t.remaining -= 1;
        Some(t.retry_after_seconds)
    }

    /// Consumes one pending proxy status.
    pub(crate) fn take_proxy_status(&self) -> Option<u16> {
        self.proxy.lock().expect("proxy faults lock").pop_front()
    }

    /// Consumes one pending stall that applies to a request for `path`
    /// (the oldest rule that matches).
    pub(crate) fn take_stall(&self, path: &str) -> Option<ProxyStall> {
        let mut rules = self.stalls.lock().expect("stall faults lock");
        let at = rules
            .iter()
            .position(|r| r.path.as_deref().is_none_or(|p| p == path))?;
        let stall = rules[at].stall;
        rules[at].remaining -= 1;
        if rules[at].remaining == 0 {
            rules.remove(at);
        }
        Some(stall)
    }

    /// The Service Quotas values a test set ([`Faults::applied_quota`]).
    pub(crate) fn applied_quotas(&self) -> HashMap<String, Option<f64>> {
        self.applied_quotas.lock().expect("quotas lock").clone()
    }

    /// Returns once image builds are not held ([`Faults::hold_builds`]).
    pub(crate) async fn builds_released(&self) {
        let mut rx = self.builds.0.subscribe();
        let _ = rx.wait_for(|held| !*held).await;
    }

    /// A receiver that changes when [`Faults::clear`] releases every stall.
    pub(crate) fn stall_release(&self) -> tokio::sync::watch::Receiver<u64> {
        self.release.0.subscribe()
    }
}

/// Fault injection for tests and the reliability suite. Cheap to clone; every
/// method acts at once on the running emulator.
///
/// Methods that name a MicroVM return `false` when no MicroVM with that id
/// has a live agent (unknown, or already terminated).
#[derive(Clone)]
pub struct Faults {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults").finish_non_exhaustive()
    }
}

impl Faults {
    fn state(&self) -> &FaultState {
        &self.shared.faults
    }

    /// The next `n` RunMicrovm calls (that pass validation) answer
    /// InsufficientCapacityException (HTTP 500) and create nothing.
    pub fn insufficient_capacity(&self, n: u32) {
        self.state().capacity.store(n, Ordering::SeqCst);
    }

    /// The next `n` RunMicrovm calls (that pass validation) answer
    /// ServiceQuotaExceededException (HTTP 402) and create nothing.
    pub fn quota_exceeded(&self, n: u32) {
        self.state().quota.store(n, Ordering::SeqCst);
    }

    /// Service Quotas' ListServiceQuotas answers `value` for the quota
    /// `code` (a MicroVMs quota of code `lambda`, e.g. `L-CD1C0CC4` for the
    /// memory in GB), or leaves it out with `None`, until changed again:
    /// an account with a reduced quota, or one AWS does not list.
    pub fn applied_quota(&self, code: &str, value: Option<f64>) {
        self.state()
            .applied_quotas
            .lock()
            .expect("quotas lock")
            .insert(code.to_owned(), value);
    }

    /// The next `n` calls of `op` answer ThrottlingException (HTTP 429) with
    /// header `Retry-After: <retry_after_seconds>` and the same value in the
    /// body's `retryAfterSeconds`.
    pub fn throttle(&self, op: Operation, n: u32, retry_after_seconds: u32) {
        self.state()
            .throttles
            .lock()
            .expect("throttles lock")
            .insert(
                op,
                Throttle {
                    remaining: n,
                    retry_after_seconds,
                },
            );
    }

    /// The next `n` calls of `op` (that pass the signature check) answer
    /// ConflictException (HTTP 409) and change nothing, as when another
    /// caller changed the resource meanwhile (a MicroVM started on an
    /// image version being deleted).
    pub fn conflict(&self, op: Operation, n: u32) {
        self.state()
            .conflicts
            .lock()
            .expect("conflicts lock")
            .insert(op, n);
    }

    /// The next `n` calls through any MicroVM proxy answer a plain HTTP
    /// `status` (e.g. 403, 429, 502) with a short text body and no
    /// grpc-status, before any token check. Returns `false` (and queues
    /// nothing) when `status` is not in 400..=599.
    pub fn proxy_status(&self, n: u32, status: u16) -> bool {
        if !(400..=599).contains(&status) {
            return false;
        }
        let mut q = self.state().proxy.lock().expect("proxy faults lock");
        q.extend(std::iter::repeat_n(status, n as usize));
        true
    }

    /// Kills the MicroVM's agent abruptly (no hook, processes killed, servers
    /// stopped), as if the guest crashed; the MicroVM then goes TERMINATED with
    /// stateReason `Container Stopped with Exit Code: 137`.
    pub fn kill_agent(&self, microvm_id: &str) -> bool {
        super::lifecycle::kill_agent(&self.shared, microvm_id)
    }

    /// Drops every live connection of the MicroVM's proxy at once (clients see
    /// a reset mid-stream); new connections are accepted as usual.
    pub fn cut_connections(&self, microvm_id: &str) -> bool {
        match self.shared.find(microvm_id) {
            Some(vm) => {
                vm.cut_proxy_connections();
                true
            }
            None => false,
        }
    }

    /// Sets the free-disk reserve the MicroVM's agent requires before each
    /// file write (a huge value makes the next write fail `disk_reserve`).
    pub fn set_disk_reserve(&self, microvm_id: &str, bytes: u64) -> bool {
        self.shared
            .with_agent(microvm_id, |a| a.set_disk_reserve(bytes))
            .is_some()
    }

    /// Makes the MicroVM's logical sandbox deadline expire now.
    pub fn expire_deadline(&self, microvm_id: &str) -> bool {
        self.shared
            .with_agent(microvm_id, |a| a.expire_deadline_now())
            .is_some()
    }

    /// The counted faults still pending and whether builds are held: what
    /// `GET /_emulator/faults` answers (`rayito local fault list`).
    pub fn pending(&self) -> PendingFaults {
        let s = self.state();
        let mut throttles: Vec<PendingThrottle> = s
            .throttles
            .lock()
            .expect("throttles lock")
            .iter()
            .filter(|(_, t)| t.remaining > 0)
            .map(|(op, t)| PendingThrottle {
                operation: op.as_str(),
                count: t.remaining,
                retry_after_seconds: t.retry_after_seconds,
            })
            .collect();
        throttles.sort_by_key(|t| t.operation);
        PendingFaults {
            insufficient_capacity: s.capacity.load(Ordering::SeqCst),
            quota_exceeded: s.quota.load(Ordering::SeqCst),
            throttles,
            proxy_statuses: s
                .proxy
                .lock()
                .expect("proxy faults lock")
                .iter()
                .copied()
                .collect(),
            stalls: s
                .stalls
                .lock()
                .expect("stall faults lock")
                .iter()
                .map(|r| r.remaining)
                .sum(),
            builds_held: *s.builds.0.borrow(),
        }
    }

    /// Forgets every pending fault.
    pub fn clear(&self) {
        let s = self.state();
        s.capacity.store(0, Ordering::SeqCst);
        s.quota.store(0, Ordering::SeqCst);
        s.throttles.lock().expect("throttles lock").clear();
        s.conflicts.lock().expect("conflicts lock").clear();
        s.proxy.lock().expect("proxy faults lock").clear();
        s.stalls.lock().expect("stall faults lock").clear();
        s.release.0.send_modify(|n| *n += 1);
        s.builds.0.send_replace(false);
        s.applied_quotas.lock().expect("quotas lock").clear();
        self.shared.efs.clear_faults();
    }

    /// Holds image builds (`true`): every build started, or already
    /// waiting, stays IN_PROGRESS before it reads its code artifact, until
    /// `hold_builds(false)` (or [`Faults::clear`]) releases them all. Lets
    /// a test see the states in flight and fill the build quota.
    pub fn hold_builds(&self, hold: bool) {
        self.state().builds.0.send_replace(hold);
    }

    /// The next `n` requests through any MicroVM proxy whose path is `path`
    /// (a gRPC method such as `/rayito.v1.FilesystemService/Stat`; `None`
    /// matches every path) stall as `stall` says, after the proxy's own
    /// checks passed: the caller sees no error, only silence, until its own
    /// deadline. A stall ends when the caller gives up, when the MicroVM's
    /// connections are cut, at [`Faults::clear`] (a held request then
    /// answers 504), or after ten minutes. Rules are consumed oldest first.
    pub fn stall_proxy(&self, n: u32, path: Option<&str>, stall: ProxyStall) {
        if n == 0 {
            return;
        }
        self.state()
            .stalls
            .lock()
            .expect("stall faults lock")
            .push(StallRule {
                path: path.map(str::to_owned),
                remaining: n,
                stall,
            });
    }
}

/// The faults still pending ([`Faults::pending`]); serialized in
/// camelCase for `GET /_emulator/faults`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingFaults {
    /// RunMicrovm calls left to answer InsufficientCapacityException.
    pub insufficient_capacity: u32,
    /// RunMicrovm calls left to answer ServiceQuotaExceededException.
    pub quota_exceeded: u32,
    /// Throttles left, per operation (by AWS name).
    pub throttles: Vec<PendingThrottle>,
    /// Proxy statuses queued, in the order they will be answered.
    pub proxy_statuses: Vec<u16>,
    /// Proxied requests left to stall, over every rule.
    pub stalls: u32,
    /// Whether image builds are held.
    pub builds_held: bool,
}

/// Throttles left for one operation.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingThrottle {
    /// The operation's AWS name.
    pub operation: &'static str,
    /// Calls left to throttle.
    pub count: u32,
    /// Their Retry-After.
    pub retry_after_seconds: u32,
}

/// How a stalled proxied request behaves (see [`Faults::stall_proxy`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyStall {
    /// The request is held: never forwarded, never answered.
    Request,
    /// The request is forwarded; the response's headers and its first
    /// `frames` body frames (a gRPC message is usually one frame) pass,
    /// then nothing more, with the stream left open.
    ResponseAfter {
        /// Body frames that pass before the stall.
        frames: u32,
    },
}

/// One pending stall rule.
#[derive(Clone, Debug)]
struct StallRule {
    path: Option<String>,
    remaining: u32,
    stall: ProxyStall,
}

/// Whether image builds are held.
#[derive(Debug)]
struct BuildHold(tokio::sync::watch::Sender<bool>);

impl Default for BuildHold {
    fn default() -> Self {
        Self(tokio::sync::watch::Sender::new(false))
    }
}

/// Wakes every stalled request at [`Faults::clear`].
#[derive(Debug)]
struct StallRelease(tokio::sync::watch::Sender<u64>);

impl Default for StallRelease {
    fn default() -> Self {
        Self(tokio::sync::watch::Sender::new(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_names_round_trip() {
        for op in Operation::ALL {
            assert_eq!(Operation::from_name(op.as_str()), Some(op));
        }
        assert_eq!(Operation::from_name("runMicrovm"), None);
    }

    #[test]
    fn counters_are_consumed_one_per_call() {
        let s = FaultState::default();
        s.capacity.store(2, Ordering::SeqCst);
        assert!(s.take_capacity() && s.take_capacity() && !s.take_capacity());
        s.throttles.lock().unwrap().insert(
            Operation::GetMicrovm,
            Throttle {
                remaining: 1,
                retry_after_seconds: 4,
            },
        );
        assert_eq!(s.take_throttle(Operation::ListMicrovms), None);
        assert_eq!(s.take_throttle(Operation::GetMicrovm), Some(4));
        assert_eq!(s.take_throttle(Operation::GetMicrovm), None);
    }

    #[test]
    fn stalls_match_their_path_and_are_consumed_oldest_first() {
        let faults = FaultState::default();
        let mut rules = faults.stalls.lock().unwrap();
        rules.push(StallRule {
            path: Some("/a".into()),
            remaining: 1,
            stall: ProxyStall::Request,
        });
        rules.push(StallRule {
            path: None,
            remaining: 2,
            stall: ProxyStall::ResponseAfter { frames: 1 },
        });
        drop(rules);
        let any = Some(ProxyStall::ResponseAfter { frames: 1 });
        assert_eq!(faults.take_stall("/b"), any);
        assert_eq!(faults.take_stall("/a"), Some(ProxyStall::Request));
        assert_eq!(faults.take_stall("/a"), any);
        assert_eq!(faults.take_stall("/a"), None);
    }
}
