//! A long capacity wait is visible: every retry is a `tracing` event of
//! target `rayito::retry` with the attempt and the time waited so far.
//!
//! One test per binary: it installs the process-wide subscriber (a scoped
//! one misses events whose callsite another test's thread registered
//! first).

use crate::sdk_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rayito::error::RetryPolicy;
use sdk_support::{builder, emulator};
use tracing_subscriber::layer::SubscriberExt as _;

/// The fields of every `rayito::retry` event, as `name=value ` text.
#[derive(Clone, Default)]
struct RetryEvents(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for RetryEvents {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        struct Fields(String);
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!("{}={:?} ", field.name(), value));
            }
        }
        if event.metadata().target() == "rayito::retry" {
            let mut fields = Fields(String::new());
            event.record(&mut fields);
            self.0.lock().unwrap().push(fields.0);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capacity_wait_logs_each_attempt_with_the_elapsed_time() {
    let events = RetryEvents::default();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(events.clone()))
        .expect("one subscriber");

    let emu = emulator().await;
    emu.faults().insufficient_capacity(3);
    let mut policy = RetryPolicy::default();
    policy.capacity.initial = Duration::from_millis(20);
    policy.capacity.max_delay = Duration::from_millis(40);
    let sbx = builder(&emu)
        .retry_policy(policy)
        .create()
        .await
        .expect("the fourth attempt succeeds");

    let seen = events.0.lock().unwrap().clone();
    let capacity: Vec<&String> = seen
        .iter()
        .filter(|e| e.contains("operation=\"RunMicrovm\"") && e.contains("kind=\"capacity\""))
        .collect();
    assert_eq!(capacity.len(), 3, "{seen:?}");
    let elapsed: Vec<u64> = capacity
        .iter()
        .map(|e| {
            let at = e.find("elapsed_ms=").expect("elapsed_ms") + "elapsed_ms=".len();
            e[at..]
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .expect("a number")
        })
        .collect();
    // One event per attempt, each with the time waited so far: the third
    // comes after at least the first two delays (20 ms, 40 ms, less 25 %).
    assert!(elapsed.windows(2).all(|w| w[0] <= w[1]), "{elapsed:?}");
    assert!(elapsed[2] >= 45, "{elapsed:?}");
    for (n, e) in capacity.iter().enumerate() {
        assert!(e.contains(&format!("attempt={}", n + 1)), "{e}");
        assert!(e.contains("delay_ms="), "{e}");
    }
    assert!(sbx.kill().await.unwrap());
}
