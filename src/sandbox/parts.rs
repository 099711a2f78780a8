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
}
