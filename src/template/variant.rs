//! Which base image an artifact is ([`Variant`]): its default image name,
//! the marker files `rayito image zip` writes for it, the operating
//! system capabilities its image is published with, and the check that an
//! artifact's markers say what a publish claims (spec: images-and-templates
//! §2.1; extras §2 and §3).
//!
//! The caps variants: `rayito-base-caps` is the full artifact published
//! with `additionalOsCapabilities: ["ALL"]` (the agent mounts S3 prefixes
//! with `CAP_SYS_ADMIN`; the base Dockerfile ships Mountpoint for Amazon S3
//! in every variant), and `rayito-base-caps-efs` adds amazon-efs-utils,
//! which only an artifact with the efs marker installs.

use std::collections::BTreeMap;
use std::fmt;

use super::artifact::{Artifact, read_base};
use crate::SandboxError;

/// The marker of a slim artifact (its kernel warm-up), spec 2.1.
pub const SLIM_MARKER: &str = "kernel-sidecar/ipython/startup/warmup_variant";
/// The marker of a poly artifact (its extra kernels), spec 2.1.
pub const POLY_MARKER: &str = "kernel-sidecar/kernels_variant";
/// The marker of an artifact whose image installs amazon-efs-utils (the
/// caps-efs variant), spec 2.1.
pub const EFS_MARKER: &str = "kernel-sidecar/efs_variant";

/// The one value of `additionalOsCapabilities` the service accepts: every
/// capability, which the caps variants are published with.
pub const ALL_OS_CAPABILITIES: &str = "ALL";

/// Which base image an artifact is: its image name, and the marker files
/// `rayito image zip` writes for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Variant {
    /// `rayito-base`: no marker.
    #[default]
    Full,
    /// `rayito-base-slim`: [`SLIM_MARKER`] holds `slim\n`.
    Slim,
    /// `rayito-base-poly`: [`POLY_MARKER`] holds `poly\n`.
    Poly,
    /// `rayito-base-caps`: the full artifact (no marker) published with the
    /// operating system capabilities [`ALL_OS_CAPABILITIES`], so that the
    /// agent can mount S3 prefixes.
    Caps,
    /// `rayito-base-caps-efs`: [`EFS_MARKER`] holds `efs\n` (the image
    /// installs amazon-efs-utils), published with
    /// [`ALL_OS_CAPABILITIES`], so that the agent can mount S3 prefixes
    /// and EFS volumes.
    CapsEfs,
}

/// The variants, in the order their names are matched.
const ALL: [Variant; 5] = [
    Variant::Full,
    Variant::Slim,
    Variant::Poly,
    Variant::Caps,
    Variant::CapsEfs,
];

impl Variant {
    /// `full`, `slim`, `poly`, `caps` or `caps-efs`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Slim => "slim",
            Self::Poly => "poly",
            Self::Caps => "caps",
            Self::CapsEfs => "caps-efs",
        }
    }

    /// The image the variant is published as by default.
    pub fn image_name(self) -> &'static str {
        match self {
            Self::Full => "rayito-base",
            Self::Slim => "rayito-base-slim",
            Self::Poly => "rayito-base-poly",
            Self::Caps => "rayito-base-caps",
            Self::CapsEfs => "rayito-base-caps-efs",
        }
    }

    /// The image's `additionalOsCapabilities`: [`ALL_OS_CAPABILITIES`] for
    /// the caps variants, none for the others.
    pub fn os_capabilities(self) -> Option<&'static str> {
        matches!(self, Self::Caps | Self::CapsEfs).then_some(ALL_OS_CAPABILITIES)
    }

    /// Whether the image installs amazon-efs-utils (its artifact carries
    /// [`EFS_MARKER`]).
    pub fn has_efs(self) -> bool {
        self == Self::CapsEfs
    }

    /// The marker file the variant's artifact carries and its content.
    pub fn marker(self) -> Option<(&'static str, &'static str)> {
        match self {
            Self::Full | Self::Caps => None,
            Self::Slim => Some((SLIM_MARKER, "slim\n")),
            Self::Poly => Some((POLY_MARKER, "poly\n")),
            Self::CapsEfs => Some((EFS_MARKER, "efs\n")),
        }
    }

    /// The variant of an official image name, `rayito-<variant>[-<size>]`
    /// (`rayito-base-caps-4gb` is [`Variant::Caps`]); `None` for any other
    /// name.
    pub fn of_official_name(name: &str) -> Option<Self> {
        let sized = |base: &str| {
            name == base
                || name.strip_prefix(base).is_some_and(|rest| {
                    rest.strip_prefix('-').is_some_and(|size| {
                        crate::Size::ALL
                            .iter()
                            .any(|s| !s.is_baseline() && s.name() == size)
                    })
                })
        };
        // The longest base first: `rayito-base-caps-efs` before
        // `rayito-base-caps` before `rayito-base`.
        let mut by_length = ALL;
        by_length.sort_by_key(|v| std::cmp::Reverse(v.image_name().len()));
        by_length.into_iter().find(|v| sized(v.image_name()))
    }

    /// What the markers of an artifact's files say it is, among the marker
    /// families: `Full` (no marker), `Slim`, `Poly` or `CapsEfs`; `None`
    /// for markers that contradict each other.
    pub(crate) fn of_markers(files: &BTreeMap<String, Vec<u8>>) -> Option<Self> {
        let found: Vec<Self> = [Self::Slim, Self::Poly, Self::CapsEfs]
            .into_iter()
            .filter(|v| {
                v.marker().is_some_and(|(path, text)| {
                    files.get(path).is_some_and(|m| m == text.as_bytes())
                })
            })
            .collect();
        match found.as_slice() {
            [] => Some(Self::Full),
            [one] => Some(*one),
            _ => None,
        }
    }

    /// The variant whose markers this one's artifact carries: a caps image
    /// is the full artifact.
    pub(crate) fn marker_family(self) -> Self {
        match self {
            Self::Caps => Self::Full,
            other => other,
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Variant {
    type Err = SandboxError;

    /// `full`, `slim` or `poly` (the artifact variants of `--variant`; a
    /// caps variant is asked for with the os capabilities, see
    /// [`Variant::with_caps`]).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "full" => Ok(Self::Full),
            "slim" => Ok(Self::Slim),
            "poly" => Ok(Self::Poly),
            _ => Err(SandboxError::invalid_argument(
                "variant",
                "unknown variant; pass full, slim or poly",
            )),
        }
    }
}

impl Variant {
    /// The variant `rayito image publish` means by `--variant` (this one),
    /// `--os-capabilities ALL` (`caps`) and `--with-efs` (`efs`): the full
    /// artifact with the capabilities is [`Variant::Caps`], with amazon-efs-utils
    /// too [`Variant::CapsEfs`]; without either, this variant.
    ///
    /// # Errors
    /// `InvalidArgument` (`with_efs`) for `efs` without `caps` (the agent
    /// mounts EFS only with `CAP_SYS_ADMIN`) or on a slim or poly
    /// artifact; `InvalidArgument` (`os_capabilities`) for `caps` on a
    /// slim or poly artifact (a caps image is built from the full one).
    pub fn with_caps(self, caps: bool, efs: bool) -> Result<Self, SandboxError> {
        if efs && !matches!(self, Self::Full | Self::CapsEfs) {
            return Err(SandboxError::invalid_argument(
                "with_efs",
                format!(
                    "amazon-efs-utils goes only into rayito-base-caps-efs, built from the full artifact, not the {self} one; publish the full artifact with it"
                ),
            ));
        }
        if efs && !caps {
            return Err(SandboxError::invalid_argument(
                "with_efs",
                "an image with amazon-efs-utils needs the os capabilities ALL: the agent mounts EFS only with CAP_SYS_ADMIN; add them",
            ));
        }
        if caps && !matches!(self, Self::Full | Self::Caps | Self::CapsEfs) {
            return Err(SandboxError::invalid_argument(
                "os_capabilities",
                format!(
                    "the os capabilities ALL make a caps image (rayito-base-caps), built from the full artifact, not the {self} one; publish the full artifact with them"
                ),
            ));
        }
        Ok(match (caps, efs) {
            (true, true) => Self::CapsEfs,
            (true, false) if self == Self::Full => Self::Caps,
            _ => self,
        })
    }
}

/// Checks that `artifact`'s markers say it is `variant` (a slim artifact
/// published as the full image would give every user the slim one; an
/// artifact with the efs marker is only the caps-efs image's).
///
/// # Errors
/// `InvalidArgument` (`variant`) when they differ; `InvalidArgument`
/// (`artifact`) for a zip this SDK does not read.
pub fn check_artifact_variant(artifact: &Artifact, variant: Variant) -> Result<(), SandboxError> {
    let files = read_base(artifact.bytes()).map_err(|_| {
        SandboxError::invalid_argument(
            "artifact",
            "is not a base image artifact (a zip this SDK reads); make one with rayito image zip",
        )
    })?;
    let found = Variant::of_markers(&files);
    let wanted = variant.marker_family();
    match found {
        Some(found) if found == wanted => Ok(()),
        Some(Variant::CapsEfs) => Err(SandboxError::invalid_argument(
            "variant",
            "the artifact carries the efs marker (kernel-sidecar/efs_variant): it is rayito-base-caps-efs's; publish it as the caps-efs variant (--with-efs --os-capabilities ALL), or pack it again without --with-efs",
        )),
        Some(_) if variant.has_efs() => Err(SandboxError::invalid_argument(
            "variant",
            "the caps-efs variant needs an artifact with the efs marker (kernel-sidecar/efs_variant); pack it with rayito image zip --with-efs",
        )),
        _ => Err(SandboxError::invalid_argument(
            "variant",
            "the artifact's variant markers do not match the variant asked for; pack the artifact for that variant, or pass the artifact's variant",
        )),
    }
}

/// Checks that an official image name (`rayito-<variant>[-<size>]`) is
/// published as its own variant: `rayito-base-caps` without the
/// capabilities would be a caps image that mounts nothing, and
/// `rayito-base` with them would no longer be the plain base.
///
/// # Errors
/// `InvalidArgument` (`name`) when `name` is another variant's official
/// name.
pub(crate) fn check_official_name(name: &str, variant: Variant) -> Result<(), SandboxError> {
    match Variant::of_official_name(name) {
        Some(official) if official != variant => Err(SandboxError::invalid_argument(
            "name",
            format!(
                "{} is the official name of the {official} variant, but this publish is the {variant} variant; publish under {} or another name",
                official.image_name(),
                variant.image_name()
            ),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn official_names_map_to_their_variant_sizes_included() {
        for v in ALL {
            assert_eq!(Variant::of_official_name(v.image_name()), Some(v));
        }
        assert_eq!(
            Variant::of_official_name("rayito-base-caps-4gb"),
            Some(Variant::Caps)
        );
        assert_eq!(
            Variant::of_official_name("rayito-base-caps-efs-512mb"),
            Some(Variant::CapsEfs)
        );
        assert_eq!(Variant::of_official_name("rayito-base-2gb"), None);
        assert_eq!(Variant::of_official_name("rayito-base-capsule"), None);
        assert_eq!(Variant::of_official_name("my-base"), None);
        check_official_name("my-base", Variant::Caps).unwrap();
        check_official_name("rayito-base-caps-8gb", Variant::Caps).unwrap();
        assert_eq!(
            check_official_name("rayito-base-caps", Variant::Full)
                .unwrap_err()
                .to_string(),
            "invalid name: rayito-base-caps is the official name of the caps variant, but this publish is the full variant; publish under rayito-base or another name"
        );
    }

    #[test]
    fn the_caps_flags_make_the_caps_variants_and_refuse_the_rest() {
        assert_eq!(
            Variant::Full.with_caps(false, false).unwrap(),
            Variant::Full
        );
        assert_eq!(Variant::Full.with_caps(true, false).unwrap(), Variant::Caps);
        assert_eq!(
            Variant::Full.with_caps(true, true).unwrap(),
            Variant::CapsEfs
        );
        assert_eq!(
            Variant::Slim.with_caps(false, false).unwrap(),
            Variant::Slim
        );
        let text = |v: Variant, caps, efs| v.with_caps(caps, efs).unwrap_err().to_string();
        assert_eq!(
            text(Variant::Full, false, true),
            "invalid with_efs: an image with amazon-efs-utils needs the os capabilities ALL: the agent mounts EFS only with CAP_SYS_ADMIN; add them"
        );
        assert_eq!(
            text(Variant::Slim, true, true),
            "invalid with_efs: amazon-efs-utils goes only into rayito-base-caps-efs, built from the full artifact, not the slim one; publish the full artifact with it"
        );
        assert_eq!(
            text(Variant::Poly, true, false),
            "invalid os_capabilities: the os capabilities ALL make a caps image (rayito-base-caps), built from the full artifact, not the poly one; publish the full artifact with them"
        );
        assert_eq!(Variant::Caps.os_capabilities(), Some("ALL"));
        assert_eq!(Variant::CapsEfs.os_capabilities(), Some("ALL"));
        assert_eq!(Variant::Full.os_capabilities(), None);
        assert_eq!(Variant::CapsEfs.marker(), Some((EFS_MARKER, "efs\n")));
        assert_eq!(Variant::Caps.marker(), None);
    }
}
