//! The SDK's hints in CLI words: an error's message names the SDK's API
//! where a program would fix it (`SandboxLogging::cloudwatch()`); a CLI
//! user fixes it with a flag. Each hint with a CLI spelling is translated;
//! the others (a builder option the CLI has no flag for) stay as they are.

use rayito::SandboxError;

/// The SDK's wording, and the CLI's. Each pair is pinned by a test
/// against the SDK's message, so a reworded message cannot slip by.
pub(crate) const TRANSLATIONS: &[(&str, &str)] = &[
    (
        "create the sandbox with SandboxLogging::cloudwatch() and an execution role that may write there, or pass the group it logs to",
        "create the sandbox with `sandbox create --logs` (on AWS with an execution role that may write there), or pass the group it logs to with --log-group",
    ),
    (
        "choose the local backend with RAYITO_BACKEND=local or Sandbox::builder().local()",
        "choose the local backend with --local (or RAYITO_BACKEND=local)",
    ),
    (
        "fix the profile name (AwsOptions::profile or AWS_PROFILE)",
        "fix the profile name (--profile or AWS_PROFILE)",
    ),
    (
        "raise the command timeout, or pass 0 for no limit",
        "raise exec's --timeout, or leave it out for no limit",
    ),
];

/// `message` with every SDK hint that has a CLI spelling in CLI words.
pub(crate) fn for_cli(message: &str) -> String {
    TRANSLATIONS
        .iter()
        .fold(message.to_owned(), |text, (sdk, cli)| {
            text.replace(sdk, cli)
        })
}

/// An SDK error's message, in CLI words.
pub(crate) fn message(err: &SandboxError) -> String {
    for_cli(&err.to_string())
}

/// A check's detail of an SDK error: its message in CLI words and its kind.
pub(crate) fn detail(err: &SandboxError) -> String {
    format!("{} (kind {})", message(err), err.classify().kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sdks_hints_read_as_flags() {
        // Two of the SDK's messages built here; the others are met by the
        // process tests (cli_answers), which pin the translation too.
        let logs = SandboxError::no_logs("m-1", "/rayito/base");
        assert!(logs.to_string().contains(TRANSLATIONS[0].0), "{logs}");
        assert_eq!(
            message(&logs),
            "no logs (logging disabled, no execution role, or another group) for sandbox m-1 in log group /rayito/base; create the sandbox with `sandbox create --logs` (on AWS with an execution role that may write there), or pass the group it logs to with --log-group"
        );
        let timeout = SandboxError::timeout(rayito::error::TimeoutScope::Command, "sleep", None);
        assert_eq!(
            message(&timeout),
            "command sleep reached its timeout and was stopped; raise exec's --timeout, or leave it out for no limit"
        );
    }
}
