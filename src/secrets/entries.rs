//! The secret cache's entries: a map bounded in count, whose entries
//! expire a fixed time after they are stored and whose least recently used
//! entry goes first when it is full. Every operation but `retain` is
//! logarithmic in the count: a cache of a million entries sweeps on each
//! read without scanning them all.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use tokio::time::Instant;

/// One value with its positions in the two orders.
struct Slot<V> {
    value: V,
    /// Expiry, and the store number that makes it unique in `by_expiry`.
    expires: (Instant, u64),
    /// Last use (a tick unique in `by_use`).
    used: u64,
}

/// The entries of one cache (see the module doc).
pub(super) struct Entries<K, V> {
    slots: HashMap<K, Slot<V>>,
    by_expiry: BTreeMap<(Instant, u64), K>,
    by_use: BTreeMap<u64, K>,
    /// Numbers uses and stores; never repeats within a cache's life (u64).
    tick: u64,
}

impl<K, V> Default for Entries<K, V> {
    fn default() -> Self {
        Self {
            slots: HashMap::new(),
            by_expiry: BTreeMap::new(),
            by_use: BTreeMap::new(),
            tick: 0,
        }
    }
}

impl<K: Clone + Eq + Hash, V: Clone> Entries<K, V> {
    /// How many entries are kept (expired ones included until a sweep).
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    fn next_tick(&mut self) -> u64 {
        self.tick = self.tick.wrapping_add(1);
        self.tick
    }

    /// Drops the entries that expired by `now` (those in order of expiry,
    /// so only the expired ones are visited).
    pub(super) fn sweep(&mut self, now: Instant) {
        while let Some(entry) = self.by_expiry.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            if let Some(slot) = self.slots.remove(&key) {
                self.by_use.remove(&slot.used);
            }
        }
    }

    /// The value of `key`, marked as just used.
    pub(super) fn get(&mut self, key: &K) -> Option<V> {
        let tick = self.next_tick();
        let slot = self.slots.get_mut(key)?;
        let key = self.by_use.remove(&slot.used)?;
        slot.used = tick;
        let value = slot.value.clone();
        self.by_use.insert(tick, key);
        Some(value)
    }

    /// Stores `value` under `key` until `expires`, first dropping the least
    /// recently used entries to keep at most `max` (at least one is kept:
    /// the new one).
    pub(super) fn insert(&mut self, key: K, value: V, expires: Instant, max: usize) {
        self.remove(&key);
        while self.slots.len() >= max.max(1) {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            if let Some(slot) = self.slots.remove(&oldest) {
                self.by_expiry.remove(&slot.expires);
            }
        }
        let stored = self.next_tick();
        let used = self.next_tick();
        self.by_expiry.insert((expires, stored), key.clone());
        self.by_use.insert(used, key.clone());
        self.slots.insert(
            key,
            Slot {
                value,
                expires: (expires, stored),
                used,
            },
        );
    }

    fn remove(&mut self, key: &K) {
        if let Some(slot) = self.slots.remove(key) {
            self.by_expiry.remove(&slot.expires);
            self.by_use.remove(&slot.used);
        }
    }

    /// Keeps only the entries whose key passes `keep` (a scan: for an
    /// explicit invalidation, not for every read).
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&K) -> bool) {
        let gone: Vec<K> = self.slots.keys().filter(|k| !keep(k)).cloned().collect();
        for key in &gone {
            self.remove(key);
        }
    }

    /// Drops every entry.
    pub(super) fn clear(&mut self) {
        self.slots.clear();
        self.by_expiry.clear();
        self.by_use.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(base: Instant, secs: u64) -> Instant {
        base + Duration::from_secs(secs)
    }

    /// The three structures agree: every slot is in both orders once.
    fn consistent(e: &Entries<&'static str, u32>) {
        assert_eq!(e.by_expiry.len(), e.slots.len());
        assert_eq!(e.by_use.len(), e.slots.len());
        for (key, slot) in &e.slots {
            assert_eq!(e.by_expiry.get(&slot.expires), Some(key));
            assert_eq!(e.by_use.get(&slot.used), Some(key));
        }
    }

    #[test]
    fn a_sweep_drops_exactly_the_expired_entries() {
        let base = Instant::now();
        let mut e = Entries::default();
        e.insert("a", 1, at(base, 10), 8);
        e.insert("b", 2, at(base, 20), 8);
        e.insert("c", 3, at(base, 30), 8);
        e.sweep(at(base, 20));
        consistent(&e);
        assert_eq!(e.get(&"a"), None);
        assert_eq!(e.get(&"b"), None, "expiring at now is expired");
        assert_eq!(e.get(&"c"), Some(3));
        assert_eq!(e.len(), 1);
    }

    #[test]
    fn a_full_map_drops_the_least_recently_used() {
        let base = Instant::now();
        let mut e = Entries::default();
        e.insert("a", 1, at(base, 10), 2);
        e.insert("b", 2, at(base, 10), 2);
        assert_eq!(e.get(&"a"), Some(1), "a is now the most recently used");
        e.insert("c", 3, at(base, 10), 2);
        consistent(&e);
        assert_eq!(e.get(&"b"), None);
        assert_eq!(e.get(&"a"), Some(1));
        assert_eq!(e.get(&"c"), Some(3));
        // A max of zero still keeps the new entry.
        e.insert("d", 4, at(base, 10), 0);
        assert_eq!(e.len(), 1);
        consistent(&e);
    }

    #[test]
    fn storing_again_replaces_value_and_expiry() {
        let base = Instant::now();
        let mut e = Entries::default();
        e.insert("a", 1, at(base, 10), 4);
        e.insert("a", 2, at(base, 30), 4);
        consistent(&e);
        e.sweep(at(base, 20));
        assert_eq!(
            e.get(&"a"),
            Some(2),
            "the old expiry is gone with the old value"
        );
        assert_eq!(e.len(), 1);
    }

    #[test]
    fn retain_and_clear_keep_the_orders_in_step() {
        let base = Instant::now();
        let mut e = Entries::default();
        for (i, key) in ["a", "b", "c", "d"].into_iter().enumerate() {
            e.insert(key, u32::try_from(i).unwrap(), at(base, 10), 8);
        }
        e.retain(|k| *k != "b" && *k != "d");
        consistent(&e);
        assert_eq!(e.len(), 2);
        e.clear();
        consistent(&e);
        assert_eq!(e.len(), 0);
        e.sweep(at(base, 100));
    }
}
