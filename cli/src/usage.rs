//! Usage errors (clap's), printed as clap does, or as the one JSON
//! document `--output json` promises; and their exit code: 2, or 125 for
//! `sandbox exec` and `sandbox shell`, whose other codes are the command's.
//!
//! The arguments are read as given because a usage error means clap could
//! not parse them: only the global options before the subcommand are
//! looked at, which is where `--output` and the subcommand's name are.

use std::ffi::OsString;

use clap::error::{ContextKind, ErrorKind};
use serde_json::json;

use crate::output::{EXIT_OWN, EXIT_USAGE};

/// Global options that take a value (the next argument, unless `=`).
const VALUED_GLOBALS: [&str; 3] = ["--output", "--region", "--profile"];

/// Prints `err` (help and version as clap does, on stdout) and returns the
/// exit code.
pub fn report(err: &clap::Error, args: &[OsString]) -> i32 {
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) {
        let _ = err.print();
        return 0;
    }
    let code = if passes_exit_code(args) {
        EXIT_OWN
    } else {
        EXIT_USAGE
    };
    if wants_json(args) {
        let rendered = err.render().to_string();
        crate::output::json(&json!({
            "error": {
                "message": summary(err.kind(), &rendered),
                "kind": "usage",
                "retryable": false,
                "invalid_argument": invalid_argument(err),
                "help": rendered.trim_end(),
            }
        }));
    } else {
        let _ = err.print();
    }
    code
}

/// The rendered error's first paragraph on one line, without clap's
/// `error: ` (the usage and the tip follow it); for a missing subcommand
/// (clap renders the help), what is missing and the usage line.
fn summary(kind: ErrorKind, rendered: &str) -> String {
    if kind == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let usage = rendered
            .lines()
            .find_map(|line| line.strip_prefix("Usage: "))
            .unwrap_or("rayito <COMMAND>");
        return format!("a subcommand is required: {usage}");
    }
    let text = rendered.strip_prefix("error: ").unwrap_or(rendered);
    let paragraph = text.split("\n\n").next().unwrap_or_default();
    paragraph.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The argument clap names, when it names one.
fn invalid_argument(err: &clap::Error) -> Option<String> {
    err.get(ContextKind::InvalidArg).map(ToString::to_string)
}

/// The options and positionals before `--`, as text.
fn words(args: &[OsString]) -> impl Iterator<Item = String> + '_ {
    args.iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .take_while(|a| a != "--")
}

/// Whether `--output json` (or `--output=json`) was given anywhere.
fn wants_json(args: &[OsString]) -> bool {
    let words: Vec<String> = words(args).collect();
    words.iter().enumerate().any(|(i, word)| {
        word == "--output=json"
            || (word == "--output" && words.get(i + 1).is_some_and(|v| v == "json"))
    })
}

/// Whether the subcommand is `sandbox exec` or `sandbox shell`: the first
/// two words that are neither options nor a global option's value.
fn passes_exit_code(args: &[OsString]) -> bool {
    let mut names = Vec::new();
    let mut skip_value = false;
    for word in words(args) {
        if skip_value {
            skip_value = false;
        } else if word.starts_with('-') {
            skip_value = VALUED_GLOBALS.contains(&word.as_str());
        } else {
            names.push(word);
            if names.len() == 2 {
                break;
            }
        }
    }
    matches!(
        names.iter().map(String::as_str).collect::<Vec<_>>()[..],
        ["sandbox", "exec" | "shell"]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<OsString> {
        std::iter::once("rayito")
            .chain(words.iter().copied())
            .map(OsString::from)
            .collect()
    }

    #[test]
    fn exec_and_shell_are_found_past_global_options() {
        for words in [
            &["sandbox", "exec", "--bogus"][..],
            &["--output", "json", "sandbox", "shell"],
            &["--region", "sandbox", "sandbox", "exec"],
            &["-vv", "--local", "sandbox", "exec", "ID", "--", "sandbox"],
        ] {
            assert!(passes_exit_code(&args(words)), "{words:?}");
        }
        for words in [
            &["sandbox", "info", "exec"][..],
            &["--profile", "exec", "sandbox", "list"],
            &["sandbox"],
            &["pool", "exec"],
        ] {
            assert!(!passes_exit_code(&args(words)), "{words:?}");
        }
    }

    #[test]
    fn json_is_wanted_only_before_the_command_s_own_arguments() {
        assert!(wants_json(&args(&["--output", "json", "sandbox"])));
        assert!(wants_json(&args(&["sandbox", "list", "--output=json"])));
        assert!(!wants_json(&args(&[
            "sandbox", "exec", "x", "--", "--output", "json"
        ])));
        assert!(!wants_json(&args(&["--output", "text"])));
    }
}
