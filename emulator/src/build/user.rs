//! `USER`: the uid, gid and home a `RUN` gets, looked up in the image's
//! own `/etc/passwd` and `/etc/group` when the step runs (an earlier step
//! may have added the account), as Docker does.

use std::os::fd::OwnedFd;

use super::image;

/// The base image's account name and its uid (and gid).
const BASE_USER: &str = "user";
const BASE_UID: u32 = 1000;

/// The largest account file read.
const MAX_ACCOUNT_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Who a `RUN` runs as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RunAs {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) home: String,
}

impl RunAs {
    pub(crate) fn root() -> Self {
        Self {
            uid: 0,
            gid: 0,
            home: "/root".to_owned(),
        }
    }
}

/// Resolves `spec` (`name`, `uid`, `name:group`, `uid:gid`) in the image.
///
/// # Errors
/// Docker's text for a name no account file lists.
pub(crate) fn resolve(root: &OwnedFd, spec: &str) -> Result<RunAs, String> {
    let read = |file: &str| {
        image::read_file(root, file, MAX_ACCOUNT_FILE_BYTES)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    lookup(spec, &read("/etc/passwd"), &read("/etc/group"))
}

fn lookup(spec: &str, passwd: &str, group: &str) -> Result<RunAs, String> {
    let (user, group_spec) = spec
        .split_once(':')
        .map_or((spec, None), |(u, g)| (u, Some(g)));
    let entries = passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .filter(|f| f.len() >= 7);
    let numeric = user.parse::<u32>().ok();
    let mut found = None;
    for fields in entries {
        let matches = match numeric {
            Some(uid) => fields[2].parse::<u32>().ok() == Some(uid),
            None => fields[0] == user,
        };
        if matches && let (Ok(uid), Ok(gid)) = (fields[2].parse(), fields[3].parse()) {
            found = Some(RunAs {
                uid,
                gid,
                home: fields[5].to_owned(),
            });
            break;
        }
    }
    let mut run_as = match (found, numeric) {
        (Some(found), _) => found,
        (None, Some(uid)) => RunAs {
            uid,
            gid: 0,
            home: "/".to_owned(),
        },
        // The base image's account (the one every sandbox runs as), which
        // the host stands for even where it has no such account.
        (None, None) if user == BASE_USER => RunAs {
            uid: BASE_UID,
            gid: BASE_UID,
            home: "/home/user".to_owned(),
        },
        (None, None) => {
            return Err(format!(
                "unable to find user {user}: no matching entries in passwd file"
            ));
        }
    };
    if let Some(group_spec) = group_spec {
        run_as.gid = match group_spec.parse::<u32>() {
            Ok(gid) => gid,
            Err(_) => group
                .lines()
                .map(|l| l.split(':').collect::<Vec<_>>())
                .find(|f| f.len() >= 3 && f[0] == group_spec)
                .and_then(|f| f[2].parse().ok())
                .ok_or_else(|| {
                    format!("unable to find group {group_spec}: no matching entries in group file")
                })?,
        };
    }
    Ok(run_as)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str =
        "root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000::/home/user:/bin/sh\nbad line\n";
    const GROUP: &str = "root:x:0:\nstaff:x:50:user\n";

    #[test]
    fn names_and_numbers_resolve_as_docker_resolves_them() {
        let ok = |spec| lookup(spec, PASSWD, GROUP).unwrap();
        assert_eq!(ok("root"), RunAs::root());
        assert_eq!(
            ok("user"),
            RunAs {
                uid: 1000,
                gid: 1000,
                home: "/home/user".to_owned()
            }
        );
        assert_eq!(ok("1000").gid, 1000);
        assert_eq!(
            ok("4242"),
            RunAs {
                uid: 4242,
                gid: 0,
                home: "/".to_owned()
            }
        );
        assert_eq!(ok("user:staff").gid, 50);
        assert_eq!(ok("user:7").gid, 7);
        // Where the image's files lack the base image's `user`, it is 1000.
        assert_eq!(
            lookup("user", "root:x:0:0:root:/root:/bin/bash\n", "").unwrap(),
            RunAs {
                uid: 1000,
                gid: 1000,
                home: "/home/user".to_owned()
            }
        );
        assert_eq!(
            lookup("nobody2", PASSWD, GROUP).unwrap_err(),
            "unable to find user nobody2: no matching entries in passwd file"
        );
        assert_eq!(
            lookup("user:wheel", PASSWD, GROUP).unwrap_err(),
            "unable to find group wheel: no matching entries in group file"
        );
    }
}
