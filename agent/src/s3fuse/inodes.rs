//! The inodes a mount has handed the kernel: a name under a parent, the
//! key it stands for, what S3 last said of it, and the two local states S3
//! knows nothing of (a directory made by `mkdir` that holds no object yet,
//! a file being written that is not uploaded yet).
//!
//! Inode numbers are not stable across mounts (as with mount-s3): a name
//! keeps its number while the kernel remembers it (its lookup count).

use std::collections::HashMap;
use std::time::{Instant, SystemTime};

use super::client::ObjectMeta;

/// The root directory's inode.
pub(super) const ROOT: u64 = 1;

/// File or directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    File,
    Dir,
}

/// One inode.
#[derive(Clone, Debug)]
pub(super) struct Node {
    pub parent: u64,
    pub name: String,
    pub kind: Kind,
    /// The mount-relative key: a file's key, or a directory's prefix
    /// (ending in `/`; the root's is empty).
    pub key: String,
    pub size: u64,
    pub mtime: SystemTime,
    pub etag: Option<String>,
    /// When S3 last said this.
    pub checked: Instant,
    /// The kernel's lookup count.
    pub lookups: u64,
    /// Made by `mkdir`, not (yet) seen in S3.
    pub local_dir: bool,
    /// Being written: not in S3 until closed.
    pub writing: bool,
}

/// The table.
#[derive(Debug)]
pub(super) struct Inodes {
    nodes: HashMap<u64, Node>,
    names: HashMap<(u64, String), u64>,
    next: u64,
}

impl Inodes {
    /// A table holding the root, with `mtime` (the mount's time).
    pub(super) fn new(mtime: SystemTime) -> Self {
        let root = Node {
            parent: ROOT,
            name: String::new(),
            kind: Kind::Dir,
            key: String::new(),
            size: 0,
            mtime,
            etag: None,
            checked: Instant::now(),
            lookups: 1,
            local_dir: false,
            writing: false,
        };
        Self {
            nodes: HashMap::from([(ROOT, root)]),
            names: HashMap::new(),
            next: ROOT + 1,
        }
    }

    pub(super) fn get(&self, ino: u64) -> Option<&Node> {
        self.nodes.get(&ino)
    }

    pub(super) fn get_mut(&mut self, ino: u64) -> Option<&mut Node> {
        self.nodes.get_mut(&ino)
    }

    /// The inode `name` under `parent` currently stands for.
    pub(super) fn child(&self, parent: u64, name: &str) -> Option<u64> {
        self.names.get(&(parent, name.to_owned())).copied()
    }

    /// Records `name` under the directory `parent` as `kind` (with S3's
    /// `meta` for a file), keeping its inode when the kind is unchanged,
    /// and counts one lookup. `None` when `parent` is not a known
    /// directory.
    pub(super) fn upsert(
        &mut self,
        parent: u64,
        name: &str,
        kind: Kind,
        meta: Option<&ObjectMeta>,
        mtime: SystemTime,
    ) -> Option<u64> {
        let parent_key = match self.nodes.get(&parent) {
            Some(p) if p.kind == Kind::Dir => p.key.clone(),
            _ => return None,
        };
        let existing = self
            .child(parent, name)
            .filter(|ino| self.nodes.get(ino).is_some_and(|n| n.kind == kind));
        let ino = match existing {
            Some(ino) => ino,
            None => {
                let ino = self.next;
                self.next += 1;
                let key = match kind {
                    Kind::File => format!("{parent_key}{name}"),
                    Kind::Dir => format!("{parent_key}{name}/"),
                };
                self.nodes.insert(
                    ino,
                    Node {
                        parent,
                        name: name.to_owned(),
                        kind,
                        key,
                        size: 0,
                        mtime,
                        etag: None,
                        checked: Instant::now(),
                        lookups: 0,
                        local_dir: false,
                        writing: false,
                    },
                );
                self.names.insert((parent, name.to_owned()), ino);
                ino
            }
        };
        let node = self.nodes.get_mut(&ino)?;
        if let Some(meta) = meta
            && !node.writing
        {
            node.size = meta.size;
            node.mtime = meta.mtime;
            node.etag = meta.etag.clone();
        }
        node.checked = Instant::now();
        node.lookups += 1;
        Some(ino)
    }

    /// Forgets the name `name` under `parent` (its inode lives on while
    /// the kernel remembers it).
    pub(super) fn unlink(&mut self, parent: u64, name: &str) {
        if let Some(ino) = self.names.remove(&(parent, name.to_owned()))
            && self.nodes.get(&ino).is_some_and(|n| n.lookups == 0)
        {
            self.nodes.remove(&ino);
        }
    }

    /// The kernel forgets `n` lookups of `ino`.
    pub(super) fn forget(&mut self, ino: u64, n: u64) {
        if ino == ROOT {
            return;
        }
        let Some(node) = self.nodes.get_mut(&ino) else {
            return;
        };
        node.lookups = node.lookups.saturating_sub(n);
        if node.lookups > 0 || node.writing || node.local_dir {
            return;
        }
        let key = (node.parent, node.name.clone());
        self.nodes.remove(&ino);
        if self.names.get(&key) == Some(&ino) {
            self.names.remove(&key);
        }
    }

    /// The children of `parent` that only this mount knows of (local
    /// directories, files being written): name, kind, inode.
    pub(super) fn local_children(&self, parent: u64) -> Vec<(String, Kind, u64)> {
        let mut out: Vec<_> = self
            .names
            .iter()
            .filter(|((p, _), _)| *p == parent)
            .filter_map(|((_, name), ino)| {
                let n = self.nodes.get(ino)?;
                (n.local_dir || n.writing).then(|| (name.clone(), n.kind, *ino))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_their_inode_until_forgotten() {
        let now = SystemTime::now();
        let mut t = Inodes::new(now);
        let d = t.upsert(ROOT, "d", Kind::Dir, None, now).unwrap();
        assert_eq!(t.get(d).unwrap().key, "d/");
        let f = t.upsert(d, "f", Kind::File, None, now).unwrap();
        assert_eq!(t.get(f).unwrap().key, "d/f");
        assert_eq!(t.upsert(d, "f", Kind::File, None, now), Some(f));
        assert_eq!(t.get(f).unwrap().lookups, 2);
        // A file is no parent.
        assert_eq!(t.upsert(f, "x", Kind::File, None, now), None);
        t.forget(f, 1);
        assert!(t.get(f).is_some());
        t.forget(f, 1);
        assert!(t.get(f).is_none() && t.child(d, "f").is_none());
        // A name that became a directory gets a new inode.
        let f2 = t.upsert(d, "g", Kind::File, None, now).unwrap();
        let g = t.upsert(d, "g", Kind::Dir, None, now).unwrap();
        assert_ne!(f2, g);
        assert_eq!(t.child(d, "g"), Some(g));
        t.get_mut(g).unwrap().local_dir = true;
        assert_eq!(t.local_children(d), vec![("g".to_owned(), Kind::Dir, g)]);
    }
}
