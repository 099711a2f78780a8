//! S3 mounts of a sandbox in the CLI (docs/cli.md, docs/mounts.md):
//! `sandbox create --mount PATH=s3://BUCKET[/PREFIX][:ro|:rw[,overwrite][,delete]]`
//! and `sandbox mounts ID` printing each mount's state as the sandbox's
//! agent reports it.

use std::collections::BTreeMap;

use rayito::mounts::{MountStatus, S3Mount};

use crate::Format;
use crate::commands::{Backend, Failure};
use crate::path_statuses::{self, Row};

/// What `--mount` expects.
const MOUNT_SYNTAX: &str = "expected PATH=s3://BUCKET[/PREFIX][:ro|:rw[,overwrite][,delete]], e.g. /mnt/data=s3://my-bucket/team7/:rw";

/// The options after the last `:`, when that tail reads as options
/// (`ro`, `rw`, `overwrite`, `delete`, comma-separated): `Ok(None)` when
/// the tail is part of the URL (it holds a `/`, or is not a word list).
fn options(tail: &str) -> Result<Option<(bool, bool, bool)>, String> {
    let words_only = !tail.is_empty() && tail.chars().all(|c| c.is_ascii_lowercase() || c == ',');
    if !words_only {
        return Ok(None);
    }
    let (mut ro, mut rw, mut overwrite, mut delete) = (false, false, false, false);
    for word in tail.split(',') {
        match word {
            "ro" => ro = true,
            "rw" => rw = true,
            "overwrite" => overwrite = true,
            "delete" => delete = true,
            other => {
                return Err(format!(
                    "{MOUNT_SYNTAX} (unknown mount option {other:?}: use ro, rw, overwrite, delete)"
                ));
            }
        }
    }
    if ro && rw {
        return Err(format!("{MOUNT_SYNTAX} (a mount is :ro or :rw, not both)"));
    }
    if (overwrite || delete) && !rw {
        return Err(format!(
            "{MOUNT_SYNTAX} (overwrite and delete need a writable mount: :rw,overwrite)"
        ));
    }
    Ok(Some((!rw, overwrite, delete)))
}

/// `--mount PATH=s3://BUCKET[/PREFIX][:ro|:rw[,overwrite][,delete]]`: the
/// mount path and the mount, read-only unless `:rw` (the path, the bucket
/// and the prefix are checked by the SDK's `create`, before any call).
pub(crate) fn parse_mount_arg(text: &str) -> Result<(String, S3Mount), String> {
    let Some((path, spec)) = text.split_once('=') else {
        return Err(MOUNT_SYNTAX.to_owned());
    };
    let Some(url) = spec.strip_prefix("s3://") else {
        return Err(MOUNT_SYNTAX.to_owned());
    };
    let (url, (read_only, overwrite, delete)) = match url.rsplit_once(':') {
        Some((rest, tail)) => match options(tail)? {
            Some(flags) => (rest, flags),
            None => (url, (true, false, false)),
        },
        None => (url, (true, false, false)),
    };
    let (bucket, prefix) = url.split_once('/').unwrap_or((url, ""));
    if path.is_empty() || bucket.is_empty() {
        return Err(MOUNT_SYNTAX.to_owned());
    }
    let mount = S3Mount::new(bucket)
        .prefix(prefix)
        .read_only(read_only)
        .allow_overwrite(overwrite)
        .allow_delete(delete);
    Ok((path.to_owned(), mount))
}

/// `sandbox mounts ID`: one ConfigureStatus through a fresh connection.
pub(crate) async fn list(backend: &Backend, format: Format, id: &str) -> Result<i32, Failure> {
    let sandbox = backend.connect(id).await?;
    let statuses: BTreeMap<String, MountStatus> = sandbox.mounts().statuses().await?;
    let rows: Vec<Row<'_>> = statuses
        .iter()
        .map(|(path, status)| Row {
            path,
            state: status.state.as_str(),
            last_error_class: status.last_error_class.as_deref(),
        })
        .collect();
    path_statuses::print(format, sandbox.id(), "mounts", "S3 mount", &rows);
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> (String, String, String, bool, bool, bool) {
        let (path, m) = parse_mount_arg(text).unwrap();
        (
            path,
            m.bucket,
            m.prefix,
            m.read_only,
            m.allow_overwrite,
            m.allow_delete,
        )
    }

    #[test]
    fn mount_arguments_parse() {
        let s = |t: &str| t.to_owned();
        assert_eq!(
            parsed("/mnt/data=s3://my-bucket"),
            (s("/mnt/data"), s("my-bucket"), s(""), true, false, false)
        );
        assert_eq!(
            parsed("/mnt/data=s3://my-bucket/team7/"),
            (
                s("/mnt/data"),
                s("my-bucket"),
                s("team7/"),
                true,
                false,
                false
            )
        );
        assert_eq!(
            parsed("/mnt/data=s3://my-bucket/team7/:ro"),
            (
                s("/mnt/data"),
                s("my-bucket"),
                s("team7/"),
                true,
                false,
                false
            )
        );
        assert_eq!(
            parsed("/home/user/out=s3://b/x/y:rw"),
            (s("/home/user/out"), s("b"), s("x/y"), false, false, false)
        );
        assert_eq!(
            parsed("/mnt/o=s3://b:rw,overwrite,delete"),
            (s("/mnt/o"), s("b"), s(""), false, true, true)
        );
        assert_eq!(
            parsed("/mnt/o=s3://b/p:rw,delete"),
            (s("/mnt/o"), s("b"), s("p"), false, false, true)
        );
        // A tail that is not a word list is part of the prefix.
        assert_eq!(
            parsed("/mnt/t=s3://b/logs/2026-01-01T10:00/"),
            (
                s("/mnt/t"),
                s("b"),
                s("logs/2026-01-01T10:00/"),
                true,
                false,
                false
            )
        );
        assert_eq!(
            parsed("/mnt/t=s3://b/a:b:rw"),
            (s("/mnt/t"), s("b"), s("a:b"), false, false, false)
        );
    }

    #[test]
    fn bad_mount_arguments_say_the_syntax() {
        for bad in [
            "/mnt/data",
            "/mnt/data=my-bucket",
            "/mnt/data=https://my-bucket",
            "=s3://b",
            "/mnt/data=s3://",
            "/mnt/data=s3:///prefix",
        ] {
            assert_eq!(parse_mount_arg(bad).unwrap_err(), MOUNT_SYNTAX, "{bad}");
        }
        assert_eq!(
            parse_mount_arg("/mnt/d=s3://b:rx").unwrap_err(),
            format!("{MOUNT_SYNTAX} (unknown mount option \"rx\": use ro, rw, overwrite, delete)")
        );
        assert_eq!(
            parse_mount_arg("/mnt/d=s3://b:ro,rw").unwrap_err(),
            format!("{MOUNT_SYNTAX} (a mount is :ro or :rw, not both)")
        );
        for flags in ["delete", "ro,overwrite", "overwrite"] {
            assert_eq!(
                parse_mount_arg(&format!("/mnt/d=s3://b:{flags}")).unwrap_err(),
                format!(
                    "{MOUNT_SYNTAX} (overwrite and delete need a writable mount: :rw,overwrite)"
                ),
                "{flags}"
            );
        }
    }
}
