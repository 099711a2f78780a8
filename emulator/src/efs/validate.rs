//! The EFS model's constraints on what a request carries (botocore's
//! `efs` 2015-02-01 shapes: id patterns, lengths, enums, the root
//! directory's path), each refused with a 400 BadRequest that names the
//! parameter.

use super::error::EfsError;
use super::state::{CreationInfo, PosixUser, Tag};

/// Largest uid or gid the model takes (2^32 - 1).
const MAX_ID: u64 = u32::MAX as u64;

/// Whether `s` is `<prefix>-` and 8 to 40 lowercase hex digits.
fn is_id(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|hex| {
            (8..=40).contains(&hex.len())
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
}

/// The bare id of `value`, a bare id or an ARN of `kind`
/// (`file-system`, `access-point`) in this emulator's region and account:
/// `Ok(None)` for a well-formed ARN of another region or account (no such
/// resource here).
///
/// # Errors
/// BadRequest naming `param` when `value` is neither.
pub(crate) fn resource_id(
    param: &str,
    value: &str,
    kind: &str,
    prefix: &str,
    region: &str,
    account: &str,
) -> Result<Option<String>, EfsError> {
    if is_id(value, prefix) {
        return Ok(Some(value.to_owned()));
    }
    let parsed = value.strip_prefix("arn:aws").and_then(|rest| {
        let (_partition_suffix, rest) = rest.split_once(":elasticfilesystem:")?;
        let (arn_region, rest) = rest.split_once(':')?;
        let (arn_account, resource) = rest.split_once(':')?;
        let id = resource.strip_prefix(kind)?.strip_prefix('/')?;
        is_id(id, prefix).then_some((arn_region, arn_account, id))
    });
    match parsed {
        Some((r, a, id)) if r == region && a == account => Ok(Some(id.to_owned())),
        Some(_) => Ok(None),
        None => Err(EfsError::bad_request(format!(
            "{param} has the value '{value}', which is not a valid {kind} id or ARN."
        ))),
    }
}

/// A mount target id: `fsmt-` and 8 to 40 hex digits.
///
/// # Errors
/// BadRequest otherwise.
pub(crate) fn mount_target_id(value: &str) -> Result<(), EfsError> {
    if is_id(value, "fsmt") {
        Ok(())
    } else {
        Err(EfsError::bad_request(format!(
            "MountTargetId has the value '{value}', which is not a valid mount target id."
        )))
    }
}

/// An idempotency token (CreationToken, ClientToken): 1 to 64 characters.
///
/// # Errors
/// BadRequest naming `param`.
pub(crate) fn token(param: &str, value: Option<&str>) -> Result<String, EfsError> {
    match value {
        None => Err(EfsError::bad_request(format!("{param} is required."))),
        Some(v) if v.is_empty() || v.chars().count() > 64 => Err(EfsError::bad_request(format!(
            "{param} must be 1 to 64 characters long."
        ))),
        Some(v) => Ok(v.to_owned()),
    }
}

/// One of the model's enum values, or the default when absent.
///
/// # Errors
/// BadRequest naming `param` and the values it takes.
pub(crate) fn one_of(
    param: &str,
    value: Option<&str>,
    allowed: &[&str],
    default: &str,
) -> Result<String, EfsError> {
    match value {
        None => Ok(default.to_owned()),
        Some(v) if allowed.contains(&v) => Ok(v.to_owned()),
        Some(v) => Err(EfsError::bad_request(format!(
            "{param} has the value '{v}'; it must be one of {}.",
            allowed.join(", ")
        ))),
    }
}

/// Whether every character of a tag key or value is one the model takes
/// (letters, digits, spaces, `_ . : / = + - @`).
fn tag_text(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_alphanumeric() || c.is_whitespace() || "_.:/=+-@".contains(c))
}

/// A resource's tags: at most 50, keys 1 to 128 characters, values at
/// most 256, no key twice, none under the reserved `aws:` prefix.
///
/// # Errors
/// BadRequest naming what is wrong.
pub(crate) fn tags(tags: &[Tag]) -> Result<(), EfsError> {
    if tags.len() > 50 {
        return Err(EfsError::bad_request("A resource takes at most 50 tags."));
    }
    for (i, tag) in tags.iter().enumerate() {
        let key_len = tag.key.chars().count();
        if key_len == 0 || key_len > 128 || !tag_text(&tag.key) {
            return Err(EfsError::bad_request(format!(
                "Tag key '{}' is not valid: 1 to 128 letters, digits, spaces or _.:/=+-@.",
                tag.key
            )));
        }
        if tag.value.chars().count() > 256 || !tag_text(&tag.value) {
            return Err(EfsError::bad_request(format!(
                "The value of tag '{}' is not valid: up to 256 letters, digits, spaces or _.:/=+-@.",
                tag.key
            )));
        }
        if tag.key.to_ascii_lowercase().starts_with("aws:") {
            return Err(EfsError::bad_request(format!(
                "Tag key '{}' uses the reserved prefix 'aws:'.",
                tag.key
            )));
        }
        if tags[..i].iter().any(|t| t.key == tag.key) {
            return Err(EfsError::bad_request(format!(
                "Tag key '{}' appears more than once.",
                tag.key
            )));
        }
    }
    Ok(())
}

/// An access point's POSIX user: uid and gid in range, at most 16
/// secondary gids.
///
/// # Errors
/// BadRequest naming the member.
pub(crate) fn posix_user(user: &PosixUser) -> Result<(), EfsError> {
    if user.uid > MAX_ID || user.gid > MAX_ID || user.secondary_gids.iter().any(|g| *g > MAX_ID) {
        return Err(EfsError::bad_request(
            "PosixUser ids must be between 0 and 4294967295.",
        ));
    }
    if user.secondary_gids.len() > 16 {
        return Err(EfsError::bad_request(
            "PosixUser.SecondaryGids takes at most 16 ids.",
        ));
    }
    Ok(())
}

/// The root directory's creation info: ids in range, permissions three
/// or four octal digits.
///
/// # Errors
/// BadRequest naming the member.
pub(crate) fn creation_info(info: &CreationInfo) -> Result<(), EfsError> {
    if info.owner_uid > MAX_ID || info.owner_gid > MAX_ID {
        return Err(EfsError::bad_request(
            "CreationInfo ids must be between 0 and 4294967295.",
        ));
    }
    let p = &info.permissions;
    if !(3..=4).contains(&p.len()) || !p.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return Err(EfsError::bad_request(format!(
            "CreationInfo.Permissions has the value '{p}'; it must be 3 or 4 octal digits."
        )));
    }
    Ok(())
}

/// The characters a root directory's path segment may not hold.
const FORBIDDEN: &str = "$#<>;`|&?{}^*/\n";

/// An access point's root directory path: `/`, or one to four segments
/// of `/name`, each name not starting with `.` and free of
/// `$#<>;`|&?{}^*` and newlines, at most 100 characters in all. (So no
/// `.` or `..` segment, and no way out of the file system.)
///
/// # Errors
/// BadRequest quoting the path.
pub(crate) fn root_path(path: &str) -> Result<(), EfsError> {
    let refuse = || {
        Err(EfsError::bad_request(format!(
            "RootDirectory.Path has the value '{path}'; it must be '/' or up to four '/name' segments (names not starting with '.', without $#<>;`|&?{{}}^* or newlines), at most 100 characters."
        )))
    };
    if path == "/" {
        return Ok(());
    }
    if path.is_empty() || path.chars().count() > 100 || !path.starts_with('/') {
        return refuse();
    }
    let segments: Vec<&str> = path[1..].split('/').collect();
    let bad_segment =
        |s: &&str| s.is_empty() || s.starts_with('.') || s.chars().any(|c| FORBIDDEN.contains(c));
    if segments.len() > 4 || segments.iter().any(bad_segment) {
        return refuse();
    }
    Ok(())
}

/// A page size (MaxItems, MaxResults): at least 1; `default` when absent.
///
/// # Errors
/// BadRequest naming `param`.
pub(crate) fn page_size(
    param: &str,
    value: Option<&str>,
    default: usize,
) -> Result<usize, EfsError> {
    match value {
        None => Ok(default),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(EfsError::bad_request(format!(
                "{param} has the value '{v}'; it must be an integer of at least 1."
            ))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_arns_resolve_in_this_region_and_account_only() {
        let id = |v| {
            resource_id(
                "FileSystemId",
                v,
                "file-system",
                "fs",
                "us-east-1",
                "000000000000",
            )
        };
        assert_eq!(id("fs-0123abcd").unwrap().as_deref(), Some("fs-0123abcd"));
        assert_eq!(
            id("arn:aws:elasticfilesystem:us-east-1:000000000000:file-system/fs-0123abcd")
                .unwrap()
                .as_deref(),
            Some("fs-0123abcd")
        );
        assert_eq!(
            id("arn:aws:elasticfilesystem:eu-west-1:000000000000:file-system/fs-0123abcd").unwrap(),
            None
        );
        for bad in [
            "fs-0123",
            "fs-0123ABCD",
            "fsap-0123abcd",
            "",
            "fs-0123abcd/..",
            "arn:aws:s3:::b",
        ] {
            assert_eq!(id(bad).unwrap_err().code(), "BadRequest", "{bad}");
        }
    }

    #[test]
    fn root_paths_follow_the_model() {
        for ok in ["/", "/a", "/rayito-volumes/data", "/a/b/c/d", "/with space"] {
            root_path(ok).unwrap_or_else(|e| panic!("{ok}: {e:?}"));
        }
        for bad in [
            "",
            "a",
            "//",
            "/a/",
            "/a//b",
            "/.",
            "/..",
            "/a/../b",
            "/.hidden",
            "/a/b/c/d/e",
            "/a$b",
            "/a;b",
            "/a\nb",
        ] {
            assert!(root_path(bad).is_err(), "{bad:?}");
        }
        assert!(root_path(&format!("/{}", "x".repeat(100))).is_err());
    }

    #[test]
    fn tags_refuse_duplicates_reserved_keys_and_long_text() {
        let tag = |k: &str, v: &str| Tag {
            key: k.into(),
            value: v.into(),
        };
        tags(&[tag("Name", "data"), tag("rayito:volume", "x")]).unwrap();
        assert!(tags(&[tag("a", "1"), tag("a", "2")]).is_err());
        assert!(tags(&[tag("aws:x", "1")]).is_err());
        assert!(tags(&[tag("", "1")]).is_err());
        assert!(tags(&[tag("k", &"v".repeat(257))]).is_err());
        assert!(tags(&[tag("k", "a;b")]).is_err());
    }

    #[test]
    fn permissions_are_three_or_four_octal_digits() {
        let info = |p: &str| CreationInfo {
            owner_uid: 1000,
            owner_gid: 1000,
            permissions: p.into(),
        };
        creation_info(&info("750")).unwrap();
        creation_info(&info("2775")).unwrap();
        for bad in ["75", "0758", "07500", "rwx"] {
            assert!(creation_info(&info(bad)).is_err(), "{bad}");
        }
        assert!(
            creation_info(&CreationInfo {
                owner_uid: MAX_ID + 1,
                ..info("750")
            })
            .is_err()
        );
    }
}
