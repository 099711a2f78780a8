//! The mount-path rules S3 mounts and EFS volumes share (docs/mounts.md,
//! "Checked before any call"): checked on the strings alone before any call (the SDK
//! never sees the guest's file system, so it never checks that a path
//! exists).
//!
//! A path is absolute, canonical (no `.` or `..` segment, no `//`, no
//! trailing `/`), strictly under `/mnt/` or `/home/user/`, at most 1,024
//! bytes (each component at most 255) and free of control characters. Across both maps no two paths
//! overlap (equal, or one a directory prefix of the other), and a sandbox
//! has at most [`MAX_MOUNTS`] of them together: the reference's message
//! promises that combined count but checks each map alone; this checks
//! the sum.

use crate::error::SandboxError;
use crate::error::messages::{self as m, Template};

/// At most this many mount paths per sandbox, S3 mounts and EFS volumes
/// together.
pub(crate) const MAX_MOUNTS: usize = 4;

/// The directories a mount path must be strictly under.
pub(crate) const ROOTS: [&str; 2] = ["/mnt/", "/home/user/"];

/// The longest mount path, in bytes (the agent's bound: room is left
/// below a mount for what sandbox code puts there).
const MAX_PATH_BYTES: usize = 1_024;

/// The longest component of a mount path, in bytes (Linux's `NAME_MAX`).
const MAX_COMPONENT_BYTES: usize = 255;

/// The argument S3 mounts' refusals name.
pub(crate) const MOUNTS: &str = "mounts";

/// The argument EFS volumes' refusals name.
pub(crate) const VOLUMES: &str = "volumes";

fn refuse(arg: &'static str, template: Template, args: &[(&str, &str)]) -> SandboxError {
    SandboxError::invalid_argument(arg, template.render(args))
}

/// Checks one mount path of the map `arg` (`mounts` or `volumes`).
///
/// # Errors
/// `InvalidArgument` naming `arg` when `path` is too long, holds a control
/// character, is not absolute, not canonical, or not strictly under
/// `/mnt/` or `/home/user/` (in that order).
pub(crate) fn check_path(arg: &'static str, path: &str) -> Result<(), SandboxError> {
    if path.len() > MAX_PATH_BYTES || path.split('/').any(|c| c.len() > MAX_COMPONENT_BYTES) {
        return Err(refuse(arg, m::MOUNT_PATH_TOO_LONG, &[]));
    }
    if path.chars().any(char::is_control) {
        return Err(refuse(arg, m::MOUNT_PATH_CONTROL, &[]));
    }
    if !path.starts_with('/') {
        return Err(refuse(arg, m::MOUNT_PATH_RELATIVE, &[("path", path)]));
    }
    let canonical = !path.ends_with('/')
        && path[1..]
            .split('/')
            .all(|segment| !matches!(segment, "" | "." | ".."));
    if !canonical {
        return Err(refuse(arg, m::MOUNT_PATH_CANONICAL, &[("path", path)]));
    }
    // Canonical, so never a root itself (`/mnt/` ends with '/', `/mnt` is
    // not under it): starting with a root means strictly under it.
    if !ROOTS.iter().any(|root| path.starts_with(root)) {
        return Err(refuse(arg, m::MOUNT_PATH_ROOT, &[("path", path)]));
    }
    Ok(())
}

/// Whether two canonical paths overlap: equal, or one a directory prefix
/// of the other (`/mnt/a` and `/mnt/a/b`, never `/mnt/a` and `/mnt/ab`).
fn overlaps(a: &str, b: &str) -> bool {
    let inside = |inner: &str, outer: &str| {
        inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    inside(a, b) || inside(b, a)
}

/// Checks the S3 mounts' paths and the EFS volumes' paths of one sandbox
/// together: the count, each path ([`check_path`]), then every pair.
///
/// # Errors
/// `InvalidArgument`: more than [`MAX_MOUNTS`] paths together (naming
/// `volumes` when there are volumes, else `mounts`); a path refused by
/// [`check_path`] (naming its map); two paths that overlap, within a map or
/// across both (naming the map of the later one, mounts first).
pub(crate) fn check_all(mount_paths: &[&str], volume_paths: &[&str]) -> Result<(), SandboxError> {
    let count = mount_paths.len() + volume_paths.len();
    if count > MAX_MOUNTS {
        let arg = if volume_paths.is_empty() {
            MOUNTS
        } else {
            VOLUMES
        };
        return Err(refuse(
            arg,
            m::MOUNT_PATH_TOO_MANY,
            &[("count", &count.to_string())],
        ));
    }
    let all: Vec<(&'static str, &str)> = mount_paths
        .iter()
        .map(|p| (MOUNTS, *p))
        .chain(volume_paths.iter().map(|p| (VOLUMES, *p)))
        .collect();
    for (arg, path) in &all {
        check_path(arg, path)?;
    }
    for (i, (arg, path)) in all.iter().enumerate() {
        if let Some((_, other)) = all[..i].iter().find(|(_, o)| overlaps(path, o)) {
            return Err(refuse(
                arg,
                m::MOUNT_PATH_OVERLAP,
                &[("path", path), ("other", other)],
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The argument and the whole message of a refusal.
    fn refusal(result: Result<(), SandboxError>) -> (String, String) {
        match result {
            Err(SandboxError::InvalidArgument {
                argument: Some(arg),
                meta,
            }) => (arg.into_owned(), meta.message().to_owned()),
            other => panic!("not an InvalidArgument naming its argument: {other:?}"),
        }
    }

    #[test]
    fn good_paths_pass() {
        for path in [
            "/mnt/data",
            "/mnt/a/b/c",
            "/home/user/data",
            "/home/user/x.y/..z",
            "/mnt/.hidden",
            "/mnt/caf\u{e9}",
        ] {
            assert_eq!(check_path(MOUNTS, path), Ok(()), "{path}");
        }
        assert_eq!(
            check_all(&["/mnt/a", "/mnt/ab"], &["/home/user/a", "/mnt/b"]),
            Ok(())
        );
        assert_eq!(check_all(&[], &[]), Ok(()));
    }

    #[test]
    fn each_path_refusal_is_pinned() {
        let long = format!("/mnt/{}", "a/".repeat(600));
        assert_eq!(check_path(VOLUMES, &long[..1_024]), Ok(()));
        let component = format!("/mnt/{}", "a".repeat(256));
        assert_eq!(check_path(VOLUMES, &component[..260]), Ok(()));
        let too_long = "invalid mounts: a mount path is longer than 1,024 bytes or has a component longer than 255; pass a shorter path";
        let cases = [
            (&long[..1_025], too_long),
            (component.as_str(), too_long),
            (
                "/mnt/a\u{0}b",
                "invalid mounts: a mount path holds a control character; pass a path without one",
            ),
            (
                "/mnt/a\nb",
                "invalid mounts: a mount path holds a control character; pass a path without one",
            ),
            (
                "mnt/data",
                "invalid mounts: the mount path mnt/data is not absolute; pass a path under /mnt/ or /home/user/",
            ),
            (
                "",
                "invalid mounts: the mount path  is not absolute; pass a path under /mnt/ or /home/user/",
            ),
        ];
        for (path, message) in cases {
            assert_eq!(
                refusal(check_path(MOUNTS, path)),
                ("mounts".to_owned(), message.to_owned()),
                "{path:?}"
            );
        }
        for path in [
            "/mnt/data/",
            "/mnt//data",
            "/mnt/./data",
            "/mnt/data/..",
            "/mnt/../etc",
            "/mnt/",
            "/home/user/",
            "//mnt/data",
            "/",
        ] {
            assert_eq!(
                refusal(check_path(VOLUMES, path)),
                (
                    "volumes".to_owned(),
                    format!(
                        "invalid volumes: the mount path {path} is not canonical (it has a '.' or '..' segment, a '//' or a trailing '/'); pass it in canonical form"
                    )
                ),
                "{path}"
            );
        }
        for path in [
            "/mnt",
            "/home/user",
            "/home/other/x",
            "/tmp/data",
            "/mntx/a",
            "/etc",
        ] {
            assert_eq!(
                refusal(check_path(MOUNTS, path)),
                (
                    "mounts".to_owned(),
                    format!(
                        "invalid mounts: the mount path {path} is not strictly under /mnt/ or /home/user/; pass a path below one of them"
                    )
                ),
                "{path}"
            );
        }
    }

    #[test]
    fn at_most_four_paths_together() {
        let four = ["/mnt/a", "/mnt/b", "/mnt/c", "/mnt/d"];
        assert_eq!(check_all(&four, &[]), Ok(()));
        assert_eq!(check_all(&four[..2], &four[2..]), Ok(()));
        let too_many = "invalid {arg}: the sandbox asks for 5 mount paths (S3 mounts and EFS volumes together); pass at most 4";
        assert_eq!(
            refusal(check_all(&[four.as_slice(), &["/mnt/e"]].concat(), &[])),
            ("mounts".to_owned(), too_many.replace("{arg}", "mounts"))
        );
        // Three and two: each map alone is within the reference's limit.
        assert_eq!(
            refusal(check_all(&four[..3], &["/mnt/e", "/mnt/f"][..])),
            ("volumes".to_owned(), too_many.replace("{arg}", "volumes"))
        );
        assert_eq!(
            refusal(check_all(&[], &[four.as_slice(), &["/mnt/e"]].concat())),
            ("volumes".to_owned(), too_many.replace("{arg}", "volumes"))
        );
        // The count comes first, before any path is read.
        assert_eq!(
            refusal(check_all(&["x", "y", "z"], &["u", "v"])).0,
            "volumes"
        );
    }

    #[test]
    fn overlaps_are_refused_within_and_across_maps() {
        let overlap = |arg: &str, other: &str, path: &str| {
            (
                arg.to_owned(),
                format!(
                    "invalid {arg}: the mount paths {other} and {path} overlap (the same path, or one inside the other); pass paths apart"
                ),
            )
        };
        assert_eq!(
            refusal(check_all(&["/mnt/a", "/mnt/a/b"], &[])),
            overlap("mounts", "/mnt/a", "/mnt/a/b")
        );
        assert_eq!(
            refusal(check_all(&["/mnt/a/b", "/mnt/a"], &[])),
            overlap("mounts", "/mnt/a/b", "/mnt/a")
        );
        assert_eq!(
            refusal(check_all(&["/mnt/data"], &["/mnt/data"])),
            overlap("volumes", "/mnt/data", "/mnt/data")
        );
        assert_eq!(
            refusal(check_all(&["/home/user/w/x"], &["/home/user/w"])),
            overlap("volumes", "/home/user/w/x", "/home/user/w")
        );
        assert_eq!(
            refusal(check_all(&[], &["/mnt/v", "/mnt/v/w"])),
            overlap("volumes", "/mnt/v", "/mnt/v/w")
        );
        // A bad path is named before any overlap is looked for.
        assert_eq!(refusal(check_all(&["/mnt/a"], &["/mnt/a/"])).0, "volumes");
        assert!(!overlaps("/mnt/a", "/mnt/ab"));
        assert!(overlaps("/mnt/a", "/mnt/a"));
    }
}
