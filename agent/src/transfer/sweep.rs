//! The staging object of an upload URL, deleted again once the URL has
//! expired: a presigned PUT or POST is valid until it expires, not once,
//! so whoever holds it can upload again after the import consumed (and
//! deleted) the first object, and nothing would read or delete the
//! second. The agent still holds the DELETE the SDK signed (valid an hour
//! past the upload URL), and uses it a little after the expiry, and once
//! more later for an upload that started before the expiry and ended
//! after. A sandbox that is gone by then sweeps nothing: the bucket's
//! lifecycle rule on the staging prefix does (docs/transfers.md).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::url::Checked;
use super::web::{self, HttpClient};

/// When the DELETE is sent, after the upload URL's expiry.
pub(crate) const SWEEPS_AFTER_EXPIRY: [Duration; 2] =
    [Duration::from_secs(5), Duration::from_secs(30 * 60)];
/// Sweeps waiting at once in this process, at most (past it, the
/// lifecycle rule is the only cleanup).
const MAX_PENDING: usize = 1024;

static PENDING: AtomicUsize = AtomicUsize::new(0);

/// Releases its slot in [`PENDING`] however the task ends.
struct Slot;

impl Drop for Slot {
    fn drop(&mut self) {
        PENDING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Deletes the object `delete` names at each of [`SWEEPS_AFTER_EXPIRY`]
/// past `expiry`, in the background; failures are left to the lifecycle
/// rule (nothing is logged but that it happened).
pub(crate) fn after_expiry(client: HttpClient, delete: Checked, expiry: Instant) {
    if PENDING.fetch_add(1, Ordering::Relaxed) >= MAX_PENDING {
        PENDING.fetch_sub(1, Ordering::Relaxed);
        tracing::info!("transfer: too many sweeps pending; the lifecycle rule expires this object");
        return;
    }
    let slot = Slot;
    tokio::spawn(async move {
        let _slot = slot;
        for after in SWEEPS_AFTER_EXPIRY {
            tokio::time::sleep_until(expiry + after).await;
            let mut req = http::Request::new(web::empty());
            *req.method_mut() = http::Method::DELETE;
            *req.uri_mut() = delete.uri.clone();
            *req.headers_mut() = delete.headers.clone();
            match client.send(req, web::IDLE_TIMEOUT).await {
                Ok(resp) if resp.status().is_success() => {}
                _ => tracing::info!("transfer: a staging object sweep failed"),
            }
        }
    });
}
