//! The deployed stack: its settings, its key (32 random bytes, made at
//! the first deploy and kept until destroy, as the stack's secret), its
//! webhooks, its events, its dead letters and its counters. Deploy,
//! status and destroy.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use rand::RngCore as _;
use rayito_events::line::Rejection;

use super::Events;
use super::store::Store;
use super::webhooks::Webhook;

/// How many dead letters are kept (the oldest dropped first).
pub(crate) const DEAD_LETTERS_KEPT: usize = 1_000;

/// The stack key: never logged, never in a Debug.
pub(crate) struct StackKey(pub(crate) [u8; 32]);

impl std::fmt::Debug for StackKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StackKey(..)")
    }
}

/// One failed delivery.
#[derive(Clone, Debug)]
pub(crate) struct DeadLetter {
    pub(crate) webhook_id: String,
    pub(crate) event_id: String,
    pub(crate) attempts: u32,
    pub(crate) reason: String,
    pub(crate) last_status: Option<u16>,
}

/// The pipeline's counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) admitted: u64,
    pub(crate) delivered: u64,
    /// By [`Rejection::ALL`]'s order.
    pub(crate) rejected: [u64; Rejection::ALL.len()],
}

impl Counters {
    pub(crate) fn reject(&mut self, r: Rejection) {
        if let Some(i) = Rejection::ALL.iter().position(|x| *x == r) {
            self.rejected[i] += 1;
        }
    }
}

/// A deployed stack.
#[derive(Debug)]
pub(crate) struct Stack {
    /// Which deploy (after a destroy, a new one).
    pub(crate) epoch: u64,
    /// `CREATE_COMPLETE`, then `UPDATE_COMPLETE` after a redeploy.
    pub(crate) status: &'static str,
    pub(crate) log_group_name: String,
    pub(crate) reconciler_interval_minutes: u32,
    pub(crate) key: StackKey,
    pub(crate) table_name: String,
    pub(crate) secret_arn: String,
    /// In registration order.
    pub(crate) webhooks: Vec<Webhook>,
    pub(crate) store: Store,
    pub(crate) dead_letters: VecDeque<DeadLetter>,
    pub(crate) counters: Counters,
}

impl Stack {
    /// Records a dead letter, the oldest dropped past [`DEAD_LETTERS_KEPT`].
    pub(crate) fn dead_letter(&mut self, letter: DeadLetter) {
        if self.dead_letters.len() >= DEAD_LETTERS_KEPT {
            self.dead_letters.pop_front();
        }
        self.dead_letters.push_back(letter);
    }
}

/// What a status answers.
#[derive(Clone, Debug)]
pub(crate) struct StackView {
    pub(crate) status: &'static str,
    pub(crate) table_name: String,
    pub(crate) secret_arn: String,
}

impl Events {
    /// Deploys the stack, or updates its settings (the key is kept).
    pub(crate) fn deploy(
        &self,
        log_group_name: String,
        reconciler_interval_minutes: u32,
        region: &str,
        account: &str,
    ) -> StackView {
        let view = {
            let mut guard = self.stack();
            match guard.as_mut() {
                Some(stack) => {
                    stack.status = "UPDATE_COMPLETE";
                    stack.log_group_name = log_group_name;
                    stack.reconciler_interval_minutes = reconciler_interval_minutes;
                    view(stack)
                }
                None => {
                    let mut key = [0u8; 32];
                    rand::rng().fill_bytes(&mut key);
                    let mut suffix = [0u8; 3];
                    rand::rng().fill_bytes(&mut suffix);
                    let suffix: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
                    let stack = Stack {
                        epoch: self.next_epoch.fetch_add(1, Ordering::Relaxed),
                        status: "CREATE_COMPLETE",
                        log_group_name,
                        reconciler_interval_minutes,
                        key: StackKey(key),
                        table_name: "rayito-events-webhooks-EventsTable".to_owned(),
                        secret_arn: format!(
                            "arn:aws:secretsmanager:{region}:{account}:secret:rayito-events-webhooks/stack-key-{suffix}"
                        ),
                        webhooks: Vec::new(),
                        store: Store::default(),
                        dead_letters: VecDeque::new(),
                        counters: Counters::default(),
                    };
                    view(guard.insert(stack))
                }
            }
        };
        self.rescheduled.notify_one();
        view
    }

    /// The stack's status, `None` when not deployed.
    pub(crate) fn status(&self) -> Option<StackView> {
        self.stack().as_ref().map(view)
    }

    /// Destroys the stack: webhooks (their workers end), events, dead
    /// letters, the key. `false` when it was not deployed.
    pub(crate) fn destroy(&self) -> bool {
        let gone = self.stack().take().is_some();
        self.rescheduled.notify_one();
        gone
    }

    /// The stack key, `None` when not deployed.
    pub(crate) fn stack_key(&self) -> Option<[u8; 32]> {
        self.stack().as_ref().map(|s| s.key.0)
    }

    /// Runs `f` on the stack of `epoch`, if it is still the deployed one.
    pub(crate) fn with_epoch(&self, epoch: u64, f: impl FnOnce(&mut Stack)) {
        if let Some(stack) = self.stack().as_mut().filter(|s| s.epoch == epoch) {
            f(stack);
        }
    }
}

fn view(stack: &Stack) -> StackView {
    StackView {
        status: stack.status,
        table_name: stack.table_name.clone(),
        secret_arn: stack.secret_arn.clone(),
    }
}
