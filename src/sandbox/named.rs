//! The named items a feature's setter gives a builder (S3 mounts and EFS
//! volumes by mount path, secret gateways by name) and the checked ones a
//! `create` sends in its one Configure: one shape for the three features,
//! so that their steps give, read, refuse and log them alike.
//!
//! `Debug` shows the keys only: an item's own fields (buckets, file system
//! ids, secret names) stay out of logs, as out of messages.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use super::SandboxBuilder;
use crate::error::SandboxError;

/// The items of type `T` given to a builder (its part), by key, in the
/// order given.
#[derive(Clone)]
pub(crate) struct Given<T>(Vec<(String, T)>);

impl<T> Default for Given<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

/// The keys of `items` as `name(["k1", ...])`.
fn keys<T>(f: &mut fmt::Formatter<'_>, name: &str, items: &[(String, T)]) -> fmt::Result {
    let keys: Vec<&str> = items.iter().map(|(k, _)| k.as_str()).collect();
    f.debug_tuple(name).field(&keys).finish()
}

impl<T> fmt::Debug for Given<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        keys(f, "Given", &self.0)
    }
}

/// Puts `item` at `key` in `list`, a map in the order given: the same key
/// again replaces its item, in its place.
pub(crate) fn put<T>(list: &mut Vec<(String, T)>, key: String, item: T) {
    match list.iter_mut().find(|(k, _)| *k == key) {
        Some(slot) => slot.1 = item,
        None => list.push((key, item)),
    }
}

/// Gives `item` at `key` to `builder` (see [`put`]).
pub(crate) fn give<T: Clone + Send + Sync + 'static>(
    builder: &mut SandboxBuilder,
    key: String,
    item: T,
) {
    builder
        .parts_mut()
        .update::<Given<T>>(|g| put(&mut g.0, key, item));
}

/// The items of type `T` given to `builder` (none: empty).
pub(crate) fn given<T: Send + Sync + 'static>(builder: &SandboxBuilder) -> &[(String, T)] {
    builder
        .parts()
        .get::<Given<T>>()
        .map_or(&[], |g| g.0.as_slice())
}

/// `Ok` when `builder` has no item of type `T`, else `refusal` (what
/// `connect` and a pool's builder say of a feature they cannot carry).
///
/// # Errors
/// `refusal`'s.
pub(crate) fn refuse_any<T: Send + Sync + 'static>(
    builder: &SandboxBuilder,
    refusal: impl FnOnce() -> SandboxError,
) -> Result<(), SandboxError> {
    if given::<T>(builder).is_empty() {
        Ok(())
    } else {
        Err(refusal())
    }
}

/// The checked items of type `T` a `create` sends once the sandbox is
/// ready (the handle's part). Shared by its clones, so that a step before
/// the launch can fill in what the apply reads (the volumes' mount
/// targets).
#[derive(Clone)]
pub(crate) struct ToApply<T>(Arc<Mutex<Vec<(String, T)>>>);

impl<T: Clone> ToApply<T> {
    pub(crate) fn new(items: Vec<(String, T)>) -> Self {
        Self(Arc::new(Mutex::new(items)))
    }

    /// The items now.
    pub(crate) fn items(&self) -> Vec<(String, T)> {
        // Replaced whole: a panic leaves a consistent list.
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the items.
    #[cfg_attr(not(feature = "efs"), allow(dead_code))] // the volumes' mount targets
    pub(crate) fn replace(&self, items: Vec<(String, T)>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = items;
    }
}

impl<T> fmt::Debug for ToApply<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        keys(f, "ToApply", &items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_key_again_replaces_its_item_in_its_place() {
        let mut list = Vec::new();
        put(&mut list, "/mnt/a".to_owned(), 1);
        put(&mut list, "/mnt/b".to_owned(), 2);
        put(&mut list, "/mnt/a".to_owned(), 3);
        assert_eq!(
            list,
            [("/mnt/a".to_owned(), 3), ("/mnt/b".to_owned(), 2)].to_vec()
        );
    }

    #[test]
    fn debug_shows_the_keys_only() {
        let given = Given(vec![("/mnt/data".to_owned(), "secret-bucket")]);
        let to_apply = ToApply::new(vec![("gw".to_owned(), "secret-name")]);
        assert_eq!(format!("{given:?}"), r#"Given(["/mnt/data"])"#);
        assert_eq!(format!("{to_apply:?}"), r#"ToApply(["gw"])"#);
    }
}
