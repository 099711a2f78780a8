//! A directory's entries from ListObjectsV2 pages (delimiter `/`): common
//! prefixes are directories, objects are files, and a directory shadows a
//! file of the same name (as mount-s3 does: keys `a` and `a/x` show one
//! directory `a`). S3 sorts `a` before `a.txt` before `a/`, so a file is
//! held back until the listing has gone past where `a/` would be.
//! Names no file can have (empty, `.`, `..`, holding a NUL) are skipped.

use std::collections::{BTreeMap, VecDeque};

use super::client::{ListPage, ObjectMeta};
use super::inodes::Kind;

/// One entry: name, kind, and S3's meta for a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    pub name: String,
    pub kind: Kind,
    pub meta: Option<ObjectMeta>,
}

/// The merge of a directory's pages, in order.
#[derive(Debug, Default)]
pub(super) struct Merge {
    /// Files waiting to know whether a directory shadows them.
    pending: BTreeMap<String, ObjectMeta>,
    /// Entries ready to hand out.
    pub ready: VecDeque<Entry>,
}

fn usable(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0'])
}

impl Merge {
    /// Adds a page listed under the mount-relative prefix `dir` (its keys
    /// start with it).
    pub(super) fn push(&mut self, dir: &str, page: ListPage) {
        // Objects and prefixes in S3's order, as `(rest of key, is prefix)`.
        let mut items: Vec<(String, Option<ObjectMeta>)> = page
            .objects
            .into_iter()
            .filter_map(|(k, m)| Some((k.strip_prefix(dir)?.to_owned(), Some(m))))
            .chain(
                page.prefixes
                    .into_iter()
                    .filter_map(|p| Some((p.strip_prefix(dir)?.to_owned(), None))),
            )
            .collect();
        items.sort_by(|a, b| a.0.cmp(&b.0));
        for (rest, meta) in items {
            match meta {
                Some(meta) => {
                    if usable(&rest) {
                        self.pending.insert(rest.clone(), meta);
                    }
                }
                None => {
                    let name = rest.strip_suffix('/').unwrap_or(&rest);
                    self.pending.remove(name);
                    if usable(name) {
                        self.ready.push_back(Entry {
                            name: name.to_owned(),
                            kind: Kind::Dir,
                            meta: None,
                        });
                    }
                }
            }
            self.release_before(&rest);
        }
    }

    /// Hands out the files whose directory (`name/`) would sort before
    /// `rest`: no later page can shadow them.
    fn release_before(&mut self, rest: &str) {
        while let Some(entry) = self.pending.first_entry() {
            if format!("{}/", entry.key()).as_str() >= rest {
                break;
            }
            let (name, meta) = entry.remove_entry();
            self.ready.push_back(Entry {
                name,
                kind: Kind::File,
                meta: Some(meta),
            });
        }
    }

    /// The listing ended: every held file is handed out.
    pub(super) fn finish(&mut self) {
        while let Some((name, meta)) = self.pending.pop_first() {
            self.ready.push_back(Entry {
                name,
                kind: Kind::File,
                meta: Some(meta),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;

    fn meta(size: u64) -> ObjectMeta {
        ObjectMeta {
            size,
            mtime: SystemTime::UNIX_EPOCH,
            etag: None,
        }
    }

    fn page(objects: &[&str], prefixes: &[&str]) -> ListPage {
        ListPage {
            objects: objects.iter().map(|k| ((*k).to_owned(), meta(1))).collect(),
            prefixes: prefixes.iter().map(|p| (*p).to_owned()).collect(),
            next: None,
        }
    }

    fn names(m: &Merge) -> Vec<(String, Kind)> {
        m.ready.iter().map(|e| (e.name.clone(), e.kind)).collect()
    }

    #[test]
    fn a_directory_shadows_a_file_across_pages() {
        let mut m = Merge::default();
        // `a` (file), then `a.txt`, then on the next page `a/` (dir).
        m.push("d/", page(&["d/a", "d/a.txt"], &[]));
        assert_eq!(names(&m), vec![]);
        m.push("d/", page(&["d/b"], &["d/a/"]));
        m.finish();
        assert_eq!(
            names(&m),
            vec![
                ("a".to_owned(), Kind::Dir),
                ("a.txt".to_owned(), Kind::File),
                ("b".to_owned(), Kind::File),
            ]
        );
    }

    #[test]
    fn unusable_names_are_skipped() {
        let mut m = Merge::default();
        // `d/` itself (a directory marker), `d/.`, `d//x` (empty name).
        m.push("d/", page(&["d/", "d/.", "d/..", "d/ok"], &["d//"]));
        m.finish();
        assert_eq!(names(&m), vec![("ok".to_owned(), Kind::File)]);
    }
}
