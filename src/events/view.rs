//! `sandbox.events_status()`: the sandbox's lifecycle events section as
//! its agent reports it (one ConfigureStatus per read).

use crate::error::SandboxError;
use crate::pb;

/// A sandbox's lifecycle events counters, as its agent keeps them since
/// it started (a resumed sandbox keeps counting).
///
/// `enabled` is false, and the rest zero, when the sandbox emits no
/// events (created without [`SandboxBuilder::events`](crate::SandboxBuilder::events))
/// or its agent cannot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventsHealth {
    /// Whether the agent holds the section (it signs and writes a line
    /// per lifecycle event).
    pub enabled: bool,
    /// Signed event lines written to the sandbox's logs.
    pub emitted: u64,
    /// Event lines the agent dropped (its queue full, the log write
    /// failed, no randomness for an event id): the stack never sees
    /// them, and its reconciler writes the sandbox's end later.
    pub dropped: u64,
    /// The class of the last dropped line (`queue_full`, `write_failed`,
    /// `random_unavailable`); `None` before any drop. A class name only,
    /// never the agent's text.
    pub last_error_class: Option<String>,
}

impl EventsHealth {
    pub(crate) fn from_wire(status: Option<&pb::LifecycleEventsStatus>) -> Self {
        let Some(s) = status else {
            return Self::default();
        };
        Self {
            enabled: true,
            emitted: s.emitted,
            dropped: s.dropped,
            last_error_class: (!s.last_error_class.is_empty())
                .then(|| crate::error::map::configure::error_class(&s.last_error_class).to_owned()),
        }
    }
}

impl crate::sandbox::Sandbox {
    /// The sandbox's lifecycle events counters, read from its agent (one
    /// ConfigureStatus): lines written and dropped; `enabled` false when
    /// it emits none (docs/events.md, "The sandbox's counters").
    ///
    /// # Errors
    /// ConfigureStatus's failures, as the transport maps them.
    pub async fn events_status(&self) -> Result<EventsHealth, SandboxError> {
        boxed!(Result<EventsHealth, SandboxError>, {
            let status = crate::configure::read_status(self.conn()).await?;
            Ok(EventsHealth::from_wire(status.lifecycle_events.as_ref()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::EventsHealth;
    use crate::pb;

    #[test]
    fn the_wire_status_read_and_its_class_filtered() {
        assert_eq!(EventsHealth::from_wire(None), EventsHealth::default());
        let on = EventsHealth::from_wire(Some(&pb::LifecycleEventsStatus {
            emitted: 3,
            dropped: 1,
            last_error_class: "queue_full".to_owned(),
        }));
        assert!(on.enabled);
        assert_eq!((on.emitted, on.dropped), (3, 1));
        assert_eq!(on.last_error_class.as_deref(), Some("queue_full"));
        let quiet = EventsHealth::from_wire(Some(&pb::LifecycleEventsStatus::default()));
        assert!(quiet.enabled);
        assert_eq!(quiet.last_error_class, None);
        let text = EventsHealth::from_wire(Some(&pb::LifecycleEventsStatus {
            emitted: 0,
            dropped: 1,
            last_error_class: "could not write /var/log/x: key abc".to_owned(),
        }));
        assert_eq!(
            text.last_error_class.as_deref(),
            Some("unrecognized_error_class")
        );
    }
}
