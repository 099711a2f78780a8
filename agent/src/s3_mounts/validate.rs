//! A section checked whole before anything is touched: every path, bucket,
//! prefix and flag, and the image's bucket allowlist. A refusal is one of
//! the section's closed classes (the SDK's `MountCode`s), never a message
//! naming a bucket or a path.

use std::collections::BTreeSet;

use super::allowlist::Allowlist;
use crate::pb;

/// The most mounts one section may hold (the SDK checks the same bound on
/// mounts and volumes together).
pub(crate) const MAX_MOUNTS: usize = 4;
/// Where mount paths may be (strictly below).
const ROOTS: [&str; 2] = ["/mnt/", "/home/user/"];
/// The longest mount path (`PATH_MAX` less room for what is below it).
const MAX_PATH_BYTES: usize = 1024;
/// The longest key prefix (S3 keys are at most 1,024 bytes).
const MAX_PREFIX_BYTES: usize = 1024;

/// A refusal's class: a path the rules do not admit.
pub(crate) const INVALID_PATH: &str = "invalid_path";
/// A refusal's class: a bucket the image does not allow, a malformed
/// bucket name, two mounts on one path, or write permissions on a
/// read-only mount.
pub(crate) const NOT_ALLOWED: &str = "not_allowed";

/// One mount as asked, checked. Debug shows the path only (a bucket or a
/// prefix never reaches a log).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct MountSpec {
    pub path: String,
    pub bucket: String,
    /// Empty, or ending in `/` (added when the caller left it out: the
    /// prefix names a directory of the bucket).
    pub prefix: String,
    pub read_only: bool,
    pub allow_overwrite: bool,
    pub allow_delete: bool,
}

impl std::fmt::Debug for MountSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MountSpec")
            .field("path", &self.path)
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

/// Checks a whole section.
///
/// # Errors
/// The class of the first refusal.
pub(crate) fn section(
    config: &pb::S3MountsConfig,
    allowlist: &Allowlist,
) -> Result<Vec<MountSpec>, &'static str> {
    if config.mounts.len() > MAX_MOUNTS {
        return Err(INVALID_PATH);
    }
    let mut paths = BTreeSet::new();
    let mut specs: Vec<MountSpec> = Vec::with_capacity(config.mounts.len());
    for mount in &config.mounts {
        check_path(&mount.mount_path)?;
        if !paths.insert(mount.mount_path.as_str()) {
            return Err(NOT_ALLOWED);
        }
        if specs.iter().any(|s| overlaps(&s.path, &mount.mount_path)) {
            return Err(INVALID_PATH);
        }
        if !bucket_name(&mount.bucket) || !allowlist.allows(&mount.bucket) {
            return Err(NOT_ALLOWED);
        }
        if mount.read_only && (mount.allow_overwrite || mount.allow_delete) {
            return Err(NOT_ALLOWED);
        }
        specs.push(MountSpec {
            path: mount.mount_path.clone(),
            bucket: mount.bucket.clone(),
            prefix: prefix(&mount.prefix)?,
            read_only: mount.read_only,
            allow_overwrite: mount.allow_overwrite,
            allow_delete: mount.allow_delete,
        });
    }
    Ok(specs)
}

/// Absolute, canonical (no `.`, `..`, empty component or trailing `/`),
/// strictly below `/mnt/` or `/home/user/`, no NUL, bounded.
fn check_path(path: &str) -> Result<(), &'static str> {
    let canonical = path.starts_with('/')
        && path.len() <= MAX_PATH_BYTES
        && !path.contains('\0')
        && path[1..]
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && c.len() <= 255);
    let below = ROOTS
        .iter()
        .any(|root| path.len() > root.len() && path.starts_with(root));
    if canonical && below {
        Ok(())
    } else {
        Err(INVALID_PATH)
    }
}

/// Equal, or one a directory above the other.
fn overlaps(a: &str, b: &str) -> bool {
    let below = |inner: &str, outer: &str| {
        inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.starts_with('/'))
    };
    a == b || below(a, b) || below(b, a)
}

/// S3's rules for a bucket name: 3 to 63 of `a-z 0-9 . -`, a letter or
/// digit at both ends.
fn bucket_name(bucket: &str) -> bool {
    let bytes = bucket.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    (3..=63).contains(&bytes.len())
        && bytes.iter().all(|b| alnum(b) || *b == b'.' || *b == b'-')
        && bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
}

/// The prefix as the helper takes it: empty, or relative segments (none
/// empty, `.` or `..`) ending in `/`.
fn prefix(prefix: &str) -> Result<String, &'static str> {
    if prefix.is_empty() {
        return Ok(String::new());
    }
    let trimmed = prefix.strip_suffix('/').unwrap_or(prefix);
    let ok = !prefix.starts_with('/')
        && prefix.len() < MAX_PREFIX_BYTES
        && !prefix.contains('\0')
        && trimmed
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..");
    if ok {
        Ok(format!("{trimmed}/"))
    } else {
        Err(INVALID_PATH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(path: &str, bucket: &str) -> pb::S3Mount {
        pb::S3Mount {
            mount_path: path.into(),
            bucket: bucket.into(),
            read_only: true,
            ..Default::default()
        }
    }

    fn check(mounts: Vec<pb::S3Mount>) -> Result<Vec<MountSpec>, &'static str> {
        section(
            &pb::S3MountsConfig { mounts },
            &Allowlist::parse(Some(" data-bucket , other ")),
        )
    }

    #[test]
    fn paths_follow_the_sdks_rules() {
        for good in ["/mnt/data", "/home/user/a/b", "/mnt/x.y-z"] {
            assert!(check(vec![mount(good, "data-bucket")]).is_ok(), "{good}");
        }
        for bad in [
            "mnt/data",
            "/mnt",
            "/mnt/",
            "/home/user",
            "/tmp/x",
            "/mnt/a/../b",
            "/mnt/./a",
            "/mnt//a",
            "/mnt/a/",
            "/home/username/x",
        ] {
            assert_eq!(
                check(vec![mount(bad, "data-bucket")]),
                Err(INVALID_PATH),
                "{bad}"
            );
        }
        assert_eq!(
            check(vec![
                mount("/mnt/a", "data-bucket"),
                mount("/mnt/a/b", "other")
            ]),
            Err(INVALID_PATH)
        );
        assert!(
            check(vec![
                mount("/mnt/a", "data-bucket"),
                mount("/mnt/ab", "other")
            ])
            .is_ok()
        );
        assert_eq!(
            check(vec![
                mount("/mnt/a", "data-bucket"),
                mount("/mnt/a", "other")
            ]),
            Err(NOT_ALLOWED)
        );
        let five = (0..5)
            .map(|i| mount(&format!("/mnt/{i}"), "other"))
            .collect();
        assert_eq!(check(five), Err(INVALID_PATH));
    }

    #[test]
    fn buckets_prefixes_and_flags() {
        assert_eq!(check(vec![mount("/mnt/a", "unlisted")]), Err(NOT_ALLOWED));
        assert_eq!(
            check(vec![mount("/mnt/a", "Data-Bucket")]),
            Err(NOT_ALLOWED)
        );
        let mut m = mount("/mnt/a", "data-bucket");
        m.allow_delete = true;
        assert_eq!(check(vec![m.clone()]), Err(NOT_ALLOWED));
        m.read_only = false;
        m.prefix = "team7".into();
        assert_eq!(check(vec![m.clone()]).unwrap()[0].prefix, "team7/");
        for bad in ["/abs", "a//b", "a/../b", "./a"] {
            m.prefix = bad.into();
            assert_eq!(check(vec![m.clone()]), Err(INVALID_PATH), "{bad}");
        }
    }
}
