//! What a failed build's BuildKit log says: which step failed (the last
//! `#N [k/n] <instruction>` line), its exit code (the last `exit code: N`)
//! and the log's last 20 lines.

use crate::SandboxError;

/// How many lines of the log the error keeps.
pub const LOG_TAIL_LINES: usize = 20;
/// The most characters of one kept line (a log line is peer data).
const MAX_LINE_CHARS: usize = 4_096;

/// What a failed build's log says about the failure.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BuildLogFailure {
    /// The failed step, counted from 1 (`k` of `[k/n]`).
    pub step: Option<u32>,
    /// How many steps the build had (`n` of `[k/n]`).
    pub steps: Option<u32>,
    /// The failed step's instruction, e.g. `RUN make`.
    pub command: Option<String>,
    /// The exit code the log reports.
    pub exit_code: Option<i32>,
    /// The log's last 20 lines, joined by `\n`.
    pub log_tail: String,
}

/// `#<digits> [<k>/<n>] <instruction>` of a trimmed line.
fn step_line(line: &str) -> Option<(u32, u32, &str)> {
    let rest = line.strip_prefix('#')?;
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return None;
    }
    let rest = rest[digits..].strip_prefix(" [")?;
    let (k, rest) = rest.split_once('/')?;
    let (n, rest) = rest.split_once(']')?;
    let command = rest.strip_prefix(' ')?;
    let number = |s: &str| -> Option<u32> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    if command.is_empty() {
        return None;
    }
    Some((number(k)?, number(n)?, command))
}

/// The number after the last `exit code:` (and optional whitespace) in
/// `line`.
fn exit_code(line: &str) -> Option<i32> {
    let (_, after) = line.rsplit_once("exit code:")?;
    let after = after.trim_start();
    let digits: &str =
        &after[..after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len()];
    if digits.is_empty() {
        return None;
    }
    digits.parse().ok()
}

fn bounded(line: &str) -> &str {
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => &line[..at],
        None => line,
    }
}

/// Reads a failed build's log lines (oldest first).
pub fn parse_build_log<S: AsRef<str>>(lines: &[S]) -> BuildLogFailure {
    let mut failure = BuildLogFailure::default();
    for line in lines {
        let line = line.as_ref().trim();
        if let Some((k, n, command)) = step_line(line) {
            failure.step = Some(k);
            failure.steps = Some(n);
            failure.command = Some(bounded(command).to_owned());
        }
        if let Some(code) = exit_code(line) {
            failure.exit_code = Some(code);
        }
    }
    let start = lines.len().saturating_sub(LOG_TAIL_LINES);
    failure.log_tail = lines[start..]
        .iter()
        .map(|l| bounded(l.as_ref().trim_end_matches(['\r', '\n'])))
        .collect::<Vec<_>>()
        .join("\n");
    failure
}

impl BuildLogFailure {
    /// The `Build` error of this failure: a failed step when the log names
    /// one, otherwise a failure with the log's tail.
    pub fn into_error(self) -> SandboxError {
        match self.step {
            Some(step) => SandboxError::build_step_failed(
                step,
                self.command.as_deref(),
                self.exit_code,
                self.log_tail,
            ),
            None => SandboxError::build_failed(None, self.log_tail),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "#1 [internal] load build definition from Dockerfile
#1 transferring dockerfile: 312B done
#1 DONE 0.0s
#5 [1/4] FROM public.ecr.aws/amazonlinux/amazonlinux:2023
#5 DONE 1.2s
#6 [2/4] COPY rayd /usr/local/bin/rayd
#6 DONE 0.1s
#7 [3/4] RUN exit 3
#7 ERROR: process \"/bin/sh -c exit 3\" did not complete successfully: exit code: 3
------
 > [3/4] RUN exit 3:
------
Dockerfile:9
--------------------
   7 |     # >>> rayito template layer (m15-templates), no editar a mano
   8 | >>> RUN exit 3
--------------------
ERROR: failed to solve: process \"/bin/sh -c exit 3\" did not complete successfully: exit code: 3";

    #[test]
    fn finds_the_step_its_command_exit_code_and_tail() {
        let lines: Vec<&str> = LOG.lines().collect();
        let failure = parse_build_log(&lines);
        assert_eq!(failure.step, Some(3));
        assert_eq!(failure.steps, Some(4));
        assert_eq!(failure.command.as_deref(), Some("RUN exit 3"));
        assert_eq!(failure.exit_code, Some(3));
        assert_eq!(failure.log_tail, lines.join("\n"));
        let e = failure.into_error();
        assert_eq!(
            e.to_string(),
            "template build step 3 failed with exit code 3; fix that step (its command and the end of the build log are in the error)"
        );
        assert!(matches!(
            &e,
            SandboxError::Build { step: Some(3), exit_code: Some(3), command: Some(c), .. } if c.as_str() == "RUN exit 3"
        ));
    }

    #[test]
    fn the_tail_is_the_last_twenty_lines() {
        let lines: Vec<String> = (1..=45).map(|i| format!("line {i}")).collect();
        let failure = parse_build_log(&lines);
        let want: Vec<String> = (26..=45).map(|i| format!("line {i}")).collect();
        assert_eq!(failure.log_tail, want.join("\n"));
        assert_eq!(failure.step, None);
        assert!(matches!(
            failure.into_error(),
            SandboxError::Build {
                step: None,
                reason: None,
                ..
            }
        ));
    }

    #[test]
    fn only_exact_shapes_count() {
        for line in [
            "#7 [stage-0 3/4] RUN x",
            "# [3/4] RUN x",
            "#7 [3/4]",
            "#7 [3/4] ",
            "#7 [a/4] RUN x",
            "#7  [3/4] RUN x",
            "x #7 [3/4] RUN x",
            "#7 [99999999999/4] RUN x",
        ] {
            assert_eq!(parse_build_log(&[line]).step, None, "{line}");
        }
        assert_eq!(
            parse_build_log(&["  #12 [1/1] RUN a b  "])
                .command
                .as_deref(),
            Some("RUN a b")
        );
        for (line, code) in [
            ("exit code: 127", Some(127)),
            ("exit code:2", Some(2)),
            ("exit code:   9 more", Some(9)),
            ("exit code: x", None),
            ("exit code: 99999999999", None),
            ("exit code: 1 ... exit code: 4", Some(4)),
        ] {
            assert_eq!(parse_build_log(&[line]).exit_code, code, "{line}");
        }
        // The last of each wins, across lines.
        let f = parse_build_log(&[
            "#1 [1/2] RUN a",
            "exit code: 1",
            "#2 [2/2] RUN b",
            "exit code: 2",
        ]);
        assert_eq!(
            (f.step, f.command.as_deref(), f.exit_code),
            (Some(2), Some("RUN b"), Some(2))
        );
        // A hostile line is bounded.
        let long = format!("#1 [1/1] RUN {}", "x".repeat(10_000));
        let f = parse_build_log(&[long]);
        assert_eq!(f.command.map(|c| c.chars().count()), Some(MAX_LINE_CHARS));
        assert_eq!(f.log_tail.chars().count(), MAX_LINE_CHARS);
    }
}
