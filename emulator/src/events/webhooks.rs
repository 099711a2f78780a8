//! The registered webhooks: register (the URL checked, the types
//! parsed, the secret value kept by the webhook's worker, in memory only),
//! list, delete. Each webhook has a bounded queue its worker drains
//! ([`super::deliver`]).

use std::future::Future;
use std::sync::Arc;

use rand::RngCore as _;
use rayito_events::{Event, EventKind};
use tokio::sync::mpsc;

use super::Events;
use super::deliver::{self, Secret};

/// How many events wait for one webhook's worker at most; past it an
/// event is a dead letter (`queue_full`).
pub(crate) const QUEUE: usize = 1_024;

/// How many webhooks a stack holds at most.
pub(crate) const MAX_WEBHOOKS: usize = 100;

/// One registered webhook.
#[derive(Debug)]
pub(crate) struct Webhook {
    /// 16 random hex characters.
    pub(crate) id: String,
    pub(crate) url: String,
    /// In the order given, without repeats.
    pub(crate) types: Vec<EventKind>,
    queue: mpsc::Sender<Event>,
}

impl Webhook {
    /// Queues `event` for delivery; `false` when the queue is full.
    pub(crate) fn enqueue(&self, event: &Event) -> bool {
        !matches!(
            self.queue.try_send(event.clone()),
            Err(mpsc::error::TrySendError::Full(_))
        )
    }
}

/// A webhook as listed.
#[derive(Clone, Debug)]
pub(crate) struct WebhookView {
    pub(crate) id: String,
    pub(crate) url: String,
    pub(crate) types: Vec<EventKind>,
}

/// Why a registration is refused (the API's 404 or 400).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    NotDeployed,
    Invalid(String),
}

/// `url` when it is `http://` or `https://` with a host (and a port in
/// 1..=65535 if any): the local backend delivers to loopback and plain
/// HTTP too, unlike AWS's deliverable-URL rule.
pub(crate) fn check_url(url: &str) -> Result<http::Uri, String> {
    let refused = || "url must be an http:// or https:// URL with a host".to_owned();
    let uri: http::Uri = url.parse().map_err(|_| refused())?;
    let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
    let authority = uri.authority().ok_or_else(refused)?;
    let host_ok = !uri.host().unwrap_or_default().is_empty() && !authority.as_str().contains('@');
    let port_ok = uri.port_u16() != Some(0);
    if scheme_ok && host_ok && port_ok {
        Ok(uri)
    } else {
        Err(refused())
    }
}

/// The kinds of `types` (`sandbox.lifecycle.<kind>`), repeats dropped.
pub(crate) fn parse_types(types: &[String]) -> Result<Vec<EventKind>, String> {
    if types.is_empty() {
        return Err("types cannot be empty".to_owned());
    }
    let mut kinds = Vec::new();
    for t in types {
        let kind =
            EventKind::from_type_name(t).ok_or_else(|| format!("unknown event type: {t}"))?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    Ok(kinds)
}

impl Events {
    /// Registers a webhook: its view, and its worker (for the caller to
    /// spawn), which holds the secret.
    ///
    /// # Errors
    /// Not deployed, a URL or types refused, too many webhooks.
    pub(crate) fn register_webhook(
        self: &Arc<Self>,
        url: &str,
        types: &[String],
        secret: Secret,
    ) -> Result<(WebhookView, impl Future<Output = ()> + Send + 'static), Refused> {
        let uri = check_url(url).map_err(Refused::Invalid)?;
        let types = parse_types(types).map_err(Refused::Invalid)?;
        let mut guard = self.stack();
        let stack = guard.as_mut().ok_or(Refused::NotDeployed)?;
        if stack.webhooks.len() >= MAX_WEBHOOKS {
            return Err(Refused::Invalid(format!(
                "a stack holds at most {MAX_WEBHOOKS} webhooks"
            )));
        }
        let mut raw = [0u8; 8];
        rand::rng().fill_bytes(&mut raw);
        let id: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        let (queue, rx) = mpsc::channel(QUEUE);
        stack.webhooks.push(Webhook {
            id: id.clone(),
            url: url.to_owned(),
            types: types.clone(),
            queue,
        });
        let worker = deliver::worker(
            self.clone(),
            deliver::Target {
                epoch: stack.epoch,
                webhook_id: id.clone(),
                uri,
                secret,
            },
            rx,
        );
        let view = WebhookView {
            id,
            url: url.to_owned(),
            types,
        };
        Ok((view, worker))
    }

    /// The webhooks in registration order, `None` when not deployed.
    pub(crate) fn webhooks(&self) -> Option<Vec<WebhookView>> {
        let guard = self.stack();
        let stack = guard.as_ref()?;
        Some(
            stack
                .webhooks
                .iter()
                .map(|w| WebhookView {
                    id: w.id.clone(),
                    url: w.url.clone(),
                    types: w.types.clone(),
                })
                .collect(),
        )
    }

    /// Deletes a webhook (its worker stops before its next delivery):
    /// whether it existed; `None` when not deployed.
    pub(crate) fn delete_webhook(&self, id: &str) -> Option<bool> {
        let mut guard = self.stack();
        let stack = guard.as_mut()?;
        let before = stack.webhooks.len();
        stack.webhooks.retain(|w| w.id != id);
        Some(stack.webhooks.len() != before)
    }

    /// Whether webhook `id` of stack `epoch` is still registered.
    pub(crate) fn webhook_live(&self, epoch: u64, id: &str) -> bool {
        self.stack()
            .as_ref()
            .is_some_and(|s| s.epoch == epoch && s.webhooks.iter().any(|w| w.id == id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_need_http_or_https_and_a_host() {
        for ok in [
            "http://127.0.0.1:8080/hook",
            "https://example.com/x?y=1",
            "http://localhost/",
            "http://[::1]:9/",
        ] {
            assert!(check_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "ftp://example.com/",
            "example.com/hook",
            "http:///path",
            "http://user:pw@example.com/",
            "http://example.com:0/",
            "https://exa mple.com/",
            "",
        ] {
            assert_eq!(
                check_url(bad).unwrap_err(),
                "url must be an http:// or https:// URL with a host",
                "{bad}"
            );
        }
    }

    #[test]
    fn types_are_the_lifecycle_types() {
        let t = |v: &[&str]| parse_types(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            t(&[
                "sandbox.lifecycle.killed",
                "sandbox.lifecycle.created",
                "sandbox.lifecycle.killed"
            ]),
            Ok(vec![EventKind::Killed, EventKind::Created])
        );
        assert_eq!(t(&[]), Err("types cannot be empty".into()));
        assert_eq!(
            t(&["sandbox.lifecycle.exploded"]),
            Err("unknown event type: sandbox.lifecycle.exploded".into())
        );
    }
}
