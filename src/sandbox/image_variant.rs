//! The variant of an official image name (`rayito-<variant>[-<size>]`):
//! what the features that need a capability of the image (EFS volumes, S3
//! mounts) check before launching, when the name alone decides it.

/// The variants of the official images.
const OFFICIAL_VARIANTS: [&str; 5] = [
    "base",
    "base-caps",
    "base-caps-efs",
    "base-poly",
    "base-slim",
];

/// The variant of an official image name, `rayito-<variant>` or
/// `rayito-<variant>-<size>` (`rayito-base-caps-4gb` is `base-caps`);
/// `None` for an ARN, no name, or any other name (an image of your own,
/// even one starting with `rayito-`): its agent's Health decides then.
#[cfg_attr(not(feature = "efs"), allow(dead_code))]
pub(crate) fn official_variant(name: Option<&str>) -> Option<&'static str> {
    let rest = name?.strip_prefix("rayito-")?;
    let known = |v: &str| OFFICIAL_VARIANTS.into_iter().find(|known| *known == v);
    known(rest).or_else(|| {
        crate::size::Size::ALL.into_iter().find_map(|size| {
            rest.strip_suffix(size.name())
                .and_then(|v| v.strip_suffix('-'))
                .and_then(known)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn official_names_give_their_variant() {
        for (name, variant) in [
            (Some("rayito-base-caps-efs"), Some("base-caps-efs")),
            (Some("rayito-base-caps-efs-4gb"), Some("base-caps-efs")),
            (Some("rayito-base-caps-512mb"), Some("base-caps")),
            (Some("rayito-base"), Some("base")),
            (Some("rayito-base-2gb"), Some("base")),
            (Some("rayito-mybuild"), None),
            (Some("rayito-miapp-caps-efs"), None),
            (Some("rayito-base-3gb"), None),
            (Some("base-caps-efs"), None),
            (
                Some("arn:aws:lambda:us-east-1:1:microvm-image:rayito-base"),
                None,
            ),
            (None, None),
        ] {
            assert_eq!(official_variant(name), variant, "{name:?}");
        }
    }
}
