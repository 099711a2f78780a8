//! The Dockerfile of a code artifact, read as the local build runs it.
//!
//! With the template layer's markers, the lines above the begin marker are
//! the base image (the host stands for it: its steps are numbered, as
//! BuildKit numbers them, and reported as cached, not run), and the lines
//! after the end marker (`USER root` and the `CMD`/`ENTRYPOINT` that start
//! the agent) are skipped. Without the markers every `COPY`, `RUN`, `ENV`,
//! `WORKDIR` and `USER` runs. `FROM` is step 1 and stands for the host;
//! `CMD`, `ENTRYPOINT`, `LABEL`, `ARG` and the other instructions that only
//! describe the image are ignored; `ADD`, `SHELL`, `ONBUILD` and copies
//! from other stages are refused (a local build cannot honour them).

use std::collections::BTreeMap;

/// The template layer's first line (`rayito::template::LAYER_BEGIN`).
pub(crate) const LAYER_BEGIN: &str =
    "# >>> rayito template layer (m15-templates), no editar a mano";
/// The template layer's last line (`rayito::template::LAYER_END`).
pub(crate) const LAYER_END: &str = "# <<< rayito template layer";
/// The largest Dockerfile a build reads.
pub(crate) const MAX_DOCKERFILE_BYTES: u64 = 1024 * 1024;
/// The most instructions a build runs.
const MAX_INSTRUCTIONS: usize = 1000;

/// One instruction the build acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Instruction {
    /// `FROM`: the host stands for the base image.
    From,
    /// `COPY <sources...> <dest>` (sources relative to the artifact).
    Copy { sources: Vec<String>, dest: String },
    /// `RUN`: the process's argv (`/bin/sh -c <cmd>` for the shell form).
    Run { argv: Vec<String> },
    /// `ENV` pairs, their values already unquoted (references to earlier
    /// variables are expanded when the step runs).
    Env(Vec<(String, RawWord)>),
    /// `WORKDIR <path>`.
    Workdir(RawWord),
    /// `USER <user>[:<group>]`.
    User(RawWord),
}

/// A word of an `ENV`, `WORKDIR` or `USER` line, before `$VAR` expansion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RawWord(Vec<Piece>);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Text(String),
    Var(String),
}

impl RawWord {
    /// The word with each `$NAME` / `${NAME}` replaced by `env`'s value
    /// (empty when unset), as Docker expands them.
    pub(crate) fn expand(&self, env: &BTreeMap<String, String>) -> String {
        self.0
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.as_str(),
                Piece::Var(name) => env.get(name).map_or("", String::as_str),
            })
            .collect()
    }
}

/// One step of the build: what to do, its text for the log and whether
/// the base image (the host) stands for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Step {
    pub(crate) instruction: Instruction,
    /// `RUN exit 3`, `COPY ["a", "/b"]`: the instruction as written.
    pub(crate) text: String,
    /// The base image's: numbered and reported, not run.
    pub(crate) base: bool,
}

impl Step {
    /// Whether BuildKit gives the step a number (`[k/n]`): the
    /// instructions that make a filesystem layer.
    pub(crate) fn numbered(&self) -> bool {
        matches!(
            self.instruction,
            Instruction::From
                | Instruction::Copy { .. }
                | Instruction::Run { .. }
                | Instruction::Workdir(_)
        )
    }
}

/// Why a Dockerfile cannot be built; the text follows BuildKit's
/// (`dockerfile parse error on line N: ...`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ParseError {
    pub(crate) line: usize,
    pub(crate) message: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "dockerfile parse error on line {}: {}",
            self.line, self.message
        )
    }
}

/// Reads a Dockerfile into its steps.
///
/// # Errors
/// An instruction the local build cannot honour, a malformed one, or more
/// than 1000 of them.
pub(crate) fn parse(text: &str) -> Result<Vec<Step>, ParseError> {
    let marked = text.lines().any(|l| l.trim() == LAYER_BEGIN);
    let mut in_base = marked;
    let mut steps = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        let trimmed = raw.trim();
        if marked && trimmed == LAYER_BEGIN {
            in_base = false;
            continue;
        }
        if marked && trimmed == LAYER_END {
            break;
        }
        if trimmed.starts_with('#') || (trimmed.is_empty() && pending.is_none()) {
            continue;
        }
        let (start, mut joined) = pending.take().unwrap_or((number, String::new()));
        if let Some(head) = trimmed.strip_suffix('\\') {
            joined.push_str(head);
            pending = Some((start, joined));
            continue;
        }
        joined.push_str(trimmed);
        if joined.trim().is_empty() {
            continue;
        }
        if let Some(step) = instruction(joined.trim(), start, in_base)? {
            if steps.len() >= MAX_INSTRUCTIONS {
                return Err(ParseError {
                    line: start,
                    message: format!("more than {MAX_INSTRUCTIONS} instructions"),
                });
            }
            steps.push(step);
        }
    }
    if let Some((line, _)) = pending {
        return Err(ParseError {
            line,
            message: "the last instruction ends with a line continuation".to_owned(),
        });
    }
    Ok(steps)
}

fn instruction(line: &str, number: usize, base: bool) -> Result<Option<Step>, ParseError> {
    let error = |message: String| ParseError {
        line: number,
        message,
    };
    let (word, rest) = line
        .split_once(char::is_whitespace)
        .map_or((line, ""), |(w, r)| (w, r.trim()));
    let keyword = word.to_ascii_uppercase();
    let instruction = match keyword.as_str() {
        "FROM" => Instruction::From,
        "CMD" | "ENTRYPOINT" | "LABEL" | "ARG" | "EXPOSE" | "VOLUME" | "STOPSIGNAL"
        | "HEALTHCHECK" | "MAINTAINER" => return Ok(None),
        // The base image's own settings: the host stands for them.
        "ENV" | "USER" if base => return Ok(None),
        "COPY" => copy(rest).map_err(error)?,
        "RUN" => Instruction::Run {
            argv: run_argv(rest).map_err(error)?,
        },
        "ENV" => Instruction::Env(env_pairs(rest).map_err(error)?),
        "WORKDIR" => Instruction::Workdir(single_word(rest, "WORKDIR").map_err(error)?),
        "USER" => Instruction::User(single_word(rest, "USER").map_err(error)?),
        "ADD" | "SHELL" | "ONBUILD" => {
            return Err(error(format!(
                "{keyword} is not supported by local builds; use COPY and RUN"
            )));
        }
        _ => return Err(error(format!("unknown instruction: {word}"))),
    };
    Ok(Some(Step {
        instruction,
        text: format!("{keyword} {rest}").trim_end().to_owned(),
        base,
    }))
}

/// `COPY` in JSON form (`["a", "b", "/dest"]`, what the template layer
/// writes) or whitespace-separated; `--from` and other flags are refused.
fn copy(rest: &str) -> Result<Instruction, String> {
    if rest.starts_with("--") {
        let flag = rest.split(['=', ' ']).next().unwrap_or(rest);
        return Err(format!("COPY {flag} is not supported by local builds"));
    }
    let mut words: Vec<String> = if rest.starts_with('[') {
        serde_json::from_str(rest).map_err(|_| "COPY: malformed JSON array".to_owned())?
    } else {
        rest.split_whitespace().map(str::to_owned).collect()
    };
    if words.len() < 2 {
        return Err("COPY requires at least two arguments".to_owned());
    }
    let dest = words.pop().unwrap_or_default();
    Ok(Instruction::Copy {
        sources: words,
        dest,
    })
}

/// `RUN ["prog", "arg"]` (exec form) or `RUN <cmd>` (`/bin/sh -c <cmd>`).
fn run_argv(rest: &str) -> Result<Vec<String>, String> {
    if rest.is_empty() {
        return Err("RUN requires a command".to_owned());
    }
    if rest.starts_with('[')
        && let Ok(argv) = serde_json::from_str::<Vec<String>>(rest)
    {
        if argv.is_empty() {
            return Err("RUN requires a command".to_owned());
        }
        return Ok(argv);
    }
    Ok(vec!["/bin/sh".to_owned(), "-c".to_owned(), rest.to_owned()])
}

fn single_word(rest: &str, keyword: &str) -> Result<RawWord, String> {
    let (word, tail) = lex_word(rest)?;
    if word.0.is_empty() || !tail.trim().is_empty() {
        return Err(format!("{keyword} requires exactly one argument"));
    }
    Ok(word)
}

/// `ENV K="v" K2=v2` or the legacy `ENV K some value`.
fn env_pairs(rest: &str) -> Result<Vec<(String, RawWord)>, String> {
    let first = rest.split_whitespace().next().unwrap_or_default();
    if !first.contains('=') {
        let (key, value) = rest
            .split_once(char::is_whitespace)
            .ok_or_else(|| "ENV must have two arguments".to_owned())?;
        check_name(key)?;
        return Ok(vec![(
            key.to_owned(),
            RawWord(vec![Piece::Text(value.trim().to_owned())]),
        )]);
    }
    let mut pairs = Vec::new();
    let mut rest = rest.trim_start();
    while !rest.is_empty() {
        let (key, after) = rest
            .split_once('=')
            .ok_or_else(|| "ENV: each pair must be KEY=VALUE".to_owned())?;
        check_name(key)?;
        let (value, tail) = lex_word(after)?;
        pairs.push((key.to_owned(), value));
        rest = tail.trim_start();
    }
    Ok(pairs)
}

fn check_name(key: &str) -> Result<(), String> {
    let ok = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-');
    if ok {
        Ok(())
    } else {
        Err("ENV: invalid variable name".to_owned())
    }
}

/// One word up to unquoted whitespace, as Docker's lexer reads it:
/// `"..."` (where `\` escapes `"`, `\` and `$`), `'...'` (literal), `\x`
/// outside quotes, and `$NAME`/`${NAME}` references outside single quotes.
/// Returns the word and the rest of the line.
fn lex_word(input: &str) -> Result<(RawWord, &str), String> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = input.char_indices().peekable();
    let mut quote: Option<char> = None;
    let flush = |text: &mut String, pieces: &mut Vec<Piece>| {
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(text)));
        }
    };
    while let Some((at, c)) = chars.next() {
        match (quote, c) {
            (None, c) if c.is_whitespace() => {
                flush(&mut text, &mut pieces);
                return Ok((RawWord(pieces), &input[at..]));
            }
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (Some('\''), c) => text.push(c),
            (None, '\\') => {
                if let Some((_, next)) = chars.next() {
                    text.push(next);
                }
            }
            (Some('"'), '\\') => match chars.peek() {
                Some(&(_, next)) if matches!(next, '"' | '\\' | '$') => {
                    text.push(next);
                    chars.next();
                }
                _ => text.push('\\'),
            },
            (_, '$') => {
                let braced = chars.peek().is_some_and(|&(_, n)| n == '{');
                if braced {
                    chars.next();
                }
                let mut name = String::new();
                while let Some(&(_, n)) = chars.peek() {
                    if n.is_ascii_alphanumeric() || n == '_' {
                        name.push(n);
                        chars.next();
                    } else {
                        break;
                    }
                }
                if braced {
                    match chars.next() {
                        Some((_, '}')) => {}
                        _ => return Err("unsupported variable modifier in ${...}".to_owned()),
                    }
                }
                if name.is_empty() {
                    text.push('$');
                } else {
                    flush(&mut text, &mut pieces);
                    pieces.push(Piece::Var(name));
                }
            }
            (_, c) => text.push(c),
        }
    }
    if quote.is_some() {
        return Err("unterminated quoted string".to_owned());
    }
    flush(&mut text, &mut pieces);
    Ok((RawWord(pieces), ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(word: &RawWord) -> String {
        word.expand(&BTreeMap::new())
    }

    #[test]
    fn the_template_layer_is_read_between_its_markers() {
        let dockerfile = concat!(
            "FROM public.ecr.aws/amazonlinux/amazonlinux:2023\n",
            "ENV BASE=1\n",
            "COPY rayd /usr/local/bin/rayd\n",
            "# >>> rayito template layer (m15-templates), no editar a mano\n",
            "COPY [\"__rayito_context/app\", \"/home/user/app\"]\n",
            "RUN echo \"hi\" > /tmp/x\n",
            "ENV A=\"a\\\\b\\\"c\\$d\"\n",
            "WORKDIR /srv\n",
            "USER user\n",
            "COPY [\"__rayito_template.json\", \"/etc/rayito/template.json\"]\n",
            "# <<< rayito template layer\n",
            "USER root\n",
            "CMD [\"/usr/local/bin/rayd\"]\n",
        );
        let steps = parse(dockerfile).unwrap();
        let texts: Vec<(&str, bool)> = steps.iter().map(|s| (s.text.as_str(), s.base)).collect();
        assert_eq!(
            texts,
            [
                ("FROM public.ecr.aws/amazonlinux/amazonlinux:2023", true),
                ("COPY rayd /usr/local/bin/rayd", true),
                ("COPY [\"__rayito_context/app\", \"/home/user/app\"]", false),
                ("RUN echo \"hi\" > /tmp/x", false),
                ("ENV A=\"a\\\\b\\\"c\\$d\"", false),
                ("WORKDIR /srv", false),
                ("USER user", false),
                (
                    "COPY [\"__rayito_template.json\", \"/etc/rayito/template.json\"]",
                    false
                ),
            ]
        );
        assert_eq!(
            steps[2].instruction,
            Instruction::Copy {
                sources: vec!["__rayito_context/app".to_owned()],
                dest: "/home/user/app".to_owned()
            }
        );
        assert_eq!(
            steps[3].instruction,
            Instruction::Run {
                argv: vec!["/bin/sh".into(), "-c".into(), "echo \"hi\" > /tmp/x".into()]
            }
        );
        match &steps[4].instruction {
            Instruction::Env(pairs) => {
                assert_eq!(pairs.len(), 1);
                assert_eq!(pairs[0].0, "A");
                assert_eq!(text(&pairs[0].1), r#"a\b"c$d"#);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(steps.iter().filter(|s| s.numbered()).count(), 6);
    }

    #[test]
    fn without_markers_every_step_runs_and_variables_expand() {
        let steps = parse(
            "FROM x\nLABEL a=b\nENV P=/opt HOME_DIR=\"${P}/h\" Q='$P'\nRUN a \\\n  b\nWORKDIR $P/w\nCMD x\n",
        )
        .unwrap();
        assert!(steps.iter().all(|s| !s.base));
        let Instruction::Env(pairs) = &steps[1].instruction else {
            panic!("{steps:?}")
        };
        let mut env = BTreeMap::new();
        env.insert("P".to_owned(), "/opt".to_owned());
        assert_eq!(pairs[1].1.expand(&env), "/opt/h");
        assert_eq!(pairs[2].1.expand(&env), "$P");
        assert_eq!(
            steps[2].instruction,
            Instruction::Run {
                argv: vec!["/bin/sh".into(), "-c".into(), "a b".into()]
            }
        );
        let Instruction::Workdir(w) = &steps[3].instruction else {
            panic!()
        };
        assert_eq!(w.expand(&env), "/opt/w");
    }

    #[test]
    fn what_a_local_build_cannot_honour_is_refused_with_its_line() {
        for (file, line, message) in [
            (
                "FROM x\nADD a /b\n",
                2,
                "ADD is not supported by local builds; use COPY and RUN",
            ),
            (
                "COPY --from=x a /b\n",
                1,
                "COPY --from is not supported by local builds",
            ),
            ("FROBNICATE\n", 1, "unknown instruction: FROBNICATE"),
            ("COPY a\n", 1, "COPY requires at least two arguments"),
            ("ENV A=\"x\n", 1, "unterminated quoted string"),
            (
                "RUN a \\\n",
                1,
                "the last instruction ends with a line continuation",
            ),
        ] {
            assert_eq!(
                parse(file),
                Err(ParseError {
                    line,
                    message: message.to_owned()
                }),
                "{file}"
            );
        }
    }
}
