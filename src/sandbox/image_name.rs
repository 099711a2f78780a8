//! Template names: what a build is called and what sandboxes are created
//! from. Here in the core because a create resolves a name to its image
//! (`Client::image_arn`); `rayito::template` re-exports the check.

use crate::SandboxError;

/// The longest template name.
const MAX_NAME_CHARS: usize = 64;

/// Checks a template name: 1 to 64 of `A-Z`, `a-z`, `0-9`, `_` and `-`,
/// with no `:tag`. An image ARN (`arn:...`) is taken as it is.
///
/// # Errors
///
/// `Template` saying what is wrong with the name (never quoting it).
pub fn check_template_name(name: &str) -> Result<(), SandboxError> {
    if name.starts_with("arn:") {
        return Ok(());
    }
    if name.contains(':') {
        return Err(SandboxError::template_name(
            "it holds a :tag, and templates have no tags",
        ));
    }
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(SandboxError::template_name(
            "it must be 1 to 64 characters long",
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(SandboxError::template_name(
            "it holds a character other than A-Z, a-z, 0-9, _ and -",
        ));
    }
    Ok(())
}

/// The ARN of the image called `name` in `account`'s `region`.
pub(crate) fn image_arn_in(partition: &str, region: &str, account: &str, name: &str) -> String {
    format!("arn:{partition}:lambda:{region}:{account}:microvm-image:{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_image_name_rule() {
        for good in [
            "a",
            "my-template_2",
            &"x".repeat(64),
            "arn:aws:lambda:us-east-1:1:microvm-image:x",
        ] {
            assert!(check_template_name(good).is_ok(), "{good}");
        }
        for (bad, why) in [
            ("web:latest", "it holds a :tag, and templates have no tags"),
            ("", "it must be 1 to 64 characters long"),
            (&"x".repeat(65), "it must be 1 to 64 characters long"),
            (
                "my template",
                "it holds a character other than A-Z, a-z, 0-9, _ and -",
            ),
            (
                "dé",
                "it holds a character other than A-Z, a-z, 0-9, _ and -",
            ),
        ] {
            let e = check_template_name(bad).unwrap_err();
            assert_eq!(e.kind().as_str(), "template");
            assert_eq!(
                e.to_string(),
                format!(
                    "invalid template name: {why}; use 1 to 64 of A-Z, a-z, 0-9, _ and - (no :tag), or an image ARN"
                )
            );
        }
    }
}
