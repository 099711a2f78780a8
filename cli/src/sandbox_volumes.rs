//! EFS volumes of a sandbox in the CLI (docs/cli.md, docs/volumes.md):
//! `sandbox create --volume PATH=fs-id:fsap-id[:ro]` (with `--egress` and
//! `--execution-role-arn`, which volumes need), and `sandbox volumes ID`
//! printing each volume's state as the sandbox's agent reports it.

use std::collections::BTreeMap;

use rayito::SandboxBuilder;
use rayito::volumes::{EfsVolume, VolumeStatus};

use crate::Format;
use crate::commands::{Backend, Failure};
use crate::path_statuses::{self, Row};

/// `sandbox create`'s volumes and what they need.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct VolumeArgs {
    /// An EFS volume mounted at PATH: an access point of a file
    /// system, `:ro` for read-only (repeatable, at most 4; needs
    /// `--egress` with your VPC's connector, `--execution-role-arn`
    /// and an image of the variant base-caps-efs; docs/volumes.md).
    #[arg(long = "volume", value_name = "PATH=fs-ID:fsap-ID[:ro]",
          value_parser = parse_volume_arg)]
    volumes: Vec<(String, EfsVolume)>,
    /// An egress network connector: a managed name (INTERNET_EGRESS)
    /// or the ARN of a connector of yours (repeatable; default: the
    /// image's).
    #[arg(long = "egress", value_name = "CONNECTOR")]
    egress: Vec<String>,
    /// The execution role the sandbox runs with (its credentials
    /// reach the sandbox through the metadata service).
    #[arg(long, value_name = "ARN")]
    execution_role_arn: Option<String>,
}

impl VolumeArgs {
    /// `builder` with the egress, the role and the volumes given.
    pub(crate) fn apply(self, mut builder: SandboxBuilder) -> SandboxBuilder {
        if !self.egress.is_empty() {
            builder = builder.egress(self.egress);
        }
        if let Some(role) = self.execution_role_arn {
            builder = builder.execution_role_arn(role);
        }
        for (path, volume) in self.volumes {
            builder = builder.volume(path, volume);
        }
        builder
    }
}

/// What `--volume` expects.
const VOLUME_SYNTAX: &str = "expected PATH=fs-ID:fsap-ID or PATH=fs-ID:fsap-ID:ro";

/// `--volume PATH=fs-id:fsap-id[:ro]`: the mount path and the volume (its
/// ids and path are checked by the SDK's `create`, before any call).
pub(crate) fn parse_volume_arg(text: &str) -> Result<(String, EfsVolume), String> {
    let Some((path, spec)) = text.split_once('=') else {
        return Err(VOLUME_SYNTAX.to_owned());
    };
    let parts: Vec<&str> = spec.split(':').collect();
    let (fs, ap, read_only) = match parts.as_slice() {
        [fs, ap] => (*fs, *ap, false),
        [fs, ap, "ro"] => (*fs, *ap, true),
        [_, _, "rw"] => return Err(format!("{VOLUME_SYNTAX} (a volume is writable unless :ro)")),
        _ => return Err(VOLUME_SYNTAX.to_owned()),
    };
    if path.is_empty() || fs.is_empty() || ap.is_empty() {
        return Err(VOLUME_SYNTAX.to_owned());
    }
    Ok((path.to_owned(), EfsVolume::new(fs, ap).read_only(read_only)))
}

/// `sandbox volumes ID`: one ConfigureStatus through a fresh connection.
pub(crate) async fn list(backend: &Backend, format: Format, id: &str) -> Result<i32, Failure> {
    let sandbox = backend.connect(id).await?;
    let statuses: BTreeMap<String, VolumeStatus> = sandbox.volumes().statuses().await?;
    let rows: Vec<Row<'_>> = statuses
        .iter()
        .map(|(path, status)| Row {
            path,
            state: status.state.as_str(),
            last_error_class: status.last_error_class.as_deref(),
        })
        .collect();
    path_statuses::print(format, sandbox.id(), "volumes", "EFS volume", &rows);
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_arguments_parse_or_say_the_syntax() {
        let (path, v) = parse_volume_arg("/mnt/data=fs-0123abcd:fsap-0123abcd").unwrap();
        assert_eq!(path, "/mnt/data");
        assert_eq!(v.file_system_id, "fs-0123abcd");
        assert_eq!(v.access_point_id, "fsap-0123abcd");
        assert!(!v.read_only);
        let (_, v) = parse_volume_arg("/mnt/data=fs-0123abcd:fsap-0123abcd:ro").unwrap();
        assert!(v.read_only);
        for bad in [
            "/mnt/data",
            "/mnt/data=fs-0123abcd",
            "=fs-1:fsap-1",
            "/mnt/data=:fsap-1",
            "/mnt/data=fs-1:",
            "/mnt/data=fs-1:fsap-1:rx",
            "/mnt/data=fs-1:fsap-1:ro:x",
        ] {
            assert_eq!(parse_volume_arg(bad).unwrap_err(), VOLUME_SYNTAX, "{bad}");
        }
        assert_eq!(
            parse_volume_arg("/mnt/d=fs-1:fsap-1:rw").unwrap_err(),
            "expected PATH=fs-ID:fsap-ID or PATH=fs-ID:fsap-ID:ro (a volume is writable unless :ro)"
        );
    }
}
