//! The features' state on the core, kept by type: a builder, a handle and a
//! client each hold one [`Parts`], and each feature reads and writes its
//! own type there, so that the core never names a feature.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// What a feature keeps in a [`Parts`]: any `Debug` value that can cross
/// threads (its `Debug` must print no secret).
pub(crate) trait Part: Any + Send + Sync + fmt::Debug {}

impl<T: Any + Send + Sync + fmt::Debug> Part for T {}

/// One value per type, shared by clones (a value is replaced, never
/// mutated in place: clones made before keep theirs).
#[derive(Clone, Default)]
pub(crate) struct Parts(Vec<Arc<dyn Part>>);

impl Parts {
    /// The value of type `T`, if one was set.
    pub(crate) fn get<T: Part>(&self) -> Option<&T> {
        self.0
            .iter()
            .find_map(|part| (&**part as &dyn Any).downcast_ref::<T>())
    }

    /// Sets the value of type `T` (replacing the one before).
    pub(crate) fn set<T: Part>(&mut self, value: T) {
        self.remove::<T>();
        self.0.push(Arc::new(value));
    }

    /// Drops the value of type `T`.
    pub(crate) fn remove<T: Part>(&mut self) {
        self.0.retain(|part| !(&**part as &dyn Any).is::<T>());
    }

    /// The value of type `T`, changed by `change` (from its default when
    /// none was set).
    pub(crate) fn update<T: Part + Clone + Default>(&mut self, change: impl FnOnce(&mut T)) {
        let mut value = self.get::<T>().cloned().unwrap_or_default();
        change(&mut value);
        self.set(value);
    }
}

impl fmt::Debug for Parts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

/// The S3 prefixes a builder's features bind, each as `(owner, bucket,
/// key prefix)`: the core keeps them so that one feature can stay clear of
/// another's objects without naming it (the transfer staging must not
/// overlap the persistence prefix in the same bucket).
#[derive(Clone, Default)]
pub(crate) struct S3Prefixes(Vec<(&'static str, String, String)>);

impl S3Prefixes {
    /// Records `owner`'s prefix, replacing the one it recorded before.
    pub(crate) fn record(&mut self, owner: &'static str, bucket: &str, prefix: &str) {
        self.0.retain(|(o, _, _)| *o != owner);
        self.0.push((owner, bucket.to_owned(), prefix.to_owned()));
    }

    /// The key prefixes recorded in `bucket`, the latest record last.
    #[cfg(feature = "s3")]
    pub(crate) fn in_bucket<'a>(&'a self, bucket: &'a str) -> impl Iterator<Item = &'a str> {
        self.0
            .iter()
            .filter(move |(_, b, _)| b == bucket)
            .map(|(_, _, prefix)| prefix.as_str())
    }
}

// Buckets and keys are the caller's data and stay out of Debug (logs):
// only who bound a prefix is shown.
impl fmt::Debug for S3Prefixes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("S3Prefixes")
            .field(
                &self
                    .0
                    .iter()
                    .map(|(owner, _, _)| *owner)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_is_found_by_its_type_and_replaced() {
        let mut parts = Parts::default();
        assert!(parts.get::<u8>().is_none());
        parts.set(1u8);
        parts.set(String::from("a"));
        parts.set(2u8);
        assert_eq!(parts.get::<u8>(), Some(&2));
        assert_eq!(parts.get::<String>().map(String::as_str), Some("a"));
        let before = parts.clone();
        parts.update::<u8>(|v| *v += 1);
        parts.remove::<String>();
        assert_eq!(parts.get::<u8>(), Some(&3));
        assert!(parts.get::<String>().is_none());
        assert_eq!(before.get::<u8>(), Some(&2));
    }

    #[test]
    fn an_owner_records_one_prefix_and_debug_hides_it() {
        let mut prefixes = S3Prefixes::default();
        prefixes.record("a", "bkt", "one");
        prefixes.record("b", "other", "two");
        prefixes.record("a", "bkt", "three");
        #[cfg(feature = "s3")]
        {
            assert_eq!(prefixes.in_bucket("bkt").collect::<Vec<_>>(), ["three"]);
            assert_eq!(prefixes.in_bucket("none").count(), 0);
        }
        let shown = format!("{prefixes:?}");
        assert_eq!(shown, r#"S3Prefixes(["b", "a"])"#);
    }
}
