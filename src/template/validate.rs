//! The checks every builder method runs on its arguments, before the value
//! is kept. Reasons are our own text and never quote the value (an
//! environment value or a command may hold a secret).

use crate::SandboxError;

/// The value goes into one Dockerfile line or one JSON field the agent
/// runs: a carriage return, a line feed or a NUL would split or cut it.
pub(crate) fn one_line(argument: &'static str, value: &str) -> Result<(), SandboxError> {
    if value.contains(['\r', '\n', '\0']) {
        return Err(SandboxError::invalid_argument(
            argument,
            "must be on one line (no carriage return, line feed or NUL)",
        ));
    }
    Ok(())
}

/// A one-line value with something other than whitespace in it.
pub(crate) fn not_blank(argument: &'static str, value: &str) -> Result<(), SandboxError> {
    if value.trim().is_empty() {
        return Err(SandboxError::invalid_argument(
            argument,
            "must not be blank",
        ));
    }
    one_line(argument, value)
}

/// A one-line absolute path.
pub(crate) fn absolute_path(argument: &'static str, value: &str) -> Result<(), SandboxError> {
    if !value.starts_with('/') {
        return Err(SandboxError::invalid_argument(
            argument,
            "must be an absolute path (starting with /)",
        ));
    }
    one_line(argument, value)
}

/// An environment variable name: `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn env_name(name: &str) -> Result<(), SandboxError> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(SandboxError::invalid_argument(
            "envs",
            "a name must match [A-Za-z_][A-Za-z0-9_]*",
        ));
    }
    Ok(())
}

/// A list of package names: at least one unless `may_be_empty`, none blank
/// or on several lines, none starting with `-` when `no_options` (a name
/// must not turn into an option of the package manager).
pub(crate) fn packages(
    argument: &'static str,
    names: &[String],
    may_be_empty: bool,
    no_options: bool,
) -> Result<(), SandboxError> {
    if names.is_empty() && !may_be_empty {
        return Err(SandboxError::invalid_argument(
            argument,
            "must name at least one package",
        ));
    }
    for name in names {
        if name.trim().is_empty() {
            return Err(SandboxError::invalid_argument(
                argument,
                "a package name is blank",
            ));
        }
        one_line(argument, name)?;
        if no_options && name.starts_with('-') {
            return Err(SandboxError::invalid_argument(
                argument,
                "a package name starts with -, which the package manager would read as an option",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_argument_and_never_the_value() {
        let e = one_line("cmd", "echo secret-value\nrm").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid cmd: must be on one line (no carriage return, line feed or NUL)"
        );
        assert!(
            matches!(&e, SandboxError::InvalidArgument { argument: Some(a), .. } if a == "cmd")
        );
        assert_eq!(
            not_blank("user", "  ").unwrap_err().to_string(),
            "invalid user: must not be blank"
        );
        assert_eq!(
            absolute_path("dst", "app").unwrap_err().to_string(),
            "invalid dst: must be an absolute path (starting with /)"
        );
        assert!(absolute_path("dst", "/app").is_ok());
        for bad in ["", "1A", "A-B", "A B", "É"] {
            assert!(env_name(bad).is_err(), "{bad}");
        }
        for good in ["A", "_", "a_1", "PATH"] {
            assert!(env_name(good).is_ok(), "{good}");
        }
        let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(packages("packages", &names(&[]), false, true).is_err());
        assert!(packages("packages", &names(&[]), true, true).is_ok());
        assert!(packages("packages", &names(&["-y"]), false, true).is_err());
        assert!(packages("packages", &names(&["-y"]), false, false).is_ok());
        assert!(packages("packages", &names(&["git", " "]), false, true).is_err());
    }
}
