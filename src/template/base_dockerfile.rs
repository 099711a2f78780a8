//! The `Dockerfile` `rayito image zip` writes when the directory has none:
//! the managed Amazon Linux 2023 base with the agent as PID 1, Mountpoint
//! for Amazon S3 and its user (every variant: `rayito-base-caps` is the
//! full artifact published with the os capabilities), and
//! amazon-efs-utils for the caps-efs variant.
//!
//! Mountpoint comes as AWS's RPM for the image's architecture at a pinned
//! version, so that two packs of the same inputs give the same artifact
//! (and a publish reuses the version it built) and a new Mountpoint is a
//! change of this file, not of the day the image was built.

use super::base_image::Arch;

/// The Mountpoint for Amazon S3 release the base image installs.
pub const MOUNT_S3_VERSION: &str = "1.21.0";

/// The user and group `mount-s3` runs as (the agent's `rayito-mount`,
/// outside the uid range the agent blocks from the metadata service, so
/// that it reaches the execution role's credentials).
pub const MOUNT_USER: &str = "rayito-mount";
/// Its uid and gid.
pub const MOUNT_UID: u32 = 990;

/// The first lines: the agent, its kernel driver and licences, Python.
macro_rules! head {
    () => {
        "\
# rayito base image: the managed Amazon Linux 2023 base with the rayito agent
# as the MicroVM's main process (hooks on port 9000, gRPC on 8080).
COPY rayd /usr/local/bin/rayd
COPY kernel-sidecar/ /opt/rayito/kernel-sidecar/
COPY licenses/ /usr/share/licenses/rayito/
RUN command -v python3 >/dev/null 2>&1 || { dnf install -y --setopt=install_weak_deps=0 python3 && dnf clean all; }
"
    };
}

/// Mountpoint for Amazon S3 for the RPM architecture `$arch`, and the
/// `rayito-mount` user (uid and gid 990, no home, no shell).
macro_rules! mount_s3 {
    ($arch:literal) => {
        concat!(
            "\
# S3 mounts (the caps variants): Mountpoint for Amazon S3, which the agent runs
# as rayito-mount (uid/gid 990) with the execution role's credentials. dnf is
# Amazon Linux's; a local build's host stands for the base and brings its own.
RUN if command -v dnf >/dev/null 2>&1; then dnf install -y --setopt=install_weak_deps=0 https://s3.amazonaws.com/mountpoint-s3-release/1.21.0/",
            $arch,
            "/mount-s3-1.21.0-",
            $arch,
            ".rpm shadow-utils && dnf clean all; fi
RUN getent group rayito-mount >/dev/null || groupadd --system --gid 990 rayito-mount; getent passwd rayito-mount >/dev/null || useradd --system --uid 990 --gid 990 --no-create-home --home-dir /nonexistent --shell /sbin/nologin rayito-mount
"
        )
    };
}

/// amazon-efs-utils (`mount -t efs` with TLS and IAM), caps-efs only.
const EFS_UTILS: &str = "\
# EFS volumes (rayito-base-caps-efs): amazon-efs-utils, for mount -t efs with TLS and IAM.
RUN if command -v dnf >/dev/null 2>&1; then dnf install -y --setopt=install_weak_deps=0 amazon-efs-utils && dnf clean all; fi
";

/// The last lines: the agent's directory and the agent as PID 1.
macro_rules! tail {
    () => {
        "\
RUN mkdir -p /etc/rayito
CMD [\"/usr/local/bin/rayd\", \"serve\", \"--grpc-addr\", \"0.0.0.0:8080\", \"--hooks-addr\", \"127.0.0.1:9000\", \"--template-dir\", \"/etc/rayito\"]
"
    };
}

/// The `Dockerfile` written when the directory has none, for an `ARM_64`
/// image without amazon-efs-utils ([`default_dockerfile`] for the
/// others): the managed Amazon Linux 2023 base (the image's
/// `baseImageArn`) with the agent as PID 1 serving its hooks on port 9000,
/// Mountpoint for Amazon S3 and its `rayito-mount` user. Python 3 (for
/// code contexts) is installed only if the base lacks it; the agent
/// carries its kernel driver inside its binary.
pub const DEFAULT_DOCKERFILE: &str = concat!(head!(), mount_s3!("arm64"), tail!());

/// The `Dockerfile` written when the directory has none, for an image of
/// `arch`, with amazon-efs-utils when `efs` (the caps-efs variant).
pub fn default_dockerfile(arch: Arch, efs: bool) -> String {
    let mount_s3 = match arch {
        Arch::Arm64 => mount_s3!("arm64"),
        Arch::X86_64 => mount_s3!("x86_64"),
    };
    let efs = if efs { EFS_UTILS } else { "" };
    format!("{}{mount_s3}{efs}{}", head!(), tail!())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arm_dockerfile_without_efs_is_the_default_one() {
        assert_eq!(default_dockerfile(Arch::Arm64, false), DEFAULT_DOCKERFILE);
    }

    #[test]
    fn mountpoint_is_the_pinned_rpm_of_the_images_architecture_and_runs_as_uid_990() {
        let url = |arch: &str| {
            format!(
                "https://s3.amazonaws.com/mountpoint-s3-release/{MOUNT_S3_VERSION}/{arch}/mount-s3-{MOUNT_S3_VERSION}-{arch}.rpm"
            )
        };
        let arm = default_dockerfile(Arch::Arm64, false);
        let x86 = default_dockerfile(Arch::X86_64, false);
        assert!(
            arm.contains(&format!(
                "RUN if command -v dnf >/dev/null 2>&1; then dnf install -y --setopt=install_weak_deps=0 {} shadow-utils && dnf clean all; fi\n",
                url("arm64")
            )),
            "{arm}"
        );
        assert!(
            x86.contains(&url("x86_64")) && !x86.contains("arm64"),
            "{x86}"
        );
        for text in [&arm, &x86] {
            assert!(text.contains(&format!(
                "getent group {MOUNT_USER} >/dev/null || groupadd --system --gid {MOUNT_UID} {MOUNT_USER};"
            )));
            assert!(text.contains(&format!(
                "useradd --system --uid {MOUNT_UID} --gid {MOUNT_UID} --no-create-home --home-dir /nonexistent --shell /sbin/nologin {MOUNT_USER}\n"
            )));
            assert!(!text.contains("amazon-efs-utils"));
        }
    }

    #[test]
    fn only_the_efs_variant_installs_amazon_efs_utils_before_the_agents_cmd() {
        let efs = default_dockerfile(Arch::Arm64, true);
        let line = "RUN if command -v dnf >/dev/null 2>&1; then dnf install -y --setopt=install_weak_deps=0 amazon-efs-utils && dnf clean all; fi\n";
        let at = efs.find(line).expect("the efs layer");
        assert!(at > efs.find("mount-s3-").unwrap());
        assert!(at < efs.find("CMD [").unwrap());
        assert_eq!(efs.replace(EFS_UTILS, ""), DEFAULT_DOCKERFILE);
    }

    #[test]
    fn docs_aws_md_shows_the_default_dockerfile_and_the_efs_layer() {
        let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/aws.md"))
            .expect("docs/aws.md");
        assert!(
            page.contains(&format!("```dockerfile\n{DEFAULT_DOCKERFILE}```")),
            "docs/aws.md should show the default Dockerfile:\n{DEFAULT_DOCKERFILE}"
        );
        assert!(
            page.contains(&format!("```dockerfile\n{EFS_UTILS}```")),
            "docs/aws.md should show the efs layer:\n{EFS_UTILS}"
        );
    }
}
