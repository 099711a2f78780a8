//! An `efs_volumes` section checked whole before anything changes: the
//! first problem found is the section's INVALID class, and the volumes in
//! force stay as they were. The path rules are the SDK's (absolute,
//! canonical, strictly under `/mnt/` or `/home/user/`, no two overlapping,
//! at most four); the agent checks them again because any client holding
//! the token may call Configure.

use std::net::Ipv4Addr;

use crate::pb;

/// At most this many volumes per sandbox (the SDK's bound).
pub(crate) const MAX_VOLUMES: usize = 4;
/// The directories volumes may be mounted below.
const ROOTS: [&str; 2] = ["/mnt/", "/home/user/"];
/// A mount path's longest length (well under PATH_MAX).
const MAX_PATH: usize = 1024;
/// A path component's longest length (NAME_MAX).
const MAX_COMPONENT: usize = 255;

/// A path breaks the mount-path rules, or two overlap.
pub(crate) const INVALID_PATH: &str = "invalid_path";
/// More than [`MAX_VOLUMES`] volumes.
pub(crate) const TOO_MANY: &str = "too_many_volumes";
/// A file system or access point id of the wrong form.
pub(crate) const INVALID_ID: &str = "invalid_id";
/// A mount target IP that is neither empty nor an IPv4 address.
pub(crate) const INVALID_IP: &str = "invalid_ip";

/// One volume, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct VolumeSpec {
    /// Where the sandbox sees it (a guest path).
    pub(crate) path: String,
    pub(crate) file_system_id: String,
    pub(crate) access_point_id: String,
    pub(crate) read_only: bool,
    /// `None`: the helper resolves the mount target by DNS.
    pub(crate) mount_target_ip: Option<Ipv4Addr>,
}

/// Checks a whole section.
///
/// # Errors
/// The INVALID class of the first problem found.
pub(crate) fn section(config: &pb::EfsVolumesConfig) -> Result<Vec<VolumeSpec>, &'static str> {
    if config.mounts.len() > MAX_VOLUMES {
        return Err(TOO_MANY);
    }
    let mut specs: Vec<VolumeSpec> = Vec::with_capacity(config.mounts.len());
    for mount in &config.mounts {
        let spec = one(mount)?;
        if specs.iter().any(|s| overlap(&s.path, &spec.path)) {
            return Err(INVALID_PATH);
        }
        specs.push(spec);
    }
    Ok(specs)
}

fn one(mount: &pb::EfsVolumeMount) -> Result<VolumeSpec, &'static str> {
    check_path(&mount.mount_path)?;
    if !id_of(&mount.file_system_id, "fs-") || !id_of(&mount.access_point_id, "fsap-") {
        return Err(INVALID_ID);
    }
    let mount_target_ip = match mount.mount_target_ip.as_str() {
        "" => None,
        ip => Some(ip.parse::<Ipv4Addr>().map_err(|_| INVALID_IP)?),
    };
    Ok(VolumeSpec {
        path: mount.mount_path.clone(),
        file_system_id: mount.file_system_id.clone(),
        access_point_id: mount.access_point_id.clone(),
        read_only: mount.read_only,
        mount_target_ip,
    })
}

/// `<prefix>` followed by 8 to 40 lowercase hex digits.
fn id_of(id: &str, prefix: &str) -> bool {
    id.strip_prefix(prefix).is_some_and(|hex| {
        (8..=40).contains(&hex.len()) && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// Absolute, canonical (no `.`, `..`, empty component or trailing `/`),
/// strictly below one of [`ROOTS`], of a sane length, no NUL.
fn check_path(path: &str) -> Result<(), &'static str> {
    let below = ROOTS
        .iter()
        .any(|root| path.len() > root.len() && path.starts_with(root));
    let canonical = path
        .strip_prefix('/')
        .is_some_and(|rest| rest.split('/').all(|c| !matches!(c, "" | "." | "..")));
    let sane = path.len() <= MAX_PATH
        && !path.contains('\0')
        && path.split('/').all(|c| c.len() <= MAX_COMPONENT);
    if below && canonical && sane {
        Ok(())
    } else {
        Err(INVALID_PATH)
    }
}

/// Equal, or one a directory prefix of the other.
pub(crate) fn overlap(a: &str, b: &str) -> bool {
    let under = |inner: &str, outer: &str| {
        inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.starts_with('/'))
    };
    a == b || under(a, b) || under(b, a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(path: &str, fs: &str, ap: &str, ip: &str) -> pb::EfsVolumeMount {
        pb::EfsVolumeMount {
            mount_path: path.to_owned(),
            file_system_id: fs.to_owned(),
            access_point_id: ap.to_owned(),
            read_only: false,
            mount_target_ip: ip.to_owned(),
        }
    }

    const FS: &str = "fs-0123456789abcdef0";
    const AP: &str = "fsap-0123456789abcdef0";

    fn check(mounts: Vec<pb::EfsVolumeMount>) -> Result<usize, &'static str> {
        section(&pb::EfsVolumesConfig { mounts }).map(|v| v.len())
    }

    #[test]
    fn good_sections_pass() {
        assert_eq!(check(vec![]), Ok(0));
        assert_eq!(check(vec![mount("/mnt/data", FS, AP, "")]), Ok(1));
        assert_eq!(
            check(vec![
                mount("/mnt/a", FS, AP, "10.0.1.5"),
                mount("/mnt/ab", FS, AP, ""),
                mount("/home/user/work/x", FS, AP, ""),
                mount("/home/user/y", FS, AP, ""),
            ]),
            Ok(4)
        );
        assert_eq!(
            check(vec![mount("/mnt/d", "fs-01234567", "fsap-01234567", "")]),
            Ok(1)
        );
    }

    #[test]
    fn each_problem_has_its_class() {
        let table: &[(&str, &str, &str, &str, &str)] = &[
            ("relative", "mnt/data", FS, AP, INVALID_PATH),
            ("root itself", "/mnt", FS, AP, INVALID_PATH),
            ("root with slash", "/mnt/", FS, AP, INVALID_PATH),
            ("home itself", "/home/user", FS, AP, INVALID_PATH),
            ("outside", "/data", FS, AP, INVALID_PATH),
            ("other home", "/home/other/x", FS, AP, INVALID_PATH),
            ("prefix trick", "/mntx/a", FS, AP, INVALID_PATH),
            ("dot", "/mnt/./a", FS, AP, INVALID_PATH),
            ("dotdot", "/mnt/../etc", FS, AP, INVALID_PATH),
            ("double slash", "/mnt//a", FS, AP, INVALID_PATH),
            ("trailing slash", "/mnt/a/", FS, AP, INVALID_PATH),
            ("nul", "/mnt/a\0b", FS, AP, INVALID_PATH),
            ("no fs prefix", "/mnt/a", "0123456789", AP, INVALID_ID),
            ("fs too short", "/mnt/a", "fs-0123456", AP, INVALID_ID),
            (
                "fs upper hex",
                "/mnt/a",
                "fs-0123456789ABCDEF",
                AP,
                INVALID_ID,
            ),
            (
                "fs too long",
                "/mnt/a",
                &format!("fs-{}", "a".repeat(41)),
                AP,
                INVALID_ID,
            ),
            ("ap as fs", "/mnt/a", AP, AP, INVALID_ID),
            ("fs as ap", "/mnt/a", FS, FS, INVALID_ID),
            ("empty ap", "/mnt/a", FS, "", INVALID_ID),
        ];
        for (what, path, fs, ap, class) in table {
            assert_eq!(check(vec![mount(path, fs, ap, "")]), Err(*class), "{what}");
        }
        for ip in [
            "10.0.0",
            "fe80::1",
            "10.0.0.256",
            "host.example",
            " 10.0.0.1",
        ] {
            assert_eq!(
                check(vec![mount("/mnt/a", FS, AP, ip)]),
                Err(INVALID_IP),
                "{ip}"
            );
        }
        let long = format!("/mnt/{}", "a".repeat(256));
        assert_eq!(check(vec![mount(&long, FS, AP, "")]), Err(INVALID_PATH));
    }

    #[test]
    fn overlaps_and_counts_are_refused() {
        for (a, b) in [
            ("/mnt/a", "/mnt/a"),
            ("/mnt/a", "/mnt/a/b"),
            ("/home/user/x/y", "/home/user/x"),
        ] {
            assert_eq!(
                check(vec![mount(a, FS, AP, ""), mount(b, FS, AP, "")]),
                Err(INVALID_PATH),
                "{a} {b}"
            );
        }
        let five = (0..5)
            .map(|i| mount(&format!("/mnt/v{i}"), FS, AP, ""))
            .collect();
        assert_eq!(check(five), Err(TOO_MANY));
        assert!(!overlap("/mnt/a", "/mnt/ab"));
    }
}
