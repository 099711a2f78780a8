//! Where credentials of a push or pull may go, remembered on the host: the
//! URL the caller gave to `clone` or `remote_add`, per sandbox, repository
//! path and remote name. Sandbox code can rewrite `.git/config`, never this
//! memory, so a push or pull checks the sandbox's URL against it instead of
//! trusting what the sandbox says.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// At most this many pins are kept in a process; past it the oldest
/// sandbox's go first (a push of theirs then needs its `url` option).
const MAX_PINS: usize = 4096;

/// `(sandbox id, repository key, remote)` → URL, with an insertion
/// counter to drop the oldest.
type Pins = BTreeMap<(String, String, String), (u64, String)>;

static PINS: Mutex<(u64, Pins)> = Mutex::new((0, BTreeMap::new()));

/// The key of a repository path as the caller wrote it: absolute, or
/// relative to the view's working directory (`None`: the sandbox's). Two
/// spellings of one directory are two keys: the second then needs `url`.
pub(crate) fn repo_key(cwd: Option<&str>, path: &str) -> String {
    let trimmed = path.trim_end_matches('/');
    let path = if trimmed.is_empty() { path } else { trimmed };
    if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{}\0{path}", cwd.unwrap_or(""))
    }
}

/// The directory `git clone <url>` makes without a path: the URL's last
/// part without `.git` (git's own rule, for the URLs credentials go to).
pub(crate) fn clone_dir(url: &str) -> Option<String> {
    let mut rest = url.trim_end_matches('/');
    rest = rest.strip_suffix("/.git").unwrap_or(rest);
    rest = rest.strip_suffix(".git").unwrap_or(rest);
    let (_, last) = rest.rsplit_once(['/', ':'])?;
    (!last.is_empty()).then(|| last.to_owned())
}

/// Remembers that `remote` of `repo` in sandbox `sandbox` is `url`.
pub(crate) fn pin(sandbox: &str, repo: String, remote: &str, url: &str) {
    let mut guard = PINS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (counter, pins) = &mut *guard;
    *counter += 1;
    pins.insert(
        (sandbox.to_owned(), repo, remote.to_owned()),
        (*counter, url.to_owned()),
    );
    while pins.len() > MAX_PINS {
        let oldest = pins
            .iter()
            .min_by_key(|(_, (n, _))| *n)
            .map(|(k, _)| k.clone());
        match oldest {
            Some(key) => pins.remove(&key),
            None => break,
        };
    }
}

/// The URL pinned for `remote` of `repo` in `sandbox`, if any.
pub(crate) fn pinned(sandbox: &str, repo: String, remote: &str) -> Option<String> {
    let guard = PINS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    guard
        .1
        .get(&(sandbox.to_owned(), repo, remote.to_owned()))
        .map(|(_, url)| url.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_clone_dirs() {
        assert_eq!(repo_key(None, "/home/user/r/"), "/home/user/r");
        assert_eq!(repo_key(Some("/w"), "/"), "/");
        assert_eq!(repo_key(Some("/w"), "r"), "/w\0r");
        assert_eq!(repo_key(None, "r"), "\0r");
        assert_eq!(clone_dir("https://h/o/r.git").as_deref(), Some("r"));
        assert_eq!(clone_dir("https://h/o/r/").as_deref(), Some("r"));
        assert_eq!(clone_dir("https://h/o/r/.git").as_deref(), Some("r"));
        assert_eq!(clone_dir("https://h").as_deref(), Some("h"));
    }

    #[test]
    fn pins_are_per_sandbox_repo_and_remote() {
        pin("sbx-a", repo_key(None, "/r"), "origin", "https://h/a.git");
        pin("sbx-b", repo_key(None, "/r"), "origin", "https://h/b.git");
        assert_eq!(
            pinned("sbx-a", repo_key(None, "/r/"), "origin").as_deref(),
            Some("https://h/a.git")
        );
        assert_eq!(
            pinned("sbx-b", repo_key(None, "/r"), "origin").as_deref(),
            Some("https://h/b.git")
        );
        assert_eq!(pinned("sbx-a", repo_key(None, "/r"), "up"), None);
        pin("sbx-a", repo_key(None, "/r"), "origin", "https://h/c.git");
        assert_eq!(
            pinned("sbx-a", repo_key(None, "/r"), "origin").as_deref(),
            Some("https://h/c.git")
        );
    }
}
