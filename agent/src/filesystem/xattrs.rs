//! A file's metadata (`WriteRequest.metadata`, `EntryInfo.metadata`): each
//! key is the extended attribute `user.rayito.<key>` of the file, set by
//! descriptor on a Write's temporary file before it is renamed into place
//! (so the set replaces the target's whole, as the new file does) and read
//! back into every `EntryInfo`.
//!
//! The rules are the reference agent's, checked before any file is made:
//! keys of 1-255 HTTP token characters, lowercased (two keys equal once
//! lowercased are refused), values of printable ASCII, at most 64 keys and
//! 4,000 bytes counting the prefix. Messages never repeat a key or value.

use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::path::Path;

use rustix::fs::XattrFlags;
use tonic::Status;

/// Every key's attribute name starts with it.
const PREFIX: &str = "user.rayito.";
const MAX_KEYS: usize = 64;
const MAX_KEY_CHARS: usize = 255;
/// Keys, values and one prefix per key.
const MAX_BYTES: usize = 4000;

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

/// The metadata of a Write as it is stored (keys lowercased), or the
/// refusal naming the rule it breaks.
#[allow(clippy::result_large_err)]
pub(crate) fn checked(
    metadata: std::collections::HashMap<String, String>,
) -> Result<BTreeMap<String, String>, Status> {
    let invalid = |rule: &str| Status::invalid_argument(format!("invalid metadata: {rule}"));
    if metadata.len() > MAX_KEYS {
        return Err(invalid("at most 64 keys"));
    }
    let mut out = BTreeMap::new();
    let mut bytes = 0usize;
    for (key, value) in metadata {
        if key.is_empty() || key.chars().count() > MAX_KEY_CHARS {
            return Err(invalid("each key has 1 to 255 characters"));
        }
        if !key.chars().all(is_token_char) {
            return Err(invalid("keys are HTTP token characters"));
        }
        if !value.chars().all(|c| (' '..='~').contains(&c)) {
            return Err(invalid("values are printable ASCII"));
        }
        bytes += PREFIX.len() + key.len() + value.len();
        if out.insert(key.to_ascii_lowercase(), value).is_some() {
            return Err(invalid("two keys are equal once lowercased"));
        }
    }
    if bytes > MAX_BYTES {
        return Err(invalid(
            "more than 4000 bytes counting the prefix user.rayito.",
        ));
    }
    Ok(out)
}

/// Sets `metadata` on the open `file`.
///
/// # Errors
/// The filesystem's: `ENOTSUP` where it keeps no user attributes.
pub(crate) fn set(file: impl AsFd, metadata: &BTreeMap<String, String>) -> std::io::Result<()> {
    for (key, value) in metadata {
        let name = format!("{PREFIX}{key}");
        rustix::fs::fsetxattr(&file, name.as_str(), value.as_bytes(), XattrFlags::empty())?;
    }
    Ok(())
}

/// The status of a failed [`set`].
pub(crate) fn set_status(e: &std::io::Error) -> Status {
    if e.raw_os_error() == Some(libc::ENOTSUP) {
        Status::failed_precondition("file metadata is not supported by this filesystem")
    } else {
        super::info::io_status(e)
    }
}

/// The metadata of `file` (open) or of `host` (not following a final
/// symlink); empty where the filesystem keeps no attributes.
pub(crate) enum Of<'a> {
    File(&'a std::fs::File),
    Path(&'a Path),
}

impl Of<'_> {
    fn list_len(&self) -> std::io::Result<usize> {
        Ok(match self {
            Self::File(f) => rustix::fs::flistxattr_query(f)?,
            Self::Path(p) => rustix::fs::llistxattr_query(*p)?,
        })
    }

    fn list(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        Ok(match self {
            Self::File(f) => rustix::fs::flistxattr(f, buf)?,
            Self::Path(p) => rustix::fs::llistxattr(*p, buf)?,
        })
    }

    fn get(&self, name: &str, buf: &mut [u8]) -> std::io::Result<usize> {
        Ok(match self {
            Self::File(f) => rustix::fs::fgetxattr(f, name, buf)?,
            Self::Path(p) => rustix::fs::lgetxattr(*p, name, buf)?,
        })
    }

    /// The `user.rayito.*` attributes, without the prefix (a value that is
    /// not text is skipped). Most files have none: one call finds that.
    pub(crate) fn read(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let Ok(len) = self.list_len() else {
            return out;
        };
        if len == 0 {
            return out;
        }
        let mut names = vec![0u8; len];
        let Ok(len) = self.list(&mut names) else {
            return out;
        };
        let mut value = vec![0u8; MAX_BYTES];
        // Sandbox code can set `user.rayito.*` itself: what is read back is
        // held to the rules a Write is (64 keys, 4,000 bytes in all), the
        // rest left out, so a listing never carries more than that per entry.
        let mut bytes = 0usize;
        for name in names[..len].split(|b| *b == 0) {
            if out.len() == MAX_KEYS {
                break;
            }
            let Ok(name) = std::str::from_utf8(name) else {
                continue;
            };
            let Some(key) = name.strip_prefix(PREFIX) else {
                continue;
            };
            if let Ok(n) = self.get(name, &mut value)
                && let Ok(text) = std::str::from_utf8(&value[..n])
            {
                let size = name.len() + n;
                if bytes + size > MAX_BYTES {
                    continue;
                }
                bytes += size;
                out.insert(key.to_owned(), text.to_owned());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skip_support;

    fn map(pairs: &[(&str, &str)]) -> std::collections::HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_rules_refuse_with_their_fixed_messages() {
        let msg = |pairs: &[(&str, &str)]| checked(map(pairs)).unwrap_err().message().to_owned();
        assert_eq!(
            msg(&[("", "v")]),
            "invalid metadata: each key has 1 to 255 characters"
        );
        assert_eq!(
            msg(&[("a b", "v")]),
            "invalid metadata: keys are HTTP token characters"
        );
        assert_eq!(
            msg(&[("k", "\n")]),
            "invalid metadata: values are printable ASCII"
        );
        assert_eq!(
            msg(&[("K", "1"), ("k", "2")]),
            "invalid metadata: two keys are equal once lowercased"
        );
        let big = "x".repeat(200);
        let many: Vec<(String, String)> = (0..30).map(|i| (format!("k{i}"), big.clone())).collect();
        let many: std::collections::HashMap<_, _> = many.into_iter().collect();
        assert_eq!(
            checked(many).unwrap_err().message(),
            "invalid metadata: more than 4000 bytes counting the prefix user.rayito."
        );
        let ok = checked(map(&[("Owner", "ana")])).unwrap();
        assert_eq!(ok.get("owner").map(String::as_str), Some("ana"));
    }

    #[test]
    fn what_sandbox_code_set_beyond_the_rules_is_not_read_back() {
        let file = tempfile::tempfile().unwrap();
        // One attribute at a time, as a guest could, until the filesystem
        // has no room (ext4 keeps about a block per file): past 64 keys.
        let mut set_count = 0;
        for i in 0..100 {
            let one: BTreeMap<String, String> = [(format!("k{i:03}"), "v".to_owned())].into();
            match set(&file, &one) {
                Ok(()) => set_count += 1,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => break,
                Err(e) => panic!("{e}"),
            }
        }
        if set_count <= MAX_KEYS {
            skip_support::skip(format!(
                "the temp filesystem keeps {set_count} user attributes per file, not more than 64"
            ));
            return;
        }
        let read = Of::File(&file).read();
        let bytes: usize = read
            .iter()
            .map(|(k, v)| PREFIX.len() + k.len() + v.len())
            .sum();
        assert_eq!(read.len(), MAX_KEYS, "of {set_count}");
        assert!(bytes <= MAX_BYTES, "{bytes}");
    }

    #[test]
    fn set_then_read_round_trips_where_the_filesystem_allows() {
        let file = tempfile::tempfile().unwrap();
        let wanted: BTreeMap<String, String> = [("a".to_owned(), "1".to_owned())].into();
        match set(&file, &wanted) {
            Ok(()) => assert_eq!(Of::File(&file).read(), wanted),
            Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => {
                skip_support::skip("the temp filesystem keeps no user attributes");
            }
            Err(e) => panic!("{e}"),
        }
    }
}
