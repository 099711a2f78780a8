//! The checks on a Checkpoint or Restore request, made before any I/O:
//! each rejection is INVALID_ARGUMENT naming its argument, never echoing
//! its value (a bucket or prefix is not to be logged or returned).

use std::path::{Component, Path, PathBuf};

use tonic::Status;

/// Most `exclude` entries.
pub(crate) const MAX_EXCLUDES: usize = 64;
/// Longest `exclude` entry, in bytes.
pub(crate) const MAX_EXCLUDE_BYTES: usize = 4096;
/// Longest key prefix, in bytes.
pub(crate) const MAX_PREFIX_BYTES: usize = 900;

/// A checked S3 location.
#[derive(Clone)]
pub(crate) struct Location {
    pub bucket: String,
    pub key_prefix: String,
    pub region: Option<String>,
}

// Bucket and prefix are not to be printed anywhere.
opaque_debug!(Location);

impl Location {
    /// `<key_prefix>/home.tar.gz`.
    pub(crate) fn archive_key(&self) -> String {
        format!("{}/home.tar.gz", self.key_prefix)
    }

    /// `<key_prefix>/manifest.json`.
    pub(crate) fn manifest_key(&self) -> String {
        format!("{}/manifest.json", self.key_prefix)
    }
}

/// Checks `loc` (the request's `target` or `source`, named `arg`).
#[allow(clippy::result_large_err)]
pub(crate) fn location(arg: &str, loc: Option<&crate::pb::S3Location>) -> Result<Location, Status> {
    let Some(loc) = loc else {
        return Err(Status::invalid_argument(format!("{arg} is required")));
    };
    if !valid_bucket(&loc.bucket) {
        return Err(Status::invalid_argument(format!(
            "{arg}.bucket is not a valid S3 bucket name"
        )));
    }
    if !valid_prefix(&loc.key_prefix) {
        return Err(Status::invalid_argument(format!(
            "{arg}.key_prefix is not a valid key prefix"
        )));
    }
    let region = match loc.region.as_deref() {
        None | Some("") => None,
        Some(r) if valid_region(r) => Some(r.to_owned()),
        Some(_) => {
            return Err(Status::invalid_argument(format!(
                "{arg}.region is not a valid AWS region"
            )));
        }
    };
    Ok(Location {
        bucket: loc.bucket.clone(),
        key_prefix: loc.key_prefix.clone(),
        region,
    })
}

/// 3–63 of `[a-z0-9.-]`, alphanumeric at both ends, no `..`, not an IPv4
/// address.
pub(crate) fn valid_bucket(b: &str) -> bool {
    let bytes = b.as_bytes();
    (3..=63).contains(&bytes.len())
        && bytes
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'-'))
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && !b.contains("..")
        && b.parse::<std::net::Ipv4Addr>().is_err()
}

/// ≤ 900 bytes, non-empty, no leading or trailing `/`, no empty, `.` or
/// `..` segment, only letters, digits and `!_.*'()-/`.
pub(crate) fn valid_prefix(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= MAX_PREFIX_BYTES
        && p.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"!_.*'()-/".contains(&c))
        && p.split('/').all(|s| !matches!(s, "" | "." | ".."))
}

/// A region name as AWS spells them (`us-east-1`, `eu-central-2`, ...):
/// lowercase letters, digits and `-`, at most 32 bytes. It becomes part of
/// a host name, so nothing else may pass.
pub(crate) fn valid_region(r: &str) -> bool {
    (1..=32).contains(&r.len())
        && r.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && !r.starts_with('-')
        && !r.ends_with('-')
}

/// The local agent has one account, `user` (the empty name is it too).
#[allow(clippy::result_large_err)]
pub(crate) fn user(user: Option<&crate::pb::User>) -> Result<(), Status> {
    match user.map(|u| u.username.as_str()) {
        None | Some("" | "user") => Ok(()),
        Some(_) => Err(Status::invalid_argument("user is unknown")),
    }
}

/// Checks `exclude` (≤ 64 HOME-relative directories; each non-empty,
/// ≤ 4,096 bytes, no NUL, no leading `/`, no `..`) and returns each as its
/// normalised components (`a//b/./c/` is `a/b/c`).
#[allow(clippy::result_large_err)]
pub(crate) fn excludes(exclude: &[String]) -> Result<Vec<PathBuf>, Status> {
    if exclude.len() > MAX_EXCLUDES {
        return Err(Status::invalid_argument(format!(
            "exclude has more than {MAX_EXCLUDES} entries"
        )));
    }
    exclude
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let bad = || {
                Status::invalid_argument(format!(
                    "exclude[{i}] is not a directory relative to the home directory"
                ))
            };
            if e.is_empty() || e.len() > MAX_EXCLUDE_BYTES || e.contains('\0') || e.starts_with('/')
            {
                return Err(bad());
            }
            let mut out = PathBuf::new();
            for c in Path::new(e).components() {
                match c {
                    Component::Normal(n) => out.push(n),
                    Component::CurDir => {}
                    _ => return Err(bad()),
                }
            }
            if out.as_os_str().is_empty() {
                return Err(bad());
            }
            Ok(out)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_follow_the_s3_naming_rules() {
        for ok in ["abc", "my-bucket.1", "a1b", &"a".repeat(63)] {
            assert!(valid_bucket(ok), "{ok}");
        }
        for bad in [
            "ab",
            &"a".repeat(64),
            "Abc",
            "-abc",
            "abc-",
            "a..b",
            "192.168.1.1",
            "a_b",
            "a/b",
            "",
        ] {
            assert!(!valid_bucket(bad), "{bad}");
        }
    }

    #[test]
    fn prefixes_follow_the_spec() {
        for ok in ["rayito-home/sbx", "a", "a/b/c", "x!_.*'()-"] {
            assert!(valid_prefix(ok), "{ok}");
        }
        for bad in [
            "", "/a", "a/", "a//b", "a/./b", "a/../b", "..", "a b", "a\0b", "é",
        ] {
            assert!(!valid_prefix(bad), "{bad}");
        }
        assert!(valid_prefix(&"a".repeat(900)));
        assert!(!valid_prefix(&"a".repeat(901)));
    }

    #[test]
    fn regions_are_host_name_safe() {
        assert!(valid_region("us-east-1"));
        for bad in [
            "",
            "US-EAST-1",
            "us.east",
            "us-east-1.evil.com",
            "-us",
            "a/b",
        ] {
            assert!(!valid_region(bad), "{bad}");
        }
    }

    #[test]
    fn excludes_are_home_relative_directories_named_by_index() {
        let got = excludes(&["a//b/./c/".into(), "data".into()]).unwrap();
        assert_eq!(got, [PathBuf::from("a/b/c"), PathBuf::from("data")]);
        for (bad, i) in [
            (vec!["".to_owned()], 0),
            (vec!["ok".to_owned(), "/abs".to_owned()], 1),
            (vec!["a/../b".to_owned()], 0),
            (vec!["..".to_owned()], 0),
            (vec!["a\0b".to_owned()], 0),
            (vec!["./".to_owned()], 0),
            (vec!["x".repeat(4097)], 0),
        ] {
            let err = excludes(&bad).unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument);
            assert_eq!(
                err.message(),
                format!("exclude[{i}] is not a directory relative to the home directory")
            );
        }
        assert!(excludes(&["x".repeat(4096)]).is_ok());
        let many: Vec<String> = (0..65).map(|i| format!("d{i}")).collect();
        assert_eq!(
            excludes(&many).unwrap_err().message(),
            "exclude has more than 64 entries"
        );
        assert!(excludes(&many[..64]).is_ok());
    }

    fn s3(bucket: &str, key_prefix: &str, region: Option<&str>) -> crate::pb::S3Location {
        crate::pb::S3Location {
            bucket: bucket.into(),
            key_prefix: key_prefix.into(),
            region: region.map(Into::into),
        }
    }

    #[test]
    fn locations_are_named_by_argument_and_never_echoed() {
        let refused = [
            (
                "target",
                s3("Secret_Bucket", "p", None),
                "target.bucket is not a valid S3 bucket name",
            ),
            (
                "source",
                s3("bucket", "secret/../x", None),
                "source.key_prefix is not a valid key prefix",
            ),
            (
                "target",
                s3("bucket", "p", Some("evil.example/")),
                "target.region is not a valid AWS region",
            ),
        ];
        for (name, loc, message) in refused {
            let err = location(name, Some(&loc)).unwrap_err();
            assert_eq!(err.message(), message);
        }
        assert_eq!(
            location("target", None).unwrap_err().message(),
            "target is required"
        );
        let ok = s3("bucket", "rayito-home/n", Some(""));
        let loc = location("target", Some(&ok)).unwrap();
        assert_eq!(loc.archive_key(), "rayito-home/n/home.tar.gz");
        assert_eq!(loc.manifest_key(), "rayito-home/n/manifest.json");
        assert_eq!(loc.region, None);
        assert_eq!(format!("{loc:?}"), "Location { .. }");
    }
}
