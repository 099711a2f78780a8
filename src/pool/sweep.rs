//! The sweep, every interval: recycle parked slots with too little
//! lifetime left, reap warming slots whose owner's lease ended (a crashed
//! process), and check the parked ones against the control plane (re-
//! suspend a running one, forget a terminated one).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use super::slot::SlotState;
use super::store::RemoveIf;
use super::{PoolInner, Started};
use crate::control::ListRequest;
use crate::error::ErrorKind;
use crate::state::SandboxState;

/// At most this many ListMicrovms pages per sweep (50 items each).
const MAX_PAGES: usize = 20;

impl PoolInner {
    pub(super) async fn sweep(&self, started: &Started) {
        let Ok(slots) = self.store.list(&started.image_arn).await else {
            return;
        };
        let now = SystemTime::now();
        let min_expiry = now + self.config.min_remaining;
        let mut parked = Vec::new();
        for slot in slots {
            let id = slot.record.sandbox_id.clone();
            let condition = match slot.record.state {
                SlotState::Ready if slot.record.expires_at() < min_expiry => {
                    RemoveIf::ReadyExpiringBefore(min_expiry)
                }
                SlotState::Ready => {
                    parked.push(id);
                    continue;
                }
                SlotState::Warming if slot.lease_until.is_none_or(|lease| lease < now) => {
                    RemoveIf::WarmingLeaseEndedBefore(now)
                }
                SlotState::Warming => continue,
            };
            let counter = match condition {
                RemoveIf::ReadyExpiringBefore(_) => &self.counters.recycled,
                _ => &self.counters.lost,
            };
            if let Ok(Some(_)) = self.store.remove_if(&id, condition).await {
                // Counted once its MicroVM is told to end, so a reader of
                // the stats never sees a reaped slot whose VM still runs.
                self.terminate(started, &id).await;
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
        if parked.is_empty() {
            return;
        }
        let Some(states) = self.listed_states(started).await else {
            return;
        };
        let control = started.client.backend().control.clone();
        for id in parked {
            let gone = match states.get(&id) {
                Some(SandboxState::Running) => {
                    let _ = control.suspend_microvm(id.clone()).await;
                    false
                }
                Some(state) => state.is_terminal(),
                None => match control.get_microvm(id.clone()).await {
                    Ok(vm) => vm.state.is_terminal(),
                    Err(err) => err.kind() == ErrorKind::SandboxNotFound,
                },
            };
            if gone && let Ok(Some(_)) = self.store.remove_if(&id, RemoveIf::Ready).await {
                self.counters.lost.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The states of the image's MicroVMs; `None` when the listing failed
    /// (that sweep then ends).
    async fn listed_states(&self, started: &Started) -> Option<HashMap<String, SandboxState>> {
        let control = started.client.backend().control.clone();
        let mut states = HashMap::new();
        let mut next_token = None;
        for _ in 0..MAX_PAGES {
            let page = control
                .list_microvms(ListRequest {
                    image: Some(started.image_arn.clone()),
                    image_version: None,
                    max_results: 50,
                    next_token: next_token.take(),
                })
                .await
                .ok()?;
            states.extend(page.items.into_iter().map(|i| (i.id, i.state)));
            match page.next_token {
                Some(token) => next_token = Some(token),
                None => return Some(states),
            }
        }
        Some(states)
    }
}
